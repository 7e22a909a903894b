//! What `shutdown` answers on real sockets: what each socket sent and read, the peers it saw,
//! and what a subscription had read and not handed to a handler when it closed.

use std::time::Duration;

use futures::StreamExt;
use ruststream::{Broker, ConnectedBroker, IncomingMessage, Subscribe, Subscriber};
use ruststream_zmq::SocketUse;

use super::{Feeder, prelude::*};
use crate::support::{Plan, eventually};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_counts_what_was_read_and_never_handed_to_a_handler() {
    const SENT: u64 = 10;
    const HANDLED: usize = 3;
    let (feeder, address) = Feeder::bind("tcp://127.0.0.1:0").await;
    let broker = ZmqQueue::new(ZmqEndpoint::dial(address.clone()));
    let monitor = broker.monitor();
    let connected = broker.connect().await.unwrap();
    let mut subscriber = connected.subscribe("closing").await.unwrap();
    for id in 0..SENT {
        feeder.send("closing", id, Plan::Ack).await;
    }
    let mut handled = Vec::new();
    {
        let mut stream = subscriber.stream();
        while handled.len() < HANDLED {
            let message = stream.next().await.unwrap().unwrap();
            handled.push(message.payload().to_vec());
        }
    }
    // Every message read off the socket, the rest ahead of the handler, before it closes; and
    // the connection counted, which libzmq's monitor reports on a thread of its own, maybe after
    // the messages.
    eventually(
        Duration::from_secs(15),
        "all ten read, the peer seen",
        || {
            monitor.sockets().first().map(|socket| socket.received()) == Some(SENT)
                && monitor.peers_seen() >= 1
        },
    )
    .await;
    drop(subscriber);
    let closed = connected.shutdown().await.unwrap();

    assert_eq!(closed.sockets().len(), 1, "{closed:?}");
    let socket = &closed.sockets()[0];
    assert_eq!(socket.what(), SocketUse::Subscriber);
    assert_eq!(socket.endpoint(), address);
    assert_eq!(socket.received(), SENT);
    assert_eq!(socket.unhandled(), SENT - HANDLED as u64, "{closed:?}");
    assert_eq!(closed.unhandled(), SENT - HANDLED as u64);
    assert_eq!(
        (closed.messages_sent(), closed.messages_received()),
        (0, SENT)
    );
    assert!(closed.peers_seen() >= 1, "{closed:?}");
    feeder.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_counts_each_publishers_socket_apart() {
    let listener = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let listening = listener.monitor();
    let listener = listener.connect().await.unwrap();
    let mut subscriber = listener.subscribe("counted").await.unwrap();
    let address = listening.bound_address().unwrap();

    let broker = ZmqQueue::new(ZmqEndpoint::dial(address.clone()));
    let connected = broker.connect().await.unwrap();
    let publisher = connected.publisher();
    for _ in 0..4 {
        publisher
            .publish(
                ruststream::OutgoingMessage::produced("counted", ruststream::BytesMut::from("x")),
                None,
            )
            .await
            .unwrap();
    }
    {
        let mut stream = subscriber.stream();
        for _ in 0..4 {
            stream.next().await.unwrap().unwrap();
        }
    }
    let closed = connected.shutdown().await.unwrap();
    assert_eq!(closed.sockets().len(), 1, "{closed:?}");
    let socket = &closed.sockets()[0];
    assert_eq!(socket.what(), SocketUse::Publisher);
    assert_eq!(socket.endpoint(), address);
    assert_eq!(
        (socket.sent(), socket.received(), socket.unhandled()),
        (4, 0, 0)
    );
    assert_eq!(closed.messages_sent(), 4);

    drop(subscriber);
    let closed = listener.shutdown().await.unwrap();
    assert_eq!(closed.messages_received(), 4, "{closed:?}");
    assert_eq!(closed.unhandled(), 0, "{closed:?}");
}
