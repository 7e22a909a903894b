//! The fleet across hosts: `scripts/fleet.sh --short` builds six hosts out of network namespaces
//! and runs `examples/fleet.rs` on them, through a killed worker, a cut link, a restarted sink and
//! retry copies; this test holds its counts to the at-most-once promise.
//!
//! It runs once per compiled backend (`fleet.sh --backend`). On libzmq and omq the fleet speaks
//! CURVE with heartbeats on: the ventilator must notice the cut worker gone within the
//! heartbeat's timeout, and the only loss the cut may add is what it sent on the cut connection
//! before it noticed.
//!
//! The test counts from the records each process wrote (what was sent, handled, collected) and
//! tells each loss's cause itself, from the faults it made, not from the example's report: a job
//! that was the killed worker's turn in the queue's rotation, sent after the last it handled and
//! before the ventilator dropped it; a result the killed worker published just before it died,
//! or any worker as the sink stopped; on libzmq and omq, the cut worker's turns until the
//! ventilator noticed the cut, and its results on the cut link. Any other loss fails, and each
//! cause is capped at a small multiple of the worst the measured runs on this backend lost to
//! it. On the default backend the connection outlives the cut unnoticed, so any loss put down
//! to the cut fails. The report's tally must match the records'.
//!
//! It needs root (network namespaces). Where they cannot be made it fails, naming why, unless
//! `RUSTSTREAM_ZMQ_SKIP_FLEET=1` is set: then it says so on stderr and passes without running.

use std::{
    collections::{BTreeMap, BTreeSet},
    io::Write,
    path::Path,
    process::Command,
};

use serde::Deserialize;
use serde_json::Value;

use super::BACKEND;
use crate::{backend::Backend, support::example_binary};

/// Jobs per scale-out run and the stream of the fault run, as `--short` sets them.
const SCALE_JOBS: u64 = 400;
const FAULT_JOBS: u64 = 4_000;
/// The fault run's rate, jobs a second.
const RATE: u64 = 200;
/// The live workers when the link is cut (one was killed before): each gets a third of it.
const LIVE_AT_THE_CUT: u64 = 3;
/// The fleet's heartbeat on libzmq and omq (`examples/fleet.rs`): every 500 ms, cut after 2 s of
/// silence. The monitor is read every 20 ms; one more second covers a loaded machine.
const NOTICED_WITHIN_MS: u64 = 500 + 2_000 + 1_000;

/// The short fleet was run `MEASURED_RUNS` times in a row on each backend, with a `yes` load on
/// each core, to learn what each fault costs. Per cause ([`Cause::name`]): the
/// worst loss of those runs, and the multiple of it a run may lose, in percent. A loss that
/// depends on a moment (what a worker had in hand when it died, what was on the wire to the
/// sink as it stopped) may be thrice the worst; the cut connection's loss is the cut worker's
/// share of the stream until the heartbeat noticed, steady from run to run, and may be a
/// quarter more.
const MEASURED_RUNS: u64 = 20;
/// Those figures on `backend`: a cause it has none for (the cut, on the default backend) fails.
fn worst_seen(backend: Backend) -> &'static [(&'static str, u64, u64)] {
    match backend {
        Backend::Zeromq => &[("killed worker", 8, 300), ("sink restart", 6, 300)],
        // omq runs the fleet as libzmq does (CURVE, the same heartbeats) and is held to the
        // same figures. Its 20 runs (17 on a machine shared with other builds, load 2 to 6; 3
        // with a `yes` on each core) lost at most 4 to the killed worker, 1 to the sink
        // restart, 167 to the cut connection and 1 to the cut link. libzmq's 4 runs beside
        // them lost at most 1 to the kill: its 117 was of a moment, not of the backend.
        Backend::Libzmq | Backend::Omq => &[
            ("killed worker", 117, 300),
            ("sink restart", 9, 300),
            ("cut connection", 164, 125),
            ("cut link", 1, 300),
        ],
    }
}

