//! One process runs brokers on both backends side by side: a queue on libzmq and one on the
//! `zeromq` client, each fed by a publisher of the other backend, over real sockets.

use std::time::Duration;

use futures::StreamExt;
use ruststream::{
    Broker, BytesMut, ConnectedBroker, IncomingMessage, OutgoingMessage, Publisher, Subscribe,
};
use ruststream_zmq::{ZmqEndpoint, libzmq, zeromq};

fn body(text: &str) -> BytesMut {
    BytesMut::from(text.as_bytes())
}

/// The next delivery of `subscriber`'s stream, by a deadline: its name and payload.
async fn next(subscriber: &mut ruststream_zmq::ZmqSubscriber) -> (String, Vec<u8>) {
    use ruststream::Subscriber;
    let delivery = tokio::time::timeout(Duration::from_secs(10), subscriber.stream().next())
        .await
        .expect("the message arrives by the deadline")
        .expect("the stream is open")
        .expect("the message is read");
    (delivery.name().to_owned(), delivery.payload().to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_on_each_backend_runs_in_one_process_and_each_takes_the_others_messages() {
    // The exposed endpoint on libzmq, with a setting only that backend has.
    let exposed = libzmq::ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .heartbeat(Duration::from_millis(500), Duration::from_secs(2));
    let exposed_at = exposed.monitor();
    let exposed = exposed.connect().await.unwrap();
    let mut payments = exposed.subscribe("payments").await.unwrap();

    // The loopback queue on the pure-Rust client.
    let loopback = zeromq::ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let loopback_at = loopback.monitor();
    let loopback = loopback.connect().await.unwrap();
    let mut retries = loopback.subscribe("payments.retry").await.unwrap();

    // Each fed by a publisher on the other backend.
    let to_exposed = zeromq::ZmqQueue::new(ZmqEndpoint::dial(exposed_at.bound_address().unwrap()))
        .connect()
        .await
        .unwrap();
    let to_loopback =
        libzmq::ZmqQueue::new(ZmqEndpoint::dial(loopback_at.bound_address().unwrap()))
            .connect()
            .await
            .unwrap();
    to_exposed
        .publisher()
        .publish(
            OutgoingMessage::produced("payments", body(r#"{"id":1}"#)),
            None,
        )
        .await
        .unwrap();
    to_loopback
        .publisher()
        .publish(
            OutgoingMessage::produced("payments.retry", body(r#"{"id":2}"#)),
            None,
        )
        .await
        .unwrap();

    assert_eq!(
        next(&mut payments).await,
        ("payments".to_owned(), br#"{"id":1}"#.to_vec()),
        "the libzmq queue took the zeromq publisher's message"
    );
    assert_eq!(
        next(&mut retries).await,
        ("payments.retry".to_owned(), br#"{"id":2}"#.to_vec()),
        "the zeromq queue took the libzmq publisher's message"
    );
    drop((payments, retries));
    for dialing in [to_exposed, to_loopback] {
        dialing.shutdown().await.unwrap();
    }
    for bound in [exposed, loopback] {
        bound.shutdown().await.unwrap();
    }
}
