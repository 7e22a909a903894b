//! A ROUTER's requesters that stop reading their answers: an answer to one whose queue is full
//! is dropped at once (waiting for one requester would hold up every other answer), counted,
//! and warned of once an episode, until that requester reads again. The same on every backend.

use std::sync::{Mutex, PoisonError};

use ruststream::Bytes;
use tokio::time::Instant;

use super::episodes::{Ended, Episodes};
use crate::{
    error::{SendFailure, ZmqError},
    monitor::ZmqMonitor,
};

/// How many requesters not reading their answers are tracked at once, for one warning each.
const TRACKED: usize = 1_024;

/// The requesters of one ROUTER whose answers are being dropped.
pub(crate) struct Requesters {
    endpoint: String,
    monitor: ZmqMonitor,
    /// What a requester's queue holds, as the warning says it ("1000 answers").
    queue: String,
    not_reading: Mutex<Episodes<Bytes>>,
}

impl Requesters {
    pub(crate) fn new(endpoint: &str, monitor: ZmqMonitor, queue: String) -> Self {
        Self {
            endpoint: endpoint.to_owned(),
            monitor,
            queue,
            not_reading: Mutex::new(Episodes::new(TRACKED)),
        }
    }

    fn episodes(&self) -> std::sync::MutexGuard<'_, Episodes<Bytes>> {
        self.not_reading
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// An answer to `identity`, a requester whose queue is full, is dropped: counted, and
    /// warned of once until that requester reads again. Answers the error its sender gets.
    pub(crate) fn not_reading(&self, identity: Bytes) -> ZmqError {
        self.monitor.count_dropped_not_reading();
        let now = Instant::now();
        let mut episodes = self.episodes();
        // A drop within an episode is counted in it; the first begins one, and warns.
        let began = episodes.refuse(&identity, now).is_none() && episodes.failed(identity, now, ());
        drop(episodes);
        if began {
            tracing::warn!(
                endpoint = %self.endpoint,
                rule = "peer-not-reading",
                queue = %self.queue,
                "a requester is not reading its answers: they are dropped until it reads again"
            );
        }
        ZmqError::Send {
            endpoint: self.endpoint.clone(),
            source: SendFailure::NotReading(format!(
                "the requester is not reading: its queue of {} is full",
                self.queue
            )),
        }
    }

    /// An answer to `identity` left: a requester that was not reading reads again.
    pub(crate) fn answered(&self, identity: &Bytes) {
        let mut episodes = self.episodes();
        let ended = episodes.reached(identity, Instant::now);
        drop(episodes);
        if let Some(Ended { refused, .. }) = ended {
            // The drop that began the episode, and each since.
            let dropped = refused + 1;
            tracing::info!(endpoint = %self.endpoint, dropped, "a requester reads its answers again");
        }
    }
}
