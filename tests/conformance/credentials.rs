//! The suites that scan the AsyncAPI document for credentials (feature `asyncapi`). ZeroMQ's NULL
//! mechanism has none, but an address a user typed can carry user information, and the document
//! is published: the described server is the host and port, never more.

use ruststream::conformance::{harness, message_shape};
use ruststream_zmq::{
    Bound, ConnectedZmqQueue, QueueSubscription, ZmqEndpoint, ZmqPublish, ZmqQueue,
};

const SECRET: &str = "zmq-secret-5c1d";

#[test]
fn the_described_server_carries_no_credentials() {
    let broker = ZmqQueue::new(ZmqEndpoint::bind(format!(
        "tcp://operator:{SECRET}@127.0.0.1:5555"
    )));
    harness::describes_without_credentials(
        &broker,
        &QueueSubscription::<Bound>::new("payments"),
        SECRET,
    );
}

#[test]
fn the_publish_policy_describes_no_credentials() {
    message_shape::publishes_without_credentials::<ConnectedZmqQueue<Bound>, _>(
        &ZmqPublish,
        SECRET,
    );
}

#[test]
fn every_described_address_drops_its_user_information() {
    // One endpoint per broker: the first address the suite hands over is the one described.
    message_shape::describes_addresses_without_credentials(
        |addresses| ZmqQueue::new(ZmqEndpoint::bind(addresses[0].to_owned())),
        "tcp",
    );
}
