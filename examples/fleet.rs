//! A pipeline spread over hosts: a ventilator, workers, a sink, and the tally of what happened.
//!
//! One binary, one role per process, chosen by the first argument. `scripts/fleet.sh` runs each
//! role on its own host (a Linux network namespace) and kills, cuts and restarts some of them;
//! this file is also usable by hand on real machines:
//!
//! ```text
//! fleet sink   --bind tcp://0.0.0.0:5570 --name s1 > sink.jsonl
//! fleet worker --name w1 --jobs tcp://VENT:5550 --progress tcp://VENT:5551 \
//!              --results tcp://SINK:5570 > w1.jsonl
//! fleet vent   --jobs-bind tcp://0.0.0.0:5550 --progress-bind tcp://0.0.0.0:5551 \
//!              --run r1 --jobs 1000 --rate 200 > vent.jsonl
//! fleet await  --dir . --run r1 --workers w1     # the run has gone through; stop them
//! fleet report --dir . --faults r1 --live w1     # tallies the JSON lines, prints the report
//! ```
//!
//! Every role takes `--backend zeromq`, `--backend libzmq` or `--backend omq`: the socket backend
//! its brokers run on, one the binary was built with (`zeromq` by default when it was; `fleet
//! backend` prints the one a role would take). On libzmq and omq every connection speaks CURVE
//! and sends heartbeats (see `Net`): each of `vent`, `worker` and `sink` then takes `--key FILE`,
//! the certificate with its own secret key (and no other host's), and the others' public keys
//! from the environment.
//!
//! - The **ventilator** binds a queue (PUSH) and publishes numbered jobs to it, and binds a
//!   fan-out (PUB) on which it announces its progress.
//! - A **worker** has a dialing queue subscription on the jobs, and does work that takes a few
//!   milliseconds per job (a call to a slow service, say). It publishes each result to the sink
//!   through a queue it dials. A worker started with `--fail-every N` fails every N-th job of a
//!   marked run on its first attempt: the copy comes back through its own retry queue, a queue
//!   it binds on its loopback. A result the sink could not take is retried the same way. A
//!   dialing fan-out subscription hears the ventilator's progress.
//! - The **sink** binds a queue and collects the results.
//!
//! Each process writes one JSON line per thing it did to stdout (`ev`: `sent`, `handled`,
//! `result`, `progress`, ...), stamped with the wall clock in milliseconds; the script keeps one
//! file per process, and `report` tallies them: sent, handled per worker, collected, lost by
//! cause, duplicated, the throughput of each scale-out phase and the reconnection times.
//!
//! `await` waits (with a deadline) until a run has settled: each named worker has had a probe
//! job (one the ventilator sends after its last job) collected by the sink, so every job sent
//! to it before has been handled or lost, and every retry copy has come back.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    convert::Infallible,
    io::Write,
    path::{Path, PathBuf},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use ruststream::{Broker, ConnectedBroker};
use ruststream_zmq::prelude::*;
use ruststream_zmq::{
    Attempt, Backend, FanoutKind, Mechanism, Pattern, QueueKind, ZmqBroker, ZmqPublisher,
};
use serde::{Deserialize, Serialize};
use tokio::signal::unix::{SignalKind, signal};

/// One job of the ventilator.
#[derive(Debug, Clone, Serialize, Deserialize, Outgoing)]
struct Job {
    id: u64,
    /// The run it belongs to (`scale1`, `faults`, ...).
    run: String,
    /// Sent after the run's last job, to learn that everything before it went through.
    probe: bool,
    /// A run whose jobs a worker started with `--fail-every` may fail on their first attempt.
    failures: bool,
}

/// What a worker sends the sink for a job done.
#[derive(Debug, Clone, Serialize, Deserialize, Outgoing)]
struct JobResult {
    id: u64,
    run: String,
    probe: bool,
    worker: String,
    attempt: u32,
}

/// The ventilator's announcement to every worker.
#[derive(Debug, Clone, Serialize, Deserialize, Outgoing)]
struct Progress {
    seq: u64,
    run: String,
    sent: u64,
    done: bool,
}

/// One line of a process's record. Every role writes the fields it knows; `report` reads them
/// all back.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Line {
    ev: String,
    /// Wall clock, milliseconds since the epoch: the hosts share one clock.
    t: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    run: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    worker: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sink: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    attempt: Option<u32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    probe: bool,
    /// `handled`: `done` (result published), `failed` (retry copy scheduled), `unsent` (the
    /// result could not be published: retry copy scheduled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    outcome: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    detail: Option<String>,
    /// `peers`: which broker's monitor (`jobs`, `progress`, `results`) and what it counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    broker: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lost: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    connected: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reconnects: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refused: Option<u64>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Writes one record line to stdout at once (a process killed a moment later keeps it).
fn record(line: Line) {
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer(
        &mut out,
        &Line {
            t: now_ms(),
            ..line
        },
    );
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

fn ev(name: &str) -> Line {
    Line {
        ev: name.to_owned(),
        ..Line::default()
    }
}

/// `--name value` pairs after the role.
struct Args(HashMap<String, String>);

impl Args {
    fn parse(args: &[String]) -> Result<Self, String> {
        let mut map = HashMap::new();
        let mut rest = args.iter();
        while let Some(key) = rest.next() {
            let name = key
                .strip_prefix("--")
                .ok_or_else(|| format!("expected --option, got {key}"))?;
            let value = rest
                .next()
                .ok_or_else(|| format!("--{name} needs a value"))?;
            map.insert(name.to_owned(), value.clone());
        }
        Ok(Self(map))
    }

    fn text(&self, name: &str) -> Result<String, String> {
        self.0
            .get(name)
            .cloned()
            .ok_or_else(|| format!("--{name} is required"))
    }

    fn text_or(&self, name: &str, default: &str) -> String {
        self.0
            .get(name)
            .cloned()
            .unwrap_or_else(|| default.to_owned())
    }

    fn number(&self, name: &str, default: u64) -> Result<u64, String> {
        self.0.get(name).map_or(Ok(default), |v| {
            v.parse()
                .map_err(|_| format!("--{name}: not a number: {v}"))
        })
    }
}

type Failure = Box<dyn std::error::Error>;

/// Who this process is on the fleet: the certificate with its secret key (`--key`; libzmq and
/// omq only).
struct Me {
    #[cfg_attr(
        not(any(feature = "libzmq", feature = "omq")),
        expect(dead_code, reason = "only the libzmq and omq fleets speak CURVE")
    )]
    key: Option<PathBuf>,
}

impl Me {
    fn of(args: &Args) -> Self {
        Self {
            key: args.0.get("key").map(PathBuf::from),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Failure> {
    // Logs go to stderr; stdout is the record.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,ruststream::dispatch=error".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some((role, rest)) = argv.split_first() else {
        return Err("usage: fleet vent|worker|sink|await|report --option value ...".into());
    };
    let args = Args::parse(rest)?;
    let backend = Choice::of(&args)?;
    match role.as_str() {
        "vent" | "worker" | "sink" => match backend {
            #[cfg(feature = "zeromq")]
            Choice::Zeromq => on::<ruststream_zmq::zeromq::Zeromq>(role, &args).await,
            #[cfg(feature = "libzmq")]
            Choice::Libzmq => on::<ruststream_zmq::libzmq::Libzmq>(role, &args).await,
            #[cfg(feature = "omq")]
            Choice::Omq => on::<ruststream_zmq::omq::Omq>(role, &args).await,
        },
        "await" => settle(&args).await,
        "report" => report(&args, backend),
        // The socket backend a role would run on, for the script.
        "backend" => {
            println!("{}", backend.name());
            Ok(())
        }
        other => {
            Err(format!("no role {other}: vent, worker, sink, await, report or backend").into())
        }
    }
}

/// Runs the role `role`, one that opens sockets, on backend `B`.
async fn on<B: Net>(role: &str, args: &Args) -> Result<(), Failure> {
    match role {
        "vent" => vent::<B>(args).await,
        "worker" => worker::<B>(args).await,
        _ => sink::<B>(args).await,
    }
}

/// The socket backend `--backend` names, among those this binary was built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Choice {
    #[cfg(feature = "zeromq")]
    Zeromq,
    #[cfg(feature = "libzmq")]
    Libzmq,
    #[cfg(feature = "omq")]
    Omq,
}

impl Choice {
    /// `--backend`, or the crate root's backend without it.
    fn of(args: &Args) -> Result<Self, Failure> {
        let default = if cfg!(feature = "zeromq") {
            "zeromq"
        } else if cfg!(feature = "libzmq") {
            "libzmq"
        } else {
            "omq"
        };
        let name = args.text_or("backend", default);
        match name.as_str() {
            #[cfg(feature = "zeromq")]
            "zeromq" => return Ok(Self::Zeromq),
            #[cfg(feature = "libzmq")]
            "libzmq" => return Ok(Self::Libzmq),
            #[cfg(feature = "omq")]
            "omq" => return Ok(Self::Omq),
            _ => {}
        }
        Err(if ["zeromq", "libzmq", "omq"].contains(&name.as_str()) {
            format!("--backend {name}: this binary was built without the `{name}` feature")
        } else {
            format!("--backend {name}: zeromq, libzmq or omq")
        }
        .into())
    }

