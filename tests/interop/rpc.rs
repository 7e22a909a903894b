//! ROUTER/DEALER against libzmq: Python DEALER and REQ peers calling a bound responder, and a
//! Python ROUTER answering this crate's requester.

use std::{collections::BTreeMap, time::Duration};

use ruststream::{
    Broker, BytesMut, ConnectedBroker, HeaderMap, IncomingMessage, OutgoingMessage, RequestReply,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::prelude::*;
use crate::support::{PyPeer, latin1, logs};

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

/// A service with a bound responder named `quotes`; answers it and the address it listens on.
pub async fn bound_responder() -> (ruststream::runtime::RunningApp, String) {
    let (running, address, _) = bound_responder_watched().await;
    (running, address)
}

/// [`bound_responder`], and its broker's monitor.
pub async fn bound_responder_watched() -> (ruststream::runtime::RunningApp, String, ZmqMonitor) {
    let broker = ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("quotes", "0.1.0")).with_broker(broker, |b| {
        b.include(
            quote
                .name("quotes")
                .out_retry("quotes.retry@tcp://127.0.0.1:1"),
        )
        .out_reply(Publish)
        .transform(ToRequester);
    });
    let running = app.start().await.unwrap();
    let address = monitor.bound_address().unwrap();
    (running, address, monitor)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_dealer_gets_each_answer_with_its_own_correlation_id() {
    logs();
    let (running, address) = bound_responder().await;
    let mut dealer = PyPeer::connect("DEALER", &address, json!({})).await;

    // Five requests in flight before the first answer is read.
    for id in 1..=5u64 {
        let headers = format!("correlation-id: ask-{id}\r\nx-client: python");
        dealer
            .send(&[
                b"quotes",
                headers.as_bytes(),
                json!({"id": id}).to_string().as_bytes(),
            ])
            .await;
    }
    let mut answers = BTreeMap::new();
    for _ in 1..=5 {
        let answer = dealer.expect("an answer").await;
        assert_eq!(
            answer.frames.len(),
            3,
            "[reply][headers][payload]: {answer:?}"
        );
        assert_eq!(answer.frames[0], b"reply");
        answers.insert(latin1(answer.headers_frame()), answer.payload());
    }
    for id in 1..=5u64 {
        assert_eq!(
            answers.get(&format!("correlation-id: ask-{id}")),
            Some(&json!({"id": id, "price": id * 10})),
            "the answer whose headers frame is exactly `correlation-id: ask-{id}` answers \
             request {id}: {answers:?}"
        );
    }
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_req_gets_its_answer_through_the_delimiter_in_every_form() {
    logs();
    let (running, address) = bound_responder().await;
    let mut req = PyPeer::connect("REQ", &address, json!({})).await;

    req.send(&[b"quotes", b"correlation-id: req-1", br#"{"id":3}"#])
        .await;
    let answer = req.expect("the answer to a three-frame request").await;
    assert_eq!(
        answer.frames.len(),
        3,
        "REQ strips the delimiter: {answer:?}"
    );
    assert_eq!(latin1(answer.headers_frame()), "correlation-id: req-1");
    assert_eq!(answer.payload(), json!({"id": 3, "price": 30}));

    req.send(&[b"quotes", br#"{"id":4}"#]).await;
    let answer = req.expect("the answer to a two-frame request").await;
    assert_eq!(answer.payload(), json!({"id": 4, "price": 40}));
    assert_eq!(
        answer.headers_frame(),
        b"",
        "no correlation-id asked, none answered: an empty headers frame"
    );

    // pyzmq's send_json: a lone frame is the payload.
    req.send_json(json!({"id": 5})).await;
    let answer = req.expect("the answer to a lone frame").await;
    assert_eq!(answer.wire["name"], "reply");
    assert_eq!(answer.payload(), json!({"id": 5, "price": 50}));
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_router_answers_the_crates_requester_echoing_the_correlation_id() {
    logs();
    let mut router = PyPeer::echo_router("tcp://127.0.0.1:*").await;
    let connected = ZmqRpc::new(ZmqEndpoint::dial(router.endpoint.clone()))
        .connect()
        .await
        .unwrap();
    let requester = connected.requester();

    let mut headers = HeaderMap::new();
    headers.insert("correlation-id", "order-42");
    let answer = requester
        .request(
            OutgoingMessage::produced("prices", BytesMut::from(&br#"{"id":42}"#[..]))
                .with_headers(headers),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    assert_eq!(answer.name(), "reply");
    assert_eq!(answer.correlation_id(), Some("order-42"));
    assert_eq!(answer.payload(), br#"{"id":42}"#);
    let seen = router.answered(Duration::from_secs(5)).await.unwrap();
    assert_eq!(
        seen,
        json!({
            "correlation_id": "order-42",
            "name": "prices",
            "headers_frame": "correlation-id: order-42",
            "payload": "{\"id\":42}",
            "delimited": false
        }),
        "the ROUTER read [identity][name][headers][payload], the headers frame byte for byte"
    );

    // With none of its own, the requester mints a correlation-id and matches the answer on it.
    let answers = futures::future::join_all((0..20u64).map(|id| {
        let requester = requester.clone();
        async move {
            let answer = requester
                .request(
                    OutgoingMessage::produced(
                        "prices",
                        BytesMut::from(json!({"id": id}).to_string().as_bytes()),
                    ),
                    Duration::from_secs(5),
                )
                .await
                .unwrap();
            assert!(answer.correlation_id().is_some_and(|c| !c.is_empty()));
            (
                id,
                serde_json::from_slice::<serde_json::Value>(answer.payload()).unwrap()["id"]
                    .clone(),
            )
        }
    }))
    .await;
    assert!(answers.iter().all(|(asked, answered)| answered == asked));
    connected.shutdown().await.unwrap();
}
