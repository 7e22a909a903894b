//! The crate's handlers, the same on every broker a scenario runs: the queue's, the 16 KiB
//! message's, the retry burst's and the echo; the state they share, and `include_mount!`, which
//! mounts the one a queue service runs.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use ruststream_zmq::prelude::*;

use crate::{
    burst::{Burst, RETRY_DELAY},
    messages::{BigJob, Job, Retries, Tenant},
    tally::{Tally, WARM_UP},
};

#[derive(Clone, FromRef)]
pub struct AppState {
    pub tally: Tally,
    pub burst: Arc<Burst>,
}

impl AppState {
    pub fn of(tally: &Tally) -> Self {
        Self {
            tally: tally.clone(),
            burst: Arc::new(Burst::new(0)),
        }
    }
}

/// The queue's handler: reads the header, decodes the JSON, acks.
#[subscriber]
pub async fn on_job(
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
pub async fn on_big_job(
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
pub async fn on_burst(
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
pub async fn on_redelivered_burst(
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
pub async fn echo(job: &Job) -> Job {
    Job { id: job.id }
}

/// The handler a queue service mounts under `jobs`.
#[derive(Clone, Copy)]
pub enum Mount {
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
            $crate::handlers::Mount::Count => {
                $b.include($crate::handlers::on_job.name("jobs"));
            }
            $crate::handlers::Mount::CountBig => {
                $b.include($crate::handlers::on_big_job.name("jobs"));
            }
            $crate::handlers::Mount::Burst => {
                $b.include($crate::handlers::on_burst.name("jobs"));
            }
            $crate::handlers::Mount::RedeliveredBurst => {
                $b.include($crate::handlers::on_redelivered_burst.name("jobs"));
            }
        }
    };
}

pub(crate) use include_mount;
