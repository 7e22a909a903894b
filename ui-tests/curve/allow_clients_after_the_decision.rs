// Who may connect is said once, when the endpoint is made: a decided endpoint (here one that
// admits any client) takes no allow-list afterwards, so no clone of it can change what another
// admits.
use ruststream_zmq::{CurveKeyPair, ZmqEndpoint};

fn main() {
    let server = CurveKeyPair::generate().unwrap();
    let client = CurveKeyPair::generate().unwrap();
    let endpoint = ZmqEndpoint::bind("tcp://0.0.0.0:5555").curve(server).allow_any_client();
    let _ = endpoint.clone().allow_clients([client.public()]);
}
