//! Peers that break the wire format on purpose. A libzmq peer sends every kind of malformed and
//! oversized message among good ones; the service refuses each bad one, counted under its rule,
//! handles every good one, and its memory stays bounded. A raw TCP peer speaking ZMTP by hand
//! shows the one attack the client itself does not survive, and that a handshake still under way
//! at shutdown does not leave the peer attached to a closed socket.

use std::{convert::Infallible, time::Duration};

use ruststream::{Broker, ConnectedBroker, Subscribe};
use ruststream_zmq::prelude::*;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    sync::mpsc,
};

use crate::support::{Deadline, PyPeer, STEP, Tap, latin1, logs, rss_kib};

#[derive(Debug, Deserialize)]
struct Job {
    n: u64,
}

#[derive(Clone)]
struct Handled(mpsc::UnboundedSender<u64>);

#[derive(FromRef)]
struct AppState {
    handled: Handled,
}

#[subscriber]
async fn work(job: &Job, State(handled): State<Handled>) {
    let _ = handled.0.send(job.n);
}

/// A frame the peer builds: `text` as bytes, or `text` repeated `times`.
fn frame(bytes: &[u8]) -> Value {
    json!(latin1(bytes))
}

fn repeat(text: &str, times: usize) -> Value {
    json!({"repeat": text, "times": times})
}

/// The limits of the service under attack: 1 MiB a message, the other limits at their defaults
/// (64 KiB and 128 lines of headers, 8 frames).
const MESSAGE_LIMIT: usize = 1 << 20;

