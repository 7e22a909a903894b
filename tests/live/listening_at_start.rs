//! A bound broker that a handler publishes through (its publisher paired at startup) listens as
//! soon as its app has started, and logs where: a peer started first (`zmqs tail`, a worker)
//! dials in before anything is published, and hears what is. A dialing one never holds the
//! start up waiting for its peer.

use std::time::Duration;

use futures::StreamExt;
use ruststream::{Broker, ConnectedBroker, IncomingMessage, Subscribe, Subscriber};
use ruststream_zmq::{ConnectedZmq, Dialing, QueueKind, ZmqMessage};
use serde::{Deserialize, Serialize};

use super::prelude::*;
use crate::support::{capture_logs, eventually, logged};

/// How long a socket may take to connect, or a message to arrive.
const WAIT: Duration = Duration::from_secs(15);

/// The name of what the fan-out sends before the event, until the peer's subscription has
/// reached the PUB: a PUB drops what it has no subscription for, and no figure of the client
/// says when one arrived.
const WARM_UP: &str = "prices.warm-up";

/// The INFO line that says where the publishers of a bound broker listen.
async fn said_at_info_where(address: &str) {
    let field = format!("endpoint={address}");
    let line = logged(&["publishers listening", &field]).await;
    assert!(line.contains(" INFO "), "not at INFO: {line}");
    assert!(
        line.split_whitespace().any(|word| word == field),
        "another endpoint: {line}"
    );
}

/// What the relay is fed, and publishes as it is: the name it goes out under, and a number.
#[derive(Debug, Serialize, Deserialize, Outgoing)]
struct Tick {
    topic: String,
    n: u64,
}

/// Publishes each tick it reads through the broker its `Out` slot is bound to.
#[subscriber(QueueSubscription::<Bound>)]
async fn relay(tick: &Tick, Out(out): Out<impl Publisher>) -> HandlerOutcome {
    match out.message(tick).to(tick.topic.clone()).publish().await {
        Ok(()) => HandlerOutcome::ack(),
        Err(_) => HandlerOutcome::drop(),
    }
}

/// A peer feeding the relay's queue at `address`.
async fn feeder(address: String) -> ConnectedZmq<QueueKind, Dialing> {
    ZmqQueue::new(ZmqEndpoint::dial(address))
        .connect()
        .await
        .unwrap()
}

/// Feeds the relay one tick.
async fn feed(feeder: &ConnectedZmq<QueueKind, Dialing>, topic: &str, n: u64) {
    feeder
        .publisher()
        .message(&Tick {
            topic: topic.to_owned(),
            n,
        })
        .to("ticks")
        .publish()
        .await
        .unwrap();
}

