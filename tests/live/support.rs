//! What the live tests share: a recording handler, a peer that feeds a queue, and the helpers of
//! every test binary (`tests/common/`): log capture, waiting on a condition with a deadline, a
//! test in a process of its own.

use std::{
    marker::PhantomData,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use ruststream::{Broker, BytesMut, ConnectedBroker, OutgoingMessage, Publisher};
use ruststream_zmq::prelude::*;
use ruststream_zmq::{ConnectedZmqQueue, QueueKind, ZmqBroker, ZmqEndpoint, ZmqPublisher};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

/// What a test asks the handler to do with one payment.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum Plan {
    Ack,
    Drop,
    /// `retry()` while fewer than `times` retries came before, then ack.
    Retry {
        times: u32,
    },
    /// `retry_after(ms)` while fewer than `times` retries came before, then ack.
    RetryAfter {
        ms: u64,
        times: u32,
    },
}

impl Plan {
    /// The outcome for a delivery that `retry_count` retries came before.
    pub fn outcome(&self, retry_count: Option<u32>) -> HandlerOutcome {
        let before = retry_count.unwrap_or(0);
        match *self {
            Plan::Ack => HandlerOutcome::ack(),
            Plan::Drop => HandlerOutcome::drop(),
            Plan::Retry { times } if before < times => HandlerOutcome::retry(),
            Plan::RetryAfter { ms, times } if before < times => {
                HandlerOutcome::retry_after(Duration::from_millis(ms))
            }
            _ => HandlerOutcome::ack(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, ruststream::Outgoing)]
pub struct Payment {
    pub id: u64,
    pub plan: Plan,
}

/// The retry count header as the handler reads it.
#[derive(Debug, Deserialize)]
pub struct Attempt {
    #[serde(rename = "x-ruststream-retry-count")]
    pub retry_count: Option<u32>,
}

/// One call of a handler, as it saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub handler: &'static str,
    pub id: u64,
    pub retry_count: Option<u32>,
    pub at: Instant,
}

/// Where handlers report their calls; a field of the app state.
#[derive(Clone)]
pub struct Calls(pub mpsc::UnboundedSender<Seen>);

impl Calls {
    /// Records the call as `handler`'s and settles it by the payment's plan.
    pub fn settle(
        &self,
        handler: &'static str,
        payment: &Payment,
        retry_count: Option<u32>,
    ) -> HandlerOutcome {
        self.record(handler, payment.id, retry_count);
        payment.plan.outcome(retry_count)
    }

    pub fn record(&self, handler: &'static str, id: u64, retry_count: Option<u32>) {
        let _ = self.0.send(Seen {
            handler,
            id,
            retry_count,
            at: Instant::now(),
        });
    }
}

/// The state of the services these tests start: where their handlers report.
#[derive(FromRef)]
pub struct AppState {
    pub calls: Calls,
}

/// The handler most tests mount: records the call as `work`, settles by the payment's plan.
#[subscriber]
pub async fn work(
    payment: &Payment,
    Headers(attempt): Headers<Attempt>,
    State(calls): State<Calls>,
) -> HandlerOutcome {
    calls.settle("work", payment, attempt.retry_count)
}

/// The calls a test waits on.
pub struct Journal {
    rx: mpsc::UnboundedReceiver<Seen>,
    pub seen: Vec<Seen>,
}

pub fn journal() -> (Calls, Journal) {
    let (tx, rx) = mpsc::unbounded_channel();
    (
        Calls(tx),
        Journal {
            rx,
            seen: Vec::new(),
        },
    )
}

impl Journal {
    /// Waits until `done` holds over every call seen so far; panics naming `what` at the deadline.
    pub async fn until(&mut self, what: &str, done: impl Fn(&[Seen]) -> bool) -> &[Seen] {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        while !done(&self.seen) {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(seen)) => self.seen.push(seen),
                Ok(None) => panic!(
                    "the handlers went away before {what}; seen: {:?}",
                    self.seen
                ),
                Err(_) => panic!("timed out waiting for {what}; seen: {:?}", self.seen),
            }
        }
        &self.seen
    }

    /// Takes in every call reported so far, without waiting; answers all seen.
    pub fn arrived(&mut self) -> &[Seen] {
        while let Ok(seen) = self.rx.try_recv() {
            self.seen.push(seen);
        }
        &self.seen
    }

    /// The calls of `handler` for payment `id`.
    pub fn of(&self, handler: &str, id: u64) -> Vec<&Seen> {
        self.seen
            .iter()
            .filter(|s| s.handler == handler && s.id == id)
            .collect()
    }
}

#[path = "../common/child.rs"]
pub mod child;
#[path = "../common/logs.rs"]
pub mod logs;
#[path = "../common/poll.rs"]
pub mod poll;
#[path = "../common/ports.rs"]
mod ports;
#[path = "../common/stderr.rs"]
pub mod stderr;

pub use child::test_name;
/// A loopback port nobody listens on right now, for endpoints a registration must name up front.
pub use ports::free_port;

