//! The requester's requests in flight: a `correlation-id` used twice at once, and a shutdown
//! while requests wait for their answers.

use std::time::{Duration, Instant};

use futures::StreamExt;
use ruststream::{
    Broker, BytesMut, ConnectedBroker, HeaderMap, IncomingMessage, OutgoingMessage, Publisher,
    RequestReply, Subscribe, Subscriber,
};
use ruststream_zmq::{ZmqEndpoint, ZmqError};

use super::ZmqRpc;

fn ask(text: &str, correlation_id: &str) -> OutgoingMessage<'static, BytesMut> {
    let mut headers = HeaderMap::new();
    headers.insert("correlation-id", correlation_id.to_owned());
    OutgoingMessage::produced("quotes", BytesMut::from(text.as_bytes())).with_headers(headers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correlation_id_already_in_flight_is_refused_and_the_first_request_gets_its_own_answer() {
    let responder = ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = responder.monitor();
    let responder = responder.connect().await.unwrap();
    let mut requests = responder.subscribe("quotes").await.unwrap();
    let answers = responder.publisher();
    let address = monitor.bound_address().unwrap();
    let requester_broker = ZmqRpc::new(ZmqEndpoint::dial(address))
        .connect()
        .await
        .unwrap();
    let requester = requester_broker.requester();

    let first = tokio::spawn({
        let requester = requester.clone();
        async move {
            requester
                .request(ask("first", "order-7"), Duration::from_secs(20))
                .await
        }
    });
    // The responder holds the first request unanswered while the second one is tried.
    let request = tokio::time::timeout(Duration::from_secs(10), requests.stream().next())
        .await
        .expect("the first request arrives")
        .expect("the stream is open")
        .unwrap();
    assert_eq!(request.payload(), b"first");
    let second = requester
        .request(ask("second", "order-7"), Duration::from_secs(20))
        .await;
    match second {
        Err(ZmqError::CorrelationIdInFlight { id, .. }) => assert_eq!(id, "order-7"),
        other => {
            panic!("the second request with the same correlation-id was not refused: {other:?}")
        }
    }

    let reply_to = String::from_utf8(request.headers().get("reply-to").unwrap().to_vec()).unwrap();
    let mut headers = HeaderMap::new();
    headers.insert("correlation-id", "order-7".to_owned());
    answers
        .publish(
            OutgoingMessage::produced(&reply_to, BytesMut::from(&b"answer to first"[..]))
                .with_headers(headers),
            None,
        )
        .await
        .unwrap();
    let answer = first.await.unwrap().expect("the first request is answered");
    assert_eq!(answer.payload(), b"answer to first");
    assert_eq!(requester.in_flight(), 0);

    requester_broker.shutdown().await.unwrap();
    responder.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_in_flight_at_shutdown_fail_at_once_with_a_shut_down_error() {
    let responder = ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = responder.monitor();
    let responder = responder.connect().await.unwrap();
    let mut requests = responder.subscribe("quotes").await.unwrap();
    let requester_broker = ZmqRpc::new(ZmqEndpoint::dial(monitor.bound_address().unwrap()))
        .connect()
        .await
        .unwrap();
    let requester = requester_broker.requester();
    let waiting: Vec<_> = (0..3)
        .map(|n| {
            let requester = requester.clone();
            tokio::spawn(async move {
                requester
                    .request(
                        ask("never answered", &format!("ask-{n}")),
                        Duration::from_secs(60),
                    )
                    .await
            })
        })
        .collect();
    // All three reached the responder, which never answers.
    for _ in 0..3 {
        tokio::time::timeout(Duration::from_secs(10), requests.stream().next())
            .await
            .expect("each request arrives")
            .expect("the stream is open")
            .unwrap();
    }
    assert_eq!(requester.in_flight(), 3);

    let shut = Instant::now();
    requester_broker.shutdown().await.unwrap();
    for request in waiting {
        let failed = tokio::time::timeout(Duration::from_secs(5), request)
            .await
            .expect("a request in flight ends with the shutdown, not at its 60 s timeout")
            .unwrap();
        assert!(
            matches!(failed, Err(ZmqError::ShutDown { .. })),
            "a request in flight at shutdown answered {failed:?}"
        );
    }
    assert!(
        shut.elapsed() < Duration::from_secs(5),
        "the requests failed {:?} after shutdown",
        shut.elapsed()
    );
    assert_eq!(requester.in_flight(), 0);
    responder.shutdown().await.unwrap();
}
