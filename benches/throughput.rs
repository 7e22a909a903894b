//! Figures, not tests: each scenario run against the crate and against raw sockets of the client
//! under it, doing the same work, interleaved, several times, on every backend the bench is built
//! with, in one process; a table of medians for each backend at the end and, with both, a cross
//! table of the crate on libzmq against the crate on `zeromq`. Run in release:
//!
//! ```text
//! cargo bench --bench throughput --features libzmq             # both backends, the cross table
//! cargo bench --bench throughput                               # the `zeromq` backend alone
//! cargo bench --bench throughput --no-default-features --features libzmq   # libzmq alone
//! cargo bench --bench throughput --features libzmq -- --backend libzmq     # one of the two
//! cargo bench --bench throughput -- --reps 1 --scale 0.1 queue rr1   # a quick look
//! cargo bench --bench throughput -- clients [N]                # short-lived REQ/DEALER clients
//! ```
//!
//! Arguments after `--`: scenario names (all of them when none is given; `list` prints them),
//! `--backend zeromq|libzmq|both` (the backends to run; every one the build has by default),
//! `--reps N` (3 by default: the table shows the median of N runs), `--scale F` (multiplies every
//! message count, 1.0 by default), `--only measured|baseline` (one side alone, to run a profiler
//! around the process), `--workers N` (the runtime's worker threads, 2 by default: with 1, a
//! row shows what a scenario costs without hand-offs between workers), `--raw-hop router` and
//! `--raw-hop dealer` (on `zeromq` the raw responder hands each request to a second task, or the
//! raw asker's answers are read by a task of their own, each through a channel of 64: what one
//! hand-off between tasks costs a round trip; on libzmq the raw responder or asker becomes a task
//! behind a thread per socket with a wake-up pipe, the design a backend could take). `clients [N]` runs the
//! short-lived requesters alone, against the crate's responder on each backend.
//!
//! Each backend's baseline is raw sockets of its own client: on `zeromq`, raw `zeromq` 0.7
//! sockets, each driven by one tokio task on the same 2-worker runtime (`benches/raw/zeromq.rs`);
//! on libzmq, raw libzmq sockets through the `zmq` 0.9 binding, each driven by a plain std
//! thread with blocking calls, the fastest way to use libzmq and so the fairest "raw" figure
//! (`benches/raw/libzmq.rs`). Both do the work the crate's handler does: read the one header,
//! decode the JSON `{"id":n}`, count; a raw responder reads the `correlation-id` header, decodes
//! the request and encodes the answer. A scenario is written once, generic over the backend
//! ([`Stack`]): the crate's side on `ZmqBroker<_, _, B>`, the raw side on `B`'s raw sockets.
//!
//! In each repetition a scenario's sides run in turn: the crate on `zeromq`, its baseline, the
//! crate on libzmq, its baseline; on odd repetitions the other way round. A baseline that is the
//! same on every backend (the framework's in-process broker) runs once a repetition, after the
//! first backend's crate, and both backends' tables set their crate against it. The cross table
//! has, for each scenario, the crate's rate on each backend (and its p50 where there are round
//! trips), libzmq's over `zeromq`'s (rate, p50), the CPU a message on each, each backend against
//! its own baseline, and the figures of its own each side has (the retry burst's lateness, its
//! early and lost copies, its peak resident set; fan-out's lost messages) side by side. `codec`
//! opens no socket: its two figures differ by noise alone.
//!
//! The feeder of the queue scenarios is the same raw PUSH for the crate and for the baseline
//! (`queue-publisher` swaps in the crate's own publisher). That it is not the bottleneck is the
//! `sender` row: the same raw PUSH into a raw PULL that only counts frames. A queue figure close
//! to that ceiling is bounded by the sender and the client, not by the receiving side; the
//! BENCHMARKS.md notes read each row against it. The `framework` row sets the crate's queue
//! against the framework's own in-process broker (`ruststream::memory`) under the same handler:
//! what dispatch costs with no socket, the ceiling of any transport.
//!
//! Each run starts its own sockets and service, warms the connection up with one message (or,
//! for a fan-out, until every subscriber has one), then measures: wall time to the last message
//! handled, the process's CPU time over it (`utime` + `stime` of `/proc/self/stat`, in 10 ms
//! ticks, every thread: service, feeder and requester alike, so the same feeder adds the same to
//! both sides; most runs last 0.3 s or more, so a tick is a few per cent at worst), the heap
//! allocations of Rust code (a counting global allocator; libzmq's own `malloc` is not seen) and
//! the context switches of the process's threads per message, round trips where there are
//! requests, and the peak resident set over it (`VmHWM` reset through `/proc/self/clear_refs` at
//! the start, the heap's free pages handed back first with `malloc_trim`; the table shows its
//! growth over the resident set at the start). One run is thrown away before the first. A global
//! `tracing` subscriber is installed with its filter off; the `warn` rows switch it to WARN,
//! writing to `/dev/null`.
//!
//! Everything runs on glibc's `malloc`, the allocator a Rust service gets by default. Built with
//! `THROUGHPUT_ALLOCATOR=mimalloc` in the environment, both sides run on `mimalloc` instead (a
//! heap per thread), to show what a service's choice of allocator does to a row; the RSS figures
//! are then not comparable, since `malloc_trim` hands nothing of `mimalloc`'s back.
//!
//! `cargo test --all-targets` builds this file too; without `--bench` it only says how to run it.

#[cfg(feature = "zeromq")]
#[path = "raw/zeromq.rs"]
mod raw_zeromq;

#[cfg(feature = "libzmq")]
#[path = "raw/libzmq.rs"]
mod raw_libzmq;

use std::{
    alloc::{GlobalAlloc, Layout, System},
    convert::Infallible,
    ops::Range,
    sync::{
        Arc, LazyLock, OnceLock,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures::StreamExt;
use mimalloc::MiMalloc;
use ruststream::memory::{MemoryBroker, MemoryPublish, MemoryPublisher};
use ruststream::{
    Broker, Bytes, BytesMut, ConnectedBroker, HeaderMap, IncomingMessage, OutgoingMessage,
    Publisher, RequestReply,
};
use ruststream_zmq::{
    Backend, FanoutKind, QueueKind, RpcKind, ZmqBroker, ZmqPublisher, prelude::*, wire,
};
use serde::{Deserialize, Serialize};
use tokio::{sync::Notify, task::JoinHandle};
use tracing_subscriber::{EnvFilter, Registry, layer::SubscriberExt, reload};

/// Counts the heap allocations of Rust code (the crate, the `zeromq` client, the framework,
/// serde, the bench itself); libzmq's own `malloc` calls, in C, are not seen.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// Read when the bench is built (cargo rebuilds it when the variable changes), so that the
/// choice costs nothing per call.
const ON_MIMALLOC: bool = match option_env!("THROUGHPUT_ALLOCATOR") {
    Some(name) => matches!(name.as_bytes(), b"mimalloc"),
    None => false,
};

/// The allocator every call goes to: a constant, so the choice folds away when built.
fn inner() -> &'static dyn GlobalAlloc {
    if ON_MIMALLOC { &MiMalloc } else { &System }
}

fn allocator() -> &'static str {
    if ON_MIMALLOC {
        "allocator: mimalloc"
    } else {
        "allocator: the system's malloc"
    }
}

// SAFETY: every call is passed unchanged to one allocator, the same one for the whole run; only
// a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { inner().alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { inner().alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { inner().realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { inner().dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// `[name][headers][payload]`, as a raw peer sends it.
type Frames = [Bytes; 3];
/// What a raw reader does with each `(name, headers, payload)`.
type Work = Arc<dyn Fn(&[u8], &[u8], &[u8]) + Send + Sync>;

// ---------------------------------------------------------------------------------------------
// The backends: the crate's brokers on each, and raw sockets of its own client

/// A socket backend of the crate, with the raw sockets of its own client that are its baseline.
/// A scenario is written once, generic over it: the crate's side runs on `ZmqBroker<_, _, B>`,
/// the raw side on `B::Pusher` and its siblings (`benches/raw/zeromq.rs`,
/// `benches/raw/libzmq.rs`).
trait Stack: Backend + Sized {
    /// The backend's name, as its feature and `--backend` spell it.
    const NAME: &'static str;
    /// What its raw side is.
    const CLIENT: &'static str;
    /// What its raw side's `--raw-hop router` and `--raw-hop dealer` are.
    const HOP_ROUTER: &'static str;
    const HOP_DEALER: &'static str;
    type Pusher: RawPusher;
    type Reader: RawReader;
    type Publisher: RawPublisher;
    type Asker: RawAsker;

    /// A fan-out broker whose queue for each subscriber holds `queue` messages, where the
    /// backend has that setting.
    fn fanout_broker<S: Side>(
        endpoint: ZmqEndpoint<S>,
        queue: usize,
    ) -> ZmqBroker<FanoutKind, S, Self>;
}

#[cfg(feature = "zeromq")]
impl Stack for ruststream_zmq::zeromq::Zeromq {
    const NAME: &'static str = "zeromq";
    const CLIENT: &'static str = raw_zeromq::CLIENT;
    const HOP_ROUTER: &'static str = raw_zeromq::HOP_ROUTER;
    const HOP_DEALER: &'static str = raw_zeromq::HOP_DEALER;
    type Pusher = raw_zeromq::Pusher;
    type Reader = raw_zeromq::Reader;
    type Publisher = raw_zeromq::Publisher;
    type Asker = raw_zeromq::Asker;

