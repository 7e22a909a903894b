//! Measuring a run: a [`Meter`] reads the process's wall time, CPU time, allocations, context
//! switches and resident set before and after, into a [`Run`]; the round trips of a raw asker
//! ([`Latencies`]) and their percentiles.

use std::{
    ops::Range,
    sync::{Arc, atomic::Ordering},
    time::{Duration, Instant},
};

use crate::{alloc::ALLOCATIONS, messages::answered};

/// The round trips of requests `ids`, as their answers come: what a raw asker keeps, on
/// either client.
pub struct Latencies {
    first: u64,
    sent_at: Vec<Option<Instant>>,
    taken: Vec<Duration>,
}

impl Latencies {
    pub fn new(ids: &Range<u64>) -> Self {
        let total = usize::try_from(ids.end - ids.start).unwrap();
        Self {
            first: ids.start,
            sent_at: vec![None; total],
            taken: Vec::with_capacity(total),
        }
    }

    pub fn all(&self) -> bool {
        self.taken.len() == self.sent_at.len()
    }

    /// How many are in flight once `next` is sent.
    pub fn in_flight(&self, next: u64) -> u64 {
        next - self.first - self.taken.len() as u64
    }

    pub fn sent(&mut self, id: u64) {
        self.sent_at[usize::try_from(id - self.first).unwrap()] = Some(Instant::now());
    }

    /// Notes the answer whose payload is `payload`.
    pub fn answered(&mut self, payload: &[u8]) {
        let id = answered(payload);
        if let Some(at) = self.sent_at[usize::try_from(id - self.first).unwrap()].take() {
            self.taken.push(at.elapsed());
        }
    }

    pub fn done(self) -> Arc<Vec<Duration>> {
        Arc::new(self.taken)
    }
}

/// One run of one side of a scenario.
#[derive(Clone, Default)]
pub struct Run {
    /// Messages (or requests) a second.
    pub rate: f64,
    /// Process CPU time per message, µs.
    pub cpu_us: f64,
    /// Heap allocations (and reallocations) of Rust code per message, the whole process.
    pub allocs: f64,
    /// Context switches of the process's threads per message: how often a thread parked and
    /// was woken, the cost of a hop between tasks or threads that finds the other side asleep.
    pub switches: f64,
    pub latencies: Option<(Duration, Duration)>,
    /// Peak resident set over the run, less the resident set at its start, KiB.
    pub peak_growth_kib: f64,
    /// Peak resident set over the run, KiB.
    pub peak_kib: f64,
    /// Figures of their own (name, value), for the crate-only rows.
    pub fields: Vec<(&'static str, f64)>,
}

pub struct Meter {
    started: Instant,
    allocations: u64,
    switches: u64,
    cpu: Duration,
    rss_kib: u64,
}

/// Hands the heap's free pages back to the system (glibc), so that a resident set read next is
/// what is live rather than what earlier runs left free. Before every run, and before each
/// reading of the RSS rows (after a tenth, at the end).
pub fn trim_heap() {
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
    pub fn start() -> Self {
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

    pub fn stop(&self, messages: u64) -> Run {
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
pub fn status_kib(field: &str) -> Option<u64> {
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

pub fn percentiles(mut latencies: Vec<Duration>) -> Option<(Duration, Duration)> {
    if latencies.is_empty() {
        return None;
    }
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    Some((at(0.50), at(0.99)))
}
