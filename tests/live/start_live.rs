//! `TestApp::start_live`: the production app over real sockets, driven by the framework's test
//! harness.

use ruststream::testing::TestApp;
use ruststream_zmq::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, PartialEq, Serialize, Deserialize, Outgoing)]
struct Payment {
    id: u64,
}

#[subscriber("payments")]
async fn charge(payment: &Payment) -> HandlerOutcome {
    let _ = payment.id;
    HandlerOutcome::ack()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_queue_runs_live_under_the_test_harness() -> Result<(), Box<dyn std::error::Error>>
{
    let app = RustStream::new(AppInfo::new("payments", "0.1.0")).with_broker(
        ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0")),
        |b| {
            b.include(charge);
        },
    );
    let tb = TestApp::start_live(app).await?;
    let payments = tb.broker::<ZmqQueue>();
    payments
        .message(&Payment { id: 1 })
        .to("payments")
        .publish()
        .await?;
    payments
        .subscriber("payments")
        .assert_called_once()
        .with(&Payment { id: 1 });
    Ok(())
}