    /// The `zeromq` client's PUB queues 100,000 messages for each subscriber, and has no
    /// setting for it.
    fn fanout_broker<S: Side>(
        endpoint: ZmqEndpoint<S>,
        _queue: usize,
    ) -> ruststream_zmq::zeromq::ZmqFanout<S> {
        ruststream_zmq::zeromq::ZmqFanout::new(endpoint)
    }
}

#[cfg(feature = "libzmq")]
impl Stack for ruststream_zmq::libzmq::Libzmq {
    const NAME: &'static str = "libzmq";
    const CLIENT: &'static str = raw_libzmq::CLIENT;
    const HOP_ROUTER: &'static str = raw_libzmq::HOP_ROUTER;
    const HOP_DEALER: &'static str = raw_libzmq::HOP_DEALER;
    type Pusher = raw_libzmq::Pusher;
    type Reader = raw_libzmq::Reader;
    type Publisher = raw_libzmq::Publisher;
    type Asker = raw_libzmq::Asker;

    /// libzmq's `peer_queue`, a setting of libzmq brokers alone.
    fn fanout_broker<S: Side>(
        endpoint: ZmqEndpoint<S>,
        queue: usize,
    ) -> ruststream_zmq::libzmq::ZmqFanout<S> {
        ruststream_zmq::libzmq::ZmqFanout::new(endpoint).peer_queue(queue)
    }
}

/// A backend this build has, as `--backend` names it: what picks a [`Stack`] at run time.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Which {
    #[cfg(feature = "zeromq")]
    Zeromq,
    #[cfg(feature = "libzmq")]
    Libzmq,
}

/// Every backend this build has, in the order they run and their tables print.
const COMPILED: &[Which] = &[
    #[cfg(feature = "zeromq")]
    Which::Zeromq,
    #[cfg(feature = "libzmq")]
    Which::Libzmq,
];

/// `$body` with `$b` naming the [`Stack`] that `$which` picks.
macro_rules! on_backend {
    ($which:expr, $b:ident => $body:expr) => {
        match $which {
            #[cfg(feature = "zeromq")]
            Which::Zeromq => {
                type $b = ruststream_zmq::zeromq::Zeromq;
                $body
            }
            #[cfg(feature = "libzmq")]
            Which::Libzmq => {
                type $b = ruststream_zmq::libzmq::Libzmq;
                $body
            }
        }
    };
}

impl Which {
    fn name(self) -> &'static str {
        on_backend!(self, B => B::NAME)
    }

    /// The backend `--backend` names; every compiled one for `both`.
    fn parse(name: &str) -> Vec<Self> {
        if name == "both" {
            assert!(
                COMPILED.len() > 1,
                "--backend both: this build has `{}` alone; build with `--features libzmq`",
                COMPILED[0].name()
            );
            return COMPILED.to_vec();
        }
        assert!(
            ["zeromq", "libzmq"].contains(&name),
            "--backend zeromq|libzmq|both"
        );
        let which = COMPILED.iter().copied().find(|which| which.name() == name);
        vec![which.unwrap_or_else(|| {
            let with = if name == "zeromq" {
                "the default features"
            } else {
                "`--features libzmq`"
            };
            panic!("--backend {name}: this build does not have it; build with {with}")
        })]
    }

    /// What its raw side is, with the hand-offs it was given.
    fn baseline(self) -> String {
        on_backend!(self, B => baseline::<B>())
    }
}

// ---------------------------------------------------------------------------------------------
// The raw sockets of a client, as each raw module provides them

/// A PUSH dialing a bound PULL.
trait RawPusher: Sized {
    async fn dial(address: &str) -> Self;
    async fn send(&mut self, frames: Frames);
    /// Sends the messages `make` builds for `ids`; answers the pusher once all have been handed
    /// to the socket.
    fn send_all(self, ids: Range<u64>, make: fn(u64) -> Frames) -> JoinHandle<Self>;
    async fn close(self);
}

/// A socket read on its own, handing every message to its work.
trait RawReader: Sized {
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
trait RawPublisher: Sized {
    /// Binds with a queue of `queue` messages for each subscriber, where the client has that
    /// setting; answers it and its address.
    async fn bind(queue: usize) -> (Self, String);
    async fn send(&mut self, frames: Frames);
    fn send_all(self, ids: Range<u64>, make: fn(u64) -> Frames) -> JoinHandle<Self>;
    async fn close(self);
}

/// A DEALER that asks a ROUTER, keeping up to `window` requests in flight.
trait RawAsker: Sized {
    /// Dials and waits for the answer to one request, so the connection is up.
    async fn dial(address: &str) -> Self;
    /// Asks `ids`, `window` at a time; answers the asker and each request's round trip.
    fn run(self, ids: Range<u64>, window: u64) -> JoinHandle<(Self, Arc<Vec<Duration>>)>;
    async fn close(self);
}

/// The id of warm-up messages, which no tally counts.
const WARM_UP: u64 = u64::MAX;
/// The delay of the retry burst.
const RETRY_DELAY: Duration = Duration::from_millis(500);
/// The shortest pause in a retry burst's deliveries that counts as a stall.
const STALL: Duration = Duration::from_millis(20);
/// How long a run may take before it counts what is missing as lost.
const RUN_DEADLINE: Duration = Duration::from_secs(120);

#[derive(Serialize, Deserialize, Outgoing)]
struct Job {
    id: u64,
}

/// The 16 KiB message: an id and a padding string.
#[derive(Serialize, Deserialize, Outgoing)]
struct BigJob {
    id: u64,
    pad: String,
}

static PAD: LazyLock<String> = LazyLock::new(|| "x".repeat(16 * 1024 - 20));

/// The one header every message carries.
#[derive(Deserialize)]
struct Tenant {
    #[serde(rename = "x-tenant")]
    tenant: String,
}

#[derive(Deserialize)]
struct Retries {
    #[serde(rename = "x-ruststream-retry-count")]
    retry_count: Option<u32>,
}

// ---------------------------------------------------------------------------------------------
// What handlers count

/// Counts the messages handled; wakes the run when the target is reached.
#[derive(Clone, Default)]
struct Tally(Arc<TallyInner>);

#[derive(Default)]
struct TallyInner {
    count: AtomicU64,
    target: AtomicU64,
    warmed: AtomicBool,
    done: Notify,
}

impl Tally {
    fn hit(&self, id: u64) {
        if id == WARM_UP {
            self.0.warmed.store(true, Ordering::Relaxed);
            return;
        }
        let count = self.0.count.fetch_add(1, Ordering::Relaxed) + 1;
        if count == self.0.target.load(Ordering::Relaxed) {
            self.0.done.notify_one();
        }
    }

    fn count(&self) -> u64 {
        self.0.count.load(Ordering::Relaxed)
    }

    fn warmed(&self) -> bool {
        self.0.warmed.load(Ordering::Relaxed) || self.count() > 0
    }

    fn arm(&self, target: u64) {
        self.0.count.store(0, Ordering::Relaxed);
        self.0.target.store(target, Ordering::Relaxed);
    }

