//! At-most-once settlement on a queue: a payments service on a queue it binds. A payment
//! of nothing is dropped; a payment the gateway fails comes back as a copy 10 seconds later,
//! through the queue the service binds.
//!
//! ```text
//! cargo run --example zmq_settlement_at_most_once -- run
//! ```
//!
//! Feed it from Python (pyzmq): `PUSH` to `tcp://127.0.0.1:5555`, frames
//! `[b"payments", b"", b'{"id": 1, "amount": 250}']`.

use std::time::Duration;

use ruststream_zmq::prelude::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Payment {
    id: u64,
    amount: u64,
}

/// Stands in for a card gateway: it declines amounts over 10 000.
fn gateway(payment: &Payment) -> Result<(), String> {
    if payment.amount > 10_000 {
        Err(format!("amount {} over the limit", payment.amount))
    } else {
        Ok(())
    }
}

#[subscriber("payments")]
async fn charge(payment: &Payment) -> HandlerOutcome {
    if payment.amount == 0 {
        // Nothing to charge. The delivery is gone either way, so it is dropped on purpose.
        tracing::warn!(payment.id, "a payment of nothing, dropped");
        return HandlerOutcome::drop();
    }
    match gateway(payment) {
        Ok(()) => HandlerOutcome::ack(),
        Err(err) => {
            // The socket keeps no copy, so the runtime publishes one after the delay.
            tracing::warn!(payment.id, %err, "the gateway failed, trying again later");
            HandlerOutcome::retry_after(Duration::from_secs(10))
        }
    }
}

#[ruststream::app]
fn app() -> impl App {
    RustStream::new(AppInfo::new("payments", "0.1.0")).with_broker(
        ZmqQueue::new(ZmqEndpoint::bind("tcp://0.0.0.0:5555")),
        |b| {
            b.include(charge);
        },
    )
}
