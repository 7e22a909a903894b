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

/// A service whose responder binds `address` and echoes each request; answers it running and
/// the address it listens on.
async fn echo_responder(address: &str) -> (ruststream::runtime::RunningApp, String) {
    let broker = ZmqRpc::new(ZmqEndpoint::bind(address));
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
    (running, monitor.bound_address().unwrap())
}

async fn request_reply(requests: u64, in_flight: u64) {
    let (running, address) = echo_responder("tcp://127.0.0.1:0").await;
    let client = ZmqRpc::new(ZmqEndpoint::dial(address))
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

/// The resident set of this process now, in KiB (`VmRSS`), where Linux reports it.
fn resident_kib() -> Option<u64> {
    std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// One short-lived requester: a REQ (even `n`) or DEALER socket that dials the responder, asks
/// once, reads its answer and closes. Answers whether the answer carried the request's id.
async fn ask_once(address: &str, n: u64) -> bool {
    use zeromq::{DealerSocket, ReqSocket, Socket, SocketRecv, SocketSend, ZmqMessage};
    let request = |frames: Vec<Vec<u8>>| {
        ZmqMessage::try_from(
            frames
                .into_iter()
                .map(Into::into)
                .collect::<Vec<ruststream::Bytes>>(),
        )
        .unwrap()
    };
    let body = serde_json::to_vec(&Job { id: n }).unwrap();
    let frames = vec![b"echo".to_vec(), Vec::new(), body];
    let answer = if n.is_multiple_of(2) {
        let mut socket = ReqSocket::new();
        socket.connect(address).await.unwrap();
        socket.send(request(frames)).await.unwrap();
        let answer = socket.recv().await.unwrap();
        let _ = socket.close().await;
        answer
    } else {
        let mut socket = DealerSocket::new();
        socket.connect(address).await.unwrap();
        socket.send(request(frames)).await.unwrap();
        let answer = socket.recv().await.unwrap();
        let _ = socket.close().await;
        answer
    };
    let Some(payload) = answer.into_vec().pop() else {
        return false;
    };
    serde_json::from_slice::<Job>(&payload).is_ok_and(|job| job.id == n)
}

/// `clients` short-lived REQ and DEALER requesters, `in_flight` at a time, against one
/// responder: every one is answered, and the responder keeps nothing per requester (its
/// resident set after the first tenth and at the end).
async fn short_lived_requesters(clients: u64, in_flight: usize) {
    use futures::StreamExt;
    let path =
        std::env::temp_dir().join(format!("ruststream-zmq-bench-{}.sock", std::process::id()));
    let (running, address) = echo_responder(&format!("ipc://{}", path.display())).await;
    let started = Instant::now();
    let mut answered = 0_u64;
    let mut early = None;
    let mut asks = futures::stream::iter(0..clients)
        .map(|n| {
            let address = address.clone();
            async move { ask_once(&address, n).await }
        })
        .buffer_unordered(in_flight);
    while let Some(right) = asks.next().await {
        answered += u64::from(right);
        if answered == clients / 10 {
            early = resident_kib();
        }
    }
    let took = started.elapsed();
    println!(
        "short-lived requesters: {clients} REQ and DEALER clients, {in_flight} at a time, {answered} \
         answered rightly in {took:?}; resident set {} KiB after the first tenth, {} KiB at the end",
        early.map_or("?".to_owned(), |kib| kib.to_string()),
        resident_kib().map_or("?".to_owned(), |kib| kib.to_string()),
    );
    running.shutdown().await.unwrap();
    let _ = std::fs::remove_file(path);
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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // `cargo bench --bench throughput -- clients [N]`: the short-lived requesters alone.
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|arg| arg == "clients") {
        let clients = args
            .get(at + 1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(200_000);
        runtime.block_on(short_lived_requesters(clients, 32));
        return;
    }
    codec(200_000);
    runtime.block_on(async {
        queue_throughput(100_000).await;
        request_reply(20_000, 50).await;
    });
}
