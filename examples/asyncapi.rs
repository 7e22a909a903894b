//! The AsyncAPI document of a service with all three patterns: a payments queue it binds (with a
//! cap and a dead-letter queue), a price feed it dials (a fan-out subscription by prefix) and a
//! quote responder it binds. Each server says its endpoint, the side this service takes and the
//! socket pair; each channel what frame 0 holds; the responder where its answers go.
//!
//! ```text
//! cargo run --example asyncapi --features asyncapi -- asyncapi gen            # JSON on stdout
//! cargo run --example asyncapi --features asyncapi -- asyncapi gen --yaml -o asyncapi.yaml
//! cargo run --example asyncapi -- run                                          # the service
//! ```
//!
//! `tests/conformance/document.rs` holds the document to `tests/conformance/asyncapi.json`, which
//! the first command writes with `-o tests/conformance/asyncapi.json`.

use ruststream_zmq::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
pub struct Payment {
    pub id: u64,
    pub amount: u64,
}

#[derive(Debug, Deserialize)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
pub struct Tick {
    pub market: String,
    pub price: u64,
}

#[derive(Debug, Deserialize)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
pub struct Ask {
    pub item: String,
}

#[derive(Debug, Serialize, Outgoing)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
pub struct Quote {
    pub item: String,
    pub total: u64,
}

/// Charges a payment; a failed charge comes back as a copy, the fifth failure is dead-lettered.
// Declared with the crate's builder, so its channel carries the `x-zeromq` binding; a by-name
// subscription (`park` below) carries none.
#[subscriber(QueueSubscription::<Bound>)]
async fn charge(payment: &Payment) -> HandlerOutcome {
    tracing::info!(payment.id, payment.amount, "charged");
    HandlerOutcome::ack()
}

/// What exhausted its attempts, parked for a person to look at.
#[subscriber("payments.dead")]
async fn park(payment: &Payment) -> HandlerOutcome {
    tracing::error!(payment.id, "parked");
    HandlerOutcome::ack()
}

/// Every tick under the prefix `prices` (`prices.eu`, `prices.us`) from the hub this service dials.
#[subscriber(FanoutSubscription::<Dialing>)]
async fn watch(tick: &Tick, Ctx(name): Ctx<MessageName>) -> HandlerOutcome {
    tracing::info!(%name, %tick.market, tick.price, "tick");
    HandlerOutcome::ack()
}

/// Answers each request at the identity it came from.
#[subscriber(Responder::<Bound>, reply("reply"))]
async fn quote(ask: &Ask) -> Quote {
    Quote {
        item: ask.item.clone(),
        total: 40,
    }
}

#[ruststream::app]
pub fn app() -> impl App {
    RustStream::new(AppInfo::new("shop", "0.1.0"))
        // Peers PUSH payments here; a retry copy comes back to this listener.
        .with_broker_labeled(
            "payments",
            ZmqQueue::new(ZmqEndpoint::bind("tcp://*:5555")),
            |b| {
                b.include(charge.name("payments"))
                    .max_attempts(nonzero!(5u32))
                    .dead_letter("payments.dead@tcp://127.0.0.1:5557");
            },
        )
        .with_broker_labeled(
            "dead-letters",
            ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:5557")),
            |b| {
                b.include(park);
            },
        )
        // The price hub binds a PUB; this service dials it, and names where its copies go.
        .with_broker_labeled(
            "prices",
            ZmqFanout::new(ZmqEndpoint::dial("tcp://127.0.0.1:5556")),
            |b| {
                b.include(
                    watch
                        .name("prices")
                        .out_retry("payments.dead@tcp://127.0.0.1:5557"),
                );
            },
        )
        // Requesters (DEALER or REQ) dial the responder.
        .with_broker_labeled(
            "quotes",
            ZmqRpc::new(ZmqEndpoint::bind("tcp://*:5559")),
            |b| {
                b.include(
                    quote
                        .name("quotes")
                        .out_retry("payments.dead@tcp://127.0.0.1:5557"),
                )
                .out_reply(Publish)
                .transform(ToRequester);
            },
        )
}