    fn name(self) -> &'static str {
        match self {
            #[cfg(feature = "zeromq")]
            Self::Zeromq => "zeromq",
            #[cfg(feature = "libzmq")]
            Self::Libzmq => "libzmq",
            #[cfg(feature = "omq")]
            Self::Omq => "omq",
        }
    }

    /// Whether the fleet speaks CURVE and sends heartbeats on this backend (see `Net`).
    fn is_secured(self) -> bool {
        self.name() != "zeromq"
    }
}

// ---------------------------------------------------------------------------------------------
// The sockets: plain on the `zeromq` client; CURVE and quick heartbeats on libzmq and omq

/// The fleet's heartbeat on libzmq and omq: a PING every 500 ms, a peer silent for 2 s cut.
const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(500);
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(2);

/// The fleet's brokers on one backend: what the roles open, whichever it is.
trait Net: Backend + Sized {
    /// What every connection of the fleet speaks on this backend.
    type Mechanism: Mechanism;

    /// A server's endpoint (`vent`, `sink`): this process, `me`, listens there.
    fn serve(address: String, me: &Me) -> Result<ZmqEndpoint<Bound, Self::Mechanism>, Failure>;

    /// A worker's endpoint on the server named `server` (`vent`, `sink`).
    fn dial(
        address: String,
        me: &Me,
        server: &str,
    ) -> Result<ZmqEndpoint<Dialing, Self::Mechanism>, Failure>;

    /// A worker's retry queue, bound on its loopback: only the worker's own copies go there.
    fn retry_queue(address: String) -> Result<ZmqEndpoint<Bound, Self::Mechanism>, Failure>;

    /// A broker of pattern `P` over `endpoint`, tuned for the fleet.
    fn broker<P: Pattern, S: Side>(
        endpoint: ZmqEndpoint<S, Self::Mechanism>,
    ) -> ZmqBroker<P, S, Self>;

    /// A worker's jobs queue.
    fn jobs_queue(
        endpoint: ZmqEndpoint<Dialing, Self::Mechanism>,
    ) -> ZmqBroker<QueueKind, Dialing, Self> {
        Self::broker(endpoint)
    }
}

/// The `zeromq` client: no CURVE, no heartbeats.
#[cfg(feature = "zeromq")]
impl Net for ruststream_zmq::zeromq::Zeromq {
    type Mechanism = ruststream_zmq::Plain;

    fn serve(address: String, _me: &Me) -> Result<ZmqEndpoint<Bound>, Failure> {
        Ok(ZmqEndpoint::bind(address))
    }

    fn dial(address: String, _me: &Me, _server: &str) -> Result<ZmqEndpoint<Dialing>, Failure> {
        Ok(ZmqEndpoint::dial(address))
    }

    fn retry_queue(address: String) -> Result<ZmqEndpoint<Bound>, Failure> {
        Ok(ZmqEndpoint::bind(address))
    }

    fn broker<P: Pattern, S: Side>(endpoint: ZmqEndpoint<S>) -> ZmqBroker<P, S, Self> {
        ZmqBroker::new(endpoint)
    }
}

/// On libzmq and omq every connection of the fleet speaks CURVE, and every broker sends
/// heartbeats often, so that a peer gone silent is cut within [`HEARTBEAT_TIMEOUT`]. Both take the
/// same settings (the crate's shared socket settings), so one impl serves both: written once
/// here, made for each backend the binary was built with.
///
/// Each process holds one secret key, its own: the certificate `--key` names (`scripts/fleet.sh`
/// writes one per host with pyzmq, readable by its owner only, and gives each process its own
/// and no other). The public keys come from environment variables (Z85 text): the ventilator's
/// and the sink's (`FLEET_VENT_PUBLIC`, `FLEET_SINK_PUBLIC`), and the workers' that the servers
/// admit (`FLEET_CLIENTS`, comma separated).
#[cfg(any(feature = "libzmq", feature = "omq"))]
macro_rules! secured_net {
    ($backend:ty) => {
        impl Net for $backend {
            type Mechanism = ruststream_zmq::Curve;

            fn serve(
                address: String,
                me: &Me,
            ) -> Result<ZmqEndpoint<Bound, Self::Mechanism>, Failure> {
                Ok(ZmqEndpoint::bind(address)
                    .curve(keys::own(me)?)
                    .allow_clients(keys::clients()?))
            }

            fn dial(
                address: String,
                me: &Me,
                server: &str,
            ) -> Result<ZmqEndpoint<Dialing, Self::Mechanism>, Failure> {
                Ok(ZmqEndpoint::dial(address).curve(keys::own(me)?, keys::public(server)?))
            }

            /// The retry queue serves with a key pair it makes for itself and lists no client:
            /// the worker's jobs broker sends its copies there with the process's own key pair,
            /// which every CURVE listener of the process admits, and nothing else gets in. No
            /// secret of another host is needed.
            fn retry_queue(
                address: String,
            ) -> Result<ZmqEndpoint<Bound, Self::Mechanism>, Failure> {
                Ok(ZmqEndpoint::bind(address)
                    .curve(ruststream_zmq::CurveKeyPair::generate()?)
                    .allow_clients([]))
            }

            /// Heartbeats every [`HEARTBEAT_INTERVAL`], a silent peer cut after
            /// [`HEARTBEAT_TIMEOUT`].
            fn broker<P: Pattern, S: Side>(
                endpoint: ZmqEndpoint<S, Self::Mechanism>,
            ) -> ZmqBroker<P, S, Self> {
                ZmqBroker::new(endpoint).heartbeat(HEARTBEAT_INTERVAL, HEARTBEAT_TIMEOUT)
            }

            /// A worker's jobs queue holds 100 jobs per connection, not the default 1,000. A
            /// socket stops reading a connection whose queue is full, its peer's heartbeats too
            /// (libzmq reads on once half of it is taken): a worker with a backlog (the
            /// scale-out sends as fast as it can) would go [`HEARTBEAT_TIMEOUT`] without hearing
            /// the ventilator, and cut its own connection, losing what was queued on it. Half of
            /// 100 jobs takes the worker about 0.3 s.
            fn jobs_queue(
                endpoint: ZmqEndpoint<Dialing, Self::Mechanism>,
            ) -> ZmqBroker<QueueKind, Dialing, Self> {
                Self::broker(endpoint).peer_queue(100)
            }
        }
    };
}

#[cfg(feature = "libzmq")]
secured_net!(ruststream_zmq::libzmq::Libzmq);
#[cfg(feature = "omq")]
secured_net!(ruststream_zmq::omq::Omq);

/// The CURVE keys of the libzmq and omq fleets: this process's own from its certificate, the
/// others' public keys from the environment.
#[cfg(any(feature = "libzmq", feature = "omq"))]
mod keys {
    use ruststream_zmq::{CurveKeyPair, CurvePublicKey};

    use super::{Failure, Me};

