//! Figures, not tests: queue throughput on loopback, request-reply round trips, and the wire
//! codec's cost per message. Run in release:
//!
//! ```text
//! cargo bench --bench throughput
//! ```
//!
//! `cargo test --all-targets` builds this file too; without `--bench` it only says how to run it.

use std::{
    convert::Infallible,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use ruststream::{
    Broker, BytesMut, ConnectedBroker, HeaderMap, OutgoingMessage, Publisher, RequestReply,
};
use ruststream_zmq::{prelude::*, wire};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

#[derive(Serialize, Deserialize, Outgoing)]
struct Job {
    id: u64,
}

#[derive(Clone)]
struct Counter(Arc<(AtomicU64, Notify)>);

#[derive(FromRef)]
struct AppState {
    counter: Counter,
}

#[subscriber]
async fn count(job: &Job, State(counter): State<Counter>) -> HandlerOutcome {
    let _ = job.id;
    counter.0.0.fetch_add(1, Ordering::Relaxed);
    counter.0.1.notify_one();
    HandlerOutcome::ack()
}

#[subscriber(Responder::<Bound>, reply("reply"))]
async fn echo(job: &Job) -> Job {
    Job { id: job.id }
}

fn payload(id: u64) -> BytesMut {
    BytesMut::from(serde_json::to_vec(&Job { id }).unwrap().as_slice())
}

async fn queue_throughput(messages: u64) {
    let counter = Counter(Arc::default());
    let state = counter.clone();
    let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = broker.monitor();
    let running = RustStream::new(AppInfo::new("bench", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(AppState { counter: state }))
        .with_broker(broker, |b| {
            b.include(count.name("jobs"));
        })
        .start()
        .await
        .unwrap();
    let peer = ZmqQueue::new(ZmqEndpoint::dial(monitor.bound_address().unwrap()))
        .connect()
        .await
        .unwrap();
    let publisher = peer.publisher();
    let started = Instant::now();
    for id in 0..messages {
        publisher
            .publish(OutgoingMessage::produced("jobs", payload(id)), None)
            .await
            .unwrap();
    }
    while counter.0.0.load(Ordering::Relaxed) < messages {
        let _ = tokio::time::timeout(Duration::from_millis(100), counter.0.1.notified()).await;
    }
    let took = started.elapsed();
    println!(
        "queue: {messages} messages published and handled in {took:?}: {:.0} messages/s",
        messages as f64 / took.as_secs_f64()
    );
    running.shutdown().await.unwrap();
    peer.shutdown().await.unwrap();
}

async fn request_reply(requests: u64, in_flight: u64) {
    let broker = ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = broker.monitor();
    let running = RustStream::new(AppInfo::new("bench", "0.1.0"))
        .with_broker(broker, |b| {
            b.include(echo.name("echo").out_retry("echo.retry@tcp://127.0.0.1:1"))
                .out_reply(Publish)
                .transform(ToRequester);
        })
        .start()
        .await
        .unwrap();
    let client = ZmqRpc::new(ZmqEndpoint::dial(monitor.bound_address().unwrap()))
        .connect()
        .await
        .unwrap();
    let requester = client.requester();
    let started = Instant::now();
    for round in 0..requests / in_flight {
        futures::future::join_all((0..in_flight).map(|n| {
            let requester = requester.clone();
            async move {
                let msg = OutgoingMessage::produced("echo", payload(round * in_flight + n));
                requester
                    .request(msg, Duration::from_secs(10))
                    .await
                    .unwrap();
            }
        }))
        .await;
    }
    let took = started.elapsed();
    println!(
        "request-reply: {requests} requests, {in_flight} in flight, in {took:?}: {:.0} requests/s, {:?} a request on average",
        requests as f64 / took.as_secs_f64(),
        took / u32::try_from(requests).unwrap_or(u32::MAX)
    );
    running.shutdown().await.unwrap();
    client.shutdown().await.unwrap();
}

fn codec(rounds: u32) {
    let mut headers = HeaderMap::new();
    headers.insert("correlation-id", "4f1c2a");
    headers.insert("x-ruststream-retry-count", "2");
    headers.insert("x-tenant", "acme");
    let body = ruststream::Bytes::from(serde_json::to_vec(&Job { id: 7 }).unwrap());
    let limits = WireLimits::default();
    let started = Instant::now();
    for _ in 0..rounds {
        let frames = wire::encode("payments.eu", &headers, body.clone()).unwrap();
        let decoded = wire::decode(&frames, &limits, None).unwrap();
        std::hint::black_box(decoded);
    }
    println!(
        "wire: encode and decode of a 3-header message: {:?} a round",
        started.elapsed() / rounds
    );
}

fn main() {
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("figures only: run `cargo bench --bench throughput`");
        return;
    }
    codec(200_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        queue_throughput(100_000).await;
        request_reply(20_000, 50).await;
    });
}
