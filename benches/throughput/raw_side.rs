//! The raw side: the sockets each raw module (`benches/raw/`) provides, the work its readers do
//! in place of the crate's handlers, the hand-offs `--raw-hop` gives it, and the raw runs of
//! the queue, request-reply and fan-out scenarios.

use std::{
    ops::Range,
    sync::{Arc, OnceLock},
    time::Duration,
};

use ruststream::Bytes;
use tokio::task::JoinHandle;

use crate::{
    backend::Stack,
    messages::{BigJob, Frames, Job, tick_frames},
    meter::{Meter, Run, percentiles},
    tally::{Tally, WARM_UP, fanout_wait, warm_up},
};

/// What a raw reader does with each `(name, headers, payload)`.
pub type Work = Arc<dyn Fn(&[u8], &[u8], &[u8]) + Send + Sync>;

/// A PUSH dialing a bound PULL.
pub trait RawPusher: Sized {
    async fn dial(address: &str) -> Self;
    async fn send(&mut self, frames: Frames);
    /// Sends the messages `make` builds for `ids`; answers the pusher once all have been handed
    /// to the socket.
    fn send_all(self, ids: Range<u64>, make: fn(u64) -> Frames) -> JoinHandle<Self>;
    async fn close(self);
}

/// A socket read on its own, handing every message to its work.
pub trait RawReader: Sized {
    /// The address it listens on, or dials.
    fn address(&self) -> &str;
    /// A bound PULL: `work(name, headers, payload)` for each message.
    async fn pull(work: Work) -> Self;
    /// A bound ROUTER that answers each `[identity][name][headers][payload]` with
    /// `[identity][reply][headers][payload]`, `answer` making the last two.
    async fn router(answer: fn(&[u8], &[u8]) -> (Bytes, Bytes)) -> Self;
    /// A SUB dialing `address`, subscribed to `prefix`, queueing up to `queue` messages where
    /// the client has that setting.
    async fn sub(address: &str, prefix: &str, work: Work, queue: usize) -> Self;
    async fn close(self);
}

/// A bound PUB.
pub trait RawPublisher: Sized {
    /// Binds with a queue of `queue` messages for each subscriber, where the client has that
    /// setting; answers it and its address.
    async fn bind(queue: usize) -> (Self, String);
    async fn send(&mut self, frames: Frames);
    fn send_all(self, ids: Range<u64>, make: fn(u64) -> Frames) -> JoinHandle<Self>;
    async fn close(self);
}

/// A DEALER that asks a ROUTER, keeping up to `window` requests in flight.
pub trait RawAsker: Sized {
    /// Dials and waits for the answer to one request, so the connection is up.
    async fn dial(address: &str) -> Self;
    /// Asks `ids`, `window` at a time; answers the asker and each request's round trip.
    fn run(self, ids: Range<u64>, window: u64) -> JoinHandle<(Self, Arc<Vec<Duration>>)>;
    async fn close(self);
}

/// The hand-offs the raw request-reply side takes on (`--raw-hop router`, `--raw-hop dealer`),
/// to measure what one costs: on `zeromq` between tasks, on libzmq between a socket's thread and
/// a task.
#[derive(Clone, Copy, Default)]
pub struct RawHops {
    pub router: bool,
    pub dealer: bool,
}

pub static RAW_HOPS: OnceLock<RawHops> = OnceLock::new();

/// The hand-offs chosen for the raw side: none unless `--raw-hop` says so.
pub fn raw_hops() -> RawHops {
    RAW_HOPS.get().copied().unwrap_or_default()
}

/// The value of header `name` in a headers frame.
fn header<'a>(headers: &'a [u8], name: &str) -> Option<&'a str> {
    std::str::from_utf8(headers).ok()?.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// The raw responder's work: the request's correlation-id and payload in, the answer out.
pub fn answer(headers: &[u8], payload: &[u8]) -> (Bytes, Bytes) {
    let correlation = header(headers, "correlation-id").unwrap_or_default();
    let job: Job = serde_json::from_slice(payload).expect("a JSON request");
    (
        Bytes::from(format!("correlation-id: {correlation}")),
        Bytes::from(serde_json::to_vec(&Job { id: job.id }).unwrap()),
    )
}

/// The raw reader's work for `{"id":n}`: the header, the JSON, the count.
pub fn raw_job(tally: &Tally) -> Work {
    let tally = tally.clone();
    Arc::new(move |_name, headers, payload| {
        let tenant = header(headers, "x-tenant").map(str::to_owned);
        std::hint::black_box(tenant);
        let job: Job = serde_json::from_slice(payload).expect("a JSON job");
        tally.hit(job.id);
    })
}

pub fn raw_big_job(tally: &Tally) -> Work {
    let tally = tally.clone();
    Arc::new(move |_name, headers, payload| {
        let tenant = header(headers, "x-tenant").map(str::to_owned);
        let job: BigJob = serde_json::from_slice(payload).expect("a JSON job");
        std::hint::black_box((tenant, job.pad.len()));
        tally.hit(job.id);
    })
}

/// The sender's ceiling: counts frames, decodes nothing.
pub fn raw_count_only(tally: &Tally) -> Work {
    let tally = tally.clone();
    Arc::new(move |_name, _headers, _payload| tally.hit(0))
}

/// Backend `B`'s raw PUSH into its raw PULL, which does `work`.
pub async fn raw_queue<B: Stack>(
    messages: u64,
    make: fn(u64) -> Frames,
    work: fn(&Tally) -> Work,
) -> Run {
    let tally = Tally::default();
    let sink = B::Reader::pull(work(&tally)).await;
    let mut pusher = B::Pusher::dial(sink.address()).await;
    warm_up!([&tally], pusher.send(make(WARM_UP)));
    tally.arm(messages);
    let meter = Meter::start();
    let sending = pusher.send_all(0..messages, make);
    let complete = tally.wait(Duration::from_secs(10)).await;
    let run = meter.stop(messages);
    assert!(
        complete,
        "the raw PULL read {} of {messages}",
        tally.count()
    );
    sending.await.unwrap().close().await;
    sink.close().await;
    run
}

/// Backend `B`'s raw DEALER asking its raw ROUTER, `window` in flight.
pub async fn raw_request_reply<B: Stack>(requests: u64, window: u64) -> Run {
    let responder = B::Reader::router(answer).await;
    let asker = B::Asker::dial(responder.address()).await;
    let meter = Meter::start();
    let (asker, latencies) = asker.run(0..requests, window).await.unwrap();
    let mut run = meter.stop(requests);
    run.latencies = percentiles(Arc::unwrap_or_clone(latencies));
    asker.close().await;
    responder.close().await;
    run
}

/// Backend `B`'s raw PUB to its raw SUBs.
pub async fn raw_fanout<B: Stack>(messages: u64, subscribers: usize) -> Run {
    let queue = usize::try_from(messages).unwrap() + 1_000;
    let (mut publisher, address) = B::Publisher::bind(queue).await;
    let mut tallies = Vec::new();
    let mut readers = Vec::new();
    for _ in 0..subscribers {
        let tally = Tally::default();
        readers.push(B::Reader::sub(&address, "ticks", raw_job(&tally), queue).await);
        tallies.push(tally);
    }
    warm_up!(tallies, publisher.send(tick_frames(WARM_UP)));
    for tally in &tallies {
        tally.arm(messages);
    }
    let meter = Meter::start();
    let sending = publisher.send_all(0..messages, tick_frames);
    let run = fanout_wait(&meter, &tallies, messages).await;
    sending.await.unwrap().close().await;
    for reader in readers {
        reader.close().await;
    }
    run
}