/// The tick a message carries.
fn tick_of(message: &ZmqMessage) -> Tick {
    serde_json::from_slice(message.payload()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_fanout_a_handler_publishes_through_listens_when_start_returns_and_says_where() {
    capture_logs();
    let prices = ZmqFanout::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = prices.monitor();
    let prices = prices.bindable();
    let to_prices = prices.bind(Publish);
    let ticks = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let ticks_monitor = ticks.monitor();
    let running = RustStream::new(AppInfo::new("prices", "0.1.0"))
        .with_broker_labeled("prices", prices, |_| {})
        .with_broker_labeled("ticks", ticks, |b| {
            b.include(relay.name("ticks"))
                .out(DefaultSlot, to_prices)
                .build();
        })
        .start()
        .await
        .unwrap();

    let address = monitor
        .bound_address()
        .expect("the fan-out listens once start() has returned");
    said_at_info_where(&address).await;

    // The tail, started before anything is published: it finds the port.
    let tail = ZmqFanout::new(ZmqEndpoint::dial(address.clone()))
        .connect()
        .await
        .unwrap();
    let mut heard = tail.subscribe("prices").await.unwrap();
    eventually(
        WAIT,
        "the tail connected to the fan-out's publisher",
        || monitor.peers_connected() >= 1,
    )
    .await;
    assert_eq!(monitor.sent(), 0, "connected before anything was published");

    let feeder = feeder(ticks_monitor.bound_address().unwrap()).await;
    let mut stream = heard.stream();
    // The first event is the first published once the tail's subscription took effect.
    loop {
        feed(&feeder, WARM_UP, 0).await;
        let next = tokio::time::timeout(Duration::from_millis(100), stream.next()).await;
        if let Ok(Some(message)) = next {
            assert_eq!(message.unwrap().name(), WARM_UP);
            break;
        }
        assert!(
            monitor.sent() < 500,
            "the tail's subscription never took effect"
        );
    }
    feed(&feeder, "prices", 1).await;
    let first = loop {
        let message = tokio::time::timeout(WAIT, stream.next())
            .await
            .expect("the event within the wait")
            .unwrap()
            .unwrap();
        if message.name() != WARM_UP {
            break message;
        }
    };
    assert_eq!((first.name(), tick_of(&first).n), ("prices", 1));
    drop(stream);
    drop(heard);
    running.shutdown().await.unwrap();
    tail.shutdown().await.unwrap();
    feeder.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_queue_a_handler_publishes_through_listens_when_start_returns_and_a_worker_takes_the_first_job()
 {
    capture_logs();
    let jobs = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = jobs.monitor();
    let jobs = jobs.bindable();
    let to_jobs = jobs.bind(Publish);
    let ticks = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let ticks_monitor = ticks.monitor();
    let running = RustStream::new(AppInfo::new("jobs", "0.1.0"))
        .with_broker_labeled("jobs", jobs, |_| {})
        .with_broker_labeled("ticks", ticks, |b| {
            b.include(relay.name("ticks"))
                .out(DefaultSlot, to_jobs)
                .build();
        })
        .start()
        .await
        .unwrap();

    let address = monitor
        .bound_address()
        .expect("the queue's publishers listen once start() has returned");
    said_at_info_where(&address).await;

    let worker = ZmqQueue::new(ZmqEndpoint::dial(address.clone()))
        .connect()
        .await
        .unwrap();
    let mut taken = worker.subscribe("jobs").await.unwrap();
    eventually(
        WAIT,
        "the worker connected to the queue's publisher",
        || monitor.peers_connected() >= 1,
    )
    .await;
    assert_eq!(monitor.sent(), 0, "connected before anything was published");

    let feeder = feeder(ticks_monitor.bound_address().unwrap()).await;
    for n in 1..=3 {
        feed(&feeder, "jobs", n).await;
    }
    let mut stream = taken.stream();
    let first = tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("the first job within the wait")
        .unwrap()
        .unwrap();
    assert_eq!((first.name(), tick_of(&first).n), ("jobs", 1));
    drop(stream);
    drop(taken);
    running.shutdown().await.unwrap();
    worker.shutdown().await.unwrap();
    feeder.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_publisher_starts_without_its_peer_and_reaches_it_once_it_listens() {
    let port = crate::support::free_port();
    let address = format!("tcp://127.0.0.1:{port}");
    // A publish would wait a minute for a peer: a start that waited for one would too.
    let queue = ZmqQueue::new(ZmqEndpoint::dial(address.clone()))
        .send_timeout(Duration::from_secs(60))
        .bindable();
    let jobs = queue.bind(Publish);
    let running = tokio::time::timeout(
        Duration::from_secs(10),
        RustStream::new(AppInfo::new("jobs", "0.1.0"))
            .with_broker(queue, |_| {})
            .start(),
    )
    .await
    .expect("start() does not wait for the dialing publisher's peer")
    .unwrap();

    let publisher = running.publisher(jobs).await.unwrap();
    let sending = tokio::spawn(async move {
        publisher
            .publish(
                ruststream::OutgoingMessage::produced("jobs", ruststream::BytesMut::from("1")),
                None,
            )
            .await
    });
    // The peer comes up after the service: the publisher reaches it.
    let worker = ZmqQueue::new(ZmqEndpoint::bind(address))
        .connect()
        .await
        .unwrap();
    let mut taken = worker.subscribe("jobs").await.unwrap();
    let mut stream = taken.stream();
    let first = tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("the job within the wait")
        .unwrap()
        .unwrap();
    assert_eq!(first.payload(), b"1");
    sending.await.unwrap().unwrap();
    drop(stream);
    drop(taken);
    running.shutdown().await.unwrap();
    worker.shutdown().await.unwrap();
}
