//! Misuse: a second `.out_retry(..)` on a dialing queue subscription. The first one made the
//! builder `Ready`; a subscription's copies go to one place, so the step is gone.

use ruststream_zmq::{Dialing, QueueSubscription};

fn main() {
    let _payments = QueueSubscription::<Dialing>::new("payments")
        .out_retry("payments.retry@tcp://127.0.0.1:5556")
        .out_retry("payments.again@tcp://127.0.0.1:5557");
}
