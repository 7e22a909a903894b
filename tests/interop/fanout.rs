//! PUB/SUB against libzmq: a Python PUB feeding a bound fan-out subscription, and a Python SUB
//! with a prefix reading from a bound fan-out publisher.

use std::time::Duration;

use ruststream::{Broker, BytesMut, ConnectedBroker, OutgoingMessage, Publisher, Subscribe};
use ruststream_zmq::{ZmqEndpoint, ZmqPublisher};
use serde_json::json;

use super::ZmqFanout;
use crate::support::{PyPeer, STEP, Tap, json_of, logs, until_async};

/// The name warm-ups travel under: inside the `orders` prefix, and no order's name.
const WARM_UP: &str = "orders.warmup";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_pub_reaches_a_bound_fanout_subscription_under_its_prefix_only() {
    logs();
    let connected = ZmqFanout::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let mut tap = Tap::new(connected.subscribe("orders").await.unwrap());
    let monitor = connected.monitor();
    let mut publisher = PyPeer::connect("PUB", &monitor.bound_address().unwrap(), json!({})).await;

    // The slow joiner: a PUB drops what it sends before the SUB's subscription reached it, so
    // warm up until the first one arrives. Warm-ups go under their own name, under the prefix:
    // those still on their way are told from the orders by that name, below.
    until_async(STEP, "a warm-up through the Python PUB", async || {
        publisher.send(&[WARM_UP.as_bytes(), b"{}"]).await;
        tap.next(Duration::from_millis(50)).await.is_some()
    })
    .await;

    publisher
        .send(&[b"orders", b"x-region: eu", br#"{"n":1}"#])
        .await;
    publisher.send(&[b"invoices", br#"{"n":2}"#]).await;
    publisher.send(&[b"orders.eu", br#"{"n":3}"#]).await;
    // A lone frame under the prefix passes the SUB's filter, and the fan-out refuses it: it
    // needs a name.
    publisher.send(&[b"orders-but-alone"]).await;
    publisher.send(&[b"orders.end", br#"{"n":4}"#]).await;

    let mut seen = Vec::new();
    while seen.last() != Some(&4) {
        let message = tap.expect("the orders").await;
        if message.name() == WARM_UP {
            // Sent before the orders on the same connection: none can follow one.
            assert!(seen.is_empty(), "a warm-up after order {seen:?}");
            continue;
        }
        seen.push(json_of(&message)["n"].as_u64().unwrap());
        if seen.len() == 1 {
            assert_eq!(message.name(), "orders");
            assert_eq!(
                ruststream::IncomingMessage::headers(&message).get_str("x-region"),
                Some("eu")
            );
        }
    }
    assert_eq!(
        seen,
        [1, 3, 4],
        "`orders` hears `orders` and `orders.eu`, not `invoices`"
    );
    assert_eq!(monitor.refused_by("lone-frame"), 1);
    assert_eq!(monitor.refused(), 1);
    connected.shutdown().await.unwrap();
}

async fn publish(publisher: &ZmqPublisher, name: &str, n: u64) {
    publisher
        .publish(
            OutgoingMessage::produced(name, BytesMut::from(json!({"n": n}).to_string().as_bytes())),
            None,
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_sub_with_a_prefix_receives_only_that_prefix_from_a_bound_publisher() {
    logs();
    let connected = ZmqFanout::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let address = connected.bind_publisher().await.unwrap();
    let publisher = connected.publisher();
    let mut sub = PyPeer::connect("SUB", &address, json!({"SUBSCRIBE": "orders"})).await;

    // Warm-ups still on their way are told from the orders by their name, below.
    until_async(STEP, "a warm-up at the Python SUB", async || {
        publish(&publisher, WARM_UP, 0).await;
        sub.recv(Duration::from_millis(50)).await.is_some()
    })
    .await;

    publish(&publisher, "invoices", 1).await;
    publish(&publisher, "orders", 2).await;
    publish(&publisher, "order", 3).await;
    publish(&publisher, "orders.eu", 4).await;
    publish(&publisher, "invoices.orders", 5).await;
    publish(&publisher, "orders.end", 6).await;

    let mut seen = Vec::new();
    while seen.last().map(|(_, n)| *n) != Some(6) {
        let received = sub.expect("the orders").await;
        assert_eq!(received.frames.len(), 3, "{received:?}");
        if received.frames[0] == WARM_UP.as_bytes() {
            assert!(seen.is_empty(), "a warm-up after {seen:?}");
            continue;
        }
        let name = received.wire["name"].as_str().unwrap().to_owned();
        seen.push((name, received.payload()["n"].as_u64().unwrap()));
    }
    assert_eq!(
        seen,
        [
            ("orders".to_owned(), 2),
            ("orders.eu".to_owned(), 4),
            ("orders.end".to_owned(), 6)
        ]
    );
    connected.shutdown().await.unwrap();
}