/// Set to `1` to skip the fleet where network namespaces cannot be made.
const SKIP_VAR: &str = "RUSTSTREAM_ZMQ_SKIP_FLEET";

/// Why namespaces cannot be made here, if they cannot.
fn namespaces_unavailable() -> Option<String> {
    let uid = Command::new("id").arg("-u").output();
    match uid {
        Ok(out) if String::from_utf8_lossy(&out.stdout).trim() == "0" => {}
        Ok(out) => {
            return Some(format!(
                "not root (uid {})",
                String::from_utf8_lossy(&out.stdout).trim()
            ));
        }
        Err(err) => return Some(format!("`id -u` did not run: {err}")),
    }
    // The fleets of both backends run in one process, side by side: each probes with a name
    // of its own.
    let probe = format!("rsfprobe{}{}", std::process::id(), BACKEND.name());
    match Command::new("ip").args(["netns", "add", &probe]).output() {
        Ok(out) if out.status.success() => {
            let _ = Command::new("ip").args(["netns", "del", &probe]).status();
            None
        }
        Ok(out) => Some(format!(
            "`ip netns add` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(err) => Some(format!("`ip` did not run: {err}")),
    }
}

/// Skips, past the test harness's capture, where the skip was asked for; fails otherwise.
fn skip_or_fail(reason: &str) {
    assert!(
        std::env::var(SKIP_VAR).is_ok_and(|v| v == "1"),
        "the fleet across hosts (scripts/fleet.sh) cannot run: network namespaces cannot be \
         made here: {reason}; set {SKIP_VAR}=1 to skip it"
    );
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED the fleet across hosts (scripts/fleet.sh), as {SKIP_VAR}=1 asks: network \
         namespaces cannot be made here: {reason}"
    );
}

/// One line of a process's record, as `examples/fleet.rs` writes them (the fields this test
/// reads), or of the script's timeline of faults.
#[derive(Debug, Deserialize)]
struct Line {
    ev: String,
    /// Wall clock, milliseconds: the hosts share one clock.
    t: u64,
    id: Option<u64>,
    run: Option<String>,
    worker: Option<String>,
    sink: Option<String>,
    attempt: Option<u32>,
    #[serde(default)]
    probe: bool,
    outcome: Option<String>,
    broker: Option<String>,
    lost: Option<u64>,
    connected: Option<u64>,
    refused: Option<u64>,
}

/// Every record of the fleet: each process's JSON lines and the script's timeline. A line a
/// killed process left half written is passed over.
fn records(dir: &Path) -> Vec<Line> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir).expect("the fleet's records") {
        let path = entry.expect("a record file").path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            let text = std::fs::read_to_string(&path).expect("a record file");
            lines.extend(
                text.lines()
                    .filter_map(|l| serde_json::from_str::<Line>(l).ok()),
            );
        }
    }
    lines.sort_by_key(|l| l.t);
    lines
}

/// When the script noted `ev` on its timeline.
fn moment(lines: &[Line], ev: &str) -> u64 {
    lines
        .iter()
        .find(|l| l.ev == ev)
        .map(|l| l.t)
        .unwrap_or_else(|| panic!("the timeline has no `{ev}`"))
}

fn is(line: &Line, ev: &str, run: &str) -> bool {
    line.ev == ev && line.run.as_deref() == Some(run) && !line.probe
}

/// What one run's records say, counted here from the lines themselves.
struct Run<'a> {
    /// When each job was sent.
    sent: BTreeMap<u64, u64>,
    /// How many results of each job the sinks collected.
    collected: BTreeMap<u64, u64>,
    /// Each job's `handled` lines, in time order.
    handled: BTreeMap<u64, Vec<&'a Line>>,
    /// Each job's results at a sink.
    results: Vec<&'a Line>,
}

