//! This crate against `ruststream-zeromq` 0.7, the older ZeroMQ transport of the framework (a
//! dev-dependency only): the brokers of both crates in one process, on loopback sockets, each
//! pattern in both directions. What crosses is asserted frame by frame as each side reads it:
//! the name, every header in order, the payload bytes; and what does not cross, where the two
//! read the same frames differently.
//!
//! The two write the same three frames `[name][headers][payload]` ("name: value" lines joined by
//! \n), answer a request at `zmq-reply:<hex of the identity>` with `reply` on frame 0, and match
//! answers on `correlation-id`. The difference a peer meets is the limits: this crate refuses
//! what is over its `WireLimits`, the other reads anything.

use std::time::Duration;

use futures::StreamExt;
use ruststream::{
    Broker, BytesMut, ConnectedBroker, HeaderMap, IncomingMessage, OutgoingMessage, Publisher,
    RequestReply, Subscribe, Subscriber,
};
use ruststream_zeromq as theirs;
use ruststream_zmq::ZmqEndpoint;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{BACKEND, ZmqFanout, ZmqQueue, ZmqRpc};
use crate::backend::Backend;
use crate::support::{
    PyPeer, STEP, alone, captured_logs, is_child, log_lines, logs, test_name, until, until_async,
};

/// One delivery as a subscription of either crate handed it over.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    name: String,
    headers: Vec<(String, String)>,
    payload: Vec<u8>,
}

impl Seen {
    fn of(name: &str, message: &impl IncomingMessage) -> Self {
        Self {
            name: name.to_owned(),
            headers: headers_of(message.headers()),
            payload: message.payload().to_vec(),
        }
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.payload).expect("a JSON payload")
    }
}

fn headers_of(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(name, value)| {
            (
                name.to_owned(),
                String::from_utf8(value.to_vec()).expect("a text header value"),
            )
        })
        .collect()
}

/// Headers as a subscription of either crate reads them: in the order sent, the names in the
/// lowercase the framework's `HeaderMap` keeps (a publisher's map already holds them so).
fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(name, value)| (name.to_ascii_lowercase(), (*value).to_owned()))
        .collect()
}

/// A subscription of either crate, read below any handler.
struct Inbox {
    rx: mpsc::UnboundedReceiver<Seen>,
}

impl Inbox {
    fn new<S>(mut subscriber: S, read: fn(&S::Message) -> Seen) -> Self
    where
        S: Subscriber + Send + 'static,
    {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(subscriber.stream());
            while let Some(Ok(message)) = stream.next().await {
                if tx.send(read(&message)).is_err() {
                    break;
                }
            }
        });
        Self { rx }
    }

    async fn next(&mut self, within: Duration) -> Option<Seen> {
        tokio::time::timeout(within, self.rx.recv())
            .await
            .ok()
            .flatten()
    }

    async fn expect(&mut self, what: &str) -> Seen {
        self.next(STEP)
            .await
            .unwrap_or_else(|| panic!("no {what} arrived within {STEP:?}"))
    }

    /// The next delivery whose name is not `skip` (warm-ups still on their way).
    async fn expect_past(&mut self, skip: &str, what: &str) -> Seen {
        loop {
            let seen = self.expect(what).await;
            if seen.name != skip {
                return seen;
            }
        }
    }
}

fn ours(message: &ruststream_zmq::ZmqMessage) -> Seen {
    Seen::of(message.name(), message)
}

fn their(message: &theirs::ZmqMessage) -> Seen {
    Seen::of(message.name(), message)
}

fn outgoing<'a>(
    name: &'a str,
    headers: &[(&str, &str)],
    payload: &[u8],
) -> OutgoingMessage<'a, BytesMut> {
    let mut map = HeaderMap::new();
    for (header, value) in headers {
        map.insert((*header).to_owned(), (*value).to_owned());
    }
    OutgoingMessage::produced(name, BytesMut::from(payload)).with_headers(map)
}

