//! At-most-once settlement on a queue: a payments service on a queue it binds. A payment
//! of nothing is dropped; a payment the gateway fails comes back as a copy 10 seconds later,
//! through the queue the service binds.
//!
//! ```text
//! cargo run --example zmq_settlement_at_most_once -- run
//! PAYMENTS_ENDPOINT=tcp://127.0.0.1:6000 cargo run --example zmq_settlement_at_most_once -- run
//! ```
//!
//! Feed it from Python (pyzmq): `PUSH` to `tcp://127.0.0.1:5555`, frames
//! `[b"payments", b"", b'{"id": 1, "amount": 250}']`; or from a shell:
//! `zmqs send tcp://127.0.0.1:5555 payments '{"id": 1, "amount": 20000}'`.
//!
//! The copy waiting out its 10 seconds lives in this process only. Ctrl-C does not wait for it:
//! the service stops within a second, and says which payments' copies were lost with it.

use std::{collections::BTreeSet, sync::Mutex, time::Duration};

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

/// The payments whose retry copy is waiting in this process: what a stop would lose.
static WAITING: Mutex<BTreeSet<u64>> = Mutex::new(BTreeSet::new());

fn waiting() -> std::sync::MutexGuard<'static, BTreeSet<u64>> {
    WAITING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[subscriber("payments")]
async fn charge(payment: &Payment) -> HandlerOutcome {
    // A copy that came back is no longer waiting.
    waiting().remove(&payment.id);
    if payment.amount == 0 {
        // Nothing to charge. The delivery is gone either way, so it is dropped on purpose.
        tracing::warn!(payment.id, "a payment of nothing, dropped");
        return HandlerOutcome::drop();
    }
    match gateway(payment) {
        Ok(()) => {
            tracing::info!(payment.id, payment.amount, "charged");
            HandlerOutcome::ack()
        }
        Err(err) => {
            // The socket keeps no copy, so the runtime publishes one after the delay.
            tracing::warn!(payment.id, %err, "the gateway failed, trying again in 10 s");
            waiting().insert(payment.id);
            HandlerOutcome::retry_after(Duration::from_secs(10))
        }
    }
}

#[ruststream::app]
fn app() -> impl App {
    let endpoint =
        std::env::var("PAYMENTS_ENDPOINT").unwrap_or_else(|_| "tcp://0.0.0.0:5555".to_owned());
    RustStream::new(AppInfo::new("payments", "0.1.0"))
        // A waiting copy is a timer of this process, which a graceful stop would otherwise wait
        // out (then send toward a listener already closed). At most once: it is lost either way.
        .shutdown_timeout(Duration::from_secs(1))
        .after_shutdown(async |_| {
            let lost = std::mem::take(&mut *waiting());
            if lost.is_empty() {
                tracing::info!("stopped; no retry copy was waiting, none lost");
            } else {
                tracing::warn!(
                    payments = ?lost,
                    "stopped; the retry copies of these payments were waiting in this process \
                     and are lost with it (at most once)"
                );
            }
            Ok::<_, std::convert::Infallible>(())
        })
        .with_broker(ZmqQueue::new(ZmqEndpoint::bind(endpoint)), |b| {
            b.include(charge);
        })
}
