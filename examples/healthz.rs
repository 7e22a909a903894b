//! A dialing service with a `/healthz` route: `200 ready` while it runs and its upstream peer is
//! connected, `503` and the reason otherwise.
//!
//! ```text
//! cargo run --example healthz          # serves http://127.0.0.1:8080/healthz
//! curl -i http://127.0.0.1:8080/healthz
//! ```
//!
//! The route is answered with plain tokio, so that the example needs no web framework; with
//! axum, the handler is `readiness.check()` mapped to a status code, as in the runtime's
//! `HealthProbe` docs.

use ruststream_zmq::Readiness;
use ruststream_zmq::prelude::*;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
};

#[subscriber("payments")]
async fn record(payment: &serde_json::Value) -> HandlerOutcome {
    tracing::info!(%payment, "recorded");
    HandlerOutcome::ack()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let upstream = std::env::var("UPSTREAM").unwrap_or_else(|_| "tcp://127.0.0.1:5555".into());
    let broker = ZmqQueue::new(ZmqEndpoint::dial(upstream));
    let monitor = broker.monitor();
    let running = RustStream::new(AppInfo::new("healthz", "0.1.0"))
        .with_broker(broker, |b| {
            b.include(record)
                .out_retry(Publish)
                .to("payments.retry@tcp://127.0.0.1:5556");
        })
        .start()
        .await?;
    let readiness = Readiness::new(running.health()).needs_peer(monitor);

    let listener = TcpListener::bind("127.0.0.1:8080").await?;
    let serving = async {
        loop {
            let Ok((mut connection, _)) = listener.accept().await else {
                continue;
            };
            let readiness = readiness.clone();
            tokio::spawn(async move {
                // The request line is all a health check sends that matters.
                let mut request = [0; 1024];
                let read = connection.read(&mut request).await.unwrap_or(0);
                let (status, body) = if !request[..read].starts_with(b"GET /healthz ") {
                    ("404 Not Found", "no such route\n".to_owned())
                } else {
                    match readiness.check() {
                        Ok(()) => ("200 OK", "ready\n".to_owned()),
                        Err(why) => ("503 Service Unavailable", format!("{why}\n")),
                    }
                };
                let response = format!(
                    "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = connection.write_all(response.as_bytes()).await;
            });
        }
    };
    tokio::select! {
        () = serving => {}
        () = running.stopping() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    running.shutdown().await?;
    Ok(())
}
