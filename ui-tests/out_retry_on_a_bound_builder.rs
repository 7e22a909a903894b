//! Misuse: `.out_retry(..)` on a bound queue subscription. Its copies go to its own listener, so
//! the step does not exist on a bound builder.

use ruststream_zmq::{Bound, QueueSubscription};

fn main() {
    let _payments =
        QueueSubscription::<Bound>::new("payments").out_retry("payments.retry@tcp://127.0.0.1:5556");
}
