//! What a subscription reads ahead of its handler: a subscription read by a task of its own (a
//! dialing queue here) holds at most `read_ahead` messages (256 by default) of at most
//! `max_message_bytes` (64 KiB): 16 MiB; past that its socket is not read and the peer's queue
//! takes the pressure. A bound queue is read by its handler's task as it takes each message, and
//! reads nothing ahead. The subscriptions here are read directly, each message taken from the
//! stream standing for one the handler took.
//!
//! That a socket stopped reading is seen against a control: a subscription with room for
//! everything, fed after the one under test, reads all it was sent; the one under test, whose
//! messages were there first, must still hold no more than its bound.

use futures::StreamExt;
use ruststream::{
    Broker, BytesMut, ConnectedBroker, IncomingMessage, OutgoingMessage, Publisher, Subscribe,
    Subscriber,
};
use ruststream_zmq::{SocketUse, WireLimits};
use std::time::Duration;

use super::{Feeder, prelude::*};
use crate::support::eventually;

/// The default read-ahead, as the guides give it.
const READ_AHEAD: u64 = 256;
/// Well past the read-ahead, and within each backend's queue for one peer (libzmq's
/// `peer_queue` of 1,000 at 64 KiB, the `zeromq` client's 100,000).
const SENT: u64 = 400;
const WAIT: Duration = Duration::from_secs(30);

/// A message of exactly `max_message_bytes` under `name`, with no headers: the largest a peer may
/// send.
fn largest(name: &str) -> BytesMut {
    let payload = WireLimits::default().message_bytes() - name.len();
    BytesMut::from(vec![b'x'; payload].as_slice())
}

/// How many messages `monitor`'s subscription has read off its socket.
fn read_off(monitor: &ZmqMonitor) -> u64 {
    monitor
        .sockets()
        .iter()
        .filter(|socket| socket.what() == SocketUse::Subscriber)
        .map(ruststream_zmq::SocketSummary::received)
        .sum()
}

async fn feed(feeder: &Feeder, name: &str, messages: u64) {
    for _ in 0..messages {
        feeder
            .publisher
            .publish(OutgoingMessage::produced(name, largest(name)), None)
            .await
            .unwrap();
    }
}

/// A subscription with room for all `SENT` messages reads every one of them: by the time it
/// has, a subscription fed before it has had every chance to read past its bound.
async fn a_subscription_with_room_reads_them_all() {
    let (feeder, address) = Feeder::bind("tcp://127.0.0.1:0").await;
    let broker = ZmqQueue::new(ZmqEndpoint::dial(address)).read_ahead(1_024);
    let monitor = broker.monitor();
    let connected = broker.connect().await.unwrap();
    let subscriber = connected.subscribe("roomy").await.unwrap();
    feed(&feeder, "roomy", SENT).await;
    eventually(
        WAIT,
        "the roomy subscription reading all it was sent",
        || read_off(&monitor) == SENT,
    )
    .await;
    drop(subscriber);
    connected.shutdown().await.unwrap();
    feeder.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_holds_at_most_256_messages_16_mib_ahead_of_its_handler() {
    const TAKEN: usize = 10;
    let (feeder, address) = Feeder::bind("tcp://127.0.0.1:0").await;
    let broker = ZmqQueue::new(ZmqEndpoint::dial(address));
    let monitor = broker.monitor();
    let connected = broker.connect().await.unwrap();
    let mut subscriber = connected.subscribe("ahead").await.unwrap();
    feed(&feeder, "ahead", SENT).await;
    eventually(WAIT, "the read-ahead filling", || {
        read_off(&monitor) >= READ_AHEAD
    })
    .await;
    a_subscription_with_room_reads_them_all().await;
    let held = read_off(&monitor);
    let bytes = held * WireLimits::default().message_bytes() as u64;
    println!(
        "a dialing queue sent {SENT} messages read {held} ahead of its handler: {bytes} bytes"
    );
    assert_eq!(
        held, READ_AHEAD,
        "read ahead of a handler that took nothing"
    );
    assert_eq!(bytes, 16 << 20, "256 of the largest messages: 16 MiB");

    // Each message the handler takes makes room for one more, and none is lost.
    let mut stream = subscriber.stream();
    for _ in 0..TAKEN {
        let message = stream.next().await.unwrap().unwrap();
        assert!(
            message.headers().is_empty(),
            "the largest message has no headers"
        );
        assert_eq!(
            "ahead".len() + message.payload().len(),
            WireLimits::default().message_bytes()
        );
    }
    let refilled = TAKEN as u64 + READ_AHEAD;
    eventually(WAIT, "the read-ahead refilled", || {
        read_off(&monitor) >= refilled
    })
    .await;
    a_subscription_with_room_reads_them_all().await;
    assert_eq!(
        read_off(&monitor),
        refilled,
        "read ahead again, to its bound"
    );
    let mut taken = TAKEN as u64;
    while taken < SENT {
        stream.next().await.unwrap().unwrap();
        taken += 1;
    }
    // The socket's task counts a message once it has handed it over, so the count may trail the
    // last one taken by a moment.
    eventually(WAIT, "every message counted read", || {
        read_off(&monitor) == SENT
    })
    .await;
    drop(stream);
    drop(subscriber);
    connected.shutdown().await.unwrap();
    feeder.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_queue_reads_nothing_ahead_of_its_handler() {
    const TAKEN: u64 = 3;
    let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = broker.monitor();
    let connected = broker.connect().await.unwrap();
    let mut subscriber = connected.subscribe("none-ahead").await.unwrap();
    let feeder = Feeder::dial(&monitor.bound_address().unwrap()).await;
    feed(&feeder, "none-ahead", SENT).await;
    let mut stream = subscriber.stream();
    for _ in 0..TAKEN {
        stream.next().await.unwrap().unwrap();
    }
    a_subscription_with_room_reads_them_all().await;
    assert_eq!(
        read_off(&monitor),
        TAKEN,
        "a bound queue read past what its handler took"
    );
    let mut taken = TAKEN;
    while taken < SENT {
        stream.next().await.unwrap().unwrap();
        taken += 1;
    }
    assert_eq!(read_off(&monitor), SENT, "every message there, in the end");
    drop(stream);
    drop(subscriber);
    feeder.close().await;
    connected.shutdown().await.unwrap();
}
