//! A sending socket owned by one task. Callers hand it messages through a bounded queue, each
//! with the deadline of its call, and wait for the outcome at most until then; the task never
//! cancels a send of the client half way, so no peer drops out of a rotation and no renewed
//! socket is left marked connected.
//!
//! A destination that fails (no peer took a message in time, or the peer stopped reading) is
//! failed fast: every send after the first failure fails at once, naming why, until the socket
//! reaches a peer again. [`Reachability`] is that decision, over plain values and a clock.
//!
//! Imports: its parent `transport`, and `error` and `wire`.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use tokio::{
    sync::{mpsc, oneshot},
    task::JoinHandle,
    time::{Instant, timeout, timeout_at},
};

use super::Sending;
use crate::{error::ZmqError, wire::Frames};

/// How many sends wait for a writer's task.
const QUEUE: usize = 1_024;

/// How long closing waits for a writer's task to close its socket.
pub(crate) const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// Why sends to a destination fail at once, since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failing {
    pub(crate) since: Instant,
    pub(crate) reason: String,
    /// How many sends were refused at once since.
    pub(crate) refused: u64,
}

/// Whether a writer's destination takes messages, as its sends so far tell.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Reachability {
    failing: Option<Failing>,
}

/// What a change of [`Reachability`] means for the log: one line an episode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Episode {
    /// Sends to the destination fail from now on.
    Began,
    /// The destination takes messages again, after this many sends were refused at once.
    Ended { refused: u64, after: Duration },
    /// Nothing to say: the state did not change.
    Unchanged,
}

impl Reachability {
    /// Whether a send may go ahead at `now`, or fails at once with why.
    pub(crate) fn admit(&mut self) -> Result<(), Failing> {
        match &mut self.failing {
            None => Ok(()),
            Some(failing) => {
                failing.refused += 1;
                Err(failing.clone())
            }
        }
    }

    /// A send failed at `now` for `reason`.
    pub(crate) fn failed(&mut self, now: Instant, reason: String) -> Episode {
        if self.failing.is_some() {
            return Episode::Unchanged;
        }
        self.failing = Some(Failing {
            since: now,
            reason,
            refused: 0,
        });
        Episode::Began
    }

    /// A message left, or a peer was reached, at `now`.
    pub(crate) fn reached(&mut self, now: Instant) -> Episode {
        match self.failing.take() {
            None => Episode::Unchanged,
            Some(failing) => Episode::Ended {
                refused: failing.refused,
                after: now.saturating_duration_since(failing.since),
            },
        }
    }

    pub(crate) fn is_failing(&self) -> bool {
        self.failing.is_some()
    }
}

/// One send handed to a writer's task.
struct Job {
    frames: Frames,
    deadline: Instant,
    done: oneshot::Sender<Result<(), ZmqError>>,
}

/// What the callers and the task share.
struct Shared {
    endpoint: String,
    reach: Mutex<Reachability>,
}

impl Shared {
    fn reach(&self) -> std::sync::MutexGuard<'_, Reachability> {
        self.reach.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn failed(&self, reason: String) {
        if self.reach().failed(Instant::now(), reason.clone()) == Episode::Began {
            tracing::warn!(
                endpoint = %self.endpoint,
                reason = %reason,
                "sends to this destination fail at once until it is reached again"
            );
        }
    }

    fn reached(&self) {
        if let Episode::Ended { refused, after } = self.reach().reached(Instant::now()) {
            tracing::info!(
                endpoint = %self.endpoint,
                refused,
                after = ?after,
                "the destination is reached again"
            );
        }
    }

    fn not_sent(&self, why: String) -> ZmqError {
        ZmqError::Send {
            endpoint: self.endpoint.clone(),
            source: why.into(),
        }
    }
}

/// Sends through a socket's task; cheap to clone.
#[derive(Clone)]
pub(crate) struct Writer {
    jobs: mpsc::Sender<Job>,
    shared: Arc<Shared>,
}

