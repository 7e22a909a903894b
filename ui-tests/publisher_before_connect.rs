//! Misuse: asking a broker that has not connected for a publisher. Only the connected form
//! publishes; `ZmqQueue::new` records the configuration and opens nothing.

use ruststream_zmq::prelude::*;

fn main() {
    let broker = ZmqQueue::new(ZmqEndpoint::dial("tcp://127.0.0.1:5555"));
    let _publisher = broker.publisher();
}
