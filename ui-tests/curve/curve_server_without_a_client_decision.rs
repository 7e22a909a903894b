// A bound CURVE endpoint given to a broker before it says who may connect: neither an allow-list
// nor `allow_any_client()`, which used to admit every holder of the server key without a word.
use ruststream_zmq::{CurveKeyPair, ZmqEndpoint, libzmq::ZmqQueue};

fn main() {
    let server = CurveKeyPair::generate().unwrap();
    let _ = ZmqQueue::new(ZmqEndpoint::bind("tcp://0.0.0.0:5555").curve(server));
}
