//! Misuse: a dialing fan-out subscription builder mounted before `.out_retry(..)` named where
//! its retry copies go: it reads from a peer that only sends, so it has no address of its own.

use ruststream_zmq::prelude::*;

#[subscriber(FanoutSubscription::<Dialing>::new("prices"))]
async fn render(tick: &serde_json::Value) -> HandlerOutcome {
    let _ = tick;
    HandlerOutcome::ack()
}

fn main() {
    let _app = RustStream::new(AppInfo::new("dashboard", "0.1.0")).with_broker(
        ZmqFanout::new(ZmqEndpoint::dial("tcp://127.0.0.1:5557")),
        |b| {
            b.include(render);
        },
    );
}