impl<'a> Run<'a> {
    fn of(lines: &'a [Line], run: &str) -> Self {
        let sent = lines
            .iter()
            .filter(|l| is(l, "sent", run))
            .filter_map(|l| Some((l.id?, l.t)))
            .collect();
        let results: Vec<&Line> = lines.iter().filter(|l| is(l, "result", run)).collect();
        let mut collected = BTreeMap::new();
        for id in results.iter().filter_map(|l| l.id) {
            *collected.entry(id).or_default() += 1;
        }
        let mut handled: BTreeMap<u64, Vec<&Line>> = BTreeMap::new();
        for l in lines.iter().filter(|l| is(l, "handled", run)) {
            handled
                .entry(l.id.expect("a handled job's id"))
                .or_default()
                .push(l);
        }
        Self {
            sent,
            collected,
            handled,
            results,
        }
    }

    fn lost(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.sent
            .iter()
            .filter(|(id, _)| !self.collected.contains_key(id))
            .map(|(id, t)| (*id, *t))
    }

    /// Jobs collected more than once, or handled to the end more than once.
    fn duplicated(&self) -> u64 {
        let collected: u64 = self.collected.values().map(|n| n - 1).sum();
        let done: u64 = self
            .handled
            .values()
            .map(|h| h.iter().filter(|l| done(l)).count() as u64)
            .map(|n| n.saturating_sub(1))
            .sum();
        collected.max(done)
    }

    /// The worker the queue dealt job `id` to, if it handled it: the first to record it (a
    /// retry copy comes back to the same worker, through its own retry queue).
    fn dealt_to(&self, id: u64) -> Option<&'a str> {
        self.handled.get(&id)?.first()?.worker.as_deref()
    }

    /// The queue's rotation just before `at`: it deals jobs to its workers in turn, so each
    /// worker has every n-th id (n workers). Answers n and the worker of each remainder, as the
    /// latest jobs sent before `at` show it: a PUSH passes over a worker whose queue is full
    /// for a moment (a loaded machine), which shifts the turns, so only the latest deal of each
    /// remainder says whose turn it is now.
    fn rotation(&self, at: u64) -> (u64, BTreeMap<u64, &'a str>) {
        let dealt: Vec<(u64, &str)> = self
            .sent
            .range(..)
            .filter(|(_, t)| **t + ROTATION_MS >= at && **t < at)
            .filter_map(|(id, _)| Some((*id, self.dealt_to(*id)?)))
            .collect();
        let workers: BTreeSet<&str> = dealt.iter().map(|(_, w)| *w).collect();
        let n = workers.len() as u64;
        assert!(
            n > 0,
            "no job sent in the {ROTATION_MS} ms before {at} was handled"
        );
        let turns: BTreeMap<u64, &str> =
            dealt.iter().map(|(id, worker)| (id % n, *worker)).collect();
        (n, turns)
    }

    /// The send time of the last job `worker` handled of those sent before `until`: it handles
    /// its jobs one at a time, in the order its connection brought them, so every turn of its
    /// after that one was still on the way to it, or in its hands.
    fn last_handled_by(&self, worker: &str, until: u64) -> u64 {
        self.sent
            .iter()
            .filter(|(id, t)| **t <= until && self.dealt_to(**id) == Some(worker))
            .map(|(_, t)| *t)
            .max()
            .unwrap_or(0)
    }
}

fn done(line: &Line) -> bool {
    line.outcome.as_deref() == Some("done")
}

/// When `broker`'s monitor (the `peers` lines `whose` picks) first counted one more peer lost
/// within `from..=to` than it had before `from`.
fn dropped(
    lines: &[Line],
    broker: &str,
    whose: impl Fn(&Line) -> bool,
    from: u64,
    to: u64,
) -> Option<u64> {
    let seen: Vec<&Line> = lines
        .iter()
        .filter(|l| l.ev == "peers" && l.broker.as_deref() == Some(broker) && whose(l))
        .collect();
    let before = seen
        .iter()
        .filter(|l| l.t < from)
        .map(|l| l.lost.unwrap_or(0))
        .next_back()
        .unwrap_or(0);
    seen.iter()
        .find(|l| l.t >= from && l.t <= to && l.lost.unwrap_or(0) > before)
        .map(|l| l.t)
}