    fn var(name: &str) -> String {
        format!("FLEET_{}", name.to_uppercase())
    }

    /// This process's key pair, from the secret certificate `--key` names.
    pub fn own(me: &Me) -> Result<CurveKeyPair, Failure> {
        let path = me.key.as_ref().ok_or(
            "--key FILE is required on libzmq and omq: the certificate with this process's secret key",
        )?;
        Ok(CurveKeyPair::from_file(path)?)
    }

    pub fn public(who: &str) -> Result<CurvePublicKey, Failure> {
        let name = var(&format!("{who}_public"));
        let text = std::env::var(&name).map_err(|_| format!("{name} is not set"))?;
        Ok(CurvePublicKey::from_z85(&text)?)
    }

    pub fn clients() -> Result<Vec<CurvePublicKey>, Failure> {
        let text = std::env::var("FLEET_CLIENTS").map_err(|_| "FLEET_CLIENTS is not set")?;
        Ok(text
            .split(',')
            .filter(|k| !k.is_empty())
            .map(CurvePublicKey::from_z85)
            .collect::<Result<_, _>>()?)
    }
}

/// Records each change of a broker's monitor (`peers` lines), polled every 20 ms, so the
/// report can tell when a lost peer was noticed and when it came back.
fn watch(monitor: ZmqMonitor, broker: &str, run: Option<String>, sink: Option<String>) {
    let broker = broker.to_owned();
    tokio::spawn(async move {
        let mut last = None;
        loop {
            let now = (
                monitor.peers_lost(),
                monitor.peers_connected(),
                monitor.reconnects(),
                monitor.peers_refused(),
            );
            if last != Some(now) {
                last = Some(now);
                record(Line {
                    run: run.clone(),
                    sink: sink.clone(),
                    broker: Some(broker.clone()),
                    lost: Some(now.0),
                    connected: Some(now.1),
                    reconnects: Some(now.2),
                    refused: Some(now.3),
                    ..ev("peers")
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

// ---------------------------------------------------------------------------------------------
// The ventilator

async fn vent<B: Net>(args: &Args) -> Result<(), Failure> {
    let jobs_at = args.text("jobs-bind")?;
    let progress_at = args.text("progress-bind")?;
    let count = args.number("jobs", 100)?;
    let first = args.number("first-id", 1)?;
    let rate = args.number("rate", 0)?;
    // One run after the other, each of `count` jobs, on the same sockets.
    let runs: Vec<String> = args
        .text_or("run", "run")
        .split(',')
        .map(str::to_owned)
        .collect();
    let failures = args.text_or("failures", "no") == "yes";
    let go = args.text_or("go", "");
    let me = Me::of(args);

    let jobs = B::broker::<QueueKind, _>(B::serve(jobs_at, &me)?)
        .connect()
        .await?;
    let bound = jobs.bind_publisher().await?;
    let progress = B::broker::<FanoutKind, _>(B::serve(progress_at, &me)?)
        .connect()
        .await?;
    let progress_bound = progress.bind_publisher().await?;
    let label = Some(runs.join(","));
    watch(jobs.monitor(), "jobs", label.clone(), None);
    watch(progress.monitor(), "progress", label, None);
    record(Line {
        detail: Some(format!("{bound} {progress_bound}")),
        ..ev("vent_bound")
    });
    let mut terminate = signal(SignalKind::terminate())?;
    let publisher = jobs.publisher();
    let announcer = progress.publisher();
    let mut seq = 0;
    let mut next = first;
    for run in &runs {
        // The script says when the workers of this run are connected: `<go><run>` exists.
        if !go.is_empty() {
            let file = PathBuf::from(format!("{go}{run}"));
            while !file.exists() {
                tokio::select! {
                    _ = terminate.recv() => return Ok(()),
                    () = tokio::time::sleep(Duration::from_millis(10)) => {}
                }
            }
        }
        let announce = async |seq: u64, sent: u64, done: bool| {
            let note = Progress {
                seq,
                run: run.clone(),
                sent,
                done,
            };
            // A PUB drops what nobody subscribed to: an announcement is worth what it carries.
            let delivered = announcer
                .message(&note)
                .to(format!("progress.{run}"))
                .publish()
                .await;
            record(Line {
                seq: Some(seq),
                run: Some(run.clone()),
                detail: delivered.err().map(|e| e.to_string()),
                ..ev("announced")
            });
        };
        let start = tokio::time::Instant::now();
        let mut announced = start;
        for n in 0..count {
            // Paced at `rate` jobs a second; as fast as it goes with none.
            if let Some(at) = (n * 1_000_000).checked_div(rate) {
                tokio::time::sleep_until(start + Duration::from_micros(at)).await;
            }
            let job = Job {
                id: next,
                run: run.clone(),
                probe: false,
                failures,
            };
            next += 1;
            send_job(&publisher, &job).await;
            if announced.elapsed() >= Duration::from_millis(500) {
                seq += 1;
                announced = tokio::time::Instant::now();
                announce(seq, n + 1, false).await;
            }
        }
        seq += 1;
        announce(seq, count, true).await;
    }
    // Probes until told to stop: a probe collected from a worker says everything sent to it
    // before has been handled (each connection is in order, each worker handles one at a time).
    let last = runs.last().cloned().unwrap_or_default();
    loop {
        tokio::select! {
            _ = terminate.recv() => break,
            () = tokio::time::sleep(Duration::from_millis(20)) => {
                let job = Job { id: next, run: last.clone(), probe: true, failures: false };
                send_job(&publisher, &job).await;
                next += 1;
            }
        }
    }
    jobs.shutdown().await?;
    progress.shutdown().await?;
    record(ev("vent_stopped"));
    Ok(())
}

/// Publishes a job; a failed send is recorded and tried again (it was not handed over).
async fn send_job(publisher: &ZmqPublisher, job: &Job) {
    for _ in 0..3 {
        match publisher.message(job).to("jobs").publish().await {
            Ok(_) => {
                record(Line {
                    id: Some(job.id),
                    run: Some(job.run.clone()),
                    probe: job.probe,
                    ..ev("sent")
                });
                return;
            }
            Err(err) => record(Line {
                id: Some(job.id),
                run: Some(job.run.clone()),
                detail: Some(err.to_string()),
                ..ev("send_failed")
            }),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A worker

#[derive(Clone)]
struct Worker {
    name: String,
    results: ZmqPublisher,
    work: Duration,
    /// Every n-th job of a run marked `failures` fails on its first attempt (0: none).
    fail_every: u64,
    retry_delay: Duration,
}

#[derive(FromRef)]
struct WorkerState {
    worker: Worker,
}

impl Worker {
    async fn handle(&self, job: &Job, attempt: u32) -> HandlerOutcome {
        let line = |outcome: &str| Line {
            id: Some(job.id),
            run: Some(job.run.clone()),
            worker: Some(self.name.clone()),
            attempt: Some(attempt),
            probe: job.probe,
            outcome: Some(outcome.to_owned()),
            ..ev("handled")
        };
        if job.failures
            && self.fail_every > 0
            && job.id.is_multiple_of(self.fail_every)
            && attempt == 1
        {
            // The slow service said no: the job comes back through this worker's retry queue.
            record(line("failed"));
            return HandlerOutcome::retry_after(self.retry_delay);
        }
        tokio::time::sleep(self.work).await;
        let result = JobResult {
            id: job.id,
            run: job.run.clone(),
            probe: job.probe,
            worker: self.name.clone(),
            attempt,
        };
        match self.results.message(&result).to("results").publish().await {
            Ok(_) => {
                record(line("done"));
                HandlerOutcome::ack()
            }
            Err(err) => {
                // The sink did not take it within the send timeout: try the job again later.
                record(Line {
                    detail: Some(err.to_string()),
                    ..line("unsent")
                });
                HandlerOutcome::retry_after(self.retry_delay)
            }
        }
    }
}

#[subscriber(QueueSubscription::<Dialing>)]
async fn work(
    job: &Job,
    Ctx(attempt): Ctx<Attempt>,
    State(worker): State<Worker>,
) -> HandlerOutcome {
    worker.handle(job, attempt).await
}

/// The retry queue's handler: the copies this worker sent itself.
#[subscriber(QueueSubscription::<Bound>)]
async fn work_again(
    job: &Job,
    Ctx(attempt): Ctx<Attempt>,
    State(worker): State<Worker>,
) -> HandlerOutcome {
    worker.handle(job, attempt).await
}

#[derive(Clone)]
struct Listener {
    name: String,
}

#[derive(FromRef)]
struct ListenerState {
    listener: Listener,
}

#[subscriber(FanoutSubscription::<Dialing>)]
async fn hear(progress: &Progress, State(listener): State<Listener>) -> HandlerOutcome {
    record(Line {
        seq: Some(progress.seq),
        run: Some(progress.run.clone()),
        worker: Some(listener.name.clone()),
        detail: Some(format!("sent {} done {}", progress.sent, progress.done)),
        ..ev("progress")
    });
    HandlerOutcome::ack()
}

async fn worker<B: Net>(args: &Args) -> Result<(), Failure> {
    let name = args.text("name")?;
    let jobs_at = args.text("jobs")?;
    let progress_at = args.text("progress")?;
    let results_at = args.text("results")?;
    let retry_port = args.number("retry-port", 5560)?;
    let me = Me::of(args);
    // The results queue's broker lives as long as the publisher taken from it.
    let results = B::broker::<QueueKind, _>(B::dial(results_at, &me, "sink")?)
        .connect()
        .await?;
    let state = Worker {
        name: name.clone(),
        work: Duration::from_millis(args.number("work-ms", 5)?),
        fail_every: args.number("fail-every", 0)?,
        retry_delay: Duration::from_millis(args.number("retry-ms", 100)?),
        results: results.publisher(),
    };
    let retry_at = format!("tcp://127.0.0.1:{retry_port}");
    let listener = Listener { name: name.clone() };
    let jobs = RustStream::new(AppInfo::new("fleet-worker", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(WorkerState { worker: state }))
        .with_broker(B::jobs_queue(B::dial(jobs_at, &me, "vent")?), |b| {
            b.include(
                work.name("jobs")
                    .out_retry(format!("jobs.retry@{retry_at}")),
            );
        })
        .with_broker(
            B::broker::<QueueKind, _>(B::retry_queue(retry_at.clone())?),
            |b| {
                b.include(work_again.name("jobs.retry"));
            },
        )
        .start()
        .await?;
    let hearing = RustStream::new(AppInfo::new("fleet-progress", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(ListenerState { listener }))
        .with_broker(
            B::broker::<FanoutKind, _>(B::dial(progress_at, &me, "vent")?),
            |b| {
                // Acked always: the destination is there because a dialing registration must name
                // one, and under CURVE one this process's sockets can reach (its retry queue's).
                b.include(
                    hear.name("progress")
                        .out_retry(format!("progress.retry@{retry_at}")),
                );
            },
        )
        .start()
        .await?;
    record(Line {
        worker: Some(name.clone()),
        ..ev("worker_started")
    });
    signal(SignalKind::terminate())?.recv().await;
    jobs.shutdown().await?;
    hearing.shutdown().await?;
    results.shutdown().await?;
    record(Line {
        worker: Some(name),
        ..ev("worker_stopped")
    });
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The sink

#[derive(Clone)]
struct Sink {
    name: String,
}

#[derive(FromRef)]
struct SinkState {
    sink: Sink,
}

#[subscriber(QueueSubscription::<Bound>)]
async fn collect(result: &JobResult, State(sink): State<Sink>) -> HandlerOutcome {
    record(Line {
        id: Some(result.id),
        run: Some(result.run.clone()),
        worker: Some(result.worker.clone()),
        attempt: Some(result.attempt),
        probe: result.probe,
        sink: Some(sink.name.clone()),
        ..ev("result")
    });
    HandlerOutcome::ack()
}

async fn sink<B: Net>(args: &Args) -> Result<(), Failure> {
    let bind = args.text("bind")?;
    let sink = Sink {
        name: args.text_or("name", "sink"),
    };
    let name = sink.name.clone();
    let results = B::broker::<QueueKind, _>(B::serve(bind, &Me::of(args))?);
    watch(results.monitor(), "results", None, Some(name.clone()));
    let running = RustStream::new(AppInfo::new("fleet-sink", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(SinkState { sink }))
        .with_broker(results, |b| {
            b.include(collect.name("results"));
        })
        .start()
        .await?;
    record(Line {
        sink: Some(name.clone()),
        ..ev("sink_started")
    });
    signal(SignalKind::terminate())?.recv().await;
    running.shutdown().await?;
    record(Line {
        sink: Some(name),
        ..ev("sink_stopped")
    });
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The tally: `await` and `report` read the records back

/// Every record line of every process in `dir` (`*.jsonl`), in no particular order; a line a
/// process is still writing is skipped.
fn read_records(dir: &Path) -> Result<Vec<Line>, Failure> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            let text = std::fs::read_to_string(&path)?;
            lines.extend(
                text.lines()
                    .filter_map(|line| serde_json::from_str::<Line>(line).ok()),
            );
        }
    }
    Ok(lines)
}

fn is(line: &Line, ev: &str, run: &str) -> bool {
    line.ev == ev && line.run.as_deref() == Some(run)
}

/// What is missing before `run` has settled; empty once it has.
fn unsettled(
    lines: &[Line],
    run: &str,
    workers: &[String],
    collected: Option<usize>,
) -> Vec<String> {
    let mut missing = Vec::new();
    if let Some(expected) = collected {
        let got: BTreeSet<u64> = lines
            .iter()
            .filter(|l| is(l, "result", run) && !l.probe)
            .filter_map(|l| l.id)
            .collect();
        if got.len() < expected {
            missing.push(format!("{} of {expected} results collected", got.len()));
        }
    }
    for worker in workers {
        let probed = lines
            .iter()
            .any(|l| is(l, "result", run) && l.probe && l.worker.as_ref() == Some(worker));
        if !probed {
            missing.push(format!("no probe result from {worker}"));
        }
    }
    // Every retry copy a live worker scheduled has come back to it.
    for l in lines.iter().filter(|l| is(l, "handled", run)) {
        let worker = l.worker.clone().unwrap_or_default();
        let copy = matches!(l.outcome.as_deref(), Some("failed" | "unsent"));
        if copy && workers.contains(&worker) {
            let back = lines.iter().any(|m| {
                is(m, "handled", run)
                    && m.id == l.id
                    && m.worker == l.worker
                    && m.attempt > l.attempt
            });
            if !back {
                missing.push(format!(
                    "the copy of job {} has not come back to {worker}",
                    l.id.unwrap_or(0)
                ));
            }
        }
    }
    missing
}

/// Waits until a run has settled (see the module's doc), or fails at the deadline.
async fn settle(args: &Args) -> Result<(), Failure> {
    let dir = PathBuf::from(args.text("dir")?);
    let run = args.text("run")?;
    let workers: Vec<String> = args
        .text_or("workers", "")
        .split(',')
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect();
    let collected = args
        .0
        .get("collected")
        .map(|n| n.parse::<usize>())
        .transpose()?;
    let limit = Duration::from_secs(args.number("timeout", 60)?);
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let missing = unsettled(&read_records(&dir)?, &run, &workers, collected);
        if missing.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            let shown: Vec<_> = missing.iter().take(5).cloned().collect();
            return Err(format!(
                "run {run} did not settle within {limit:?}: {} (and {} more)",
                shown.join("; "),
                missing.len().saturating_sub(5)
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The figures of one scale-out run.
#[derive(Debug, Serialize)]
struct ScaleRun {
    run: String,
    workers: usize,
    sent: usize,
    collected: usize,
    lost: usize,
    duplicated: usize,
    seconds: f64,
    jobs_per_second: f64,
    handled: BTreeMap<String, usize>,
}

/// The figures of the run with faults.
#[derive(Debug, Default, Serialize)]
struct FaultRun {
    sent: usize,
    collected: usize,
    lost: usize,
    lost_by_cause: BTreeMap<String, usize>,
    /// Each lost job, its cause and where it fell from its fault.
    lost_jobs: Vec<LostJob>,
    /// The margins the causes were given.
    margins: Option<Margins>,
    duplicated: usize,
    handled: BTreeMap<String, usize>,
    retry_copies_scheduled: usize,
    retry_copies_back: usize,
    retry_copies_lost_with_a_live_worker: usize,
    retry_copies_died_with_the_killed_worker: usize,
    progress_heard: BTreeMap<String, usize>,
    progress_announced: usize,
    /// Publishes of a job that failed at the ventilator (it tries each again).
    send_failures: usize,
    /// Jobs sent while the cut worker's link was down that it handled once it was back.
    waited_out_the_cut: usize,
    /// Milliseconds from the link's restore to the first result of that worker at the sink.
    reconnect_after_cut_ms: Option<u64>,
    /// Milliseconds from the sink's restart to the first result of each live worker there.
    reconnect_after_sink_restart_ms: BTreeMap<String, u64>,
    /// Milliseconds from the cut to the ventilator's jobs queue counting a peer lost, if it
    /// did while the cut lasted (heartbeats on libzmq and omq; the default backend does not
    /// notice).
    cut_noticed_by_ventilator_ms: Option<u64>,
    /// The same for the sink's queue.
    cut_noticed_by_sink_ms: Option<u64>,
    /// Milliseconds from the restore to the ventilator's jobs queue having as many peers as
    /// before the cut again, when it had noticed the cut.
    cut_worker_back_at_ventilator_ms: Option<u64>,
    /// The same for the sink's queue.
    cut_worker_back_at_sink_ms: Option<u64>,
    /// Connections the ventilator's and the sink's sockets refused at their handshake (CURVE).
    peers_refused: u64,
}

#[derive(Debug, Default, Serialize)]
struct Summary {
    /// The socket backend the fleet ran on: `zeromq`, `libzmq` or `omq`.
    backend: &'static str,
    scale: Vec<ScaleRun>,
    faults: Option<FaultRun>,
    expectations: Vec<(String, bool)>,
}

/// The time of the first timeline event named `ev` (the script writes them).
fn moment<'a>(lines: &'a [Line], ev: &str) -> Option<&'a Line> {
    lines.iter().find(|l| l.ev == ev)
}

fn scale_run(lines: &[Line], run: &str, workers: usize) -> ScaleRun {
    let sent: BTreeMap<u64, u64> = lines
        .iter()
        .filter(|l| is(l, "sent", run) && !l.probe)
        .filter_map(|l| Some((l.id?, l.t)))
        .collect();
    let results: Vec<&Line> = lines
        .iter()
        .filter(|l| is(l, "result", run) && !l.probe)
        .collect();
    let collected: BTreeSet<u64> = results.iter().filter_map(|l| l.id).collect();
    let mut handled: BTreeMap<String, usize> = BTreeMap::new();
    for l in lines
        .iter()
        .filter(|l| is(l, "handled", run) && !l.probe && l.outcome.as_deref() == Some("done"))
    {
        *handled
            .entry(l.worker.clone().unwrap_or_default())
            .or_default() += 1;
    }
    let first = sent.values().min().copied().unwrap_or(0);
    let last = results.iter().map(|l| l.t).max().unwrap_or(first);
    let seconds = (last.saturating_sub(first)) as f64 / 1000.0;
    ScaleRun {
        run: run.to_owned(),
        workers,
        sent: sent.len(),
        collected: collected.len(),
        lost: sent.keys().filter(|id| !collected.contains(id)).count(),
        duplicated: results.len() - collected.len(),
        seconds,
        jobs_per_second: if seconds > 0.0 {
            collected.len() as f64 / seconds
        } else {
            0.0
        },
        handled,
    }
}

/// How far before and after a fault a job may have been sent, or its result published, and
/// still be lost to that fault, in milliseconds.
#[derive(Debug, Clone, Copy, Serialize)]
struct Margin {
    before: u64,
    after: u64,
}

impl Margin {
    /// `before,after` in milliseconds.
    fn parse(text: &str) -> Result<Self, Failure> {
        let (before, after) = text
            .split_once(',')
            .ok_or_else(|| format!("a margin is `before,after` in ms, not {text:?}"))?;
        Ok(Self {
            before: before.trim().parse()?,
            after: after.trim().parse()?,
        })
    }

    /// Within `before` of `from` and `after` of `to`.
    fn holds(self, t: u64, from: u64, to: u64) -> bool {
        t + self.before >= from && t <= to + self.after
    }
}

/// The margins the report allows around each fault (`--kill-margin-ms`, `--cut-margin-ms`,
/// `--sink-margin-ms`), set from how close to each fault the losses of the measured runs fell.
#[derive(Debug, Clone, Copy, Serialize)]
struct Margins {
    kill: Margin,
    cut: Margin,
    sink: Margin,
}

/// The faults and what the records tell of each job: a loss is put down to a fault only if the
/// job was the faulty party's (the killed or the cut worker's) and fell within its margin.
struct Windows {
    margins: Margins,
    kill: Option<(String, u64)>,
    /// When the ventilator's jobs queue counted the killed worker's connection lost.
    kill_noticed: Option<u64>,
    cut: Option<(String, u64, u64)>,
    sink: Option<(u64, u64)>,
    /// When the ventilator counted the cut worker's connection lost, if it did during the cut.
    cut_noticed: Option<u64>,
    /// When each job of the run was sent.
    sent: BTreeMap<u64, u64>,
    /// The worker that recorded each job it handled (a retry copy goes back to the same one).
    handled_by: BTreeMap<u64, String>,
}

/// The margins the report allows by default, `before,after` each fault, from the measured runs:
/// before the kill and the cut, a small multiple of how early the earliest job or result lost
/// to them was sent (a job in a worker's buffers, a result on the wire); after the ventilator
/// dropped the killed worker or noticed the cut, after the restore and the sink's restart, none
/// was lost, and the margin only covers two processes' records of one moment.
const KILL_MARGIN_MS: &str = "150,50";
const CUT_MARGIN_MS: &str = "150,50";
const SINK_MARGIN_MS: &str = "50,0";

/// How much of the stream before a fault shows the queue's rotation over its workers.
const ROTATION_SPAN_MS: u64 = 1_000;

impl Windows {
    /// Sent to the killed worker (from the rotation) from shortly before its death until the
    /// ventilator dropped it.
    fn sent_to_killed(&self, id: u64, t: u64) -> bool {
        let Some((worker, at)) = &self.kill else {
            return false;
        };
        let until = self.kill_noticed.unwrap_or(*at).max(*at);
        self.margins.kill.holds(t, *at, until) && self.routed(id, *at).is_some_and(|w| w == worker)
    }
    /// Handled by the killed worker shortly before its death: its result was in flight.
    fn published_by_killed(&self, worker: &str, t: u64) -> bool {
        self.kill
            .as_ref()
            .is_some_and(|(w, at)| w == worker && self.margins.kill.holds(t, *at, *at))
    }
    fn in_sink_restart(&self, t: u64) -> bool {
        self.sink
            .is_some_and(|(stop, start)| self.margins.sink.holds(t, stop, start))
    }
    /// Handled by the cut worker while its link was down or about to be.
    fn published_on_cut(&self, worker: &str, t: u64) -> bool {
        self.cut
            .as_ref()
            .is_some_and(|(w, down, up)| w == worker && self.margins.cut.holds(t, *down, *up))
    }
    /// Sent to the cut worker (from the rotation) while its link was down or about to be.
    fn sent_on_cut(&self, id: u64, t: u64) -> bool {
        self.cut.as_ref().is_some_and(|(w, down, up)| {
            self.margins.cut.holds(t, *down, *up) && self.routed(id, *down).is_some_and(|r| r == w)
        })
    }
    /// Sent to the cut worker (from the rotation) from shortly before the cut until the
    /// ventilator noticed it: while its queue still gave the cut worker its share, which went
    /// down with the connection.
    fn sent_before_cut_noticed(&self, id: u64, t: u64) -> bool {
        match (&self.cut, self.cut_noticed) {
            (Some((w, down, _)), Some(noticed)) => {
                self.margins.cut.holds(t, *down, noticed)
                    && self.routed(id, *down).is_some_and(|r| r == w)
            }
            _ => false,
        }
    }
    fn killed(&self, worker: &str) -> bool {
        self.kill.as_ref().is_some_and(|(w, _)| w == worker)
    }
    /// The worker a job was routed to: the one that recorded it, else the queue's rotation. The
    /// queue deals its jobs round the workers it had before the fault `at` in turn, so a job goes
    /// where the job as many places back as there are workers went; jobs lost on the way are
    /// stepped over.
    fn routed(&self, id: u64, at: u64) -> Option<&str> {
        if let Some(worker) = self.handled_by.get(&id) {
            return Some(worker);
        }
        let from = at.saturating_sub(ROTATION_SPAN_MS);
        let dealt: BTreeSet<&str> = self
            .sent
            .iter()
            .filter(|(_, t)| **t >= from && **t < at)
            .filter_map(|(id, _)| self.handled_by.get(id).map(String::as_str))
            .collect();
        let turn = u64::try_from(dealt.len()).ok().filter(|n| *n > 0)?;
        let mut back = id.checked_sub(turn)?;
        loop {
            let sent_at = *self.sent.get(&back)?;
            if sent_at + self.margins.kill.before.max(self.margins.cut.before) + ROTATION_SPAN_MS
                < at
            {
                return None;
            }
            if let Some(worker) = self.handled_by.get(&back) {
                return Some(worker);
            }
            back = back.checked_sub(turn)?;
        }
    }
}

/// Why a job of the fault run never reached the sink, as far as the records tell.
fn cause(lines: &[&Line], id: u64, sent_at: u64, w: &Windows) -> &'static str {
    let handled: Vec<&&Line> = lines
        .iter()
        .filter(|l| l.ev == "handled" && l.id == Some(id))
        .collect();
    if let Some(done) = handled
        .iter()
        .filter(|l| l.outcome.as_deref() == Some("done"))
        .max_by_key(|l| l.t)
    {
        let worker = done.worker.as_deref().unwrap_or("");
        if w.published_by_killed(worker, done.t) {
            return "killed worker: its result was in flight";
        }
        if w.in_sink_restart(done.t) {
            return "sink restart: the result was in flight to the old sink";
        }
        if w.published_on_cut(worker, done.t) {
            return "cut link: the result was in flight on it";
        }
        return "unexplained: handled, result published, never collected";
    }
    if let Some(copy) = handled.iter().max_by_key(|l| l.t) {
        let worker = copy.worker.as_deref().unwrap_or("");
        if w.killed(worker) {
            return "killed worker: its retry copy died with it";
        }
        return "unexplained: a retry copy never came back";
    }
    if w.sent_to_killed(id, sent_at) {
        return "killed worker: sent around its death, never handled";
    }
    if w.cut_noticed.is_some() {
        // The connection was cut: only what was sent before the ventilator noticed went with it.
        if w.sent_before_cut_noticed(id, sent_at) {
            return "cut connection: sent before the ventilator noticed the cut, never handled";
        }
    } else if w.sent_on_cut(id, sent_at) {
        return "cut link: in flight on it, never handled";
    }
    "unexplained: sent, never handled"
}

/// A lost job: its cause, the worker it went to as far as the records tell, and how far from
/// its fault's window it fell (the time it was sent, or its result published if it was).
#[derive(Debug, Serialize)]
struct LostJob {
    id: u64,
    cause: &'static str,
    worker: Option<String>,
    /// `sent` or `published`: which time the offsets are of.
    at: &'static str,
    /// Milliseconds from the start of its fault (the kill, the cut, the sink told to stop).
    from_start_ms: Option<i64>,
    /// Milliseconds from the end of its fault's window (the ventilator dropping the killed
    /// worker, the link restored or the cut noticed, the sink started again).
    from_end_ms: Option<i64>,
}

fn signed(t: u64, from: u64) -> i64 {
    i64::try_from(t).unwrap_or(i64::MAX) - i64::try_from(from).unwrap_or(i64::MAX)
}

fn lost_job(lines: &[&Line], id: u64, sent_at: u64, why: &'static str, w: &Windows) -> LostJob {
    let published = lines
        .iter()
        .filter(|l| l.ev == "handled" && l.id == Some(id))
        .filter(|l| l.outcome.as_deref() == Some("done"))
        .map(|l| l.t)
        .max();
    let t = published.unwrap_or(sent_at);
    let window = if why.starts_with("killed") {
        w.kill.as_ref().map(|(_, at)| {
            let until = if published.is_some() {
                *at
            } else {
                w.kill_noticed.unwrap_or(*at).max(*at)
            };
            (*at, until)
        })
    } else if why.starts_with("sink") {
        w.sink
    } else if why.starts_with("cut connection") {
        w.cut
            .as_ref()
            .zip(w.cut_noticed)
            .map(|((_, down, _), n)| (*down, n))
    } else if why.starts_with("cut") {
        w.cut.as_ref().map(|(_, down, up)| (*down, *up))
    } else {
        None
    };
    let at_ = window.map_or(w.kill.as_ref().map_or(0, |k| k.1), |(from, _)| from);
    LostJob {
        id,
        cause: why,
        worker: w.routed(id, at_).map(str::to_owned),
        at: if published.is_some() {
            "published"
        } else {
            "sent"
        },
        from_start_ms: window.map(|(from, _)| signed(t, from)),
        from_end_ms: window.map(|(_, to)| signed(t, to)),
    }
}

/// What a broker's monitor (`peers` lines) said of a cut from `down` to `up`: when it first
/// counted a peer lost during the cut, and how many milliseconds after `up` it had as many peers
/// as before the cut again (0 where that beat the script's note of `up`). `whose` picks the
/// process's lines.
fn around_the_cut(
    lines: &[Line],
    broker: &str,
    whose: impl Fn(&Line) -> bool,
    down: u64,
    up: u64,
) -> (Option<u64>, Option<u64>) {
    let mut seen: Vec<&Line> = lines
        .iter()
        .filter(|l| l.ev == "peers" && l.broker.as_deref() == Some(broker) && whose(l))
        .collect();
    seen.sort_by_key(|l| l.t);
    let Some(before) = seen.iter().rev().find(|l| l.t <= down).copied() else {
        return (None, None);
    };
    // The same process's lines only (a restarted sink writes its own).
    seen.retain(|l| l.sink == before.sink);
    let (lost, connected) = (before.lost.unwrap_or(0), before.connected.unwrap_or(0));
    let noticed = seen
        .iter()
        .find(|l| l.t > down && l.t <= up && l.lost.unwrap_or(0) > lost)
        .map(|l| l.t);
    // Back once connected again after the loss: a reconnect can beat the script's note of the
    // restore by a few milliseconds (seen under load), so it is not looked for from that note.
    let back = noticed.and_then(|lost_at| {
        seen.iter()
            .find(|l| l.t > lost_at && l.connected.unwrap_or(0) >= connected)
            .map(|l| l.t.saturating_sub(up))
    });
    (noticed, back)
}

/// When a broker's monitor first counted a peer lost from `at` on (the same millisecond
/// included: the ventilator may drop a killed worker before the script notes the kill).
fn dropped_after(
    lines: &[Line],
    broker: &str,
    whose: impl Fn(&Line) -> bool,
    at: u64,
) -> Option<u64> {
    let mut seen: Vec<&Line> = lines
        .iter()
        .filter(|l| l.ev == "peers" && l.broker.as_deref() == Some(broker) && whose(l))
        .collect();
    seen.sort_by_key(|l| l.t);
    let lost = seen
        .iter()
        .rev()
        .find(|l| l.t < at)
        .map_or(0, |l| l.lost.unwrap_or(0));
    seen.iter()
        .find(|l| l.t >= at && l.lost.unwrap_or(0) > lost)
        .map(|l| l.t)
}

fn fault_run(lines: &[Line], run: &str, margins: Margins) -> (FaultRun, Windows) {
    let cut = moment(lines, "cut").and_then(|down| {
        let up = moment(lines, "restore")?;
        Some((down.worker.clone().unwrap_or_default(), down.t, up.t))
    });
    let of_vent = |l: &Line| l.run.as_deref() == Some(run);
    let of_sink = |l: &Line| l.sink.is_some();
    let (vent_noticed, vent_back, sink_noticed, sink_back) = match &cut {
        Some((_, down, up)) => {
            let (vent_noticed, vent_back) = around_the_cut(lines, "jobs", of_vent, *down, *up);
            let (sink_noticed, sink_back) = around_the_cut(lines, "results", of_sink, *down, *up);
            (vent_noticed, vent_back, sink_noticed, sink_back)
        }
        None => (None, None, None, None),
    };
    let kill = moment(lines, "kill").map(|l| (l.worker.clone().unwrap_or_default(), l.t));
    let kill_noticed = kill
        .as_ref()
        .and_then(|(_, at)| dropped_after(lines, "jobs", of_vent, *at));
    let of_run: Vec<&Line> = lines
        .iter()
        .filter(|l| l.run.as_deref() == Some(run))
        .collect();
    let sent: BTreeMap<u64, u64> = of_run
        .iter()
        .filter(|l| l.ev == "sent" && !l.probe)
        .filter_map(|l| Some((l.id?, l.t)))
        .collect();
    let mut handled_by = BTreeMap::new();
    for l in of_run.iter().filter(|l| l.ev == "handled" && !l.probe) {
        if let (Some(id), Some(worker)) = (l.id, &l.worker) {
            handled_by.entry(id).or_insert_with(|| worker.clone());
        }
    }
    let windows = Windows {
        margins,
        kill,
        kill_noticed,
        cut,
        sink: moment(lines, "sink_stop")
            .and_then(|stop| Some((stop.t, moment(lines, "sink_start")?.t))),
        cut_noticed: vent_noticed,
        sent: sent.clone(),
        handled_by,
    };
    let results: Vec<&&Line> = of_run
        .iter()
        .filter(|l| l.ev == "result" && !l.probe)
        .collect();
    let collected: BTreeSet<u64> = results.iter().filter_map(|l| l.id).collect();
    let since_cut = |noticed: Option<u64>| {
        let down = windows.cut.as_ref().map_or(0, |c| c.1);
        noticed.map(|t| t - down)
    };
    let mut f = FaultRun {
        margins: Some(margins),
        sent: sent.len(),
        collected: collected.len(),
        duplicated: results.len() - collected.len(),
        cut_noticed_by_ventilator_ms: since_cut(vent_noticed),
        cut_noticed_by_sink_ms: since_cut(sink_noticed),
        cut_worker_back_at_ventilator_ms: vent_back,
        cut_worker_back_at_sink_ms: sink_back,
        peers_refused: {
            // Each monitor's count, as it last said it, summed over the monitors.
            let mut last: BTreeMap<(Option<&str>, Option<&str>), u64> = BTreeMap::new();
            for l in lines
                .iter()
                .filter(|l| l.ev == "peers" && (of_vent(l) || of_sink(l)))
            {
                let seen = last
                    .entry((l.broker.as_deref(), l.sink.as_deref()))
                    .or_default();
                *seen = (*seen).max(l.refused.unwrap_or(0));
            }
            last.values().sum()
        },
        ..FaultRun::default()
    };
    // A job handled to the end twice, by one worker or two, is a duplicate even if the sink
    // saw one result.
    let mut done: BTreeMap<u64, usize> = BTreeMap::new();
    for l in of_run.iter().filter(|l| l.ev == "handled" && !l.probe) {
        let worker = l.worker.clone().unwrap_or_default();
        match l.outcome.as_deref() {
            Some("done") => {
                *f.handled.entry(worker).or_default() += 1;
                *done.entry(l.id.unwrap_or(0)).or_default() += 1;
            }
            Some("failed" | "unsent") => {
                f.retry_copies_scheduled += 1;
                let back = of_run.iter().any(|m| {
                    m.ev == "handled"
                        && m.id == l.id
                        && m.worker == l.worker
                        && m.attempt > l.attempt
                });
                if back {
                    f.retry_copies_back += 1;
                } else if windows.killed(&worker) {
                    f.retry_copies_died_with_the_killed_worker += 1;
                } else {
                    f.retry_copies_lost_with_a_live_worker += 1;
                }
            }
            _ => {}
        }
    }
    f.duplicated = f
        .duplicated
        .max(done.values().filter(|n| **n > 1).map(|n| n - 1).sum());
    for (id, at) in &sent {
        if !collected.contains(id) {
            f.lost += 1;
            let why = cause(&of_run, *id, *at, &windows);
            *f.lost_by_cause.entry(why.to_owned()).or_default() += 1;
            f.lost_jobs.push(lost_job(&of_run, *id, *at, why, &windows));
        }
    }
    for l in of_run.iter().filter(|l| l.ev == "progress") {
        *f.progress_heard
            .entry(l.worker.clone().unwrap_or_default())
            .or_default() += 1;
    }
    f.progress_announced = of_run.iter().filter(|l| l.ev == "announced").count();
    f.send_failures = of_run.iter().filter(|l| l.ev == "send_failed").count();
    if let Some((worker, down, up)) = &windows.cut {
        f.waited_out_the_cut = of_run
            .iter()
            .filter(|l| {
                l.ev == "handled"
                    && l.worker.as_ref() == Some(worker)
                    && l.t >= *up
                    && l.id
                        .and_then(|id| sent.get(&id))
                        .is_some_and(|at| at >= down && at < up)
            })
            .count();
        f.reconnect_after_cut_ms = results
            .iter()
            .filter(|l| l.worker.as_ref() == Some(worker) && l.t >= *up)
            .map(|l| l.t - up)
            .min();
    }
    if let Some((_, start)) = windows.sink {
        for l in results.iter().filter(|l| l.t >= start) {
            let worker = l.worker.clone().unwrap_or_default();
            let after = l.t - start;
            f.reconnect_after_sink_restart_ms
                .entry(worker)
                .and_modify(|ms| *ms = (*ms).min(after))
                .or_insert(after);
        }
    }
    (f, windows)
}

fn report(args: &Args, backend: Choice) -> Result<(), Failure> {
    let dir = PathBuf::from(args.text("dir")?);
    let lines = read_records(&dir)?;
    let margins = Margins {
        kill: Margin::parse(&args.text_or("kill-margin-ms", KILL_MARGIN_MS))?,
        cut: Margin::parse(&args.text_or("cut-margin-ms", CUT_MARGIN_MS))?,
        sink: Margin::parse(&args.text_or("sink-margin-ms", SINK_MARGIN_MS))?,
    };
    let mut summary = Summary::default();
    let mut expectations = Vec::new();
    let mut expect = |what: String, ok: bool| expectations.push((what, ok));
    let mut scale = Vec::new();
    for spec in args
        .text_or("scale", "")
        .split(',')
        .filter(|s| !s.is_empty())
    {
        let (run, workers) = spec.split_once(':').ok_or("--scale run:workers,...")?;
        scale.push(scale_run(&lines, run, workers.parse()?));
    }
    if !scale.is_empty() {
        println!(
            "scale-out (one ventilator; every worker of a run dialed it before the run began):"
        );
    }
    for s in &scale {
        println!(
            "  {} worker(s): {} jobs sent, {} collected, {} lost, {} duplicated, {:.2} s, {:.0} jobs/s; handled {}",
            s.workers,
            s.sent,
            s.collected,
            s.lost,
            s.duplicated,
            s.seconds,
            s.jobs_per_second,
            per_worker(&s.handled)
        );
        expect(
            format!("scale {} worker(s): every job collected once", s.workers),
            s.sent > 0 && s.lost == 0 && s.duplicated == 0,
        );
    }
    if let (Some(one), Some(four)) = (
        scale.iter().find(|s| s.workers == 1),
        scale.iter().find(|s| s.workers == 4),
    ) {
        let speedup = four.jobs_per_second / one.jobs_per_second.max(f64::MIN_POSITIVE);
        println!("  speed-up from 1 to 4 workers: {speedup:.1}x");
        expect(
            "4 workers take at least twice the jobs per second of 1".to_owned(),
            speedup >= 2.0,
        );
    }
    if let Some(run) = args.0.get("faults") {
        let (f, w) = fault_run(&lines, run, margins);
        let live: Vec<String> = args
            .text_or("live", "")
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        println!("run {run}, {} workers:", f.handled.len());
        if let Some((worker, _)) = &w.kill {
            println!("  {worker} killed with SIGKILL mid-stream");
        }
        if let Some((worker, down, up)) = &w.cut {
            println!(
                "  {worker}'s link cut for {:.1} s, then restored",
                (up - down) as f64 / 1000.0
            );
        }
        if backend.is_secured() {
            println!(
                "  {} backend: CURVE on every connection, heartbeats every {} ms, a silent peer cut after {} ms",
                backend.name(),
                HEARTBEAT_INTERVAL.as_millis(),
                HEARTBEAT_TIMEOUT.as_millis()
            );
        }
        if let Some((stop, start)) = w.sink {
            println!(
                "  the sink stopped and restarted {:.1} s later",
                (start - stop) as f64 / 1000.0
            );
        }
        println!(
            "  jobs sent {}, results collected {}, lost {}, duplicated {}",
            f.sent, f.collected, f.lost, f.duplicated
        );
        println!(
            "  sends the ventilator saw fail (each tried again): {}",
            f.send_failures
        );
        println!("  handled per worker: {}", per_worker(&f.handled));
        for (cause, n) in &f.lost_by_cause {
            println!("  lost, {cause}: {n}");
        }
        println!(
            "  retry copies: {} scheduled, {} came back, {} lost while their worker lived, {} died with the killed worker",
            f.retry_copies_scheduled,
            f.retry_copies_back,
            f.retry_copies_lost_with_a_live_worker,
            f.retry_copies_died_with_the_killed_worker
        );
        println!(
            "  progress: {} announcements, heard {}",
            f.progress_announced,
            per_worker(&f.progress_heard)
        );
        if w.cut.is_some() {
            println!(
                "  jobs sent to the cut worker while its link was down, handled after it came back: {}",
                f.waited_out_the_cut
            );
            match f.reconnect_after_cut_ms {
                Some(ms) => {
                    println!("  first result from the cut worker {ms} ms after its link came back")
                }
                None => println!("  no result from the cut worker after its link came back"),
            }
            let noticed = |by: &str, ms: Option<u64>, back: Option<u64>| match (ms, back) {
                (Some(ms), Some(back)) => println!(
                    "  the {by} noticed the cut worker's connection lost {ms} ms after the cut; the worker connected to it again {back} ms after its link came back"
                ),
                (Some(ms), None) => println!(
                    "  the {by} noticed the cut worker's connection lost {ms} ms after the cut; it did not connect again"
                ),
                (None, _) => println!(
                    "  the {by} did not notice the cut while it lasted: its connection to the cut worker stayed open"
                ),
            };
            noticed(
                "ventilator",
                f.cut_noticed_by_ventilator_ms,
                f.cut_worker_back_at_ventilator_ms,
            );
            noticed(
                "sink",
                f.cut_noticed_by_sink_ms,
                f.cut_worker_back_at_sink_ms,
            );
        }
        if backend.is_secured() {
            println!(
                "  connections refused at their CURVE handshake: {}",
                f.peers_refused
            );
        }
        if w.sink.is_some() {
            println!(
                "  first result at the restarted sink, per worker (ms after it started): {}",
                per_worker_ms(&f.reconnect_after_sink_restart_ms)
            );
        }
        expect("faults: nothing duplicated".to_owned(), f.duplicated == 0);
        expect(
            "faults: every lost job has a cause at-most-once allows".to_owned(),
            f.lost_by_cause
                .keys()
                .all(|c| !c.starts_with("unexplained")),
        );
        expect(
            "faults: collected and lost add up to sent".to_owned(),
            f.collected + f.lost == f.sent,
        );
        if args.text_or("expect-retries", "no") == "yes" {
            expect(
                "faults: retry copies went out".to_owned(),
                f.retry_copies_scheduled > 0,
            );
        }
        expect(
            "faults: no retry copy was lost while its worker lived".to_owned(),
            f.retry_copies_lost_with_a_live_worker == 0,
        );
        if let Some((killed, at)) = &w.kill {
            let before = lines
                .iter()
                .any(|l| is(l, "handled", run) && l.worker.as_ref() == Some(killed) && l.t < *at);
            expect(
                format!("faults: {killed} handled jobs before it was killed"),
                before,
            );
        }
        for worker in &live {
            let after_all = [
                w.kill.as_ref().map(|k| k.1),
                w.cut.as_ref().map(|c| c.2),
                w.sink.map(|s| s.1),
            ]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(0);
            let carried_on = lines.iter().any(|l| {
                is(l, "result", run) && l.worker.as_ref() == Some(worker) && l.t > after_all
            });
            expect(
                format!("faults: {worker} carried on after the last fault (a result collected)"),
                carried_on,
            );
            if w.sink.is_some() {
                expect(
                    format!("faults: {worker} reached the restarted sink"),
                    f.reconnect_after_sink_restart_ms.contains_key(worker),
                );
            }
            let heard_last = lines.iter().any(|l| {
                is(l, "progress", run)
                    && l.worker.as_ref() == Some(worker)
                    && l.detail
                        .as_deref()
                        .is_some_and(|d| d.ends_with("done true"))
            });
            expect(
                format!("faults: {worker} heard the last progress announcement"),
                heard_last,
            );
        }
        if w.cut.is_some() {
            expect(
                "faults: the cut worker's results reach the sink again after its link returns"
                    .to_owned(),
                f.reconnect_after_cut_ms.is_some(),
            );
        }
        if backend.is_secured() {
            // A heartbeat goes out every interval; a peer silent for the timeout after one is
            // cut. The monitor is read every 20 ms: a second covers that and a loaded machine.
            let limit = (HEARTBEAT_INTERVAL + HEARTBEAT_TIMEOUT).as_millis() + 1_000;
            let limit = u64::try_from(limit).unwrap_or(u64::MAX);
            let name = backend.name();
            if w.cut.is_some() {
                expect(
                    format!(
                        "{name}: the ventilator noticed the cut worker gone within {limit} ms of the cut"
                    ),
                    f.cut_noticed_by_ventilator_ms.is_some_and(|ms| ms <= limit),
                );
                expect(
                    format!(
                        "{name}: the sink noticed the cut worker gone within {limit} ms of the cut"
                    ),
                    f.cut_noticed_by_sink_ms.is_some_and(|ms| ms <= limit),
                );
                expect(
                    format!(
                        "{name}: the cut worker connected to the ventilator and the sink again"
                    ),
                    f.cut_worker_back_at_ventilator_ms.is_some()
                        && f.cut_worker_back_at_sink_ms.is_some(),
                );
            }
            expect(
                format!("{name}: CURVE refused no connection of the fleet's hosts"),
                f.peers_refused == 0,
            );
        }
        summary.faults = Some(f);
    }
    summary.backend = backend.name();
    summary.scale = scale;
    summary.expectations = expectations;
    println!("expectations:");
    for (what, ok) in &summary.expectations {
        println!("  {} {what}", if *ok { "ok  " } else { "FAIL" });
    }
    if let Some(path) = args.0.get("summary") {
        std::fs::write(path, serde_json::to_vec_pretty(&summary)?)?;
    }
    let failed = summary.expectations.iter().filter(|(_, ok)| !ok).count();
    if failed > 0 {
        return Err(format!("{failed} expectation(s) failed").into());
    }
    Ok(())
}

fn per_worker(counts: &BTreeMap<String, usize>) -> String {
    counts
        .iter()
        .map(|(w, n)| format!("{w} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn per_worker_ms(counts: &BTreeMap<String, u64>) -> String {
    counts
        .iter()
        .map(|(w, n)| format!("{w} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}