/// One of each malformed or oversized message, with the rule it breaks.
fn bad_messages() -> Vec<(&'static str, Vec<Value>)> {
    let name = || frame(b"jobs");
    let payload = || frame(br#"{"n":0}"#);
    vec![
        (
            "frame-count",
            vec![name(), frame(b""), payload(), frame(b"extra")],
        ),
        (
            "frame-count",
            vec![name(), frame(b""), payload(), frame(b"4"), frame(b"5")],
        ),
        ("max-frames", (0..12).map(|_| payload()).collect()),
        ("max-frames", (0..10_000).map(|_| frame(b"")).collect()),
        ("name-utf8", vec![frame(&[0xff, 0xfe]), payload()]),
        (
            "name-utf8",
            vec![frame(&[0xc3, 0x28]), frame(b""), payload()],
        ),
        (
            "header-colon",
            vec![name(), frame(b"no colon here"), payload()],
        ),
        (
            "header-colon",
            vec![name(), frame(b"ok: 1\r\nbroken\r\n"), payload()],
        ),
        ("headers-utf8", vec![name(), frame(b"a: \xff"), payload()]),
        // 12,000 lines in 60,000 bytes: under the byte limit, so the line limit refuses it.
        (
            "max-header-lines",
            vec![name(), repeat("a: 1\n", 12_000), payload()],
        ),
        (
            "max-header-bytes",
            vec![name(), repeat("k: v\n", 20_000), payload()],
        ),
        (
            "max-message-bytes",
            vec![name(), repeat("x", MESSAGE_LIMIT + 1)],
        ),
        (
            "max-message-bytes",
            vec![name(), frame(b""), repeat("x", 4 * MESSAGE_LIMIT)],
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_peer_is_refused_message_by_message_while_every_good_message_is_handled_in_bounded_memory()
 {
    logs();
    const ROUNDS: u64 = 20;
    let (handled, mut handled_rx) = mpsc::unbounded_channel();
    let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .limits(WireLimits::default().max_message_bytes(MESSAGE_LIMIT));
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("hostile", "0.1.0"))
        .on_startup(async move |()| {
            Ok::<_, Infallible>(AppState {
                handled: Handled(handled),
            })
        })
        .with_broker(broker, |b| {
            b.include(work.name("jobs"));
        });
    let running = app.start().await.unwrap();
    let mut peer = PyPeer::connect("PUSH", &monitor.bound_address().unwrap(), json!({})).await;

    let bad = bad_messages();
    let mut good = 0;
    let mut seen = Vec::new();
    let mut rss_after_warm_up = 0;
    let mut trajectory = Vec::new();
    let started = std::time::Instant::now();
    // Round 0 warms the allocator up; the resident set is measured after it and at the end.
    for round in 0..=ROUNDS {
        for (_, frames) in &bad {
            peer.send_frames(frames.clone()).await;
            good += 1;
            peer.send(&[b"jobs", json!({"n": good}).to_string().as_bytes()])
                .await;
        }
        // A lone frame that is not JSON: a payload on a queue, which the codec cannot decode.
        // Not a wire refusal: the framework's decode-failure policy drops it.
        peer.send(&[b"not json \xff"]).await;
        while seen.len() < good as usize {
            match tokio::time::timeout(STEP, handled_rx.recv()).await {
                Ok(Some(n)) => seen.push(n),
                _ => panic!(
                    "round {round}: handled {} of {good} good messages; refused {}",
                    seen.len(),
                    monitor.refused()
                ),
            }
        }
        if round == 0 {
            rss_after_warm_up = rss_kib();
        }
        if round % 5 == 0 {
            trajectory.push(rss_kib());
        }
    }
    let rss_end = rss_kib();
    let rounds = ROUNDS + 1;
    let bad_bytes: usize = 12_000 * 5 + 20_000 * 5 + 5 * MESSAGE_LIMIT;
    println!(
        "hostile peer: {rounds} rounds of {} bad messages (about {} MiB each round) and {} good \
         ones in {:?}; resident set {rss_after_warm_up} KiB after the first round, {rss_end} KiB \
         after the last (every 5 rounds: {trajectory:?} KiB)",
        bad.len(),
        bad_bytes >> 20,
        bad.len(),
        started.elapsed()
    );
    assert_eq!(
        seen,
        (1..=good).collect::<Vec<_>>(),
        "every good message, in order"
    );
    let mut expected = std::collections::BTreeMap::new();
    for (rule, _) in &bad {
        *expected.entry(*rule).or_insert(0) += rounds;
    }
    for (rule, count) in &expected {
        assert_eq!(monitor.refused_by(rule), *count, "refusals under {rule}");
    }
    assert_eq!(monitor.refused(), bad.len() as u64 * rounds);
    // The bound. 20 rounds push about 100 MiB of refused bytes through the socket. The client
    // reads each bad message whole (the 4 MiB one into a read buffer as large as its frame), and
    // it is freed once refused; the allocator keeps some of those buffers cached, so the resident
    // set climbs a few MiB over the first rounds and then stays flat (measured: +3 to +5 MiB,
    // flat over 100 rounds). Other tests of this binary run alongside and own a little of it too.
    // 16 MiB over the figure after the first round allows all that, and is far below what
    // keeping one refused 4 MiB message per round would cost (80 MiB).
    assert!(
        rss_end <= rss_after_warm_up + 16 * 1024,
        "the resident set grew from {rss_after_warm_up} to {rss_end} KiB"
    );
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_mid_handshake_at_shutdown_is_disconnected_not_kept_by_a_closed_socket() {
    // The shape of a dialing subscription that reconnects while the service it reads from shuts
    // down: its handshake begins before the listener closes and ends after.
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let address = connected.bind_publisher().await.unwrap();
    // Greetings exchanged: the service accepted and waits for this peer's READY.
    let mut raw = raw_greeted(&address).await;
    connected.shutdown().await.unwrap();
    // The connection may already be gone; the handshake's end is what matters when it is not.
    let _ = raw.write_all(&ready("PULL")).await;
    let closed = tokio::time::timeout(STEP, async {
        let mut rest = [0; 256];
        while let Ok(1..) = raw.read(&mut rest).await {}
    })
    .await;
    assert!(
        closed.is_ok(),
        "the peer stayed connected to a socket that was shut down; it would wait there for good"
    );
}

/// Set in the child process that runs the service under the frame-length attack.
const CHILD: &str = "RUSTSTREAM_ZMQ_INTEROP_CHILD";

/// A peer speaking ZMTP 3.0 by hand, through the exchange of greetings.
async fn raw_greeted(address: &str) -> tokio::net::TcpStream {
    let mut raw = tokio::net::TcpStream::connect(address.trim_start_matches("tcp://"))
        .await
        .unwrap();
    raw.write_all(&greeting()).await.unwrap();
    let mut theirs = [0; 64];
    raw.read_exact(&mut theirs).await.unwrap();
    raw
}

/// A PUSH peer speaking ZMTP 3.0 by hand, through the handshake; the test writes its frames.
async fn raw_push(address: &str) -> tokio::net::TcpStream {
    let mut raw = raw_greeted(address).await;
    raw.write_all(&ready("PUSH")).await.unwrap();
    let mut their_ready = [0; 28];
    raw.read_exact(&mut their_ready).await.unwrap();
    assert_eq!(&their_ready[2..7], &[5, b'R', b'E', b'A', b'D'][..]);
    raw
}

/// One message frame of at most 255 bytes; `more` when another frame follows.
fn short_frame(bytes: &[u8], more: bool) -> Vec<u8> {
    let mut frame = vec![u8::from(more), u8::try_from(bytes.len()).unwrap()];
    frame.extend_from_slice(bytes);
    frame
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "bug: the zeromq 0.7 decoder reserves the length a frame header announces before \
            reading it; a peer that announces a 1 TiB frame (an 11-byte header after the \
            handshake) aborts the whole service process (`memory allocation of ... bytes \
            failed`), before WireLimits can act"]
async fn a_peer_announcing_a_frame_larger_than_memory_does_not_take_the_service_down() {
    let test = "hostile::the_service_side_of_the_frame_length_attack";
    let child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            test,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(2 * STEP, child)
        .await
        .expect("the child process did not finish in time")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("survived the frame-length attack"),
        "the service process did not survive ({}):\n{stdout}\n{stderr}",
        output.status
    );
}

/// The child's half of the test above; does nothing unless run as that child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run in a child process by a_peer_announcing_a_frame_larger_than_memory_does_not_take_the_service_down"]
async fn the_service_side_of_the_frame_length_attack() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    logs();
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let mut tap = Tap::new(connected.subscribe("jobs").await.unwrap());
    let address = connected.monitor().bound_address().unwrap();
    let mut attacker = raw_push(&address).await;
    let mut good = short_frame(b"jobs", true);
    good.extend(short_frame(br#"{"n":1}"#, false));
    attacker.write_all(&good).await.unwrap();
    tap.expect("a good message from the raw peer").await;
    println!("resident set before the attack: {} KiB", rss_kib());

    // A long frame header: flags 0x02, then a length of 1 TiB; no body follows.
    let mut header = vec![0x02];
    header.extend((1u64 << 40).to_be_bytes());
    attacker.write_all(&header).await.unwrap();

    // Another peer's message still arrives, and the figures are readable.
    let mut other = raw_push(&address).await;
    let mut good = short_frame(b"jobs", true);
    good.extend(short_frame(br#"{"n":2}"#, false));
    other.write_all(&good).await.unwrap();
    tap.expect("a good message from another peer").await;
    println!(
        "resident set after the attack: {} KiB; survived the frame-length attack",
        rss_kib()
    );
    connected.shutdown().await.unwrap();
}

/// The 64-byte ZMTP 3.0 greeting of a NULL-mechanism peer.
fn greeting() -> Vec<u8> {
    let mut g = vec![0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 3, 0];
    let mut mechanism = b"NULL".to_vec();
    mechanism.resize(20, 0);
    g.extend(mechanism);
    g.push(0);
    g.resize(64, 0);
    g
}

/// The READY command of a peer of `socket_type`.
fn ready(socket_type: &str) -> Vec<u8> {
    let mut body = vec![5];
    body.extend(b"READY");
    body.push(11);
    body.extend(b"Socket-Type");
    body.extend((socket_type.len() as u32).to_be_bytes());
    body.extend(socket_type.as_bytes());
    let mut frame = vec![0x04, body.len() as u8];
    frame.extend(body);
    frame
}

#[subscriber]
async fn retry_once(
    job: &Job,
    Headers(attempt): Headers<Attempt>,
    State(handled): State<Handled>,
) -> HandlerOutcome {
    let _ = handled
        .0
        .send(job.n * 10 + u64::from(attempt.retry_count.unwrap_or(0)));
    if attempt.retry_count.is_none() {
        HandlerOutcome::retry()
    } else {
        HandlerOutcome::ack()
    }
}

#[derive(Debug, Deserialize)]
struct Attempt {
    #[serde(rename = "x-ruststream-retry-count")]
    retry_count: Option<u32>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_the_publisher_could_not_send_again_is_refused_at_intake_and_the_next_good_message_is_handled()
 {
    logs();
    let (handled, mut handled_rx) = mpsc::unbounded_channel();
    let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("hostile", "0.1.0"))
        .on_startup(async move |()| {
            Ok::<_, Infallible>(AppState {
                handled: Handled(handled),
            })
        })
        .with_broker(broker, |b| {
            b.include(retry_once.name("jobs"))
                .max_attempts(nonzero!(3u32));
        });
    let running = app.start().await.unwrap();
    let mut peer = PyPeer::connect("PUSH", &monitor.bound_address().unwrap(), json!({})).await;
    // Two headers that parse as `name: value` lines but that the publisher refuses to send (a CR
    // inside a value, an empty name): a retry copy of either could not leave, so the README says
    // both are refused at intake under `header-invalid`. Then a good job.
    peer.send(&[b"jobs", b"x-note: a\rb", br#"{"n":1}"#]).await;
    peer.send(&[b"jobs", b": an empty name", br#"{"n":2}"#])
        .await;
    peer.send(&[b"jobs", b"x-note: fine", br#"{"n":3}"#]).await;
    // The handler reports n * 10 + the retry count: 30 for the good job, 31 for its copy.
    let mut seen = Vec::new();
    let deadline = Deadline::after(
        STEP,
        "the good job and its retry copy handled, and both odd jobs refused",
    );
    while !(seen.contains(&31) && monitor.refused_by("header-invalid") == 2) {
        if let Ok(Some(n)) =
            tokio::time::timeout(Duration::from_millis(50), handled_rx.recv()).await
        {
            seen.push(n);
        }
        assert!(
            seen.iter().all(|n| n / 10 == 3),
            "a job with an odd header was delivered: handled {seen:?} (n * 10 + retry count)"
        );
        assert!(
            !deadline.passed(),
            "handled {seen:?} (n * 10 + retry count); refused {} under header-invalid, {} in all",
            monitor.refused_by("header-invalid"),
            monitor.refused()
        );
    }
    // Jobs 1 and 2 were read before job 3 on the one connection, and a copy of either would have
    // left through the retry publisher before job 3's: once 31 is handled, neither can follow.
    assert_eq!(
        seen,
        [30, 31],
        "only the good job and its copy are handled: an odd header is neither delivered nor \
         copied"
    );
    assert_eq!(
        monitor.refused(),
        2,
        "the two odd jobs, refused under header-invalid and nothing else"
    );
    running.shutdown().await.unwrap();
}