/// What made a job of the run with faults never reach the sink, as this test tells it from
/// what it set up: which worker it killed and when, whose link it cut, when it restarted the
/// sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Cause {
    /// The job was the killed worker's turn and it died before handling it, its result was on
    /// its way out when it died, or its retry copy died with it.
    KilledWorker,
    /// Its result was on the way to the sink as the sink stopped.
    SinkRestart,
    /// It was the cut worker's turn, sent before the ventilator noticed the cut (heartbeats,
    /// libzmq and omq): it went down with the connection.
    CutConnection,
    /// Its result was on the cut link when the connection went down.
    CutLink,
}

impl Cause {
    /// The name the caps below use.
    fn name(self) -> &'static str {
        match self {
            Self::KilledWorker => "killed worker",
            Self::SinkRestart => "sink restart",
            Self::CutConnection => "cut connection",
            Self::CutLink => "cut link",
        }
    }
}

/// The faults the script made, from its timeline and the ventilator's and the sink's records.
struct Faults<'a> {
    run: &'a Run<'a>,
    killed: &'a str,
    kill: u64,
    /// When the ventilator dropped the killed worker.
    kill_noticed: u64,
    cut_worker: &'a str,
    cut: u64,
    restore: u64,
    /// When the ventilator dropped the cut worker, if it did while the link was down.
    cut_noticed: Option<u64>,
    sink_stop: u64,
    sink_start: u64,
    /// The rotation before the kill, and before the cut.
    at_kill: (u64, BTreeMap<u64, &'a str>),
    at_cut: (u64, BTreeMap<u64, &'a str>),
}

impl Faults<'_> {
    /// Whether job `id`, never handled, was `worker`'s turn in `rotation`, sent after the last
    /// job it handled and before the ventilator dropped it (`noticed`).
    fn its_turn(
        &self,
        rotation: &(u64, BTreeMap<u64, &str>),
        worker: &str,
        id: u64,
        sent_at: u64,
        noticed: u64,
    ) -> bool {
        let (n, turns) = rotation;
        // A worker passed over in the latest turns (its queue was full) holds no remainder:
        // then the time window alone places its jobs.
        let turn = turns.get(&(id % n));
        (turn == Some(&worker) || !turns.values().any(|w| *w == worker))
            && sent_at > self.run.last_handled_by(worker, noticed)
            && sent_at <= noticed + NOTICE_SLACK_MS
    }

    /// Why job `id`, sent at `sent_at`, never reached the sink; `Err` with what the records say
    /// of it where no fault the test made accounts for it.
    fn cause(&self, id: u64, sent_at: u64) -> Result<Cause, String> {
        let handled = self.run.handled.get(&id).map_or(&[][..], Vec::as_slice);
        let within = |t: u64, from: u64, to: u64| t + RESULT_FLIGHT_MS >= from && t <= to;
        if let Some(last) = handled.iter().rev().find(|l| done(l)) {
            let worker = last.worker.as_deref().unwrap_or("");
            if worker == self.killed && within(last.t, self.kill, self.kill) {
                return Ok(Cause::KilledWorker);
            }
            if within(last.t, self.sink_stop, self.sink_start) {
                return Ok(Cause::SinkRestart);
            }
            if worker == self.cut_worker && within(last.t, self.cut, self.restore) {
                return Ok(Cause::CutLink);
            }
            return Err(format!(
                "{worker} handled it and published its result at {}, never collected",
                last.t
            ));
        }
        if let Some(last) = handled.last() {
            let worker = last.worker.as_deref().unwrap_or("");
            if worker == self.killed {
                return Ok(Cause::KilledWorker);
            }
            return Err(format!(
                "{worker} sent itself a retry copy that never came back"
            ));
        }
        if self.its_turn(&self.at_kill, self.killed, id, sent_at, self.kill_noticed) {
            return Ok(Cause::KilledWorker);
        }
        if let Some(noticed) = self.cut_noticed
            && self.its_turn(&self.at_cut, self.cut_worker, id, sent_at, noticed)
        {
            return Ok(Cause::CutConnection);
        }
        Err(format!("sent at {sent_at}, never handled"))
    }
}

