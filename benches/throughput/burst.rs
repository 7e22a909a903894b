//! The retry burst's timing: when each delivery and its copy were seen ([`Burst`]), and the
//! figures drawn from it once the run is over, how late the copies came and the stalls in
//! which no handler ran. Pure functions of the recorded times.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant},
};

use crate::meter::{Run, percentiles};

/// The delay of the retry burst.
pub const RETRY_DELAY: Duration = Duration::from_millis(500);

/// The shortest pause in a retry burst's deliveries that counts as a stall.
const STALL: Duration = Duration::from_millis(20);

/// When each copy of the retry burst was seen, in nanoseconds since `base` (0: not seen).
pub struct Burst {
    pub base: Instant,
    pub first: Vec<AtomicU64>,
    pub second: Vec<AtomicU64>,
}

impl Burst {
    pub fn new(messages: u64) -> Self {
        let slots = || (0..messages).map(|_| AtomicU64::new(0)).collect();
        Self {
            base: Instant::now(),
            first: slots(),
            second: slots(),
        }
    }

    pub fn now(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX) + 1
    }
}

/// The burst's figures: copies early and lost, how late the rest came (p50, p99), how long the
/// first deliveries took, and the resident set at its peak.
pub fn lateness(burst: &Burst, run: &Run) -> Vec<(&'static str, f64)> {
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