    /// Waits until the target is reached or nothing has come for `idle`; answers whether it was.
    async fn wait(&self, idle: Duration) -> bool {
        let target = self.0.target.load(Ordering::Relaxed);
        let deadline = tokio::time::Instant::now() + RUN_DEADLINE;
        let mut last = (self.count(), tokio::time::Instant::now());
        while self.count() < target {
            let now = tokio::time::Instant::now();
            if now >= deadline || now - last.1 >= idle {
                return false;
            }
            let _ = tokio::time::timeout(Duration::from_millis(50), self.0.done.notified()).await;
            let count = self.count();
            if count != last.0 {
                last = (count, tokio::time::Instant::now());
            }
        }
        true
    }
}

/// Waits until every tally has seen a warm-up message, `$send` sending one more every 5 ms.
macro_rules! warm_up {
    ($tallies:expr, $send:expr) => {{
        let deadline = Instant::now() + Duration::from_secs(30);
        while !$tallies.iter().all(|tally| tally.warmed()) {
            assert!(Instant::now() < deadline, "the warm-up never arrived");
            $send.await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }};
}

/// When each copy of the retry burst was seen, in nanoseconds since `base` (0: not seen).
struct Burst {
    base: Instant,
    first: Vec<AtomicU64>,
    second: Vec<AtomicU64>,
}

impl Burst {
    fn new(messages: u64) -> Self {
        let slots = || (0..messages).map(|_| AtomicU64::new(0)).collect();
        Self {
            base: Instant::now(),
            first: slots(),
            second: slots(),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX) + 1
    }
}

#[derive(Clone, FromRef)]
struct AppState {
    tally: Tally,
    burst: Arc<Burst>,
}

impl AppState {
    fn of(tally: &Tally) -> Self {
        Self {
            tally: tally.clone(),
            burst: Arc::new(Burst::new(0)),
        }
    }
}

/// The queue's handler: reads the header, decodes the JSON, acks.
#[subscriber]
async fn on_job(
    job: &Job,
    Headers(tenant): Headers<Tenant>,
    State(tally): State<Tally>,
) -> HandlerOutcome {
    std::hint::black_box(&tenant.tenant);
    tally.hit(job.id);
    HandlerOutcome::ack()
}

/// The same over the 16 KiB message.
#[subscriber]
async fn on_big_job(
    job: &BigJob,
    Headers(tenant): Headers<Tenant>,
    State(tally): State<Tally>,
) -> HandlerOutcome {
    std::hint::black_box((&tenant.tenant, job.pad.len()));
    tally.hit(job.id);
    HandlerOutcome::ack()
}

/// The retry burst: the first delivery asks for a copy in 500 ms, the copy is acked.
#[subscriber]
async fn on_burst(
    job: &Job,
    Headers(retries): Headers<Retries>,
    State(burst): State<Arc<Burst>>,
    State(tally): State<Tally>,
) -> HandlerOutcome {
    burst_outcome(&burst, &tally, job.id, |first, now| {
        let is_first = retries.retry_count.is_none();
        if is_first {
            first.store(now, Ordering::Relaxed);
        }
        is_first
    })
}

/// `on_burst` for a broker that redelivers the message itself, with no retry header: the
/// first delivery of an id is the one that finds its slot empty.
#[subscriber]
async fn on_redelivered_burst(
    job: &Job,
    State(burst): State<Arc<Burst>>,
    State(tally): State<Tally>,
) -> HandlerOutcome {
    burst_outcome(&burst, &tally, job.id, |first, now| {
        first
            .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    })
}

/// What a burst handler answers for `id`: a first delivery (`is_first` tells, given its slot
/// and the time) asks for a copy in 500 ms; a copy is timed, counted and acked.
fn burst_outcome(
    burst: &Burst,
    tally: &Tally,
    id: u64,
    is_first: impl FnOnce(&AtomicU64, u64) -> bool,
) -> HandlerOutcome {
    if id == WARM_UP {
        tally.hit(WARM_UP);
        return HandlerOutcome::ack();
    }
    let Some(slot) = usize::try_from(id)
        .ok()
        .filter(|&at| at < burst.first.len())
    else {
        return HandlerOutcome::ack();
    };
    let now = burst.now();
    if is_first(&burst.first[slot], now) {
        HandlerOutcome::retry_after(RETRY_DELAY)
    } else {
        burst.second[slot].store(now, Ordering::Relaxed);
        tally.hit(id);
        HandlerOutcome::ack()
    }
}

#[subscriber(Responder::<Bound>, reply("reply"))]
async fn echo(job: &Job) -> Job {
    Job { id: job.id }
}

/// The same echo on the framework's in-process broker; [`ReplyTo`] sends its answer to the
/// request's inbox.
#[subscriber("echo", reply("echoed"))]
async fn memory_echo(job: &Job) -> Job {
    Job { id: job.id }
}

/// Names an answer on the in-process broker after its request's `reply-to`, as the crate's
/// `ToRequester` does on a responder.
struct ReplyTo;

impl<C, Options> PublishTransform<ForReply<C>, Options> for ReplyTo {
    type Destination = Names;

    fn apply(
        &self,
        out: &mut ruststream::runtime::Outgoing<'_>,
        _options: &mut Option<Options>,
        cx: &ruststream::runtime::PublishContext<'_, C>,
    ) {
        if let Some(to) = cx.headers().get_shared("reply-to")
            && let Ok(to) = ruststream::Str::try_from(to)
        {
            out.set_name(to);
        }
    }
}

/// The burst's figures: copies early and lost, how late the rest came (p50, p99), how long the
/// first deliveries took, and the resident set at its peak.
fn lateness(burst: &Burst, run: &Run) -> Vec<(&'static str, f64)> {
    let delay = u64::try_from(RETRY_DELAY.as_nanos()).unwrap();
    let (mut early, mut lost, mut late) = (0_u64, 0_u64, Vec::new());
    let (mut first_min, mut first_max) = (u64::MAX, 0);
    let (mut copy_min, mut copy_max) = (u64::MAX, 0);
    let mut seen = Vec::with_capacity(burst.first.len());
    for (first, second) in burst.first.iter().zip(&burst.second) {
        let (first, second) = (
            first.load(Ordering::Relaxed),
            second.load(Ordering::Relaxed),
        );
        if first == 0 || second == 0 {
            lost += 1;
            continue;
        }
        seen.push((first, second));
        first_min = first_min.min(first);
        first_max = first_max.max(first);
        copy_min = copy_min.min(second);
        copy_max = copy_max.max(second);
        if second < first + delay {
            early += 1;
        } else {
            late.push(Duration::from_nanos(second - first - delay));
        }
    }
    let (p50, p99) = percentiles(late).unwrap_or_default();
    let (stalls, longest) = stalls(&seen, delay);
    vec![
        ("early", early as f64),
        ("lost", lost as f64),
        ("late p50, ms", p50.as_secs_f64() * 1e3),
        ("late p99, ms", p99.as_secs_f64() * 1e3),
        (
            "first deliveries spread over, ms",
            first_max.saturating_sub(first_min) as f64 / 1e6,
        ),
        (
            "copies spread over, ms",
            copy_max.saturating_sub(copy_min) as f64 / 1e6,
        ),
        ("stalls", stalls as f64),
        ("longest stall, ms", longest as f64 / 1e6),
        ("peak RSS growth, MB", run.peak_growth_kib / 1024.0),
        ("peak RSS, MB", run.peak_kib / 1024.0),
    ]
}

/// The pauses of [`STALL`] or more in a burst's deliveries (`seen`: each message's first and
/// second, in nanoseconds) while a copy was due and not yet delivered: how many, and the longest
/// in nanoseconds. Lateness made of such pauses is time no handler ran, not a slow path.
fn stalls(seen: &[(u64, u64)], delay: u64) -> (usize, u64) {
    let sorted = |mut times: Vec<u64>| {
        times.sort_unstable();
        times
    };
    let delivered = sorted(
        seen.iter()
            .flat_map(|&(first, second)| [first, second])
            .collect(),
    );
    let due = sorted(seen.iter().map(|&(first, _)| first + delay).collect());
    let copies = sorted(seen.iter().map(|&(_, second)| second).collect());
    let stall = u64::try_from(STALL.as_nanos()).unwrap();
    let (mut count, mut longest) = (0, 0);
    for pair in delivered.windows(2) {
        let (at, pause) = (pair[0], pair[1] - pair[0]);
        let waiting =
            due.partition_point(|&time| time <= at) > copies.partition_point(|&time| time <= at);
        if pause >= stall && waiting {
            count += 1;
            longest = longest.max(pause);
        }
    }
    (count, longest)
}

/// The same burst on the framework's in-process broker, which delays a redelivery itself (a
/// task that sleeps, then puts the delivery back in the queue): no copy is published, so this
/// is the least a delayed retry costs in this framework, the ceiling of any transport.
async fn memory_retry_burst(messages: u64) -> Run {
    let tally = Tally::default();
    let burst = Arc::new(Burst::new(messages));
    let state = AppState {
        tally: tally.clone(),
        burst: Arc::clone(&burst),
    };
    let (running, publisher) = memory_service(state, &tally, Mount::RedeliveredBurst).await;
    tally.arm(messages);
    let meter = Meter::start();
    let sending = memory_publish_all(publisher, messages);
    tally.wait(Duration::from_secs(10)).await;
    sending.await.unwrap();
    let mut run = meter.stop(messages);
    run.fields = lateness(&burst, &run);
    running.shutdown().await.unwrap();
    run
}

// ---------------------------------------------------------------------------------------------
// The raw side's messages and work, shared by both raw modules

fn json(id: u64) -> Bytes {
    Bytes::from(serde_json::to_vec(&Job { id }).unwrap())
}

fn job_frames(id: u64) -> Frames {
    [
        Bytes::from_static(b"jobs"),
        Bytes::from_static(b"x-tenant: acme"),
        json(id),
    ]
}

fn tick_frames(id: u64) -> Frames {
    [
        Bytes::from_static(b"ticks"),
        Bytes::from_static(b"x-tenant: acme"),
        json(id),
    ]
}

fn big_frames(id: u64) -> Frames {
    let body = serde_json::to_vec(&BigJob {
        id,
        pad: PAD.clone(),
    })
    .unwrap();
    [
        Bytes::from_static(b"jobs"),
        Bytes::from_static(b"x-tenant: acme"),
        Bytes::from(body),
    ]
}

/// The hand-offs the raw request-reply side takes on (`--raw-hop router`, `--raw-hop dealer`),
/// to measure what one costs: on `zeromq` between tasks, on libzmq between a socket's thread and
/// a task.
#[derive(Clone, Copy, Default)]
struct RawHops {
    router: bool,
    dealer: bool,
}

static RAW_HOPS: OnceLock<RawHops> = OnceLock::new();

/// The hand-offs chosen for the raw side: none unless `--raw-hop` says so.
fn raw_hops() -> RawHops {
    RAW_HOPS.get().copied().unwrap_or_default()
}

/// What backend `B`'s raw side is, with the hand-offs it was given.
fn baseline<B: Stack>() -> String {
    let RawHops { router, dealer } = raw_hops();
    let hops: Vec<&str> = [(router, B::HOP_ROUTER), (dealer, B::HOP_DEALER)]
        .into_iter()
        .filter_map(|(on, what)| on.then_some(what))
        .collect();
    if hops.is_empty() {
        B::CLIENT.to_owned()
    } else {
        format!("{}, with {}", B::CLIENT, hops.join(" and "))
    }
}

/// A raw request: `[echo][correlation-id: n][{"id":n}]`.
fn request(id: u64) -> Frames {
    [
        Bytes::from_static(b"echo"),
        Bytes::from(format!("correlation-id: {id}")),
        json(id),
    ]
}

/// The id an answer carries.
fn answered(payload: &[u8]) -> u64 {
    serde_json::from_slice::<Job>(payload)
        .expect("a JSON answer")
        .id
}

/// The round trips of requests `ids`, as their answers come: what a raw asker keeps, on
/// either client.
struct Latencies {
    first: u64,
    sent_at: Vec<Option<Instant>>,
    taken: Vec<Duration>,
}

impl Latencies {
    fn new(ids: &Range<u64>) -> Self {
        let total = usize::try_from(ids.end - ids.start).unwrap();
        Self {
            first: ids.start,
            sent_at: vec![None; total],
            taken: Vec::with_capacity(total),
        }
    }

    fn all(&self) -> bool {
        self.taken.len() == self.sent_at.len()
    }

    /// How many are in flight once `next` is sent.
    fn in_flight(&self, next: u64) -> u64 {
        next - self.first - self.taken.len() as u64
    }

    fn sent(&mut self, id: u64) {
        self.sent_at[usize::try_from(id - self.first).unwrap()] = Some(Instant::now());
    }

    /// Notes the answer whose payload is `payload`.
    fn answered(&mut self, payload: &[u8]) {
        let id = answered(payload);
        if let Some(at) = self.sent_at[usize::try_from(id - self.first).unwrap()].take() {
            self.taken.push(at.elapsed());
        }
    }

    fn done(self) -> Arc<Vec<Duration>> {
        Arc::new(self.taken)
    }
}

/// The value of header `name` in a headers frame.
fn header<'a>(headers: &'a [u8], name: &str) -> Option<&'a str> {
    std::str::from_utf8(headers).ok()?.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// The raw responder's work: the request's correlation-id and payload in, the answer out.
fn answer(headers: &[u8], payload: &[u8]) -> (Bytes, Bytes) {
    let correlation = header(headers, "correlation-id").unwrap_or_default();
    let job: Job = serde_json::from_slice(payload).expect("a JSON request");
    (
        Bytes::from(format!("correlation-id: {correlation}")),
        Bytes::from(serde_json::to_vec(&Job { id: job.id }).unwrap()),
    )
}

/// The raw reader's work for `{"id":n}`: the header, the JSON, the count.
fn raw_job(tally: &Tally) -> Work {
    let tally = tally.clone();
    Arc::new(move |_name, headers, payload| {
        let tenant = header(headers, "x-tenant").map(str::to_owned);
        std::hint::black_box(tenant);
        let job: Job = serde_json::from_slice(payload).expect("a JSON job");
        tally.hit(job.id);
    })
}

fn raw_big_job(tally: &Tally) -> Work {
    let tally = tally.clone();
    Arc::new(move |_name, headers, payload| {
        let tenant = header(headers, "x-tenant").map(str::to_owned);
        let job: BigJob = serde_json::from_slice(payload).expect("a JSON job");
        std::hint::black_box((tenant, job.pad.len()));
        tally.hit(job.id);
    })
}

/// The sender's ceiling: counts frames, decodes nothing.
fn raw_count_only(tally: &Tally) -> Work {
    let tally = tally.clone();
    Arc::new(move |_name, _headers, _payload| tally.hit(0))
}

// ---------------------------------------------------------------------------------------------
// Measuring

/// One run of one side of a scenario.
#[derive(Clone, Default)]
struct Run {
    /// Messages (or requests) a second.
    rate: f64,
    /// Process CPU time per message, µs.
    cpu_us: f64,
    /// Heap allocations (and reallocations) of Rust code per message, the whole process.
    allocs: f64,
    /// Context switches of the process's threads per message: how often a thread parked and
    /// was woken, the cost of a hop between tasks or threads that finds the other side asleep.
    switches: f64,
    latencies: Option<(Duration, Duration)>,
    /// Peak resident set over the run, less the resident set at its start, KiB.
    peak_growth_kib: f64,
    /// Peak resident set over the run, KiB.
    peak_kib: f64,
    /// Figures of their own (name, value), for the crate-only rows.
    fields: Vec<(&'static str, f64)>,
}

struct Meter {
    started: Instant,
    allocations: u64,
    switches: u64,
    cpu: Duration,
    rss_kib: u64,
}

/// Hands the heap's free pages back to the system (glibc), so that a resident set read next is
/// what is live rather than what earlier runs left free. Before every run, and before each
/// reading of the RSS rows (after a tenth, at the end).
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn malloc_trim(pad: usize) -> i32;
        }
        // SAFETY: glibc's `malloc_trim` takes a padding size and touches only the allocator's
        // free lists.
        unsafe {
            malloc_trim(0);
        }
    }
}

