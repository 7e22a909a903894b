//! Misuse: a `#[subscriber(QueueSubscription::<Dialing>)]` handler mounted in a `Router` chain
//! without `.out_retry(..)`: nothing names where its retry copies go.

use ruststream::runtime::{Router, RouterDef};
use ruststream_zmq::prelude::*;

#[subscriber(QueueSubscription::<Dialing>)]
async fn charge(payment: &serde_json::Value) -> HandlerOutcome {
    let _ = payment;
    HandlerOutcome::retry()
}

fn routes() -> impl RouterDef<ZmqQueue<Dialing>> {
    Router::<ZmqQueue<Dialing>>::new()
        .include(charge.name("payments"))
        .build()
}

fn main() {
    let _ = routes();
}
