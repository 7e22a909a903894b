//! A dialing service with a `/healthz` route: `200 ready` while it runs and its upstream peer is
//! connected, `503 not ready` otherwise. The reason (which names the endpoint) goes to the log,
//! not to whoever asks.
//!
//! ```text
//! cargo run --example healthz          # serves http://127.0.0.1:8080/healthz
//! curl -i http://127.0.0.1:8080/healthz
//! ```
//!
//! `HEALTHZ_ADDR` sets the address the route listens on, `UPSTREAM` the peer the service dials.
//! A Kubernetes probe comes from the node, not from inside the pod, so it needs a bind that is
//! not loopback: `HEALTHZ_ADDR=0.0.0.0:8080`. Anyone who reaches that port can open
//! connections, so the server bounds them: at most [`MAX_CONNECTIONS`] at a time, so the file
//! descriptors the ZeroMQ sockets need stay free, and each gets [`CONNECTION_TIME`], so a client
//! that never sends its request gives its place up. `axum::serve` has neither, so the route is
//! axum's and each connection is served by hyper; an error of `accept` (out of file descriptors)
//! is logged and retried a second later by axum's `Listener`.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{Router, extract::State, http::StatusCode, routing::get, serve::Listener};
use hyper_util::{rt::TokioIo, service::TowerToHyperService};
use ruststream_zmq::{Readiness, prelude::*};
use tokio::{net::TcpListener, sync::Semaphore};

/// Connections served at once; the next ones wait in the kernel's queue (128, tokio's backlog;
/// past it, their connects are retried), costing the process no file descriptor.
const MAX_CONNECTIONS: usize = 64;
/// How long a connection is served, its request included: a probe needs milliseconds.
const CONNECTION_TIME: Duration = Duration::from_secs(1);

#[subscriber("payments")]
async fn record(payment: &serde_json::Value) -> HandlerOutcome {
    tracing::info!(%payment, "recorded");
    HandlerOutcome::ack()
}

/// What the route reads: the readiness, and the last reason logged, so that a caller asking
/// often does not flood the log with one reason.
#[derive(Clone)]
struct Health {
    readiness: Readiness,
    logged: Arc<Mutex<Option<String>>>,
}

async fn healthz(State(health): State<Health>) -> (StatusCode, &'static str) {
    let why = health.readiness.check().err().map(|why| why.to_string());
    let mut logged = health
        .logged
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    if *logged != why {
        match &why {
            Some(why) => tracing::warn!(why, "not ready"),
            None => tracing::info!("ready"),
        }
        logged.clone_from(&why);
    }
    match why {
        None => (StatusCode::OK, "ready\n"),
        Some(_) => (StatusCode::SERVICE_UNAVAILABLE, "not ready\n"),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let upstream = std::env::var("UPSTREAM").unwrap_or_else(|_| "tcp://127.0.0.1:5555".into());
    let address = std::env::var("HEALTHZ_ADDR").unwrap_or_else(|_| "127.0.0.1:8080".into());
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
    let health = Health {
        readiness: Readiness::new(running.health()).needs_peer(monitor),
        logged: Arc::default(),
    };
    let routes = TowerToHyperService::new(
        Router::new()
            .route("/healthz", get(healthz))
            .with_state(health),
    );

    let mut listener = TcpListener::bind(&address).await?;
    tracing::info!("serving http://{address}/healthz");
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let serving = async {
        loop {
            // A place first, then the connection: past the cap, callers wait unaccepted.
            let slot = Arc::clone(&slots)
                .acquire_owned()
                .await
                .expect("never closed");
            let (connection, _) = Listener::accept(&mut listener).await;
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(connection), routes.clone());
            tokio::spawn(async move {
                // Dropping the connection at its time closes it, and the slot frees with it.
                let _ = tokio::time::timeout(CONNECTION_TIME, connection).await;
                drop(slot);
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
