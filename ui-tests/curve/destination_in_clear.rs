// A destination's keys are a dialing endpoint with CURVE: a CURVE broker has no way to send a
// destination's copies in clear.
use ruststream_zmq::{CurveKeyPair, CurvePublicKey, ZmqEndpoint, libzmq::ZmqQueue};

fn main() {
    let server = CurvePublicKey::from_z85("rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7").unwrap();
    let own = CurveKeyPair::generate().unwrap();
    let _ = ZmqQueue::new(ZmqEndpoint::dial("tcp://10.0.0.5:5555").curve(own, server))
        .destination(ZmqEndpoint::dial("tcp://10.0.0.6:5556"));
}