/// The task of a [`Writer`]: closing it closes the socket.
pub(crate) struct WriterTask {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Writer {
    /// Starts the task that owns `socket` (sending to `endpoint`) on the current runtime.
    pub(crate) fn start(socket: Sending, endpoint: String) -> (Self, WriterTask) {
        let (jobs, queue) = mpsc::channel(QUEUE);
        let (stop, stopped) = oneshot::channel();
        let shared = Arc::new(Shared {
            endpoint,
            reach: Mutex::default(),
        });
        let task = tokio::spawn(run(socket, queue, Arc::clone(&shared), stopped));
        (Self { jobs, shared }, WriterTask { stop, task })
    }

    /// Sends one message: it leaves, or fails naming why, by `deadline`.
    pub(crate) async fn send(&self, frames: Frames, deadline: Instant) -> Result<(), ZmqError> {
        if let Err(failing) = self.shared.reach().admit() {
            return Err(self.shared.not_sent(format!(
                "not reached for {:?} ({}); sends fail at once until it is reached again",
                failing.since.elapsed(),
                failing.reason
            )));
        }
        let gone = || ZmqError::ShutDown {
            what: "a publisher",
        };
        let Ok(permit) = timeout_at(deadline, self.jobs.reserve()).await else {
            let why = "the peer is not reading: the socket's queue stayed full until the \
                       deadline"
                .to_owned();
            self.shared.failed(why.clone());
            return Err(self.shared.not_sent(why));
        };
        let permit = permit.map_err(|_| gone())?;
        let (done, outcome) = oneshot::channel();
        permit.send(Job {
            frames,
            deadline,
            done,
        });
        match timeout_at(deadline, outcome).await {
            Ok(outcome) => outcome.map_err(|_| gone())?,
            Err(_) => {
                let why = "it did not leave by its deadline: no peer took it, or the peer is not \
                           reading"
                    .to_owned();
                self.shared.failed(why.clone());
                Err(self.shared.not_sent(why))
            }
        }
    }
}

impl WriterTask {
    /// Stops the task and closes its socket, waiting at most [`CLOSE_WAIT`]; sends still
    /// queued fail with a shut-down error.
    pub(crate) async fn close(self) {
        let _ = self.stop.send(());
        let abort = self.task.abort_handle();
        if timeout(CLOSE_WAIT, self.task).await.is_err() {
            abort.abort();
        }
    }
}

/// The task: sends each message before its deadline, one at a time, and while the destination
/// fails, tries to reach it again.
async fn run(
    mut socket: Sending,
    mut jobs: mpsc::Receiver<Job>,
    shared: Arc<Shared>,
    mut stop: oneshot::Receiver<()>,
) {
    loop {
        if shared.reach().is_failing() {
            tokio::select! {
                biased;
                _ = &mut stop => break,
                () = socket.reach() => shared.reached(),
            }
            continue;
        }
        let job = tokio::select! {
            biased;
            _ = &mut stop => break,
            job = jobs.recv() => match job {
                Some(job) => job,
                None => break,
            },
            () = socket.watch() => continue,
        };
        let left = job.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let _ = job.done.send(Err(
                shared.not_sent("its deadline passed before its turn came".to_owned())
            ));
            continue;
        }
        let sent = socket.send(job.frames, left).await;
        match &sent {
            Ok(()) => shared.reached(),
            Err(err) => shared.failed(err.to_string()),
        }
        let _ = job.done.send(sent);
    }
    // What is still queued fails with a shut-down error as its senders are dropped.
    drop(jobs);
    socket.close().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_refuses_every_later_send_until_the_destination_is_reached() {
        let start = Instant::now();
        let mut reach = Reachability::default();
        assert_eq!(reach.admit(), Ok(()));
        assert_eq!(reach.failed(start, "no peer".into()), Episode::Began);
        for refused in 1..=3 {
            let failing = reach.admit().unwrap_err();
            assert_eq!(
                (failing.reason.as_str(), failing.refused),
                ("no peer", refused)
            );
        }
        assert_eq!(
            reach.failed(start + Duration::from_secs(1), "again".into()),
            Episode::Unchanged,
            "a failure within an episode is not a new one"
        );
        assert_eq!(
            reach.reached(start + Duration::from_secs(7)),
            Episode::Ended {
                refused: 3,
                after: Duration::from_secs(7)
            }
        );
        assert_eq!(reach.admit(), Ok(()));
        assert_eq!(reach.reached(start), Episode::Unchanged);
    }
}
