//! What the handlers count: a [`Tally`] of messages handled, which wakes a run when its target
//! is reached, the warm-up that precedes every measured run, and the wait for a fan-out's
//! subscribers.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use tokio::sync::Notify;

use crate::meter::{Meter, Run};

/// The id of warm-up messages, which no tally counts.
pub const WARM_UP: u64 = u64::MAX;

/// How long a run may take before it counts what is missing as lost.
pub const RUN_DEADLINE: Duration = Duration::from_secs(120);

/// Counts the messages handled; wakes the run when the target is reached.
#[derive(Clone, Default)]
pub struct Tally(Arc<TallyInner>);

#[derive(Default)]
struct TallyInner {
    count: AtomicU64,
    target: AtomicU64,
    warmed: AtomicBool,
    done: Notify,
}

impl Tally {
    pub fn hit(&self, id: u64) {
        if id == WARM_UP {
            self.0.warmed.store(true, Ordering::Relaxed);
            return;
        }
        let count = self.0.count.fetch_add(1, Ordering::Relaxed) + 1;
        if count == self.0.target.load(Ordering::Relaxed) {
            self.0.done.notify_one();
        }
    }

    pub fn count(&self) -> u64 {
        self.0.count.load(Ordering::Relaxed)
    }

    pub fn warmed(&self) -> bool {
        self.0.warmed.load(Ordering::Relaxed) || self.count() > 0
    }

    pub fn arm(&self, target: u64) {
        self.0.count.store(0, Ordering::Relaxed);
        self.0.target.store(target, Ordering::Relaxed);
    }

    /// Waits until the target is reached or nothing has come for `idle`; answers whether it was.
    pub async fn wait(&self, idle: Duration) -> bool {
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
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !$tallies.iter().all(|tally| tally.warmed()) {
            assert!(
                std::time::Instant::now() < deadline,
                "the warm-up never arrived"
            );
            $send.await;
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }};
}

pub(crate) use warm_up;

/// Waits for every subscriber; the rate is of messages published and delivered to all.
pub async fn fanout_wait(meter: &Meter, tallies: &[Tally], messages: u64) -> Run {
    for tally in tallies {
        tally.wait(Duration::from_secs(3)).await;
    }
    let delivered: u64 = tallies.iter().map(Tally::count).sum();
    let mut run = meter.stop(messages);
    let lost = messages * tallies.len() as u64 - delivered;
    run.fields = vec![("lost", lost as f64)];
    run
}
