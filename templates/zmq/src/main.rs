//! A ZeroMQ service: payments from a queue, a failed one tried again up to a cap, then parked on
//! a dead-letter queue. `cargo run -- run` starts it; `cargo test` runs its tests in process.

use std::time::Duration;

use ruststream_zmq::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, PartialEq, Serialize, Deserialize, Outgoing)]
pub struct Payment {
    pub id: u64,
    pub amount: u64,
}

/// The work itself; put the call to your gateway, database or model here.
async fn settle(payment: &Payment) -> Result<(), &'static str> {
    if payment.amount > 10_000 {
        return Err("the gateway refused the amount");
    }
    Ok(())
}

#[subscriber("payments")]
async fn charge(payment: &Payment, Ctx(attempt): Ctx<Attempt>) -> HandlerOutcome {
    if payment.amount == 0 {
        tracing::warn!(payment.id, "nothing to charge, dropped");
        return HandlerOutcome::drop();
    }
    match settle(payment).await {
        Ok(()) => {
            tracing::info!(payment.id, attempt, "charged");
            HandlerOutcome::ack()
        }
        Err(why) => {
            tracing::warn!(payment.id, attempt, why, "failed, trying again later");
            // A copy comes back after the delay, until the cap below.
            HandlerOutcome::retry_after(Duration::from_secs(1))
        }
    }
}

#[subscriber("payments.dead")]
async fn park(payment: &Payment) -> HandlerOutcome {
    tracing::error!(payment.id, "parked for a person to look at");
    HandlerOutcome::ack()
}

/// The service's name, as its logs and its AsyncAPI document give it.
const SERVICE: &str = "{{project-name}}";

#[ruststream::app]
fn app() -> impl App {
    RustStream::new(AppInfo::new(SERVICE, env!("CARGO_PKG_VERSION")))
        .with_broker_labeled(
            "payments",
            ZmqQueue::new(ZmqEndpoint::bind("tcp://0.0.0.0:5555")),
            |b| {
                b.include(charge)
                    .max_attempts(nonzero!(3u32)) // the third failure is the last
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ruststream::testing::TestApp;

    use super::{Payment, app};

    #[tokio::test]
    async fn a_payment_is_charged_once() -> Result<(), Box<dyn std::error::Error>> {
        let tb = TestApp::start(app()).await?;
        let payments = tb.broker_named("payments");
        let payment = Payment { id: 1, amount: 250 };
        payments.message(&payment).to("payments").publish().await?;
        payments
            .subscriber("payments")
            .assert_called_once()
            .with(&payment);
        tb.broker_named("dead-letters")
            .subscriber("payments.dead")
            .assert_not_called();
        Ok(())
    }

    /// On a paused clock, `advance` lets each retry delay pass at once.
    #[tokio::test(start_paused = true)]
    async fn a_failing_payment_is_tried_three_times_then_dead_lettered()
    -> Result<(), Box<dyn std::error::Error>> {
        let tb = TestApp::start(app()).await?;
        let payments = tb.broker_named("payments");
        let payment = Payment {
            id: 2,
            amount: 20_000,
        };
        payments.message(&payment).to("payments").publish().await?;
        tb.advance(Duration::from_secs(1)).await?;
        tb.advance(Duration::from_secs(1)).await?;
        payments.subscriber("payments").assert_called(3);
        payments
            .published::<Payment>("payments.dead@tcp://127.0.0.1:5556")
            .assert_called_once()
            .with(&payment);
        tb.broker_named("dead-letters")
            .subscriber("payments.dead")
            .assert_called_once()
            .with(&payment);
        Ok(())
    }
}
