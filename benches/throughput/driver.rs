//! The driver: which sides of a scenario a repetition runs and in what order, what each side
//! runs on a backend, and the repetitions themselves, each run printed as it ends.

use tracing_subscriber::EnvFilter;

use crate::{
    backend::{Stack, Which, on_backend},
    crate_requests::crate_request_reply,
    crate_side::{Body, Feed, codec, crate_fanout, crate_queue, crate_retry_burst},
    log_filter::{readme_filter, set_filter},
    memory_side::{memory_queue, memory_request_reply, memory_retry_burst},
    messages::{big_frames, job_frames},
    meter::Run,
    raw_side::{raw_big_job, raw_count_only, raw_fanout, raw_job, raw_queue, raw_request_reply},
    scenarios::{Baseline, Scenario},
    summary::{Row, micros, rate},
};

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

/// Runs every row `reps` times, each repetition's sides interleaved as [`parts`] orders
/// them (one side alone with `only`), after one run thrown away on each backend; prints a
/// line for every run and keeps it in its row.
pub fn run(
    runtime: &tokio::runtime::Runtime,
    backends: &[Which],
    rows: &mut [Row],
    reps: usize,
    only: Option<bool>,
) {
    // One run thrown away on each backend, so that the first measured run does not pay for the
    // process's first sockets, threads and heap.
    for &which in backends {
        on_backend!(which, B => runtime.block_on(raw_queue::<B>(50_000, job_frames, raw_job)));
    }
    for rep in 0..reps {
        for row in rows.iter_mut() {
            for part in parts(row.scenario, backends, rep) {
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
                    Part::Measured(which) => row.runs[at(backends, which)].0.push(run),
                    Part::Baseline(which) => row.runs[at(backends, which)].1.push(run),
                    Part::Shared => {
                        for (_, baseline) in &mut row.runs {
                            baseline.push(run.clone());
                        }
                    }
                }
            }
        }
    }
}

/// Where `which` stands in `backends`.
fn at(backends: &[Which], which: Which) -> usize {
    backends
        .iter()
        .position(|&other| other == which)
        .expect("a backend that runs")
}
