//! Misuse: a responder mounted before `.out_retry(..)`. Its name is not a destination on either
//! side (its ROUTER answers only the identities requests carry), so even a bound responder must
//! say where its retry copies go.

use ruststream_zmq::prelude::*;
use serde::Serialize;

#[derive(Serialize, Outgoing)]
struct Quote {
    price: u64,
}

#[subscriber(Responder::<Bound>::new("quotes"), reply("reply"))]
async fn quote(ask: &serde_json::Value) -> Quote {
    let _ = ask;
    Quote { price: 10 }
}

fn main() {
    let _app = RustStream::new(AppInfo::new("quotes", "0.1.0")).with_broker(
        ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:5559")),
        |b| {
            b.include(quote).out_reply(Publish).transform(ToRequester);
        },
    );
}
