//! The one-way wire contract on a queue, fed by a raw ZeroMQ peer: the three accepted forms, and
//! every refusal with its warning and counter, the next good message still delivered.

use std::{
    convert::Infallible,
    time::{Duration, Instant},
};

use serde::Deserialize;
use zeromq::{PushSocket, Socket, SocketSend, ZmqMessage as Frames};

use super::{BACKEND, prelude::*};
use crate::{
    backend::Backend,
    support::{Calls, Journal, Payment, Plan, capture_logs, journal, log_lines},
};

#[derive(FromRef)]
struct AppState {
    calls: Calls,
}

#[derive(Debug, Deserialize)]
struct Tenant {
    #[serde(rename = "x-tenant")]
    tenant: Option<String>,
}

#[subscriber]
async fn work(
    payment: &Payment,
    Headers(tenant): Headers<Tenant>,
    State(calls): State<Calls>,
) -> HandlerOutcome {
    // The tenant header, when sent, rides in the journal as the retry-count slot's neighbour.
    let tagged = if tenant.tenant.as_deref() == Some("acme") {
        1
    } else {
        0
    };
    calls.record("work", payment.id, Some(tagged));
    HandlerOutcome::ack()
}

/// A raw PUSH peer dialing a bound queue service named `name` with `limits`.
async fn serve(
    name: &'static str,
    limits: WireLimits,
) -> (
    ruststream::runtime::RunningApp,
    ZmqMonitor,
    PushSocket,
    Journal,
) {
    let (calls, journal) = journal();
    let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0")).limits(limits);
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("wire", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(AppState { calls }))
        .with_broker(broker, |b| {
            b.include(work.name(name));
        });
    let running = app.start().await.unwrap();
    let mut peer = PushSocket::new();
    peer.connect(&monitor.bound_address().unwrap())
        .await
        .unwrap();
    (running, monitor, peer, journal)
}

fn payment(id: u64) -> Vec<u8> {
    serde_json::to_vec(&Payment {
        id,
        plan: Plan::Ack,
    })
    .unwrap()
}