/// A peer that feeds a queue: a publisher of a broker of its own, on backend `B` (each backend's
/// topics name theirs `Feeder`).
pub struct Feeder<B> {
    pub publisher: ZmqPublisher,
    shutdown: Box<dyn FnOnce() -> futures::future::BoxFuture<'static, ()> + Send>,
    backend: PhantomData<fn() -> B>,
}

impl<B: ruststream_zmq::Backend> Feeder<B> {
    /// A PUSH dialing a bound subscription.
    pub async fn dial(address: &str) -> Self {
        Self::of(
            ZmqBroker::<QueueKind, _, B>::new(ZmqEndpoint::dial(address))
                .connect()
                .await
                .unwrap(),
        )
    }

    /// A PUSH that binds `address` for a dialing subscription; answers it and the address it
    /// listens on.
    pub async fn bind(address: &str) -> (Self, String) {
        let connected = ZmqBroker::<QueueKind, _, B>::new(ZmqEndpoint::bind(address))
            .connect()
            .await
            .unwrap();
        let bound = connected.bind_publisher().await.unwrap();
        (Self::of(connected), bound)
    }

    fn of<S: ruststream_zmq::Side>(connected: ConnectedZmqQueue<S>) -> Self {
        Self {
            publisher: connected.publisher(),
            shutdown: Box::new(move || {
                Box::pin(async move { drop(connected.shutdown().await.unwrap()) })
            }),
            backend: PhantomData,
        }
    }

    pub async fn close(self) {
        (self.shutdown)().await;
    }

    /// Sends the payment `id`, which its handler settles per `plan`, under `name`.
    pub async fn send(&self, name: &str, id: u64, plan: Plan) {
        let body = BytesMut::from(
            serde_json::to_vec(&Payment { id, plan })
                .unwrap()
                .as_slice(),
        );
        self.publisher
            .publish(OutgoingMessage::produced(name, body), None)
            .await
            .unwrap();
    }
}

/// Every log line of the process (INFO and up), from the first call on, for the tests that
/// assert a warning: each finds its own lines by a name no other test logs.
pub fn logs() -> &'static logs::Captured {
    logs::process_wide("info")
}

/// Starts capturing logs; call first in a test that asserts on them.
pub fn capture_logs() {
    let _ = logs();
}

/// Every log line written so far that contains each of `parts`.
pub fn log_lines(parts: &[&str]) -> Vec<String> {
    logs().lines(parts)
}

/// Waits until a log line contains every one of `parts`; answers the first such line.
pub async fn logged(parts: &[&str]) -> String {
    let mut lines = logs().logged(parts, Duration::from_secs(15)).await;
    lines.remove(0)
}

/// Waits until `monitor.sent()` reaches `expected`, failing after fifteen seconds: a message can
/// be handled in this process before the publisher that sent it has counted it. A test holds
/// the count to a number only after shutting the service down, which waits for every copy still
/// due, so a late extra publish cannot slip past.
pub async fn sent_reaches(monitor: &ruststream_zmq::ZmqMonitor, expected: u64) {
    eventually(
        Duration::from_secs(15),
        &format!("the publisher counting {expected} sent"),
        || monitor.sent() >= expected,
    )
    .await;
}

/// Polls `done` until it holds, or fails naming `what` once `limit` has passed.
pub async fn eventually(limit: Duration, what: &str, done: impl Fn() -> bool) {
    poll::until(limit, what, done).await;
}

/// The example `name`, next to this test's executable (`target/<profile>/examples/<name>`), built
/// by the same cargo with this test's profile and features: `cargo test --all-targets` builds
/// the examples only as test harnesses (`examples/<name>-<hash>`), and `cargo test --test live`
/// not at all. The library is built already, so this compiles the example alone.
pub fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test runs from target/<profile>/deps");
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev",
        Some(other) => other,
        None => panic!("no profile directory above {}", exe.display()),
    };
    let target_dir = profile_dir.parent().expect("the target directory");
    // The example is built with exactly the test's features, the backends among them, so the
    // runs of every backend share one binary and its build.
    let mut features = Vec::new();
    if cfg!(feature = "testing") {
        features.push("testing");
    }
    if cfg!(feature = "asyncapi") {
        features.push("asyncapi");
    }
    if cfg!(feature = "metrics") {
        features.push("metrics");
    }
    if cfg!(feature = "zeromq") {
        features.push("zeromq");
    }
    if cfg!(feature = "libzmq") {
        features.push("libzmq");
    }
    if cfg!(feature = "omq") {
        features.push("omq");
    }
    let out = Command::new(env!("CARGO"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "build",
            "--quiet",
            "--example",
            name,
            "--no-default-features",
            "--profile",
            profile,
        ])
        .arg("--target-dir")
        .arg(target_dir)
        .args(["--features", &features.join(",")])
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo could not build the {name} example: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let binary = profile_dir.join("examples").join(name);
    assert!(binary.exists(), "no {} after the build", binary.display());
    binary
}
