// A setting only libzmq has, asked of a broker on the `zeromq` client.
use std::time::Duration;

use ruststream_zmq::{ZmqEndpoint, zeromq::ZmqQueue};

fn main() {
    let _ = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .heartbeat(Duration::from_secs(1), Duration::from_secs(5));
}
