//! Misuse: a dialing queue subscription builder mounted before `.out_retry(..)` named where its
//! retry copies go. The builder is still `WantsRetryDestination`, which is not a subscription.

use ruststream_zmq::prelude::*;

#[subscriber(QueueSubscription::<Dialing>::new("payments"))]
async fn charge(payment: &serde_json::Value) -> HandlerOutcome {
    let _ = payment;
    HandlerOutcome::ack()
}

fn main() {
    let _app = RustStream::new(AppInfo::new("payments", "0.1.0")).with_broker(
        ZmqQueue::new(ZmqEndpoint::dial("tcp://127.0.0.1:5555")),
        |b| {
            b.include(charge);
        },
    );
}
