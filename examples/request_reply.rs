//! Request-reply: a quote service (a ROUTER responder) and a client (a DEALER requester) on
//! loopback. The client keeps several requests in flight on one connection; each answer comes
//! back with its request's `correlation-id`.
//!
//! ```text
//! cargo run --example request_reply
//! ```

use std::time::Duration;

use ruststream::{Broker, ConnectedBroker, OutgoingMessage, RequestReply};
use ruststream_zmq::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct Ask {
    item: String,
    quantity: u64,
}

#[derive(Debug, Serialize, Deserialize, Outgoing)]
struct Quote {
    item: String,
    total: u64,
}

/// A responder's name is not a destination, so its retry copies need a queue of their own.
#[subscriber(Responder::<Bound>, reply("reply"))]
async fn quote(ask: &Ask) -> Quote {
    let unit = 40 + ask.item.len() as u64;
    tracing::info!(%ask.item, ask.quantity, "quoting");
    Quote {
        item: ask.item.clone(),
        total: unit * ask.quantity,
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    ruststream::logging::init()?;
    let quotes = ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = quotes.monitor();
    let service = RustStream::new(AppInfo::new("quotes", "0.1.0"))
        .with_broker(quotes, |b| {
            b.include(
                quote
                    .name("quotes")
                    .out_retry("quotes.retry@tcp://127.0.0.1:1"),
            )
            .out_reply(Publish)
            // Routes each answer to the requester its request came from, with its
            // correlation-id.
            .transform(ToRequester);
        })
        .start()
        .await?;
    let address = monitor
        .bound_address()
        .ok_or("the responder did not bind")?;

    let client = ZmqRpc::new(ZmqEndpoint::dial(address)).connect().await?;
    let requester = client.requester();
    let items = ["lamp", "desk", "chair", "bookshelf"];
    let answers = futures::future::join_all(items.iter().enumerate().map(|(n, item)| {
        let requester = requester.clone();
        async move {
            let ask = serde_json::to_vec(&Ask {
                item: (*item).to_owned(),
                quantity: n as u64 + 1,
            })?;
            let answer = requester
                .request(
                    OutgoingMessage::new("quotes", ask.as_slice()),
                    Duration::from_secs(5),
                )
                .await?;
            let answered: Quote =
                serde_json::from_slice(ruststream::IncomingMessage::payload(&answer))?;
            Ok::<_, Box<dyn std::error::Error>>((
                answer.correlation_id().unwrap_or("?").to_owned(),
                answered,
            ))
        }
    }))
    .await;
    service.shutdown().await?;
    client.shutdown().await?;

    println!("\nfour requests in flight on one DEALER:");
    for answer in answers {
        let (correlation_id, answered) = answer?;
        println!(
            "  {:<10} total {:>4}  (correlation-id {correlation_id})",
            answered.item, answered.total
        );
    }
    Ok(())
}
