// A CURVE endpoint given to a broker on the `zeromq` client, which does not speak CURVE.
use ruststream_zmq::{CurveKeyPair, ZmqEndpoint, zeromq::ZmqQueue};

fn main() {
    let server = CurveKeyPair::generate().unwrap();
    let endpoint = ZmqEndpoint::bind("tcp://127.0.0.1:0").curve(server).allow_any_client();
    let _ = ZmqQueue::new(endpoint);
}