impl Meter {
    fn start() -> Self {
        trim_heap();
        // Resets `VmHWM` to the resident set now (Linux 4.0 and later).
        let _ = std::fs::write("/proc/self/clear_refs", "5");
        Self {
            started: Instant::now(),
            allocations: ALLOCATIONS.load(Ordering::Relaxed),
            switches: context_switches(),
            cpu: cpu_time(),
            rss_kib: status_kib("VmRSS:").unwrap_or(0),
        }
    }

    fn stop(&self, messages: u64) -> Run {
        let took = self.started.elapsed();
        let allocations = ALLOCATIONS.load(Ordering::Relaxed) - self.allocations;
        let switches = context_switches().saturating_sub(self.switches);
        let cpu = cpu_time().saturating_sub(self.cpu);
        let peak = status_kib("VmHWM:").unwrap_or(0);
        Run {
            rate: messages as f64 / took.as_secs_f64(),
            cpu_us: cpu.as_secs_f64() * 1e6 / messages as f64,
            allocs: allocations as f64 / messages as f64,
            switches: switches as f64 / messages as f64,
            latencies: None,
            peak_growth_kib: peak.saturating_sub(self.rss_kib) as f64,
            peak_kib: peak as f64,
            fields: Vec::new(),
        }
    }
}

/// The CPU time of the whole process, user and system, every thread, the living and the ended
/// (`utime` and `stime` of `/proc/self/stat`, in clock ticks of 10 ms).
fn cpu_time() -> Duration {
    const TICK: Duration = Duration::from_millis(10);
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    // `utime` and `stime` are the 14th and 15th fields, the 12th and 13th after the command.
    let ticks = |at: usize| {
        fields
            .get(at)
            .and_then(|f| f.parse::<u32>().ok())
            .unwrap_or(0)
    };
    TICK * (ticks(11) + ticks(12))
}

/// The context switches, voluntary and not, of the process's living threads.
fn context_switches() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("status")).ok())
        .flat_map(|status| {
            status
                .lines()
                .filter_map(|line| {
                    let (key, value) = line.split_once(':')?;
                    key.ends_with("ctxt_switches")
                        .then(|| value.trim().parse::<u64>().ok())
                        .flatten()
                })
                .collect::<Vec<_>>()
        })
        .sum()
}

/// A `/proc/self/status` figure in KiB (`VmRSS:`, `VmHWM:`).
fn status_kib(field: &str) -> Option<u64> {
    std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix(field))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

fn percentiles(mut latencies: Vec<Duration>) -> Option<(Duration, Duration)> {
    if latencies.is_empty() {
        return None;
    }
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    Some((at(0.50), at(0.99)))
}

// ---------------------------------------------------------------------------------------------
// The log filter the `warn` rows switch

static FILTER: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// Installs the global subscriber: a filter, off until a row switches it, over a fmt layer
/// writing to `/dev/null` (a write per line, as to a file, and nothing on the terminal).
fn install_subscriber() {
    use tracing_subscriber::util::SubscriberInitExt;
    let (filter, handle) = reload::Layer::new(EnvFilter::new("off"));
    let sink = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .expect("/dev/null");
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(Arc::new(sink)),
        )
        .init();
    let _ = FILTER.set(handle);
}

/// The README's filter: WARN, less the runtime's ack / nack line.
fn readme_filter() -> EnvFilter {
    let mut filter = EnvFilter::new("warn");
    for directive in [
        "ruststream::dispatch[{subscription,error}]=error",
        "ruststream::dispatch[{subscription,destination,error}]=warn",
        "ruststream::dispatch[{subscription,message_type,error}]=warn",
        "ruststream::dispatch[{subscription,headers_type,error}]=warn",
        "ruststream::dispatch[{subscription,reply,error}]=warn",
    ] {
        filter = filter.add_directive(directive.parse().expect("a directive"));
    }
    filter
}

fn set_filter(filter: EnvFilter) {
    if let Some(handle) = FILTER.get() {
        handle.reload(filter).expect("the filter reloads");
    }
}

// ---------------------------------------------------------------------------------------------
// The crate's side

#[derive(Clone, Copy)]
enum Body {
    Small,
    Big,
}

/// The handler a queue service mounts under `jobs`.
#[derive(Clone, Copy)]
enum Mount {
    Count,
    CountBig,
    Burst,
    /// The burst on a broker that redelivers the message itself.
    RedeliveredBurst,
}

/// Mounts the handler `mount` names on `b`, the scope of whichever broker runs it (a macro:
/// the scope's type differs per broker and app, and is not worth spelling out).
macro_rules! include_mount {
    ($b:expr, $mount:expr) => {
        match $mount {
            Mount::Count => {
                $b.include(on_job.name("jobs"));
            }
            Mount::CountBig => {
                $b.include(on_big_job.name("jobs"));
            }
            Mount::Burst => {
                $b.include(on_burst.name("jobs"));
            }
            Mount::RedeliveredBurst => {
                $b.include(on_redelivered_burst.name("jobs"));
            }
        }
    };
}

#[derive(Clone, Copy, PartialEq)]
enum Feed {
    RawPush,
    CratePublisher,
}

/// A bound queue service on backend `B` with `mount` as its subscription; answers it running
/// and its address.
async fn queue_service<B: Stack>(
    state: AppState,
    mount: Mount,
) -> (ruststream::runtime::RunningApp, String) {
    let broker = ZmqBroker::<QueueKind, Bound, B>::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = broker.monitor();
    let running = RustStream::new(AppInfo::new("bench", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(state))
        .with_broker(broker, |b| include_mount!(b, mount))
        .start()
        .await
        .unwrap();
    (running, monitor.bound_address().unwrap())
}

fn crate_message(frames: Frames) -> OutgoingMessage<'static, BytesMut> {
    let [_, _, payload] = frames;
    let mut headers = HeaderMap::new();
    headers.insert("x-tenant", "acme");
    OutgoingMessage::produced("jobs", BytesMut::from(&payload[..])).with_headers(headers)
}

