//! Figures, not tests: each scenario run against the crate and against raw sockets of the client
//! under it, doing the same work, interleaved, several times, on every backend the bench is built
//! with, in one process; a table of medians for each backend at the end and, with more than one,
//! a cross table of the crate on each backend against the crate on the first (`zeromq`). Run in
//! release:
//!
//! ```text
//! cargo bench --bench throughput --features libzmq,omq         # three backends, the cross table
//! cargo bench --bench throughput --features libzmq             # `zeromq` and libzmq
//! cargo bench --bench throughput                               # the `zeromq` backend alone
//! cargo bench --bench throughput --no-default-features --features libzmq   # libzmq alone
//! cargo bench --bench throughput --features libzmq,omq -- --backend libzmq,omq   # two of three
//! cargo bench --bench throughput -- --reps 1 --scale 0.1 queue rr1   # a quick look
//! cargo bench --bench throughput -- clients [N]                # short-lived REQ/DEALER clients
//! ```
//!
//! Arguments after `--`: scenario names (all of them when none is given; `list` prints them),
//! `--backend zeromq|libzmq|omq|all` or a list such as `libzmq,omq` (the backends to run; every
//! one the build has by default; `both` is `all`),
//! `--reps N` (3 by default: the table shows the median of N runs), `--scale F` (multiplies every
//! message count, 1.0 by default), `--only measured|baseline` (one side alone, to run a profiler
//! around the process), `--workers N` (the runtime's worker threads, 2 by default: with 1, a
//! row shows what a scenario costs without hand-offs between workers), `--raw-hop router` and
//! `--raw-hop dealer` (on `zeromq` the raw responder hands each request to a second task, or the
//! raw asker's answers are read by a task of their own, each through a channel of 64: what one
//! hand-off between tasks costs a round trip; the same on omq; on libzmq the raw responder or
//! asker becomes a task behind a thread per socket with a wake-up pipe, the design a backend
//! could take). `clients [N]` runs the short-lived requesters alone, against the crate's
//! responder on each backend.
//!
//! Each backend's baseline is raw sockets of its own client: on `zeromq`, raw `zeromq` 0.7
//! sockets, each driven by one tokio task on the same 2-worker runtime (`benches/raw/zeromq.rs`);
//! on libzmq, raw libzmq sockets through the `zmq` 0.9 binding, each driven by a plain std
//! thread with blocking calls, the fastest way to use libzmq and so the fairest "raw" figure
//! (`benches/raw/libzmq.rs`); on omq, raw `omq-tokio` 0.33 sockets, each read by one tokio task
//! on the same runtime, where their actors run too (`benches/raw/omq.rs`). All do the work the
//! crate's handler does: read the one header, decode the JSON `{"id":n}`, count; a raw
//! responder reads the `correlation-id` header, decodes the request and encodes the answer. A
//! scenario is written once, generic over the backend ([`Stack`](backend::Stack)): the crate's
//! side on `ZmqBroker<_, _, B>`, the raw side on `B`'s raw sockets.
//!
//! In each repetition a scenario's sides run in turn: the crate on `zeromq`, its baseline, the
//! crate on libzmq, its baseline, the crate on omq, its baseline; on odd repetitions the other way
//! round. A baseline that is the same on every backend (the framework's in-process broker) runs
//! once a repetition, after the first backend's crate, and every backend's table sets its crate
//! against it. The cross table has, for each scenario, the crate's rate on each backend (and its
//! p50 where there are round trips), each later backend's over the first's (rate, p50), the CPU
//! a message on each, each backend against
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

// One concern a file, under `benches/throughput/`; the raw sockets of each client under
// `benches/raw/`. `#[path]`, so that no file but this one sits where cargo looks for benches.

#[path = "throughput/alloc.rs"]
mod alloc;
#[path = "throughput/backend.rs"]
mod backend;
#[path = "throughput/burst.rs"]
mod burst;
#[path = "throughput/clients.rs"]
mod clients;
#[path = "throughput/crate_requests.rs"]
mod crate_requests;
#[path = "throughput/crate_side.rs"]
mod crate_side;
#[path = "throughput/driver.rs"]
mod driver;
#[path = "throughput/handlers.rs"]
mod handlers;
#[path = "throughput/log_filter.rs"]
mod log_filter;
#[path = "throughput/memory_side.rs"]
mod memory_side;
#[path = "throughput/messages.rs"]
mod messages;
#[path = "throughput/meter.rs"]
mod meter;
#[path = "throughput/raw_side.rs"]
mod raw_side;
#[path = "throughput/scenarios.rs"]
mod scenarios;
#[path = "throughput/summary.rs"]
mod summary;
#[path = "throughput/tally.rs"]
mod tally;

#[cfg(feature = "zeromq")]
#[path = "raw/zeromq.rs"]
mod raw_zeromq;

#[cfg(feature = "libzmq")]
#[path = "raw/libzmq.rs"]
mod raw_libzmq;

#[cfg(feature = "omq")]
#[path = "raw/omq.rs"]
mod raw_omq;

use crate::{
    alloc::allocator,
    backend::{COMPILED, Which, on_backend},
    clients::short_lived_requesters,
    log_filter::install_subscriber,
    raw_side::{RAW_HOPS, RawHops},
    scenarios::{SCENARIOS, Scenario},
    summary::{Row, print_cross_table, print_table},
};

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
    driver::run(&runtime, &backends, &mut rows, reps, only);
    for (at, &which) in backends.iter().enumerate() {
        print_table(which, at, &rows, reps, workers);
    }
    print_cross_table(&backends, &rows, reps, workers);
}
