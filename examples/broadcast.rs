//! Broadcast on a fan-out: a price hub publishes ticks, two services subscribe by prefix.
//!
//! The hub binds a PUB; the `dashboard` service subscribes to every `prices` tick, the `audit`
//! service only to `prices.eu`. Both dial the hub, so their registrations must say where retry
//! copies go: the dashboard fails to render one tick in seven, and its copy comes back through a
//! queue it binds for itself. PUB drops what it sends before a subscription reaches it (the slow
//! joiner), so the first ticks may be missed; the hub ticks for a while, then everyone stops.
//!
//! ```text
//! cargo run --example broadcast
//! ```

use std::{net::TcpListener, time::Duration};

use ruststream::{Broker, ConnectedBroker};
use ruststream_zmq::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize, Outgoing)]
struct Tick {
    seq: u64,
    market: String,
    price: u64,
}

#[subscriber(FanoutSubscription::<Dialing>)]
async fn render(tick: &Tick) -> HandlerOutcome {
    if tick.seq.is_multiple_of(7) {
        tracing::warn!(tick.seq, "the chart was busy; rendering again in 100 ms");
        return HandlerOutcome::retry_after(Duration::from_millis(100));
    }
    tracing::info!(tick.seq, %tick.market, tick.price, "dashboard: rendered");
    HandlerOutcome::ack()
}

#[subscriber]
async fn render_again(tick: &Tick) -> HandlerOutcome {
    tracing::info!(tick.seq, %tick.market, "dashboard: rendered on the second try");
    HandlerOutcome::ack()
}

#[subscriber(FanoutSubscription::<Dialing>)]
async fn audit(tick: &Tick) -> HandlerOutcome {
    tracing::info!(tick.seq, tick.price, "audit: an EU price recorded");
    HandlerOutcome::ack()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    ruststream::logging::init()?;
    let hub = ZmqFanout::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await?;
    let hub_address = hub.bind_publisher().await?;
    let retry_port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();

    let dashboard = RustStream::new(AppInfo::new("dashboard", "0.1.0"))
        .with_broker(
            ZmqFanout::new(ZmqEndpoint::dial(hub_address.clone())),
            |b| {
                b.include(
                    render
                        .name("prices")
                        .out_retry(format!("prices.retry@tcp://127.0.0.1:{retry_port}")),
                );
            },
        )
        .with_broker(
            ZmqQueue::new(ZmqEndpoint::bind(format!("tcp://127.0.0.1:{retry_port}"))),
            |b| {
                b.include(render_again.name("prices.retry"));
            },
        )
        .start()
        .await?;
    let auditor = RustStream::new(AppInfo::new("audit", "0.1.0"))
        .with_broker(
            ZmqFanout::new(ZmqEndpoint::dial(hub_address.clone())),
            |b| {
                b.include(
                    audit
                        .name("prices.eu")
                        .out_retry("prices.eu.retry@tcp://127.0.0.1:1"),
                );
            },
        )
        .start()
        .await?;

    let publisher = hub.publisher();
    for seq in 1..=30 {
        let market = if seq % 3 == 0 { "us" } else { "eu" };
        let tick = Tick {
            seq,
            market: market.to_owned(),
            price: 100 + seq * 3,
        };
        publisher
            .message(&tick)
            .to(format!("prices.{market}"))
            .publish()
            .await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Let the last copies come back before stopping.
    tokio::time::sleep(Duration::from_millis(300)).await;
    dashboard.shutdown().await?;
    auditor.shutdown().await?;
    hub.shutdown().await?;
    println!(
        "\nthe hub sent 30 ticks: the dashboard heard every `prices.*`, the audit only `prices.eu`"
    );
    Ok(())
}