/// The crate's publisher sending what `make` builds for `ids`, from a task of its own.
fn publish_all(
    publisher: ZmqPublisher,
    ids: std::ops::Range<u64>,
    make: fn(u64) -> Frames,
    name: &'static str,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        for id in ids {
            let [_, _, payload] = make(id);
            let mut headers = HeaderMap::new();
            headers.insert("x-tenant", "acme");
            let msg =
                OutgoingMessage::produced(name, BytesMut::from(&payload[..])).with_headers(headers);
            publisher.publish(msg, None).await.expect("the publish");
        }
    })
}

/// The crate's queue on backend `B`: `messages` fed by a raw PUSH of its client or the crate's
/// publisher on it. With `probe`, the resident set is read after a tenth of the messages and at
/// the end.
async fn crate_queue<B: Stack>(messages: u64, body: Body, feed: Feed, probe: bool) -> Run {
    let tally = Tally::default();
    let mount = match body {
        Body::Small => Mount::Count,
        Body::Big => Mount::CountBig,
    };
    let (running, address) = queue_service::<B>(AppState::of(&tally), mount).await;
    let make = match body {
        Body::Small => job_frames,
        Body::Big => big_frames,
    };
    trim_heap();
    let before = status_kib("VmRSS:").unwrap_or(0);
    let (meter, done, feeder) = if feed == Feed::RawPush {
        let mut pusher = B::Pusher::dial(&address).await;
        warm_up!([&tally], pusher.send(make(WARM_UP)));
        tally.arm(messages);
        let meter = Meter::start();
        let (pusher, done) = if probe {
            let (pusher, done, readings) = flood_in_tenths(pusher, &tally, messages, make).await;
            (pusher, (done, readings))
        } else {
            let sending = pusher.send_all(0..messages, make);
            let done = tally.wait(Duration::from_secs(10)).await;
            (sending.await.unwrap(), (done, [0; 3]))
        };
        pusher.close().await;
        (meter, done, None)
    } else {
        let peer = ZmqBroker::<QueueKind, Dialing, B>::new(ZmqEndpoint::dial(address))
            .connect()
            .await
            .unwrap();
        let publisher = peer.publisher();
        warm_up!([&tally], async {
            publisher
                .publish(crate_message(make(WARM_UP)), None)
                .await
                .unwrap();
        });
        tally.arm(messages);
        let meter = Meter::start();
        let sending = publish_all(publisher, 0..messages, make, "jobs");
        let done = tally.wait(Duration::from_secs(10)).await;
        sending.await.unwrap();
        (meter, (done, [0; 3]), Some(peer))
    };
    let mut run = meter.stop(messages);
    let (complete, readings) = done;
    assert!(
        complete,
        "the crate's queue handled {} of {messages}",
        tally.count()
    );
    if probe {
        let mb = |kib: u64| kib as f64 / 1024.0;
        run.fields = vec![
            ("RSS before, MB", mb(before)),
            ("after round 1 of 10, MB", mb(readings[0])),
            ("after round 5, MB", mb(readings[1])),
            ("after round 10, MB", mb(readings[2])),
        ];
    }
    running.shutdown().await.unwrap();
    if let Some(peer) = feeder {
        peer.shutdown().await.unwrap();
    }
    run
}

/// The same handler on the framework's own in-process broker (`ruststream::memory`), fed by its
/// publisher from a task of its own: what the framework's dispatch costs with no socket at all,
/// the ceiling of any transport under the same handler.
async fn memory_queue(messages: u64) -> Run {
    let tally = Tally::default();
    let (running, publisher) = memory_service(AppState::of(&tally), &tally, Mount::Count).await;
    tally.arm(messages);
    let meter = Meter::start();
    let sending = memory_publish_all(publisher, messages);
    let done = tally.wait(Duration::from_secs(10)).await;
    sending.await.unwrap();
    let run = meter.stop(messages);
    assert!(
        done,
        "the memory broker handled {} of {messages}",
        tally.count()
    );
    running.shutdown().await.unwrap();
    run
}

/// The framework's in-process broker running `mount`'s handler, warmed up with one message;
/// answers the running app and the broker's publisher.
async fn memory_service(
    state: AppState,
    tally: &Tally,
    mount: Mount,
) -> (ruststream::runtime::RunningApp, MemoryPublisher) {
    let broker = MemoryBroker::new();
    let publisher = broker.publisher();
    let running = RustStream::new(AppInfo::new("bench", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(state))
        .with_broker(broker, |b| include_mount!(b, mount))
        .start()
        .await
        .unwrap();
    warm_up!([tally], async {
        publisher
            .publish(crate_message(job_frames(WARM_UP)), None)
            .await
            .unwrap();
    });
    (running, publisher)
}

/// The in-process broker's publisher sending `messages` jobs, from a task of its own.
fn memory_publish_all(publisher: MemoryPublisher, messages: u64) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        for id in 0..messages {
            let message = crate_message(job_frames(id));
            publisher.publish(message, None).await.unwrap();
        }
    })
}

/// Sends `messages` in ten rounds, each handled whole before the next is sent, so that no
/// queue holds messages when the resident set is read: after the first, the fifth and the last
/// round (each time after trimming the heap). Growth that goes on from round to round is kept
/// per message; a queue's capacity, grown once to a round's size, shows after the first round
/// and stays. Answers the pusher, whether all were handled, and the three readings.
async fn flood_in_tenths<P: RawPusher>(
    mut pusher: P,
    tally: &Tally,
    messages: u64,
    make: fn(u64) -> Frames,
) -> (P, bool, [u64; 3]) {
    let tenth = messages / 10;
    let mut readings = [0; 3];
    let deadline = Instant::now() + RUN_DEADLINE;
    for round in 0..10 {
        let end = if round == 9 {
            messages
        } else {
            (round + 1) * tenth
        };
        pusher = pusher.send_all(round * tenth..end, make).await.unwrap();
        while tally.count() < end && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let at = match round {
            0 => 0,
            4 => 1,
            9 => 2,
            _ => continue,
        };
        trim_heap();
        readings[at] = status_kib("VmRSS:").unwrap_or(0);
    }
    (pusher, tally.count() >= messages, readings)
}

