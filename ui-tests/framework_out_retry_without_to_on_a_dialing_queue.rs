//! Misuse: the framework's `.out_retry(Publish)` without `.to(..)` on a dialing by-name
//! registration in a `Router` chain. A dialing queue reads from a peer that only sends, so its
//! subscription addresses none of its copies and the chain must name a destination.

use ruststream::runtime::{Router, RouterDef};
use ruststream_zmq::prelude::*;

#[subscriber("payments")]
async fn charge(payment: &serde_json::Value) -> HandlerOutcome {
    let _ = payment;
    HandlerOutcome::retry()
}

fn routes() -> impl RouterDef<ZmqQueue<Dialing>> {
    Router::<ZmqQueue<Dialing>>::new()
        .include(charge)
        .max_attempts(nonzero!(3u32))
        .out_retry(Publish)
        .build()
}

fn main() {
    let _ = routes();
}
