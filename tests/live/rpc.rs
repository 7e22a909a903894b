//! `ZmqRpc` on real sockets: answers at the identity a request carries with its
//! `correlation-id`, REQ peers, many requests on one DEALER, several responders, bad reply
//! addresses, and a timeout that covers the whole request.

use std::{
    convert::Infallible,
    time::{Duration, Instant},
};

use ruststream::{
    Broker, BytesMut, ConnectedBroker, HeaderMap, OutgoingMessage, Publisher, RequestReply,
};
use ruststream_zmq::{ConnectedZmqRpc, ZmqRequester};

use serde::{Deserialize, Serialize};
use zeromq::{ReqSocket, Socket, SocketRecv, SocketSend, ZmqMessage as Frames};

use super::{BACKEND, ZmqQueue, prelude::*};

#[derive(Debug, Serialize, Deserialize)]
struct Ask {
    id: u64,
}

#[derive(Debug, PartialEq, Serialize, Deserialize, Outgoing)]
struct Quote {
    id: u64,
    by: String,
}

#[derive(Clone, FromRef)]
struct AppState {
    who: Who,
}

#[derive(Clone)]
struct Who(&'static str);

#[subscriber(Responder::<Bound>, reply("reply"))]
async fn quote(ask: &Ask, State(who): State<Who>) -> Quote {
    Quote {
        id: ask.id,
        by: who.0.to_owned(),
    }
}

#[subscriber(Responder::<Dialing>, reply("reply"))]
async fn dialing_quote(ask: &Ask, State(who): State<Who>) -> Quote {
    Quote {
        id: ask.id,
        by: who.0.to_owned(),
    }
}

#[subscriber(reply("reply"))]
async fn by_name_quote(ask: &Ask) -> Quote {
    Quote {
        id: ask.id,
        by: "by-name".to_owned(),
    }
}

/// A bound responder answering as `who`; answers the running app and its address.
async fn bound_responder(who: &'static str) -> (ruststream::runtime::RunningApp, String) {
    let broker = ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("quotes", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(AppState { who: Who(who) }))
        .with_broker(broker, |b| {
            b.include(
                quote
                    .name("quotes")
                    .out_retry("quotes.retry@tcp://127.0.0.1:1"),
            )
            .out_reply(Publish)
            .transform(ToRequester);
        });
    let running = app.start().await.unwrap();
    (running, monitor.bound_address().unwrap())
}

async fn requester(address: &str) -> (ConnectedZmqRpc<Dialing>, ZmqRequester) {
    let connected = ZmqRpc::new(ZmqEndpoint::dial(address))
        .connect()
        .await
        .unwrap();
    let requester = connected.requester();
    (connected, requester)
}

fn ask(id: u64) -> BytesMut {
    BytesMut::from(serde_json::to_vec(&Ask { id }).unwrap().as_slice())
}

fn quote_of(answer: &ZmqMessage) -> Quote {
    serde_json::from_slice(ruststream::IncomingMessage::payload(answer)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_responder_answers_at_the_identity_with_the_requests_correlation_id() {
    let (running, address) = bound_responder("a").await;
    let (connected, requester) = requester(&address).await;

    let mut headers = HeaderMap::new();
    headers.insert("correlation-id", "order-42");
    let msg = OutgoingMessage::produced("quotes", ask(42)).with_headers(headers);
    let answer = requester
        .request(msg, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(answer.correlation_id(), Some("order-42"));
    assert_eq!(answer.name(), "reply");
    assert_eq!(
        quote_of(&answer),
        Quote {
            id: 42,
            by: "a".into()
        }
    );

    // With no correlation-id of its own, the requester mints one and matches on it.
    let answer = requester
        .request(
            OutgoingMessage::produced("quotes", ask(7)),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    assert!(answer.correlation_id().is_some_and(|id| !id.is_empty()));
    assert_eq!(quote_of(&answer).id, 7);
    running.shutdown().await.unwrap();
    connected.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_req_peer_gets_its_answer_with_the_delimiter_kept() {
    let (running, address) = bound_responder("a").await;
    let mut req = ReqSocket::new();
    req.connect(&address).await.unwrap();
    let frames: Vec<ruststream::Bytes> = vec![
        "quotes".into(),
        "correlation-id: req-1".into(),
        serde_json::to_vec(&Ask { id: 3 }).unwrap().into(),
    ];
    req.send(Frames::try_from(frames).unwrap()).await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), req.recv())
        .await
        .unwrap()
        .unwrap()
        .into_vec();
    assert_eq!(
        answer.len(),
        3,
        "[reply][headers][payload] once REQ strips the delimiter"
    );
    assert_eq!(&answer[0][..], b"reply");
    assert!(
        std::str::from_utf8(&answer[1])
            .unwrap()
            .contains("correlation-id: req-1")
    );
    let answered: Quote = serde_json::from_slice(&answer[2]).unwrap();
    assert_eq!(answered.id, 3);
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_by_name_responder_that_names_no_destination_is_refused_at_startup() {
    let app = RustStream::new(AppInfo::new("quotes", "0.1.0")).with_broker(
        ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0")),
        |b| {
            b.include(by_name_quote.name("nameless-quotes"))
                .out_reply(Publish)
                .transform(ToRequester);
        },
    );
    let err = app
        .start()
        .await
        .expect_err("a responder with no destination for its copies started")
        .to_string();
    assert!(
        err.contains("nameless-quotes") && err.contains("NamedCopies"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_requests_in_flight_share_one_dealer_and_each_gets_its_own_answer() {
    let (running, address) = bound_responder("a").await;
    let (connected, requester) = requester(&address).await;
    let answers = futures::future::join_all((0..300u64).map(|id| {
        let requester = requester.clone();
        async move {
            let answer = requester
                .request(
                    OutgoingMessage::produced("quotes", ask(id)),
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
            (id, quote_of(&answer).id)
        }
    }))
    .await;
    assert!(
        answers.iter().all(|(asked, answered)| asked == answered),
        "an answer went to the wrong request"
    );
    assert_eq!(requester.in_flight(), 0);
    running.shutdown().await.unwrap();
    connected.shutdown().await.unwrap();
}

/// The process's resident set now (`VmRSS`) and at its peak so far (`VmHWM`), in KiB; the test
/// fails, saying so, without /proc.
fn memory_kib() -> (u64, u64) {
    let memory = crate::memory::Memory::now();
    (memory.rss_kib, memory.peak_kib)
}

/// The probe's one line of figures, which the parent reads back.
const FIGURES: &str = "memory figures (KiB):";

/// The most the resident set, now or at its peak, may grow over the 99,000 requests after the
/// first 1,000: a leak of 85 bytes a request would pass it.
const GROWTH_LIMIT_KIB: u64 = 8 * 1024;

/// How long the probe may run before the parent kills it (on a loaded 2-core machine it takes
/// well under a minute).
const PROBE_DEADLINE: Duration = Duration::from_secs(300);

/// The figures the probe printed: resident and peak after 1,000 requests, then after 100,000.
#[derive(Debug)]
struct Figures {
    rss_early: u64,
    hwm_early: u64,
    rss_end: u64,
    hwm_end: u64,
}

impl Figures {
    fn line(&self) -> String {
        format!(
            "{FIGURES} rss_early={} hwm_early={} rss_end={} hwm_end={}",
            self.rss_early, self.hwm_early, self.rss_end, self.hwm_end
        )
    }

    fn parse(line: &str) -> Option<Self> {
        let rest = line.split_once(FIGURES)?.1;
        let value = |key: &str| -> Option<u64> {
            rest.split_whitespace()
                .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
        };
        Some(Self {
            rss_early: value("rss_early")?,
            hwm_early: value("hwm_early")?,
            rss_end: value("rss_end")?,
            hwm_end: value("hwm_end")?,
        })
    }

    fn assert_flat(&self) {
        assert!(
            self.rss_end <= self.rss_early + GROWTH_LIMIT_KIB,
            "the resident set grew from {} to {} KiB",
            self.rss_early,
            self.rss_end
        );
        assert!(
            self.hwm_end <= self.hwm_early + GROWTH_LIMIT_KIB,
            "the peak resident set grew from {} to {} KiB",
            self.hwm_early,
            self.hwm_end
        );
    }
}

/// The test below, by the name libtest gives it on this backend: its child process runs it again
/// by that name.
fn memory_probe() -> String {
    crate::support::test_name(module_path!(), "memory_stays_flat_over_100_000_requests")
}

/// The resident set is the whole process's, and the other tests of this binary run beside this
/// one: the requests run in a child process of its own (this test again), which measures itself
/// and checks the bound; the parent requires its figures and libtest's verdict, and checks the
/// figures again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_stays_flat_over_100_000_requests() {
    if crate::support::child::is_child(&memory_probe()) {
        return memory_probe_100_000_requests().await;
    }
    let rest =
        crate::support::child::alone_with_figures(&memory_probe(), FIGURES, PROBE_DEADLINE).await;
    let figures = Figures::parse(&format!("{FIGURES}{rest}"))
        .unwrap_or_else(|| panic!("the probe's figures do not read: {rest}"));
    figures.assert_flat();
}

async fn memory_probe_100_000_requests() {
    const REQUESTS: u64 = 100_000;
    const IN_FLIGHT: u64 = 100;
    let (running, address) = bound_responder("a").await;
    let (connected, requester) = requester(&address).await;
    let started = Instant::now();
    let mut early = None;
    for round in 0..REQUESTS / IN_FLIGHT {
        futures::future::join_all((0..IN_FLIGHT).map(|n| {
            let requester = requester.clone();
            async move {
                let id = round * IN_FLIGHT + n;
                let answer = requester
                    .request(
                        OutgoingMessage::produced("quotes", ask(id)),
                        Duration::from_secs(10),
                    )
                    .await
                    .unwrap();
                assert_eq!(quote_of(&answer).id, id);
            }
        }))
        .await;
        if round == 9 {
            early = Some(memory_kib());
        }
    }
    let (rss_early, hwm_early) = early.expect("the first 1,000 requests were measured");
    let (rss_end, hwm_end) = memory_kib();
    let figures = Figures {
        rss_early,
        hwm_early,
        rss_end,
        hwm_end,
    };
    println!(
        "{REQUESTS} requests, {IN_FLIGHT} in flight, in {:?}; after 1,000, then after {REQUESTS}:",
        started.elapsed()
    );
    println!("{}", figures.line());
    assert_eq!(
        requester.in_flight(),
        0,
        "finished requests left entries behind"
    );
    figures.assert_flat();
    running.shutdown().await.unwrap();
    connected.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_responders_in_one_process_each_answer_their_own_requests() {
    // One bound responder, and one dialing responder that reaches a requester which binds.
    let requester_side = ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let dialing_requester = requester_side.requester();
    // The DEALER binds on its first use; a throwaway request with a short timeout makes it bind.
    let _ = dialing_requester
        .request(
            OutgoingMessage::produced("warm", ask(0)),
            Duration::from_millis(50),
        )
        .await;
    let requester_address = requester_side.monitor().bound_address().unwrap();

    let bound = ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let bound_monitor = bound.monitor();
    let app = RustStream::new(AppInfo::new("quotes", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(AppState { who: Who("both") }))
        .with_broker(bound, |b| {
            b.include(
                quote
                    .name("quotes")
                    .out_retry("quotes.retry@tcp://127.0.0.1:1"),
            )
            .out_reply(Publish)
            .transform(ToRequester);
        })
        .with_broker(ZmqRpc::new(ZmqEndpoint::dial(requester_address)), |b| {
            b.include(
                dialing_quote
                    .name("prices")
                    .out_retry("prices.retry@tcp://127.0.0.1:1"),
            )
            .out_reply(Publish)
            .transform(ToRequester);
        });
    let running = app.start().await.unwrap();
    let (connected, bound_requester) = requester(&bound_monitor.bound_address().unwrap()).await;
    for id in 1..=20 {
        let from_bound = bound_requester
            .request(
                OutgoingMessage::produced("quotes", ask(id)),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
        assert_eq!(quote_of(&from_bound).id, id);
        let from_dialing = dialing_requester
            .request(
                OutgoingMessage::produced("prices", ask(100 + id)),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
        assert_eq!(quote_of(&from_dialing).id, 100 + id);
    }
    running.shutdown().await.unwrap();
    connected.shutdown().await.unwrap();
    requester_side.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_address_that_is_not_valid_is_an_error_naming_it() {
    let connected = ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let _responder = ruststream::Subscribe::subscribe(&connected, "quotes")
        .await
        .unwrap();
    let publisher = connected.publisher();
    for address in [
        "zmq-reply:zz",
        "zmq-reply:\u{e9}\u{e9}",
        "zmq-reply:abc",
        "zmq-reply:0102",
        "quotes",
    ] {
        let sent = publisher
            .publish(
                OutgoingMessage::produced(address, BytesMut::from(&b"{}"[..])),
                None,
            )
            .await;
        let err = sent
            .expect_err("a reply to an invalid address succeeded")
            .to_string();
        assert!(err.contains(address), "{address}: {err}");
    }
    connected.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_timeout_covers_connecting_and_sending() {
    let address = format!("tcp://127.0.0.1:{}", crate::support::free_port());
    let (connected, requester) = requester(&address).await;
    let started = Instant::now();
    let err = requester
        .request(
            OutgoingMessage::produced("quotes", ask(1)),
            Duration::from_millis(300),
        )
        .await
        .expect_err("a request to nobody was answered");
    let waited = started.elapsed();
    assert!(matches!(err, ZmqError::RequestTimeout { .. }), "{err}");
    assert!(
        waited < Duration::from_secs(3),
        "the timeout did not cover connecting: {waited:?}"
    );
    connected.shutdown().await.unwrap();
}

/// A queue's handler whose answer `ToRequester` would send where the message's `reply-to` says.
#[subscriber(reply("reply"))]
async fn answers_anyone(ask: &Ask) -> Quote {
    Quote {
        id: ask.id,
        by: "queue".to_owned(),
    }
}

/// `ToRequester` answers only the `zmq-reply:` addresses a responder stamps: a `reply-to` a
/// peer wrote on a queue's message (`name@tcp://host:port`) fails the answer, saying why, is
/// counted as a send failure, and never makes the service dial the address the peer chose.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_never_goes_to_an_address_a_peer_wrote() {
    crate::support::capture_logs();
    let lure = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let lure_address = format!("tcp://{}", lure.local_addr().unwrap());
    let subscription = format!("{}-lured", BACKEND.name());
    let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("lured", "0.1.0")).with_broker(broker, |b| {
        b.include(answers_anyone.name(subscription.clone()))
            .out_reply(Publish)
            .transform(ToRequester);
    });
    let running = app.start().await.unwrap();
    let mut peer = zeromq::PushSocket::new();
    peer.connect(&monitor.bound_address().unwrap())
        .await
        .unwrap();
    let headers = format!("reply-to: answers@{lure_address}");
    let frames: Vec<Vec<u8>> = vec![
        subscription.clone().into_bytes(),
        headers.into_bytes(),
        br#"{"id":7}"#.to_vec(),
    ];
    let message = Frames::try_from(
        frames
            .into_iter()
            .map(ruststream::Bytes::from)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    peer.send(message).await.unwrap();

    crate::support::eventually(
        Duration::from_secs(10),
        "the answer's failure counted",
        || monitor.send_failures() == 1,
    )
    .await;
    let why = crate::support::logged(&["not a `zmq-reply:` address", &subscription]).await;
    assert!(why.contains("a peer wrote it"), "{why}");
    assert_eq!(monitor.sent(), 0, "nothing left for the peer's address");
    let dialed = tokio::time::timeout(Duration::from_millis(200), lure.accept()).await;
    assert!(
        dialed.is_err(),
        "the service dialed the address the peer wrote"
    );
    running.shutdown().await.unwrap();
}
