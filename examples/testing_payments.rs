//! A service test with `TestApp`: the production app, its brokers connected in process (the
//! crate's `testing` feature), no sockets. The test injects payments and asserts what the handler
//! did and what the service published, retry copies and dead letters included.
//!
//! ```text
//! cargo test --example testing_payments --features testing
//! ```

// A plain build compiles the service; the tests exist only in the test build.
#![cfg_attr(not(test), allow(dead_code, unused_imports))]

use std::time::Duration;

use ruststream_zmq::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, PartialEq, Serialize, Deserialize, Outgoing)]
struct Payment {
    id: u64,
    amount: u64,
}

#[subscriber("payments")]
async fn charge(payment: &Payment) -> HandlerOutcome {
    match payment.amount {
        0 => HandlerOutcome::drop(),
        amount if amount > 10_000 => HandlerOutcome::retry_after(Duration::from_millis(50)),
        _ => HandlerOutcome::ack(),
    }
}

#[subscriber("payments.dead")]
async fn park(payment: &Payment) -> HandlerOutcome {
    tracing::error!(payment.id, "parked");
    HandlerOutcome::ack()
}

fn app() -> impl App {
    RustStream::new(AppInfo::new("payments", "0.1.0"))
        .with_broker_labeled(
            "payments",
            ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:5555")),
            |b| {
                b.include(charge)
                    .max_attempts(nonzero!(2u32))
                    .dead_letter("payments.dead@tcp://127.0.0.1:5556");
            },
        )
        // The dead-letter queue: another endpoint, bound by the same service.
        .with_broker_labeled(
            "dead-letters",
            ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:5556")),
            |b| {
                b.include(park);
            },
        )
}

fn main() {
    println!("run the tests: cargo test --example testing_payments --features testing");
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ruststream::testing::TestApp;

    use super::{Payment, app};

    #[tokio::test]
    async fn a_payment_is_charged_once() -> Result<(), Box<dyn std::error::Error>> {
        let tb = TestApp::start(app()).await?;
        let payments = tb.broker_named("payments");
        payments
            .message(&Payment { id: 1, amount: 250 })
            .to("payments")
            .publish()
            .await?;
        payments
            .subscriber("payments")
            .assert_called_once()
            .with(&Payment { id: 1, amount: 250 });
        Ok(())
    }

    /// On a paused clock: `advance` lets the `retry_after` delay pass.
    #[tokio::test(start_paused = true)]
    async fn a_failing_payment_comes_back_once_then_leaves_as_a_dead_letter()
    -> Result<(), Box<dyn std::error::Error>> {
        let tb = TestApp::start(app()).await?;
        let payments = tb.broker_named("payments");
        payments
            .message(&Payment {
                id: 2,
                amount: 20_000,
            })
            .to("payments")
            .publish()
            .await?;
        tb.advance(Duration::from_millis(50)).await?;
        // The first delivery and its copy reach the handler; at the cap the copy leaves for
        // the dead-letter queue, which the service's publisher sent, so the log shows it.
        payments.subscriber("payments").assert_called(2);
        let dead = payments.published::<Payment>("payments.dead@tcp://127.0.0.1:5556");
        dead.assert_called_once().with(&Payment {
            id: 2,
            amount: 20_000,
        });
        tb.broker_named("dead-letters")
            .subscriber("payments.dead")
            .assert_called_once();
        Ok(())
    }
}
