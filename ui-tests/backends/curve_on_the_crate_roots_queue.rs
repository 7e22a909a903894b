// A CURVE endpoint given to the crate root's `ZmqQueue`, which runs on the default backend
// (`zeromq`, with no security mechanism): the error names the brokers that speak CURVE.
use ruststream_zmq::{CurveKeyPair, ZmqEndpoint, ZmqQueue};

fn main() {
    let server = CurveKeyPair::generate().unwrap().public();
    let client = CurveKeyPair::generate().unwrap();
    let endpoint = ZmqEndpoint::dial("tcp://127.0.0.1:5555").curve(client, server);
    let _ = ZmqQueue::new(endpoint);
}