/// How much of the stream before a fault shows the queue's rotation.
const ROTATION_MS: u64 = 1_000;
/// How long a result may be on its way to the sink: it crosses the bridge in a millisecond; a
/// second covers a loaded machine.
const RESULT_FLIGHT_MS: u64 = 1_000;
/// How long after the ventilator's record of a dropped peer a job may still have been dealt to
/// it: the record is written by another task, up to 20 ms after the monitor counted the drop.
const NOTICE_SLACK_MS: u64 = 250;

#[test]
fn a_fleet_across_hosts_loses_only_what_at_most_once_allows_and_duplicates_nothing() {
    if let Some(reason) = namespaces_unavailable() {
        skip_or_fail(&reason);
        return;
    }
    let binary = example_binary("fleet");
    let backend = BACKEND.name();
    // The fleet of the other backend may run beside this one, in namespaces of its own.
    let dir = std::env::temp_dir().join(format!(
        "ruststream-zmq-fleet-{}-{backend}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let summary_path = dir.join("summary.json");
    let out = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/fleet.sh"))
        .arg("--short")
        .args(["--backend", backend])
        .arg("--bin")
        .arg(&binary)
        .arg("--dir")
        .arg(&dir)
        .arg("--summary")
        .arg(&summary_path)
        .env("FLEET_PREFIX", "rsft")
        .output()
        .expect("bash runs scripts/fleet.sh");
    let printed = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{printed}");
    assert!(
        out.status.success(),
        "scripts/fleet.sh --short --backend {backend} failed ({}):\n{printed}",
        out.status
    );
    let summary: Value = serde_json::from_slice(
        &std::fs::read(&summary_path).expect("the script wrote its summary"),
    )
    .expect("the summary is JSON");
    assert_eq!(
        summary["backend"].as_str(),
        Some(backend),
        "the fleet ran on the backend asked for"
    );
    // From here on the test counts from the records each process wrote, and tells each loss's
    // cause from the faults it made; the report's tally must say the same.
    let lines = records(&dir);

    // Scale-out: every job of each run collected once. (Which workers took part is not held
    // here: the script begins a run once the workers' TCP connections are up, and on libzmq
    // and omq a new worker's CURVE handshake can still be under way as the burst leaves.)
    for name in ["scale1", "scale2", "scale4"] {
        let run = Run::of(&lines, name);
        assert_eq!(run.sent.len() as u64, SCALE_JOBS, "{name}: jobs sent");
        assert_eq!(run.lost().count(), 0, "{name}: every job collected");
        assert_eq!(run.duplicated(), 0, "{name}: no job twice");
    }

    // The run with faults, as the script made them.
    let run = Run::of(&lines, "faults");
    let kill = moment(&lines, "kill");
    let cut = moment(&lines, "cut");
    let restore = moment(&lines, "restore");
    let sink_stop = moment(&lines, "sink_stop");
    let sink_start = moment(&lines, "sink_start");
    assert!(
        lines.iter().any(|l| is(l, "go", "faults") && l.t < kill)
            && kill < cut
            && cut < restore
            && restore < sink_stop
            && sink_stop < sink_start,
        "the faults one after the other"
    );
    let of_vent = |l: &Line| l.run.as_deref() == Some("faults");
    let of_old_sink = |l: &Line| l.sink.as_deref() == Some("s1");
    // A drop the ventilator counted within a second before the script noted the kill is the
    // kill's too: the script notes it once `kill` has returned.
    let kill_noticed = dropped(&lines, "jobs", of_vent, kill.saturating_sub(1_000), cut)
        .expect("the ventilator dropped the killed worker");
    let cut_noticed = dropped(&lines, "jobs", of_vent, cut, restore);
    let faults = Faults {
        run: &run,
        killed: "w1",
        kill,
        kill_noticed,
        cut_worker: "w2",
        cut,
        restore,
        cut_noticed,
        sink_stop,
        sink_start,
        at_kill: run.rotation(kill),
        at_cut: run.rotation(cut),
    };
    assert_eq!(run.sent.len() as u64, FAULT_JOBS);
    assert_eq!(run.duplicated(), 0, "nothing duplicated");
    let mut causes: BTreeMap<&str, u64> = BTreeMap::new();
    let mut unexplained = Vec::new();
    for (id, sent_at) in run.lost() {
        match faults.cause(id, sent_at) {
            Ok(cause) => *causes.entry(cause.name()).or_default() += 1,
            Err(why) => unexplained.push(format!("job {id}: {why}")),
        }
    }
    assert!(
        unexplained.is_empty(),
        "lost jobs no fault the test made accounts for (kill of w1 at {kill}, dropped by the \
         ventilator at {kill_noticed}; w2's link down {cut} to {restore}, dropped at \
         {cut_noticed:?}; the sink stopped at {sink_stop}, back at {sink_start}): \
         {unexplained:#?}\nexplained: {causes:?}"
    );
    let lost = run.lost().count() as u64;
    println!("{lost} job(s) lost on {backend}, by cause: {causes:?}");
    // The report the script printed tells the same tally.
    let reported = &summary["faults"];
    for (what, counted) in [
        ("sent", FAULT_JOBS),
        ("collected", run.collected.len() as u64),
        ("lost", lost),
        ("duplicated", 0),
    ] {
        assert_eq!(
            reported[what].as_u64(),
            Some(counted),
            "the report's `{what}` against the records"
        );
    }
    // Each cause within its cap; a cause the measured runs never saw on this backend (a cut
    // on the default backend, whose connection outlives it) fails.
    for (cause, n) in &causes {
        let Some((_, worst, percent)) = worst_seen(BACKEND).iter().find(|(c, ..)| c == cause)
        else {
            panic!(
                "{n} job(s) lost to \"{cause}\", a cause this backend ({backend}) must not \
                 lose to: {causes:#?}"
            );
        };
        let cap = worst * percent / 100;
        assert!(
            *n <= cap,
            "{n} job(s) lost to \"{cause}\", more than its cap ({cap}: {percent}% of the worst \
             of {MEASURED_RUNS} measured runs, {worst}): {causes:#?}"
        );
    }

    // The cut, as each backend meets it.
    let sink_noticed = dropped(&lines, "results", of_old_sink, cut, restore);
    match BACKEND {
        Backend::Zeromq => assert!(
            cut_noticed.is_none() && sink_noticed.is_none(),
            "without heartbeats the cut goes unnoticed while it lasts: the ventilator dropped \
             w2 at {cut_noticed:?}, the sink at {sink_noticed:?}"
        ),
        // omq's heartbeats notice the cut as libzmq's do: in the measured runs the ventilator
        // dropped w2 2.23 to 2.51 s after the cut, the sink 2.01 to 2.49 s.
        Backend::Libzmq | Backend::Omq => {
            heartbeats_noticed_the_cut(&lines, cut, restore, cut_noticed, sink_noticed, &causes)
        }
    }

    // Retry copies: some went out, every one of a live worker came back to it.
    let copies: Vec<&Line> = run
        .handled
        .values()
        .flatten()
        .filter(|l| matches!(l.outcome.as_deref(), Some("failed" | "unsent")))
        .copied()
        .collect();
    assert!(!copies.is_empty(), "w4 failed jobs and sent itself copies");
    for copy in copies {
        let back = run.handled[&copy.id.unwrap()]
            .iter()
            .any(|l| l.worker == copy.worker && l.attempt > copy.attempt);
        assert!(
            back || copy.worker.as_deref() == Some(faults.killed),
            "a retry copy of job {:?} never came back to {:?}, which lived",
            copy.id,
            copy.worker
        );
    }
    // Everyone worked: the killed worker before its death, the others to the end.
    for worker in ["w1", "w2", "w3", "w4"] {
        let handled = run
            .handled
            .values()
            .flatten()
            .filter(|l| done(l) && l.worker.as_deref() == Some(worker))
            .count();
        assert!(handled > 0, "{worker} handled jobs");
    }
    // Every dialing socket came back: the cut worker's results after its link, each live
    // worker's results at the restarted sink.
    let collected_from = |worker: &str, sink: &str, after: u64| {
        run.results.iter().any(|l| {
            l.worker.as_deref() == Some(worker) && l.sink.as_deref() == Some(sink) && l.t >= after
        })
    };
    assert!(
        collected_from("w2", "s1", restore) || collected_from("w2", "s2", restore),
        "the cut worker's results reached the sink after its link came back"
    );
    for worker in ["w2", "w3", "w4"] {
        assert!(
            collected_from(worker, "s2", sink_start),
            "{worker}'s results reached the restarted sink"
        );
    }
    // A run that failed keeps its records for a look; this one is done with them.
    let _ = std::fs::remove_dir_all(&dir);
}

/// On libzmq and omq, what the heartbeats and CURVE did in the run with faults.
fn heartbeats_noticed_the_cut(
    lines: &[Line],
    cut: u64,
    restore: u64,
    vent_noticed: Option<u64>,
    sink_noticed: Option<u64>,
    causes: &BTreeMap<&str, u64>,
) {
    // Heartbeats: the ventilator and the sink cut the silent worker's connection within
    // the timeout, and it connects again once its link is back.
    for (who, noticed) in [("ventilator", vent_noticed), ("sink", sink_noticed)] {
        let after = noticed.map(|t| t - cut);
        assert!(
            after.is_some_and(|ms| ms <= NOTICED_WITHIN_MS),
            "the {who} noticed the cut {after:?} ms after it, not within {NOTICED_WITHIN_MS} ms"
        );
    }
    let connected_again = |broker: &str, whose: &dyn Fn(&Line) -> bool| {
        let peers = |l: &&Line| l.ev == "peers" && l.broker.as_deref() == Some(broker) && whose(l);
        let before = lines
            .iter()
            .filter(peers)
            .rfind(|l| l.t <= cut)
            .and_then(|l| l.connected)
            .unwrap_or(0);
        lines
            .iter()
            .filter(peers)
            .any(|l| l.t >= restore && l.connected.unwrap_or(0) >= before)
    };
    assert!(
        connected_again("jobs", &|l| l.run.as_deref() == Some("faults")),
        "the cut worker connected to the ventilator again"
    );
    assert!(
        connected_again("results", &|l| l.sink.as_deref() == Some("s1")),
        "the cut worker connected to the sink again"
    );
    // What went down with the connection: the cut worker's share of the stream until the
    // ventilator noticed, and a second more (what was in flight when the link went down).
    let noticed = vent_noticed.unwrap_or(cut) - cut;
    let cut_connection = causes.get("cut connection").copied().unwrap_or(0);
    let share = RATE * (noticed + 1_000) / 1_000 / LIVE_AT_THE_CUT;
    assert!(
        cut_connection <= share,
        "the cut connection lost {cut_connection} jobs, more than the cut worker's share \
         ({share}) of the stream until it was noticed: {causes:#?}"
    );
    // CURVE: every host was admitted.
    let refused = lines
        .iter()
        .filter(|l| l.ev == "peers")
        .filter_map(|l| l.refused)
        .max()
        .unwrap_or(0);
    assert_eq!(
        refused, 0,
        "CURVE refused a connection of the fleet's hosts"
    );
}