/// A service whose responder, on backend `B`, binds `address` and echoes each request; answers
/// it running and the address it listens on.
async fn echo_responder<B: Stack>(address: &str) -> (ruststream::runtime::RunningApp, String) {
    let broker = ZmqBroker::<RpcKind, Bound, B>::new(ZmqEndpoint::bind(address));
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

/// One request through `requester` (the crate's or the in-process broker's), checked against
/// its answer.
async fn ask<R>(requester: &R, id: u64)
where
    R: RequestReply<Payload = ruststream::Take>,
    R::Error: std::fmt::Debug,
{
    let msg = OutgoingMessage::produced("echo", BytesMut::from(&json(id)[..]));
    let answer = requester
        .request(msg, Duration::from_secs(30))
        .await
        .expect("an answer");
    assert_eq!(answered(answer.payload()), id, "the answer to its request");
}

/// Asks `requests` through `requester`, `window` in flight, from a task of its own; each
/// finished request counts in `progress`. Answers how long each took.
fn ask_all<R>(
    requester: R,
    requests: u64,
    window: usize,
    progress: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<Vec<Duration>>
where
    R: RequestReply<Payload = ruststream::Take> + Send + Sync + 'static,
    R::Error: std::fmt::Debug,
{
    tokio::spawn(async move {
        let timed = |id| {
            let asked = Instant::now();
            let answered = ask(&requester, id);
            let progress = &progress;
            async move {
                answered.await;
                progress.fetch_add(1, Ordering::Relaxed);
                asked.elapsed()
            }
        };
        // One in flight is a plain loop, as the raw asker's: a `FuturesUnordered` of one
        // future yields to the scheduler after every poll that finds it pending, and each
        // such yield wakes the other worker (1.2 context switches a request, none raw).
        if window == 1 {
            let mut latencies = Vec::with_capacity(usize::try_from(requests).unwrap());
            for id in 0..requests {
                latencies.push(timed(id).await);
            }
            return latencies;
        }
        futures::stream::iter(0..requests)
            .map(timed)
            .buffer_unordered(window)
            .collect::<Vec<_>>()
            .await
    })
}

/// The crate's responder and requester on backend `B`: `requests`, `window` in flight on one
/// requester. With `probe`, the resident set after a tenth and at the end.
async fn crate_request_reply<B: Stack>(requests: u64, window: usize, probe: bool) -> Run {
    let (running, address) = echo_responder::<B>("tcp://127.0.0.1:0").await;
    let client = ZmqBroker::<RpcKind, Dialing, B>::new(ZmqEndpoint::dial(address))
        .connect()
        .await
        .unwrap();
    let requester = client.requester();
    ask(&requester, WARM_UP).await;
    let progress = Arc::new(AtomicU64::new(0));
    let meter = Meter::start();
    let asking = ask_all(requester, requests, window, Arc::clone(&progress));
    let mut early = None;
    if probe {
        while progress.load(Ordering::Relaxed) < requests {
            if early.is_none() && progress.load(Ordering::Relaxed) >= requests / 10 {
                trim_heap();
                early = status_kib("VmRSS:");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let latencies = asking.await.unwrap();
    let mut run = meter.stop(requests);
    run.latencies = percentiles(latencies);
    if probe {
        run.fields = vec![
            ("RSS after a tenth, MB", early.unwrap_or(0) as f64 / 1024.0),
            ("RSS at the end, MB", {
                trim_heap();
                status_kib("VmRSS:").unwrap_or(0) as f64 / 1024.0
            }),
        ];
    }
    running.shutdown().await.unwrap();
    client.shutdown().await.unwrap();
    run
}

/// The same echo and asker on the framework's in-process broker (`window` in flight): what
/// the framework's dispatch and its request machinery cost with no socket.
async fn memory_request_reply(requests: u64, window: usize) -> Run {
    let broker = MemoryBroker::new();
    let requester = broker.requester();
    let running = RustStream::new(AppInfo::new("bench", "0.1.0"))
        .with_broker(broker, |b| {
            b.include(memory_echo)
                .out_reply(MemoryPublish)
                .transform(ReplyTo);
        })
        .start()
        .await
        .unwrap();
    ask(&requester, WARM_UP).await;
    let meter = Meter::start();
    let latencies = ask_all(requester, requests, window, Arc::new(AtomicU64::new(0)))
        .await
        .unwrap();
    let mut run = meter.stop(requests);
    run.latencies = percentiles(latencies);
    running.shutdown().await.unwrap();
    run
}

/// The crate's fan-out on backend `B`: its publisher to four subscribing services; `messages`
/// each.
async fn crate_fanout<B: Stack>(messages: u64, subscribers: usize) -> Run {
    let queue = usize::try_from(messages).unwrap() + 1_000;
    let hub = B::fanout_broker(ZmqEndpoint::bind("tcp://127.0.0.1:0"), queue)
        .connect()
        .await
        .unwrap();
    let hub_address = hub.bind_publisher().await.unwrap();
    let publisher = hub.publisher();
    let mut tallies = Vec::new();
    let mut services = Vec::new();
    for _ in 0..subscribers {
        let tally = Tally::default();
        let state = AppState::of(&tally);
        let running = RustStream::new(AppInfo::new("bench", "0.1.0"))
            .on_startup(async move |()| Ok::<_, Infallible>(state))
            .with_broker(
                B::fanout_broker(ZmqEndpoint::dial(hub_address.clone()), queue),
                |b| {
                    b.include(on_job.name("ticks"))
                        .out_retry(Publish)
                        .to("ticks.retry@tcp://127.0.0.1:1");
                },
            )
            .start()
            .await
            .unwrap();
        tallies.push(tally);
        services.push(running);
    }
    warm_up!(tallies, async {
        let [_, _, payload] = tick_frames(WARM_UP);
        let msg = OutgoingMessage::produced("ticks", BytesMut::from(&payload[..]))
            .with_headers(tenant_headers());
        publisher.publish(msg, None).await.unwrap();
    });
    for tally in &tallies {
        tally.arm(messages);
    }
    let meter = Meter::start();
    let sending = publish_all(publisher, 0..messages, tick_frames, "ticks");
    let run = fanout_wait(&meter, &tallies, messages).await;
    sending.await.unwrap();
    for running in services {
        running.shutdown().await.unwrap();
    }
    hub.shutdown().await.unwrap();
    run
}

fn tenant_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("x-tenant", "acme");
    headers
}

/// Waits for every subscriber; the rate is of messages published and delivered to all.
async fn fanout_wait(meter: &Meter, tallies: &[Tally], messages: u64) -> Run {
    for tally in tallies {
        tally.wait(Duration::from_secs(3)).await;
    }
    let delivered: u64 = tallies.iter().map(Tally::count).sum();
    let mut run = meter.stop(messages);
    let lost = messages * tallies.len() as u64 - delivered;
    run.fields = vec![("lost", lost as f64)];
    run
}

/// 100,000 `retry_after(500 ms)` copies on backend `B`, fed by a raw PUSH of its client as fast
/// as it goes.
async fn crate_retry_burst<B: Stack>(messages: u64) -> Run {
    let tally = Tally::default();
    let burst = Arc::new(Burst::new(messages));
    let state = AppState {
        tally: tally.clone(),
        burst: Arc::clone(&burst),
    };
    let (running, address) = queue_service::<B>(state, Mount::Burst).await;
    let mut pusher = B::Pusher::dial(&address).await;
    warm_up!([&tally], pusher.send(job_frames(WARM_UP)));
    tally.arm(messages);
    let meter = Meter::start();
    let pusher = pusher.send_all(0..messages, job_frames).await.unwrap();
    tally.wait(Duration::from_secs(10)).await;
    let mut run = meter.stop(messages);
    pusher.close().await;
    run.fields = lateness(&burst, &run);
    running.shutdown().await.unwrap();
    run
}

// ---------------------------------------------------------------------------------------------
// The raw side

/// Backend `B`'s raw PUSH into its raw PULL, which does `work`.
async fn raw_queue<B: Stack>(
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
async fn raw_request_reply<B: Stack>(requests: u64, window: u64) -> Run {
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
async fn raw_fanout<B: Stack>(messages: u64, subscribers: usize) -> Run {
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

// ---------------------------------------------------------------------------------------------
// The scenarios

/// One row of the table.
struct Scenario {
    name: &'static str,
    what: &'static str,
    /// The label of the measured side, and the baseline.
    sides: (&'static str, Baseline),
    /// How many messages at `--scale 1`.
    messages: u64,
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "sender",
        what: "sender ceiling: raw PUSH into a raw PULL that only counts",
        sides: ("raw", Baseline::Alone),
        messages: 200_000,
    },
    Scenario {
        name: "queue",
        what: "queue, {n} messages, handler reads the header, decodes, acks; raw PUSH feeds",
        sides: ("crate", Baseline::Each("raw")),
        messages: 200_000,
    },
    Scenario {
        name: "framework",
        what: "queue, {n} messages, the crate (raw PUSH feeds) vs the framework's in-process broker",
        sides: ("crate", Baseline::Shared("memory broker")),
        messages: 200_000,
    },
    Scenario {
        name: "queue-publisher",
        what: "queue, {n} messages, fed by the crate's publisher (vs the raw PUSH)",
        sides: ("crate publisher", Baseline::Each("raw PUSH")),
        messages: 200_000,
    },
    Scenario {
        name: "rr1",
        what: "request-reply, {n} requests, one in flight",
        sides: ("crate", Baseline::Each("raw")),
        messages: 20_000,
    },
    Scenario {
        name: "rr64",
        what: "request-reply, {n} requests, 64 in flight on one requester",
        sides: ("crate", Baseline::Each("raw")),
        messages: 200_000,
    },
    Scenario {
        name: "rr64-framework",
        what: "request-reply, {n} requests, 64 in flight, the crate vs the framework's in-process broker",
        sides: ("crate", Baseline::Shared("memory broker")),
        messages: 200_000,
    },
    Scenario {
        name: "fanout",
        what: "fan-out, {n} messages from one publisher to 4 subscribers",
        sides: ("crate", Baseline::Each("raw")),
        messages: 50_000,
    },
    Scenario {
        name: "queue16k",
        what: "queue, {n} messages of 16 KiB, handler decodes, acks",
        sides: ("crate", Baseline::Each("raw")),
        messages: 20_000,
    },
    Scenario {
        name: "retry",
        what: "retry burst: {n} `retry_after(500 ms)` copies",
        sides: ("crate", Baseline::Alone),
        messages: 100_000,
    },
    Scenario {
        name: "retry-framework",
        what: "retry burst: {n} `retry_after(500 ms)` copies, the crate vs the framework's in-process broker (it delays each redelivery itself)",
        sides: ("crate", Baseline::Shared("memory broker")),
        messages: 100_000,
    },
    Scenario {
        name: "responder-rss",
        what: "responder RSS over {n} requests, 64 in flight",
        sides: ("crate", Baseline::Alone),
        messages: 1_000_000,
    },
    Scenario {
        name: "flood",
        what: "RSS over a flood of {n} queue messages",
        sides: ("crate", Baseline::Alone),
        messages: 1_000_000,
    },
    Scenario {
        name: "warn",
        what: "queue, {n} messages, a WARN fmt subscriber (vs none)",
        sides: ("WARN", Baseline::Each("off")),
        messages: 200_000,
    },
    Scenario {
        name: "warn-filtered",
        what: "queue, {n} messages, WARN with the README's filter (vs none)",
        sides: ("filtered", Baseline::Each("off")),
        messages: 200_000,
    },
    Scenario {
        name: "codec",
        what: "wire: encode and decode of a 3-header message, {n} rounds",
        sides: ("crate", Baseline::Alone),
        messages: 200_000,
    },
];

/// What a scenario's measured side is set against.
#[derive(Clone, Copy)]
enum Baseline {
    /// Nothing: the measured side alone.
    Alone,
    /// Its label; run on each backend (raw sockets of its client, or the crate on it otherwise
    /// set up).
    Each(&'static str),
    /// Its label; the same whatever the backend (the framework's in-process broker), so run
    /// once a repetition and set against each backend's measured side.
    Shared(&'static str),
}

impl Baseline {
    fn label(self) -> Option<&'static str> {
        match self {
            Self::Alone => None,
            Self::Each(label) | Self::Shared(label) => Some(label),
        }
    }
}

/// One side of a scenario's run.
#[derive(Clone, Copy)]
enum Part {
    /// The measured side, on a backend.
    Measured(Which),
    /// The baseline, on a backend.
    Baseline(Which),
    /// A baseline that no backend runs ([`Baseline::Shared`]).
    Shared,
}

/// The sides of `scenario` that repetition `rep` runs, interleaved: each backend's measured side
/// then its baseline, a shared baseline after the first backend's measured side; the whole
/// order reversed on odd repetitions, so that each side runs first as often as last.
fn parts(scenario: &Scenario, backends: &[Which], rep: usize) -> Vec<Part> {
    let mut parts = Vec::new();
    for (at, &which) in backends.iter().enumerate() {
        parts.push(Part::Measured(which));
        match scenario.sides.1 {
            Baseline::Each(_) => parts.push(Part::Baseline(which)),
            Baseline::Shared(_) if at == 0 => parts.push(Part::Shared),
            _ => {}
        }
    }
    if rep % 2 == 1 {
        parts.reverse();
    }
    parts
}

/// Runs one side of a scenario.
async fn run_part(scenario: &Scenario, part: Part, n: u64) -> Run {
    match part {
        Part::Measured(which) => on_backend!(which, B => run_side::<B>(scenario, false, n).await),
        Part::Baseline(which) => on_backend!(which, B => run_side::<B>(scenario, true, n).await),
        Part::Shared => match scenario.name {
            "framework" => memory_queue(n).await,
            "rr64-framework" => memory_request_reply(n, 64).await,
            "retry-framework" => memory_retry_burst(n).await,
            name => unreachable!("no shared baseline in {name}"),
        },
    }
}

/// Runs one side of a scenario on backend `B`: the measured one, or its baseline.
async fn run_side<B: Stack>(scenario: &Scenario, baseline: bool, n: u64) -> Run {
    match (scenario.name, baseline) {
        ("sender", _) => raw_queue::<B>(n, job_frames, raw_count_only).await,
        ("queue", false) => crate_queue::<B>(n, Body::Small, Feed::RawPush, false).await,
        ("queue", true) => raw_queue::<B>(n, job_frames, raw_job).await,
        ("framework", false) => crate_queue::<B>(n, Body::Small, Feed::RawPush, false).await,
        ("queue-publisher", false) => {
            crate_queue::<B>(n, Body::Small, Feed::CratePublisher, false).await
        }
        ("queue-publisher", true) => crate_queue::<B>(n, Body::Small, Feed::RawPush, false).await,
        ("rr1", false) => crate_request_reply::<B>(n, 1, false).await,
        ("rr1", true) => raw_request_reply::<B>(n, 1).await,
        ("rr64", false) => crate_request_reply::<B>(n, 64, false).await,
        ("rr64", true) => raw_request_reply::<B>(n, 64).await,
        ("rr64-framework", false) => crate_request_reply::<B>(n, 64, false).await,
        ("fanout", false) => crate_fanout::<B>(n, 4).await,
        ("fanout", true) => raw_fanout::<B>(n, 4).await,
        ("queue16k", false) => crate_queue::<B>(n, Body::Big, Feed::RawPush, false).await,
        ("queue16k", true) => raw_queue::<B>(n, big_frames, raw_big_job).await,
        ("retry", _) | ("retry-framework", false) => crate_retry_burst::<B>(n).await,
        ("responder-rss", _) => crate_request_reply::<B>(n, 64, true).await,
        ("flood", _) => crate_queue::<B>(n, Body::Small, Feed::RawPush, true).await,
        ("warn" | "warn-filtered", true) => {
            set_filter(EnvFilter::new("off"));
            crate_queue::<B>(n, Body::Small, Feed::RawPush, false).await
        }
        ("warn", false) => {
            set_filter(EnvFilter::new("warn"));
            let run = crate_queue::<B>(n, Body::Small, Feed::RawPush, false).await;
            set_filter(EnvFilter::new("off"));
            run
        }
        ("warn-filtered", false) => {
            set_filter(readme_filter());
            let run = crate_queue::<B>(n, Body::Small, Feed::RawPush, false).await;
            set_filter(EnvFilter::new("off"));
            run
        }
        ("codec", _) => codec(n),
        (name, _) => unreachable!("{name} has no such side (baseline: {baseline}) on a backend"),
    }
}

fn codec(rounds: u64) -> Run {
    let mut headers = HeaderMap::new();
    headers.insert("correlation-id", "4f1c2a");
    headers.insert("x-ruststream-retry-count", "2");
    headers.insert("x-tenant", "acme");
    let body = json(7);
    let limits = WireLimits::default();
    let meter = Meter::start();
    for _ in 0..rounds {
        let frames = wire::encode("payments.eu", &headers, body.clone()).unwrap();
        let decoded = wire::decode(&frames, &limits, None).unwrap();
        std::hint::black_box(decoded);
    }
    let mut run = meter.stop(rounds);
    run.fields = vec![("ns a round", 1e9 / run.rate)];
    run
}

// ---------------------------------------------------------------------------------------------
// The table

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => f64::midpoint(values[n / 2 - 1], values[n / 2]),
    }
}

fn median_duration(values: impl Iterator<Item = Duration>) -> Duration {
    Duration::from_secs_f64(median(values.map(|d| d.as_secs_f64()).collect()))
}

fn rate(value: f64) -> String {
    if value >= 10_000.0 {
        format!("{:.0}k", value / 1e3)
    } else {
        format!("{value:.0}")
    }
}

fn micros(value: Duration) -> String {
    let us = value.as_secs_f64() * 1e6;
    if us >= 10_000.0 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{us:.0} µs")
    }
}

/// The medians of one side's runs: rate, CPU, p50, p99, peak growth, fields.
struct Summary {
    rate: f64,
    cpu_us: f64,
    allocs: f64,
    switches: f64,
    latencies: Option<(Duration, Duration)>,
    peak_mb: f64,
    fields: Vec<(&'static str, f64)>,
}

fn summarize(runs: &[Run]) -> Summary {
    // A side left out with `--only` has no runs, and so no latencies.
    let latencies =
        (!runs.is_empty() && runs.iter().all(|run| run.latencies.is_some())).then(|| {
            (
                median_duration(runs.iter().filter_map(|run| run.latencies.map(|l| l.0))),
                median_duration(runs.iter().filter_map(|run| run.latencies.map(|l| l.1))),
            )
        });
    let fields = runs.first().map_or_else(Vec::new, |first| {
        first
            .fields
            .iter()
            .enumerate()
            .map(|(at, (name, _))| {
                (
                    *name,
                    median(runs.iter().map(|run| run.fields[at].1).collect()),
                )
            })
            .collect()
    });
    Summary {
        rate: median(runs.iter().map(|run| run.rate).collect()),
        cpu_us: median(runs.iter().map(|run| run.cpu_us).collect()),
        allocs: median(runs.iter().map(|run| run.allocs).collect()),
        switches: median(runs.iter().map(|run| run.switches).collect()),
        latencies,
        peak_mb: median(runs.iter().map(|run| run.peak_growth_kib).collect()) / 1024.0,
        fields,
    }
}

/// A scenario's runs: for each backend run (in the order of `--backend`), its measured side and
/// its baseline. A shared baseline's runs stand in every backend's.
struct Row<'a> {
    scenario: &'a Scenario,
    n: u64,
    runs: Vec<(Vec<Run>, Vec<Run>)>,
}

impl Row<'_> {
    fn what(&self) -> String {
        self.scenario.what.replace("{n}", &thousands(self.n))
    }
}

/// A side's own figures, `name value; name value`.
fn figures(fields: &[(&'static str, f64)]) -> String {
    fields
        .iter()
        .map(|(name, value)| format!("{name} {value:.1}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// p50 / p99, or `-` without round trips.
fn round_trips(summary: &Summary) -> String {
    summary.latencies.map_or("-".to_owned(), |(p50, p99)| {
        format!("{} / {}", micros(p50), micros(p99))
    })
}

/// The table of one backend (`at` in each row's runs): its measured side against its baseline.
fn print_table(which: Which, at: usize, rows: &[Row], reps: usize, workers: usize) {
    println!();
    println!(
        "backend `{}`, baseline: {}; {}; {workers} runtime workers; medians of {reps} runs",
        which.name(),
        which.baseline(),
        allocator()
    );
    println!();
    println!(
        "| scenario | measured | baseline | ratio | CPU µs/msg, measured / baseline (x) | allocations/msg | context switches/msg | p50 / p99, measured | p50 / p99, baseline | peak RSS growth, MB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for row in rows {
        let what = row.what();
        let (measured, baseline) = &row.runs[at];
        let m = summarize(measured);
        let (label, base) = row.scenario.sides;
        let fields = figures(&m.fields);
        if let Some(base_label) = base.label() {
            let b = summarize(baseline);
            let what = if fields.is_empty() {
                what
            } else {
                format!(
                    "{what} ({label}: {fields}; {base_label}: {})",
                    figures(&b.fields)
                )
            };
            println!(
                "| {what} | {label}: {}/s | {base_label}: {}/s | {:.2} | {:.2} / {:.2} ({:.2} x) | {:.1} / {:.1} | {:.2} / {:.2} | {} | {} | {:.1} / {:.1} |",
                rate(m.rate),
                rate(b.rate),
                m.rate / b.rate,
                m.cpu_us,
                b.cpu_us,
                m.cpu_us / b.cpu_us,
                m.allocs,
                b.allocs,
                m.switches,
                b.switches,
                round_trips(&m),
                round_trips(&b),
                m.peak_mb,
                b.peak_mb,
            );
        } else {
            let what = if fields.is_empty() {
                what
            } else {
                format!("{what}: {fields}")
            };
            println!(
                "| {what} | {label}: {}/s | - | - | {:.2} | {:.1} | {:.2} | {} | - | {:.1} |",
                rate(m.rate),
                m.cpu_us,
                m.allocs,
                m.switches,
                round_trips(&m),
                m.peak_mb,
            );
        }
    }
}

/// The cross-backend table: each scenario's measured side on the first backend (`zeromq`) and
/// on the second (`libzmq`) side by side, the second over the first, and each against its own
/// baseline.
fn print_cross_table(backends: &[Which], rows: &[Row], reps: usize, workers: usize) {
    let [first, second] = backends else {
        return;
    };
    let (one, two) = (first.name(), second.name());
    println!();
    println!(
        "crate on `{two}` against crate on `{one}`; {}; {workers} runtime workers; medians of {reps} runs",
        allocator()
    );
    println!();
    println!(
        "| scenario | {one} | {two} | {two} / {one} | CPU µs/msg, {one} / {two} (x) | {one} / its baseline | {two} / its baseline | figures, {one} / {two} |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for row in rows {
        let (label, base) = row.scenario.sides;
        let sides = [&row.runs[0], &row.runs[1]].map(|(measured, baseline)| {
            (
                summarize(measured),
                base.label().map(|_| summarize(baseline)),
            )
        });
        let [(a, a_base), (b, b_base)] = &sides;
        // The rate, and the p50 where there are round trips.
        let cell = |m: &Summary| match m.latencies {
            Some((p50, _)) => format!("{label}: {}/s, p50 {}", rate(m.rate), micros(p50)),
            None => format!("{label}: {}/s", rate(m.rate)),
        };
        let p50_ratio = |over: &Summary, under: &Summary| match (over.latencies, under.latencies) {
            (Some((over, _)), Some((under, _))) => {
                format!(", p50 {:.2}", over.as_secs_f64() / under.as_secs_f64())
            }
            _ => String::new(),
        };
        let against = |m: &Summary, own: &Option<Summary>| match (own, base.label()) {
            (Some(b), Some(base_label)) => {
                format!("{:.2} of {base_label}{}", m.rate / b.rate, p50_ratio(m, b))
            }
            _ => "-".to_owned(),
        };
        // Each figure of its own (the burst's lateness, what was lost, the resident set) on
        // both backends, and the p99 where there are round trips.
        let mut both: Vec<String> = a
            .fields
            .iter()
            .zip(&b.fields)
            .map(|((name, one), (_, two))| format!("{name} {one:.1} / {two:.1}"))
            .collect();
        if let (Some((_, one)), Some((_, two))) = (a.latencies, b.latencies) {
            both.push(format!("p99 {} / {}", micros(one), micros(two)));
        }
        println!(
            "| {} | {} | {} | {:.2}{} | {:.2} / {:.2} ({:.2} x) | {} | {} | {} |",
            row.what(),
            cell(a),
            cell(b),
            b.rate / a.rate,
            p50_ratio(b, a),
            a.cpu_us,
            b.cpu_us,
            b.cpu_us / a.cpu_us,
            against(a, a_base),
            against(b, b_base),
            if both.is_empty() {
                "-".to_owned()
            } else {
                both.join("; ")
            },
        );
    }
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (at, digit) in digits.chars().enumerate() {
        if at > 0 && (digits.len() - at).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Short-lived requesters (`clients [N]`): the `zeromq` client's, against the crate's responder
// on each backend

/// One short-lived requester: a REQ (even `n`) or DEALER socket that dials the responder, asks
/// once, reads its answer and closes. Answers whether the answer carried the request's id.
async fn ask_once(address: &str, n: u64) -> bool {
    use zeromq::{DealerSocket, ReqSocket, Socket, SocketRecv, SocketSend, ZmqMessage};
    let request = |frames: Vec<Vec<u8>>| {
        ZmqMessage::try_from(frames.into_iter().map(Into::into).collect::<Vec<Bytes>>()).unwrap()
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
/// responder on backend `B`: every one is answered, and the responder keeps nothing per
/// requester (its resident set after the first tenth and at the end).
async fn short_lived_requesters<B: Stack>(clients: u64, in_flight: usize) {
    let path =
        std::env::temp_dir().join(format!("ruststream-zmq-bench-{}.sock", std::process::id()));
    let (running, address) = echo_responder::<B>(&format!("ipc://{}", path.display())).await;
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
            early = status_kib("VmRSS:");
        }
    }
    let took = started.elapsed();
    println!(
        "short-lived requesters, responder on `{}`: {clients} REQ and DEALER clients, {in_flight} \
         at a time, {answered} answered rightly in {took:?}; resident set {} KiB after the first \
         tenth, {} KiB at the end",
        B::NAME,
        early.map_or("?".to_owned(), |kib| kib.to_string()),
        status_kib("VmRSS:").map_or("?".to_owned(), |kib| kib.to_string()),
    );
    running.shutdown().await.unwrap();
    let _ = std::fs::remove_file(path);
}

// ---------------------------------------------------------------------------------------------

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|arg| arg == "--bench") {
        println!("figures only: run `cargo bench --bench throughput`");
        return;
    }
    let mut workers = 2_usize;
    let mut reps = 3_usize;
    // `--only measured` or `--only baseline`: one side alone, for a profiler around the process.
    let mut only: Option<bool> = None;
    let mut scale = 1.0_f64;
    let mut names = Vec::new();
    let mut hops = RawHops::default();
    let mut backends = COMPILED.to_vec();
    let mut clients = None;
    let mut rest = args.iter().peekable();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--bench" => {}
            "--reps" => reps = rest.next().and_then(|n| n.parse().ok()).expect("--reps N"),
            "--scale" => scale = rest.next().and_then(|n| n.parse().ok()).expect("--scale F"),
            // The runtime's worker threads (2 by default, one a core of the machine the
            // figures come from).
            "--workers" => {
                workers = rest
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("--workers N");
            }
            "--backend" => {
                backends = Which::parse(rest.next().map_or("", String::as_str));
            }
            "--raw-hop" => match rest.next().map(String::as_str) {
                Some("router") => hops.router = true,
                Some("dealer") => hops.dealer = true,
                _ => panic!("--raw-hop router|dealer"),
            },
            "--only" => {
                only = match rest.next().map(String::as_str) {
                    Some("measured") => Some(false),
                    Some("baseline") => Some(true),
                    _ => panic!("--only measured|baseline"),
                };
            }
            "list" => {
                for scenario in SCENARIOS {
                    println!("{:16} {}", scenario.name, scenario.what);
                }
                return;
            }
            // `clients [N]`: the short-lived requesters alone.
            "clients" => {
                let n = rest.next_if(|n| n.parse::<u64>().is_ok());
                clients = Some(n.map_or(200_000, |n| n.parse().unwrap()));
            }
            name if name.starts_with("--") => {}
            name => {
                assert!(
                    SCENARIOS.iter().any(|s| s.name == name),
                    "no scenario `{name}`: `list` names them"
                );
                names.push(name.to_owned());
            }
        }
    }
    RAW_HOPS.set(hops).ok();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap();
    if let Some(clients) = clients {
        for &which in &backends {
            on_backend!(which, B => runtime.block_on(short_lived_requesters::<B>(clients, 32)));
        }
        return;
    }
    let chosen: Vec<&Scenario> = SCENARIOS
        .iter()
        .filter(|s| names.is_empty() || names.iter().any(|name| name == s.name))
        .collect();
    install_subscriber();
    for &which in &backends {
        println!("backend `{}`; baseline: {}", which.name(), which.baseline());
    }
    println!("{}; {workers} runtime workers", allocator());
    let mut rows: Vec<Row> = chosen
        .iter()
        .map(|&scenario| Row {
            scenario,
            n: ((scenario.messages as f64 * scale).round() as u64).max(100),
            runs: backends.iter().map(|_| (Vec::new(), Vec::new())).collect(),
        })
        .collect();
    // One run thrown away on each backend, so that the first measured run does not pay for the
    // process's first sockets, threads and heap.
    for &which in &backends {
        on_backend!(which, B => runtime.block_on(raw_queue::<B>(50_000, job_frames, raw_job)));
    }
    for rep in 0..reps {
        for row in &mut rows {
            for part in parts(row.scenario, &backends, rep) {
                let is_baseline = !matches!(part, Part::Measured(_));
                if only.is_some_and(|only| only != is_baseline) {
                    continue;
                }
                let run = runtime.block_on(run_part(row.scenario, part, row.n));
                let (backend, label) = match part {
                    Part::Measured(which) => (which.name(), row.scenario.sides.0),
                    Part::Baseline(which) => {
                        (which.name(), row.scenario.sides.1.label().unwrap_or("-"))
                    }
                    Part::Shared => ("-", row.scenario.sides.1.label().unwrap_or("-")),
                };
                println!(
                    "run {}/{reps} {backend:7} {:16} {:16} {:>9}/s {:7.2} CPU µs/msg {:6.1} allocs/msg {:6.2} switches/msg{}{}",
                    rep + 1,
                    row.scenario.name,
                    label,
                    rate(run.rate),
                    run.cpu_us,
                    run.allocs,
                    run.switches,
                    run.latencies.map_or(String::new(), |(p50, p99)| format!(
                        " p50 {} p99 {}",
                        micros(p50),
                        micros(p99)
                    )),
                    run.fields
                        .iter()
                        .map(|(name, value)| format!("; {name} {value:.1}"))
                        .collect::<String>(),
                );
                match part {
                    Part::Measured(which) => row.runs[at(&backends, which)].0.push(run),
                    Part::Baseline(which) => row.runs[at(&backends, which)].1.push(run),
                    Part::Shared => {
                        for (_, baseline) in &mut row.runs {
                            baseline.push(run.clone());
                        }
                    }
                }
            }
        }
    }
    for (at, &which) in backends.iter().enumerate() {
        print_table(which, at, &rows, reps, workers);
    }
    print_cross_table(&backends, &rows, reps, workers);
}

/// Where `which` stands in `backends`.
fn at(backends: &[Which], which: Which) -> usize {
    backends
        .iter()
        .position(|&other| other == which)
        .expect("a backend that runs")
}
