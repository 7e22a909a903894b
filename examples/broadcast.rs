//! Broadcast on a fan-out: a price hub republishes quotes as ticks, two services subscribe by
//! prefix.
//!
//! The `hub` service reads quotes from a queue it binds, and its handler publishes each one as a
//! tick to `prices.eu` or `prices.us` through an `Out` slot bound to the hub's fan-out (a PUB it
//! binds): the publisher is wired through the app, as any handler's. The `dashboard` service
//! subscribes to every `prices` tick, the `audit` service only to `prices.eu`. Both dial the hub,
//! so their registrations say where retry copies go: the dashboard fails to render one tick in
//! seven, and its copy comes back through a queue it binds for itself.
//!
//! PUB drops what it sends before a subscription reaches it (the slow joiner), so the first
//! ticks may be missed. Each service counts what it heard, and the example ends by saying so.
//!
//! ```text
//! cargo run --example broadcast
//! ```

use std::{
    net::TcpListener,
    sync::atomic::{AtomicU64, Ordering::SeqCst},
    time::{Duration, Instant},
};

use ruststream::{Broker, ConnectedBroker};
use ruststream_zmq::prelude::*;
use serde::{Deserialize, Serialize};

const QUOTES: u64 = 30;

#[derive(Debug, Serialize, Deserialize, Outgoing)]
struct Quote {
    seq: u64,
    market: String,
    price: u64,
}

#[derive(Debug, Serialize, Deserialize, Outgoing)]
struct Tick {
    seq: u64,
    market: String,
    price: u64,
}

/// What each handler did, read once everyone has stopped.
static PUBLISHED: AtomicU64 = AtomicU64::new(0);
static DASHBOARD_HEARD: AtomicU64 = AtomicU64::new(0);
static DASHBOARD_RETRIED: AtomicU64 = AtomicU64::new(0);
static DASHBOARD_RENDERED_AGAIN: AtomicU64 = AtomicU64::new(0);
static AUDIT_HEARD: AtomicU64 = AtomicU64::new(0);

/// The hub's handler: a quote in, a tick out on the fan-out, named by its market.
#[subscriber(QueueSubscription::<Bound>)]
async fn relay(quote: &Quote, Out(ticks): Out<impl Publisher>) -> HandlerOutcome {
    let tick = Tick {
        seq: quote.seq,
        market: quote.market.clone(),
        price: quote.price,
    };
    let topic = format!("prices.{}", quote.market);
    if let Err(err) = ticks.message(&tick).to(topic).publish().await {
        tracing::warn!(quote.seq, %err, "hub: the tick was not published");
        return HandlerOutcome::drop();
    }
    PUBLISHED.fetch_add(1, SeqCst);
    HandlerOutcome::ack()
}

#[subscriber(FanoutSubscription::<Dialing>)]
async fn render(tick: &Tick) -> HandlerOutcome {
    DASHBOARD_HEARD.fetch_add(1, SeqCst);
    if tick.seq.is_multiple_of(7) {
        DASHBOARD_RETRIED.fetch_add(1, SeqCst);
        tracing::warn!(tick.seq, "the chart was busy; rendering again in 100 ms");
        return HandlerOutcome::retry_after(Duration::from_millis(100));
    }
    tracing::info!(tick.seq, %tick.market, tick.price, "dashboard: rendered");
    HandlerOutcome::ack()
}

#[subscriber]
async fn render_again(tick: &Tick) -> HandlerOutcome {
    DASHBOARD_RENDERED_AGAIN.fetch_add(1, SeqCst);
    tracing::info!(tick.seq, %tick.market, "dashboard: rendered on the second try");
    HandlerOutcome::ack()
}

#[subscriber(FanoutSubscription::<Dialing>)]
async fn audit(tick: &Tick) -> HandlerOutcome {
    AUDIT_HEARD.fetch_add(1, SeqCst);
    tracing::info!(tick.seq, tick.price, "audit: an EU price recorded");
    HandlerOutcome::ack()
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Polls `done` until it holds or `within` has passed: the copies and ticks still on their way.
async fn settle(within: Duration, done: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !done() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    ruststream::logging::init()?;
    let prices = format!("tcp://127.0.0.1:{}", free_port()?);
    let quotes = format!("tcp://127.0.0.1:{}", free_port()?);
    let retry_port = free_port()?;

    // The fan-out is registered first and bound to the relay's slot: the handler publishes
    // through the app's own broker, with its socket, limits and shutdown.
    let fanout = ZmqFanout::new(ZmqEndpoint::bind(prices.clone())).bindable();
    let to_fanout = fanout.bind(Publish);
    let hub = RustStream::new(AppInfo::new("hub", "0.1.0"))
        .with_broker_labeled("prices", fanout, |_| {})
        .with_broker_labeled(
            "quotes",
            ZmqQueue::new(ZmqEndpoint::bind(quotes.clone())),
            |b| {
                b.include(relay.name("quotes"))
                    .out(DefaultSlot, to_fanout)
                    .build();
            },
        )
        .start()
        .await?;

    let dashboard = RustStream::new(AppInfo::new("dashboard", "0.1.0"))
        .with_broker(ZmqFanout::new(ZmqEndpoint::dial(prices.clone())), |b| {
            b.include(
                render
                    .name("prices")
                    .out_retry(format!("prices.retry@tcp://127.0.0.1:{retry_port}")),
            );
        })
        .with_broker(
            ZmqQueue::new(ZmqEndpoint::bind(format!("tcp://127.0.0.1:{retry_port}"))),
            |b| {
                b.include(render_again.name("prices.retry"));
            },
        )
        .start()
        .await?;
    let auditor = RustStream::new(AppInfo::new("audit", "0.1.0"))
        .with_broker(ZmqFanout::new(ZmqEndpoint::dial(prices.clone())), |b| {
            b.include(
                audit
                    .name("prices.eu")
                    .out_retry("prices.eu.retry@tcp://127.0.0.1:1"),
            );
        })
        .start()
        .await?;

    // The feed: a client of the hub's queue, outside any service.
    let feed = ZmqQueue::new(ZmqEndpoint::dial(quotes)).connect().await?;
    let publisher = feed.publisher();
    let mut eu = 0;
    for seq in 1..=QUOTES {
        let market = if seq % 3 == 0 { "us" } else { "eu" };
        eu += u64::from(market == "eu");
        let quote = Quote {
            seq,
            market: market.to_owned(),
            price: 100 + seq * 3,
        };
        publisher.message(&quote).to("quotes").publish().await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The hub's last ticks, then the dashboard's copies, may still be on their way.
    settle(Duration::from_secs(2), || PUBLISHED.load(SeqCst) == QUOTES).await;
    settle(Duration::from_secs(2), || {
        DASHBOARD_RENDERED_AGAIN.load(SeqCst) == DASHBOARD_RETRIED.load(SeqCst)
    })
    .await;
    feed.shutdown().await?;
    dashboard.shutdown().await?;
    auditor.shutdown().await?;
    hub.shutdown().await?;

    let (retried, again) = (
        DASHBOARD_RETRIED.load(SeqCst),
        DASHBOARD_RENDERED_AGAIN.load(SeqCst),
    );
    println!(
        "\nthe hub published {} of {QUOTES} quotes as ticks",
        PUBLISHED.load(SeqCst)
    );
    println!(
        "the dashboard heard {} of {QUOTES} `prices.*`; {again} of the {retried} it retried came \
         back",
        DASHBOARD_HEARD.load(SeqCst)
    );
    println!(
        "the audit heard {} of {eu} `prices.eu`",
        AUDIT_HEARD.load(SeqCst)
    );
    Ok(())
}
