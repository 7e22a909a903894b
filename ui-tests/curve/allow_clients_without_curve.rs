// An allow-list on an endpoint that does not speak CURVE: there is no handshake to refuse.
use ruststream_zmq::{CurveKeyPair, ZmqEndpoint};

fn main() {
    let client = CurveKeyPair::generate().unwrap();
    let _ = ZmqEndpoint::bind("tcp://127.0.0.1:0").allow_clients([client.public()]);
}