/// What both crates' publishers send in each direction: headers of mixed case, a value with a
/// `:` and inner spaces, a framework header, and a payload of non-ASCII text.
const HEADERS: &[(&str, &str)] = &[
    ("x-tenant", "acme"),
    ("X-Trace", "a: b  c"),
    ("x-ruststream-retry-count", "2"),
];
const PAYLOAD: &str = "{\"id\":1,\"note\":\"caf\u{e9} \u{2713}\"}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ruststream_zeromq_queue_publisher_reaches_a_bound_queue_of_this_crate_with_every_header()
{
    logs();
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let mut inbox = Inbox::new(connected.subscribe("payments").await.unwrap(), ours);
    let address = connected.monitor().bound_address().unwrap();

    let other = theirs::ZmqQueue::new(theirs::ZmqEndpoint::connect(address))
        .connect()
        .await
        .unwrap();
    let publisher = other.publisher();
    publisher
        .publish(outgoing("payments", HEADERS, PAYLOAD.as_bytes()), None)
        .await
        .unwrap();
    publisher
        .publish(outgoing("payments.eu", &[], br#"{"id":2}"#), None)
        .await
        .unwrap();

    let first = inbox.expect("the message with headers").await;
    assert_eq!(
        first,
        Seen {
            name: "payments".into(),
            headers: pairs(HEADERS),
            payload: PAYLOAD.as_bytes().to_vec(),
        },
        "the name, every header in order, the payload byte for byte"
    );
    let second = inbox.expect("the message without headers").await;
    assert_eq!(second.name, "payments.eu");
    assert!(second.headers.is_empty(), "{second:?}");
    assert_eq!(second.json(), json!({"id": 2}));
    assert_eq!(connected.monitor().refused(), 0);

    other.shutdown().await.unwrap();
    connected.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_publisher_of_this_crate_reaches_a_bound_ruststream_zeromq_queue_with_every_header()
{
    logs();
    let other = theirs::ZmqQueue::new(theirs::ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let mut inbox = Inbox::new(other.subscribe("payments").await.unwrap(), their);
    let address = other.bound_address().expect("the subscription bound");

    let connected = ZmqQueue::new(ZmqEndpoint::dial(address))
        .connect()
        .await
        .unwrap();
    let publisher = connected.publisher();
    publisher
        .publish(outgoing("payments", HEADERS, PAYLOAD.as_bytes()), None)
        .await
        .unwrap();
    publisher
        .publish(outgoing("payments.eu", &[], br#"{"id":2}"#), None)
        .await
        .unwrap();

    let first = inbox.expect("the message with headers").await;
    assert_eq!(
        first,
        Seen {
            name: "payments".into(),
            headers: pairs(HEADERS),
            payload: PAYLOAD.as_bytes().to_vec(),
        }
    );
    let second = inbox.expect("the message without headers").await;
    assert_eq!(second.name, "payments.eu");
    assert!(second.headers.is_empty(), "{second:?}");
    assert_eq!(second.json(), json!({"id": 2}));

    connected.shutdown().await.unwrap();
    other.shutdown().await.unwrap();
}

/// 129 header lines: one over this crate's `max_header_lines`.
fn many_headers() -> Vec<(String, String)> {
    (0..129)
        .map(|n| (format!("x-h{n}"), n.to_string()))
        .collect()
}

fn borrowed(headers: &[(String, String)]) -> Vec<(&str, &str)> {
    headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect()
}

/// The test below, by the name libtest gives it on this backend: its child process runs it again
/// by that name.
fn over_the_limits() -> String {
    test_name(
        module_path!(),
        "messages_over_this_crates_limits_cross_towards_ruststream_zeromq_only",
    )
}

/// Where the two differ on the one-way wire: this crate refuses a message over its
/// `WireLimits` (64 KiB a message, 128 header lines by default), warns naming the subscription, the
/// endpoint and the rule, counts it by rule and goes on with the next (on libzmq a frame over the size limit
/// cuts its connection instead, unread); `ruststream-zeromq` has no limits and takes both. The
/// warnings are read from the logs, so it runs in a process of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_over_this_crates_limits_cross_towards_ruststream_zeromq_only() {
    if is_child(&over_the_limits()) {
        return over_the_limits_in_a_process_of_its_own().await;
    }
    alone(&over_the_limits()).await;
}

/// The refusal warnings of the subscription `payments` at `endpoint` under `rule`.
fn refusal_warnings(rule: &str, endpoint: &str) -> Vec<String> {
    log_lines(&[
        "refused a message from a peer",
        "subscription=payments ",
        &format!("endpoint={endpoint} "),
        &format!("rule=\"{rule}\""),
    ])
}

async fn over_the_limits_in_a_process_of_its_own() {
    captured_logs();
    let big = vec![b'x'; 9 << 20];
    let many = many_headers();

    // Towards this crate: refused by rule, warned and counted, and the next message arrives.
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let monitor = connected.monitor();
    let mut inbox = Inbox::new(connected.subscribe("payments").await.unwrap(), ours);
    let address = monitor.bound_address().unwrap();
    let other = theirs::ZmqQueue::new(theirs::ZmqEndpoint::connect(address.clone()))
        .connect()
        .await
        .unwrap();
    let publisher = other.publisher();
    // On libzmq a frame over the limit never reaches the service: see below.
    if BACKEND == Backend::Zeromq {
        publisher
            .publish(outgoing("payments", &[], &big), None)
            .await
            .unwrap();
    }
    publisher
        .publish(outgoing("payments", &borrowed(&many), b"{}"), None)
        .await
        .unwrap();
    publisher
        .publish(outgoing("payments", &[], br#"{"id":3}"#), None)
        .await
        .unwrap();
    let next = inbox.expect("the message behind the refused ones").await;
    assert_eq!(
        next.json(),
        json!({"id": 3}),
        "the refused ones never arrive"
    );
    assert_eq!(monitor.refused_by("max-header-lines"), 1);
    // Each refusal warned before the next message was handed over.
    let warnings = refusal_warnings("max-header-lines", &address);
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0].contains(" WARN ")
            && warnings[0].contains("a headers frame of 129 lines, over the limit of 128"),
        "{}",
        warnings[0]
    );
    if BACKEND != Backend::Zeromq {
        // libzmq and omq refuse the frame before reading it, by cutting the connection that
        // sent it.
        let lost = monitor.peers_lost();
        let _ = publisher
            .publish(outgoing("payments", &[], &big), None)
            .await;
        until(STEP, "the sender of 9 MiB cut", || {
            monitor.peers_lost() != lost
        })
        .await;
        assert_eq!(monitor.refused_by("max-message-bytes"), 0);
        assert!(refusal_warnings("max-message-bytes", &address).is_empty());
    } else {
        assert_eq!(monitor.refused_by("max-message-bytes"), 1);
        let warnings = refusal_warnings("max-message-bytes", &address);
        assert_eq!(warnings.len(), 1, "{warnings:#?}");
        assert!(
            warnings[0].contains(" WARN ")
                && warnings[0].contains(&format!("over the limit of {} per message", 64 << 10)),
            "{}",
            warnings[0]
        );
    }
    assert_eq!(
        monitor.refused(),
        monitor.refused_by("max-header-lines") + monitor.refused_by("max-message-bytes")
    );
    other.shutdown().await.unwrap();
    connected.shutdown().await.unwrap();

    // Towards ruststream-zeromq: this crate's publisher sends both, the other reads them whole.
    let other = theirs::ZmqQueue::new(theirs::ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let mut inbox = Inbox::new(other.subscribe("payments").await.unwrap(), their);
    let connected = ZmqQueue::new(ZmqEndpoint::dial(other.bound_address().unwrap()))
        .connect()
        .await
        .unwrap();
    let publisher = connected.publisher();
    publisher
        .publish(outgoing("payments", &[], &big), None)
        .await
        .unwrap();
    publisher
        .publish(outgoing("payments", &borrowed(&many), b"{}"), None)
        .await
        .unwrap();
    let arrived = inbox.expect("the 9 MiB message").await;
    assert_eq!(arrived.payload.len(), big.len());
    assert!(arrived.payload == big);
    let arrived = inbox.expect("the message of 129 headers").await;
    assert_eq!(arrived.headers, many);
    connected.shutdown().await.unwrap();
    other.shutdown().await.unwrap();
}

/// Neither crate's publisher writes anything but three frames, but a peer of another kind
/// (pyzmq here) may, and the two read its frames differently: a lone frame is a payload here
/// (under the subscription's name) and a name with no payload there; a fourth frame is refused
/// here and dropped unread there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_frame_and_a_fourth_frame_from_a_third_peer_read_differently_on_the_two_crates() {
    logs();
    let lone: &[&[u8]] = &[br#"{"id":1}"#];
    let four: &[&[u8]] = &[b"payments", b"x-tenant: acme", br#"{"id":2}"#, b"extra"];
    let marker: &[&[u8]] = &[b"payments", b"", br#"{"id":3}"#];

    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let monitor = connected.monitor();
    let mut inbox = Inbox::new(connected.subscribe("payments").await.unwrap(), ours);
    let mut push = PyPeer::connect("PUSH", &monitor.bound_address().unwrap(), json!({})).await;
    for frames in [lone, four, marker] {
        push.send(frames).await;
    }
    let first = inbox.expect("the lone frame").await;
    assert_eq!(
        (first.name.as_str(), first.json()),
        ("payments", json!({"id": 1})),
        "here a lone frame is the payload, under the subscription's name"
    );
    let next = inbox.expect("the marker").await;
    assert_eq!(
        next.json(),
        json!({"id": 3}),
        "the four frames never arrive"
    );
    assert_eq!(monitor.refused_by("frame-count"), 1);
    drop(push);
    connected.shutdown().await.unwrap();

    let other = theirs::ZmqQueue::new(theirs::ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let mut inbox = Inbox::new(other.subscribe("payments").await.unwrap(), their);
    let mut push = PyPeer::connect("PUSH", &other.bound_address().unwrap(), json!({})).await;
    for frames in [lone, four, marker] {
        push.send(frames).await;
    }
    let first = inbox.expect("the lone frame").await;
    assert_eq!(
        first,
        Seen {
            name: r#"{"id":1}"#.into(),
            headers: Vec::new(),
            payload: Vec::new(),
        },
        "there a lone frame is a name with an empty payload"
    );
    let second = inbox.expect("the four frames").await;
    assert_eq!(
        second,
        Seen {
            name: "payments".into(),
            headers: pairs(&[("x-tenant", "acme")]),
            payload: br#"{"id":2}"#.to_vec(),
        },
        "there the fourth frame is dropped unread"
    );
    assert_eq!(inbox.expect("the marker").await.json(), json!({"id": 3}));
    other.shutdown().await.unwrap();
}

/// Warm-ups travel under this name, inside the `orders` prefix: a PUB drops what it sends
/// before a subscription reached it (the slow joiner), on both crates.
const WARM_UP: &str = "orders.warmup";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ruststream_zeromq_fanout_publisher_reaches_a_bound_fanout_of_this_crate_by_prefix() {
    logs();
    let connected = ZmqFanout::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let mut inbox = Inbox::new(connected.subscribe("orders").await.unwrap(), ours);
    let other = theirs::ZmqFanout::new(theirs::ZmqEndpoint::connect(
        connected.monitor().bound_address().unwrap(),
    ))
    .connect()
    .await
    .unwrap();
    let publisher = other.publisher();

    until_async(
        STEP,
        "a warm-up from the ruststream-zeromq PUB",
        async || {
            publisher
                .publish(outgoing(WARM_UP, &[], b"{}"), None)
                .await
                .unwrap();
            inbox.next(Duration::from_millis(50)).await.is_some()
        },
    )
    .await;

    publisher
        .publish(outgoing("invoices", &[], br#"{"n":1}"#), None)
        .await
        .unwrap();
    publisher
        .publish(outgoing("orders.eu", HEADERS, PAYLOAD.as_bytes()), None)
        .await
        .unwrap();
    let eu = inbox.expect_past(WARM_UP, "orders.eu").await;
    assert_eq!(
        eu,
        Seen {
            name: "orders.eu".into(),
            headers: pairs(HEADERS),
            payload: PAYLOAD.as_bytes().to_vec(),
        },
        "`invoices` is outside the prefix and never arrives; `orders.eu` arrives whole"
    );

    other.shutdown().await.unwrap();
    connected.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_fanout_publisher_of_this_crate_reaches_a_ruststream_zeromq_subscription_by_prefix()
{
    logs();
    let connected = ZmqFanout::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let address = connected.bind_publisher().await.unwrap();
    let publisher = connected.publisher();
    let other = theirs::ZmqFanout::new(theirs::ZmqEndpoint::connect(address))
        .connect()
        .await
        .unwrap();
    let mut inbox = Inbox::new(other.subscribe("orders").await.unwrap(), their);

    until_async(STEP, "a warm-up at the ruststream-zeromq SUB", async || {
        publisher
            .publish(outgoing(WARM_UP, &[], b"{}"), None)
            .await
            .unwrap();
        inbox.next(Duration::from_millis(50)).await.is_some()
    })
    .await;

    publisher
        .publish(outgoing("invoices", &[], br#"{"n":1}"#), None)
        .await
        .unwrap();
    publisher
        .publish(outgoing("orders.eu", HEADERS, PAYLOAD.as_bytes()), None)
        .await
        .unwrap();
    let eu = inbox.expect_past(WARM_UP, "orders.eu").await;
    assert_eq!(
        eu,
        Seen {
            name: "orders.eu".into(),
            headers: pairs(HEADERS),
            payload: PAYLOAD.as_bytes().to_vec(),
        },
        "`invoices` is outside the prefix and never arrives; `orders.eu` arrives whole"
    );

    other.shutdown().await.unwrap();
    connected.shutdown().await.unwrap();
}

mod responder {
    //! A responder service of this crate, called by a `ruststream-zeromq` requester.

    use super::super::prelude::*;
    use serde::{Deserialize, Serialize};

    use super::*;

    #[derive(Debug, Deserialize)]
    pub struct Ask {
        pub id: u64,
    }

    #[derive(Debug, Serialize, Outgoing)]
    pub struct Quote {
        pub id: u64,
        pub price: u64,
    }

    #[subscriber(Responder::<Bound>, reply("reply"))]
    async fn quote(ask: &Ask) -> Quote {
        Quote {
            id: ask.id,
            price: ask.id * 10,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_ruststream_zeromq_requester_is_answered_by_a_responder_service_of_this_crate() {
        logs();
        let broker = ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
        let monitor = broker.monitor();
        let running = RustStream::new(AppInfo::new("quotes", "0.1.0"))
            .with_broker(broker, |b| {
                b.include(
                    quote
                        .name("quotes")
                        .out_retry("quotes.retry@tcp://127.0.0.1:1"),
                )
                .out_reply(Publish)
                .transform(ToRequester);
            })
            .start()
            .await
            .unwrap();
        let other = theirs::ZmqRpc::new(theirs::ZmqEndpoint::connect(
            monitor.bound_address().unwrap(),
        ))
        .connect()
        .await
        .unwrap();
        let requester = other.publisher();

        // ruststream-zeromq gives each request's DEALER a random UUID for a routing id. omq
        // refuses an id that starts with a zero byte (the form libzmq keeps for the ids it makes,
        // and a claim of one is an attack: guide::security), so on omq about 1 request in 256
        // is refused at its handshake and times out; the others back ends take it.
        let refused_on_omq = |result: Result<theirs::ZmqMessage, theirs::ZmqError>| match result {
            Ok(answer) => Some(answer),
            Err(theirs::ZmqError::RequestTimeout) if BACKEND == Backend::Omq => None,
            Err(err) => panic!("the request failed: {err}"),
        };

        // Its own correlation-id comes back; a request without one is matched on the one the
        // requester minted (it returns nothing else).
        let first = refused_on_omq(
            requester
                .request(
                    outgoing(
                        "quotes",
                        &[("correlation-id", "ask-7"), ("x-client", "zeromq")],
                        br#"{"id":7}"#,
                    ),
                    Duration::from_secs(5),
                )
                .await,
        );
        if let Some(answer) = &first {
            assert_eq!(answer.name(), "reply");
            assert_eq!(answer.headers().get_str("correlation-id"), Some("ask-7"));
            assert_eq!(their(answer).json(), json!({"id": 7, "price": 70}));
        }

        let answers = futures::future::join_all((1..=5u64).map(|id| {
            let requester = requester.clone();
            async move {
                let answer = refused_on_omq(
                    requester
                        .request(
                            outgoing("quotes", &[], json!({"id": id}).to_string().as_bytes()),
                            Duration::from_secs(5),
                        )
                        .await,
                );
                (id, answer.map(|answer| their(&answer).json()))
            }
        }))
        .await;
        let mut refused = u64::from(first.is_none());
        for (id, answer) in answers {
            match answer {
                Some(answer) => assert_eq!(answer, json!({"id": id, "price": id * 10})),
                None => refused += 1,
            }
        }
        // Each unanswered request is a handshake the responder refused, and counted.
        assert_eq!(monitor.peers_refused(), refused, "refused at the handshake");

        // Each request was a connection of its own: the responder saw the six, less the ones it
        // refused, come and go.
        let served = 6 - refused;
        until(
            STEP,
            "the requester connections closed at the responder",
            || match monitor.peers_lost() {
                lost if lost >= served => Ok(()),
                lost => Err(format!("{lost} of {served} closed")),
            },
        )
        .await;
        assert_eq!(monitor.peers_lost(), served);

        other.shutdown().await.unwrap();
        running.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ruststream_zeromq_responder_answers_the_requester_of_this_crate() {
    logs();
    let other = theirs::ZmqRpc::new(theirs::ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let mut requests = other.subscribe("prices").await.unwrap();
    let address = other.bound_address().expect("the responder bound");
    let answers = other.publisher();

    // A responder as that crate's services answer: at the request's `reply-to`, with its
    // `correlation-id`, the payload echoed; it reports each request as it read it.
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(requests.stream());
        while let Some(Ok(request)) = stream.next().await {
            let reply_to = request.headers().get_str("reply-to").unwrap().to_owned();
            let correlation = request
                .headers()
                .get_str("correlation-id")
                .map(str::to_owned);
            let mut headers = vec![("x-answered-by", "ruststream-zeromq")];
            if let Some(correlation) = &correlation {
                headers.push(("correlation-id", correlation));
            }
            answers
                .publish(outgoing(&reply_to, &headers, request.payload()), None)
                .await
                .unwrap();
            if seen_tx.send(their(&request)).is_err() {
                break;
            }
        }
    });

    let connected = ZmqRpc::new(ZmqEndpoint::dial(address))
        .connect()
        .await
        .unwrap();
    let requester = connected.requester();
    let answer = requester
        .request(
            outgoing(
                "prices",
                &[("correlation-id", "order-42"), ("x-client", "zmq")],
                br#"{"id":42}"#,
            ),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    assert_eq!(answer.name(), "reply");
    assert_eq!(
        headers_of(answer.headers()),
        pairs(&[
            ("x-answered-by", "ruststream-zeromq"),
            ("correlation-id", "order-42")
        ])
    );
    assert_eq!(answer.payload(), br#"{"id":42}"#);

    let request = tokio::time::timeout(STEP, seen.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(request.name, "prices");
    let reply_to = request
        .headers
        .iter()
        .find(|(name, _)| name == "reply-to")
        .map(|(_, value)| value.clone())
        .unwrap();
    assert!(
        reply_to.starts_with("zmq-reply:"),
        "the same reply address form: {reply_to}"
    );
    assert_eq!(
        request
            .headers
            .iter()
            .filter(|(name, _)| name != "reply-to")
            .cloned()
            .collect::<Vec<_>>(),
        pairs(&[("correlation-id", "order-42"), ("x-client", "zmq")]),
        "the request's headers as sent"
    );

    // Many requests in flight on this crate's one DEALER, each matched by its minted id.
    let answers = futures::future::join_all((0..20u64).map(|id| {
        let requester = requester.clone();
        async move {
            let answer = requester
                .request(
                    outgoing("prices", &[], json!({"id": id}).to_string().as_bytes()),
                    Duration::from_secs(5),
                )
                .await
                .unwrap();
            let payload: Value = serde_json::from_slice(answer.payload()).unwrap();
            (id, payload["id"].clone())
        }
    }))
    .await;
    assert!(answers.iter().all(|(asked, answered)| answered == asked));

    connected.shutdown().await.unwrap();
    other.shutdown().await.unwrap();
}

mod services {
    //! Two services, one on each crate, handlers and codecs included: this crate's service
    //! sends jobs to a worker on `ruststream-zeromq`, whose handler answers each through its
    //! `out_reply` into a queue this crate's service binds.

    use std::sync::OnceLock;

    use super::super::prelude::*;
    use serde::{Deserialize, Serialize};

    use super::*;

    #[derive(Debug, Serialize, Deserialize)]
    pub struct Job {
        pub id: u64,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Outgoing)]
    pub struct Done {
        pub id: u64,
        pub by: String,
    }

    /// The worker's handler, on `ruststream-zeromq`.
    #[subscriber("jobs", reply("results"))]
    async fn work(job: &Job) -> Done {
        Done {
            id: job.id,
            by: "ruststream-zeromq".to_owned(),
        }
    }

    /// What the results handler of this crate's service read, and under which name.
    static RESULTS: OnceLock<mpsc::UnboundedSender<(Done, String)>> = OnceLock::new();

    /// The results handler, on this crate.
    #[subscriber("results")]
    async fn record(done: &Done, Ctx(name): Ctx<MessageName>) -> HandlerOutcome {
        let _ = RESULTS
            .get()
            .expect("the test set the channel")
            .send((done.clone(), name.to_string()));
        HandlerOutcome::ack()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_worker_service_on_ruststream_zeromq_answers_jobs_from_a_service_of_this_crate() {
        logs();
        let (results_tx, mut results) = mpsc::unbounded_channel();
        RESULTS.set(results_tx).expect("one test sets the channel");

        // This crate's service: binds the results queue.
        let results_queue = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
        let results_monitor = results_queue.monitor();
        let ours = RustStream::new(AppInfo::new("dispatcher", "0.1.0"))
            .with_broker(results_queue, |b| {
                b.include(record);
            })
            .start()
            .await
            .unwrap();
        let results_address = results_monitor.bound_address().unwrap();

        // The worker on ruststream-zeromq: binds `jobs`, answers into the results queue it
        // dials. A connected clone of its jobs broker shares its state, so it reports the port.
        let jobs = theirs::ZmqQueue::new(theirs::ZmqEndpoint::bind("tcp://127.0.0.1:0"));
        let jobs_probe = jobs.clone().connect().await.unwrap();
        let to_results =
            theirs::ZmqQueue::new(theirs::ZmqEndpoint::connect(results_address)).bindable();
        let answer = to_results.bind(theirs::ZmqQueuePublish);
        let worker = RustStream::new(AppInfo::new("worker", "0.1.0"))
            .with_broker(jobs, |b| {
                b.include(work).out_reply(answer);
            })
            .with_broker(to_results, |_b| {})
            .start()
            .await
            .unwrap();
        let jobs_address = jobs_probe.bound_address().expect("the worker bound `jobs`");

        // This crate's publisher sends the jobs, as a service's `Out` slot would.
        let dispatch = ZmqQueue::new(ZmqEndpoint::dial(jobs_address))
            .connect()
            .await
            .unwrap();
        for id in 1..=3u64 {
            dispatch
                .publisher()
                .publish(
                    outgoing("jobs", &[], json!({"id": id}).to_string().as_bytes()),
                    None,
                )
                .await
                .unwrap();
        }

        let mut answered = Vec::new();
        for _ in 1..=3 {
            let (done, name) = tokio::time::timeout(STEP, results.recv())
                .await
                .expect("an answer from the worker within a step")
                .unwrap();
            assert_eq!(name, "results", "the reply's name, frame 0");
            answered.push(done);
        }
        answered.sort_by_key(|done| done.id);
        assert_eq!(
            answered,
            (1..=3u64)
                .map(|id| Done {
                    id,
                    by: "ruststream-zeromq".to_owned(),
                })
                .collect::<Vec<_>>()
        );
        assert_eq!(results_monitor.refused(), 0);

        dispatch.shutdown().await.unwrap();
        worker.shutdown().await.unwrap();
        ours.shutdown().await.unwrap();
    }
}