async fn send(peer: &mut PushSocket, frames: Vec<Vec<u8>>) {
    let frames: Vec<_> = frames.into_iter().map(ruststream::Bytes::from).collect();
    peer.send(Frames::try_from(frames).unwrap()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_frames_two_frames_and_a_lone_frame_all_arrive() {
    let (running, monitor, mut peer, mut journal) = serve("forms", WireLimits::default()).await;
    send(
        &mut peer,
        vec![
            b"forms".to_vec(),
            b"x-tenant: acme\r\nother: 1".to_vec(),
            payment(1),
        ],
    )
    .await;
    send(&mut peer, vec![b"forms".to_vec(), payment(2)]).await;
    send(&mut peer, vec![payment(3)]).await;
    let seen = journal.until("three payments", |s| s.len() == 3).await;
    let ids: Vec<_> = seen.iter().map(|s| (s.id, s.retry_count)).collect();
    assert_eq!(
        ids,
        [(1, Some(1)), (2, Some(0)), (3, Some(0))],
        "the header rode only the first"
    );
    assert_eq!(monitor.refused(), 0);
    running.shutdown().await.unwrap();
}

/// The refusal warnings logged so far for the subscription `name` at `monitor`'s endpoint: no
/// other test uses the name, and the same test on the other backend listens elsewhere.
fn refusal_warnings(name: &str, monitor: &ZmqMonitor) -> Vec<String> {
    let endpoint = monitor.bound_address().expect("the service is bound");
    log_lines(&[
        "refused a message from a peer",
        &format!("subscription={name} "),
        &format!("endpoint={endpoint} "),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_warns_once_is_counted_and_the_next_good_message_arrives() {
    capture_logs();
    let limits = WireLimits::default()
        .max_message_bytes(4096)
        .max_header_bytes(512)
        .max_header_lines(8)
        .max_frames(3);
    let (running, monitor, mut peer, mut journal) = serve("refusals", limits).await;
    let name = || b"refusals".to_vec();
    let bad: Vec<(&str, Vec<Vec<u8>>)> = vec![
        ("max-frames", vec![name(), vec![], payment(0), vec![]]),
        ("name-utf8", vec![vec![0xff, 0xfe], payment(0)]),
        (
            "header-colon",
            vec![name(), b"no colon here".to_vec(), payment(0)],
        ),
        (
            "headers-utf8",
            vec![name(), vec![b'a', b':', 0xff], payment(0)],
        ),
        // Every frame under the limit, together over it (a lone frame over it is the next test's).
        (
            "max-message-bytes",
            vec![name(), vec![], vec![b'x'; 4096 - 8 + 2]],
        ),
        (
            "max-header-bytes",
            vec![
                name(),
                format!("a: {}", "x".repeat(600)).into_bytes(),
                payment(0),
            ],
        ),
        (
            "max-header-lines",
            vec![name(), "a: 1\n".repeat(9).into_bytes(), payment(0)],
        ),
    ];
    for (index, (rule, frames)) in bad.into_iter().enumerate() {
        send(&mut peer, frames).await;
        let good = 100 + index as u64;
        send(&mut peer, vec![name(), payment(good)]).await;
        journal
            .until("the good message after a bad one", |s| {
                s.iter().any(|s| s.id == good)
            })
            .await;
        assert_eq!(monitor.refused_by(rule), 1, "rule {rule}");
        // The reader logs a refusal before it reads the next message, so by now the warning is
        // written; one refusal, one warning, naming the subscription and the rule.
        let warnings = refusal_warnings("refusals", &monitor);
        let of_this_rule: Vec<_> = warnings
            .iter()
            .filter(|line| line.contains(&format!("rule=\"{rule}\"")))
            .collect();
        assert_eq!(of_this_rule.len(), 1, "rule {rule}: {warnings:#?}");
        assert!(of_this_rule[0].contains("WARN"), "{}", of_this_rule[0]);
        assert_eq!(
            warnings.len(),
            index + 1,
            "one warning for each refusal so far: {warnings:#?}"
        );
    }
    assert_eq!(monitor.refused(), 7);
    assert_eq!(refusal_warnings("refusals", &monitor).len(), 7);
    assert!(
        journal.seen.iter().all(|s| s.id >= 100),
        "a refused message reached the handler"
    );
    running.shutdown().await.unwrap();
}

/// A lone frame over the message limit, and the next message: what each backend does with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_frame_over_the_message_limit_is_refused_and_the_service_reads_on() {
    match BACKEND {
        Backend::Zeromq => lone_frame_over_the_limit_refused_warned_and_counted().await,
        Backend::Libzmq | Backend::Omq => {
            lone_frame_over_the_limit_refused_before_it_is_read_and_its_peer_cut().await
        }
    }
}

/// On the `zeromq` client a frame over the limit is read, then refused like any other message:
/// one warning, one count, and the same peer's next message arrives.
async fn lone_frame_over_the_limit_refused_warned_and_counted() {
    capture_logs();
    let limits = WireLimits::default().max_message_bytes(4096);
    let (running, monitor, mut peer, mut journal) = serve("lone-frame", limits).await;
    send(&mut peer, vec![b"lone-frame".to_vec(), vec![b'x'; 5000]]).await;
    send(&mut peer, vec![b"lone-frame".to_vec(), payment(1)]).await;
    journal
        .until("the good message", |s| s.iter().any(|s| s.id == 1))
        .await;
    assert_eq!(monitor.refused_by("max-message-bytes"), 1);
    assert_eq!(refusal_warnings("lone-frame", &monitor).len(), 1);
    running.shutdown().await.unwrap();
}

/// On libzmq a frame over the limit is refused before it is read (`ZMQ_MAXMSGSIZE`): the
/// connection that sent it is cut and counted as a peer lost, and the service reads on.
async fn lone_frame_over_the_limit_refused_before_it_is_read_and_its_peer_cut() {
    let limits = WireLimits::default().max_message_bytes(4096);
    let (running, monitor, mut peer, mut journal) = serve("lone-frame", limits).await;
    let address = monitor.bound_address().unwrap();
    send(&mut peer, vec![b"lone-frame".to_vec(), vec![b'x'; 5000]]).await;
    crate::support::eventually(
        Duration::from_secs(10),
        "the sender's connection cut",
        || monitor.peers_lost() == 1,
    )
    .await;
    let mut next = PushSocket::new();
    next.connect(&address).await.unwrap();
    send(&mut next, vec![b"lone-frame".to_vec(), payment(1)]).await;
    journal
        .until("the next peer's message", |s| s.iter().any(|s| s.id == 1))
        .await;
    assert_eq!(
        monitor.refused(),
        0,
        "libzmq refused it before the service saw it"
    );
    assert!(journal.seen.iter().all(|s| s.id == 1));
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_of_100_000_header_lines_is_refused_before_any_header_map_is_built() {
    capture_logs();
    let (running, monitor, mut peer, mut journal) = serve(
        "many-lines",
        // A message of 1.1 MB, under the message limit too: only the line count refuses it.
        WireLimits::default()
            .max_header_bytes(4 << 20)
            .max_message_bytes(4 << 20),
    )
    .await;
    // Every line is also not UTF-8 and has no colon: a decode that read the text, or built the
    // map line by line, before it counted the lines would refuse by `headers-utf8` or
    // `header-colon`. Only the count taken before any of that answers `max-header-lines`, with
    // every one of the 100,000 lines counted.
    let headers = b"\xff no colon\n".repeat(100_000);
    let started = Instant::now();
    send(&mut peer, vec![b"many-lines".to_vec(), headers, payment(1)]).await;
    send(&mut peer, vec![b"many-lines".to_vec(), payment(2)]).await;
    journal
        .until("the good message", |s| s.iter().any(|s| s.id == 2))
        .await;
    println!(
        "100,000 header lines refused and the next message handled in {:?}",
        started.elapsed()
    );
    assert_eq!(monitor.refused_by("max-header-lines"), 1);
    assert_eq!(monitor.refused(), 1, "refused by another rule as well");
    let warnings = refusal_warnings("many-lines", &monitor);
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0].contains("rule=\"max-header-lines\"")
            && warnings[0].contains("a headers frame of 100000 lines, over the limit of 128"),
        "{}",
        warnings[0]
    );
    assert!(journal.of("work", 1).is_empty());
    running.shutdown().await.unwrap();
}
