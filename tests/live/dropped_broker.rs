//! A connected broker dropped without `shutdown` still closes its sockets and ends its tasks:
//! nothing it started holds it alive.

use std::time::Duration;

use futures::StreamExt;
use ruststream::{Broker, BytesMut, OutgoingMessage, Publisher, Subscribe, Subscriber};
use ruststream_zmq::ZmqEndpoint;

use super::{ZmqQueue, ZmqRpc};
use crate::support::poll::until;

/// How many tasks are alive on the test's own runtime.
fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

/// Polls until the runtime runs no more tasks than `baseline`, or fails after a deadline,
/// naming how many are left.
async fn tasks_end(baseline: usize, what: &str) {
    until(
        Duration::from_secs(10),
        format_args!("{what}: the tasks of the dropped broker to end"),
        || match alive_tasks() {
            alive if alive <= baseline => Ok(()),
            alive => Err(format!("{alive} tasks still alive (baseline {baseline})")),
        },
    )
    .await;
}

/// Polls until nothing listens on `address` (a `tcp://host:port`) any more.
async fn port_freed(address: &str) {
    let host_port = address.trim_start_matches("tcp://").to_owned();
    until(
        Duration::from_secs(10),
        format_args!("{address} freed by the dropped broker that bound it"),
        || std::net::TcpListener::bind(&host_port).is_ok(),
    )
    .await;
}

fn body(text: &str) -> BytesMut {
    BytesMut::from(text.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_responder_and_a_requester_dropped_without_shutdown_end_their_tasks_and_free_the_port() {
    let baseline = alive_tasks();
    let responder = ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = responder.monitor();
    let responder = responder.connect().await.unwrap();
    let mut requests = responder.subscribe("quotes").await.unwrap();
    let address = monitor.bound_address().unwrap();
    let requester = ZmqRpc::new(ZmqEndpoint::dial(address.clone()))
        .connect()
        .await
        .unwrap();
    requester
        .requester()
        .publish(OutgoingMessage::produced("quotes", body("{}")), None)
        .await
        .unwrap();
    let request = tokio::time::timeout(Duration::from_secs(10), requests.stream().next())
        .await
        .expect("the request arrives")
        .expect("the stream is open")
        .unwrap();
    assert_eq!(request.name(), "quotes");
    assert!(
        alive_tasks() > baseline,
        "the brokers run tasks while they live"
    );

    drop((request, requests, requester, responder));

    tasks_end(baseline, "request-reply").await;
    port_freed(&address).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_and_its_publisher_dropped_without_shutdown_end_their_tasks_and_free_the_port() {
    let baseline = alive_tasks();
    let queue = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = queue.monitor();
    let queue = queue.connect().await.unwrap();
    let mut payments = queue.subscribe("payments").await.unwrap();
    let address = monitor.bound_address().unwrap();
    let publisher = queue.publisher();
    publisher
        .publish(OutgoingMessage::produced("payments", body("{}")), None)
        .await
        .unwrap();
    let delivery = tokio::time::timeout(Duration::from_secs(10), payments.stream().next())
        .await
        .expect("the message arrives")
        .expect("the stream is open")
        .unwrap();
    assert_eq!(delivery.name(), "payments");

    drop((delivery, payments, publisher, queue));

    tasks_end(baseline, "queue").await;
    port_freed(&address).await;
}
