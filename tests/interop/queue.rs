//! PUSH/PULL against libzmq: a Python PUSH feeding a bound queue in every documented form, and
//! a Python PULL reading what a dialing queue publisher sends.

use ruststream::{
    Broker, BytesMut, ConnectedBroker, HeaderMap, OutgoingMessage, Publisher, Subscribe,
};
use ruststream_zmq::{WireLimits, ZmqEndpoint};
use serde_json::json;

use super::ZmqQueue;
use crate::support::{PyPeer, Tap, header, json_of, latin1, logs};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_push_reaches_a_bound_queue_in_every_documented_form() {
    logs();
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let mut tap = Tap::new(connected.subscribe("payments").await.unwrap());
    let address = connected.monitor().bound_address().unwrap();
    let mut push = PyPeer::connect("PUSH", &address, json!({})).await;

    // [name][headers][payload] with one header line.
    push.send(&[b"payments", b"x-tenant: acme", br#"{"id":1,"amount":250}"#])
        .await;
    // CRLF line ends, a trailing line end, mixed case, and a payload with non-ASCII text.
    push.send(&[
        b"payments.eu",
        b"X-Tenant: acme\r\nCorrelation-Id: c-2\r\n",
        "{\"id\":2,\"note\":\"caf\u{e9} \u{2713}\"}".as_bytes(),
    ])
    .await;
    // [name][payload]: no headers.
    push.send(&[b"payments", br#"{"id":3}"#]).await;
    // A lone frame from pyzmq's send_json: the payload, under the subscription's name.
    push.send_json(json!({"id": 4, "amount": 0})).await;
    // An empty headers frame is no headers.
    push.send(&[b"payments", b"", br#"{"id":5}"#]).await;
    // The payload is the codec's bytes, untouched, whatever they are.
    let binary: Vec<u8> = (0..=255u8).collect();
    push.send(&[
        b"payments",
        b"content-type: application/octet-stream",
        &binary,
    ])
    .await;

    let one = tap.expect("the three-frame message").await;
    assert_eq!(one.name(), "payments");
    assert_eq!(header(&one, "x-tenant"), Some("acme"));
    assert_eq!(ruststream::IncomingMessage::headers(&one).len(), 1);
    assert_eq!(json_of(&one), json!({"id": 1, "amount": 250}));

    let two = tap.expect("the CRLF message").await;
    assert_eq!(two.name(), "payments.eu");
    assert_eq!(
        header(&two, "x-tenant"),
        Some("acme"),
        "names are case-insensitive"
    );
    assert_eq!(two.correlation_id(), Some("c-2"));
    assert_eq!(ruststream::IncomingMessage::headers(&two).len(), 2);
    assert_eq!(json_of(&two)["note"], "caf\u{e9} \u{2713}");

    let three = tap.expect("the two-frame message").await;
    assert_eq!(three.name(), "payments");
    assert!(ruststream::IncomingMessage::headers(&three).is_empty());
    assert_eq!(json_of(&three), json!({"id": 3}));

    let four = tap.expect("the lone frame").await;
    assert_eq!(
        four.name(),
        "payments",
        "a lone frame takes the subscription's name"
    );
    assert!(ruststream::IncomingMessage::headers(&four).is_empty());
    assert_eq!(json_of(&four), json!({"id": 4, "amount": 0}));

    let five = tap.expect("the message with an empty headers frame").await;
    assert!(ruststream::IncomingMessage::headers(&five).is_empty());
    assert_eq!(json_of(&five), json!({"id": 5}));

    let six = tap.expect("the binary payload").await;
    assert_eq!(ruststream::IncomingMessage::payload(&six), &binary[..]);

    assert_eq!(connected.monitor().refused(), 0);
    connected.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_pull_reads_name_headers_payload_from_a_dialing_queue_publisher() {
    logs();
    let mut pull = PyPeer::bind("PULL", "tcp://127.0.0.1:*", json!({})).await;
    let connected = ZmqQueue::new(ZmqEndpoint::dial(pull.endpoint.clone()))
        .connect()
        .await
        .unwrap();
    let publisher = connected.publisher();

    let mut headers = HeaderMap::new();
    headers.insert("x-tenant", "acme");
    headers.insert("correlation-id", "job-1");
    publisher
        .publish(
            OutgoingMessage::produced("jobs", BytesMut::from(&br#"{"id":1}"#[..]))
                .with_headers(headers),
            None,
        )
        .await
        .unwrap();
    publisher
        .publish(
            OutgoingMessage::produced("jobs.eu", BytesMut::from(&br#"{"id":2}"#[..])),
            None,
        )
        .await
        .unwrap();

    let first = pull.expect("the message with headers").await;
    assert_eq!(first.frames.len(), 3, "[name][headers][payload]: {first:?}");
    assert_eq!(first.frames[0], b"jobs");
    assert_eq!(first.wire["name"], "jobs");
    // The README's format, byte for byte: `name: value` lines in the order the headers were
    // set, joined by \n, no trailing line end.
    assert_eq!(
        latin1(first.headers_frame()),
        "x-tenant: acme\ncorrelation-id: job-1"
    );
    assert_eq!(first.payload(), json!({"id": 1}));

    let second = pull.expect("the message without headers").await;
    assert_eq!(
        second.frames,
        [b"jobs.eu".to_vec(), Vec::new(), br#"{"id":2}"#.to_vec()],
        "always three frames; no headers is an empty frame"
    );
    connected.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_headers_frame_of_exactly_the_line_limit_is_accepted_however_its_lines_end() {
    logs();
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .limits(WireLimits::default().max_header_lines(4))
        .connect()
        .await
        .unwrap();
    let mut tap = Tap::new(connected.subscribe("payments").await.unwrap());
    let monitor = connected.monitor();
    let mut push = PyPeer::connect("PUSH", &monitor.bound_address().unwrap(), json!({})).await;
    // Four lines each way: joined by line breaks, and each ended by one (as HTTP writes them).
    push.send(&[b"payments", b"a: 1\nb: 2\nc: 3\nd: 4", br#"{"id":1}"#])
        .await;
    push.send(&[
        b"payments",
        b"a: 1\r\nb: 2\r\nc: 3\r\nd: 4\r\n",
        br#"{"id":2}"#,
    ])
    .await;
    push.send(&[b"payments", br#"{"id":3}"#]).await;
    let mut ids = Vec::new();
    while ids.last() != Some(&3) {
        ids.push(
            json_of(&tap.expect("the payments").await)["id"]
                .as_u64()
                .unwrap(),
        );
    }
    assert_eq!(
        ids,
        [1, 2, 3],
        "refused: {} under max-header-lines",
        monitor.refused_by("max-header-lines")
    );
    connected.shutdown().await.unwrap();
}
