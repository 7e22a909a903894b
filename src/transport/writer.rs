//! A sending socket owned by one task. Callers hand it messages through a bounded queue, each
//! with the deadline of its call, and wait for the outcome at most until then; the task never
//! cancels a send of the client half way, so no peer drops out of a rotation and no renewed
//! socket is left marked connected.
//!
//! A destination that fails (no peer took a message in time, or the peer stopped reading) is
//! failed fast: every send after the first failure fails at once, naming why, until the socket
//! reaches a peer again, with one warning when that begins ([`Episodes`]).

use std::{
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use std::task::Poll;

use tokio::{
    runtime::Handle,
    sync::{mpsc, oneshot},
    task::JoinHandle,
    time::{Instant, timeout, timeout_at},
};

use super::{
    backend::{CLOSE_WAIT, late_for_its_turn},
    dispatch::AnyWriteSocket,
    episodes::{Ended, Episodes, Failing},
};
use crate::{
    error::{SendFailure, ZmqError},
    monitor::Flush,
    wire::Frames,
};

/// How many sends wait for a writer's task.
const QUEUE: usize = 1_024;

/// How often an idle writer's task looks at what its socket's monitor reported.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// The socket, shared between the task and a caller that finds it idle; `None` once closed.
type HeldSocket = Arc<tokio::sync::Mutex<Option<AnyWriteSocket>>>;

/// What a send fails with once the writer's socket is closed.
fn gone() -> ZmqError {
    ZmqError::ShutDown {
        what: "a publisher",
    }
}

/// One send handed to a writer's task.
struct Job {
    frames: Frames,
    deadline: Instant,
    done: oneshot::Sender<Result<(), ZmqError>>,
}

/// What the callers and the task share.
struct WriterState {
    endpoint: String,
    /// The one episode of the destination failing (keyed by nothing: one destination).
    reach: Mutex<Episodes<(), String>>,
    /// Whether `reach` is failing, read without its lock by every send.
    failing: AtomicBool,
}

impl WriterState {
    fn reach(&self) -> std::sync::MutexGuard<'_, Episodes<(), String>> {
        self.reach.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a send may go ahead, or fails at once with why.
    fn admit(&self) -> Result<(), Failing<String>> {
        if !self.failing.load(Ordering::Acquire) {
            return Ok(());
        }
        self.reach()
            .refuse(&(), Instant::now())
            .cloned()
            .map_or(Ok(()), Err)
    }

    fn failed(&self, reason: String) {
        let mut reach = self.reach();
        let began = reach.failed((), Instant::now(), reason.clone());
        self.failing.store(true, Ordering::Release);
        drop(reach);
        if began {
            tracing::warn!(
                endpoint = %self.endpoint,
                reason = %reason,
                "sends to this destination fail at once until it is reached again"
            );
        }
    }

    fn reached(&self) {
        if !self.failing.load(Ordering::Acquire) {
            return;
        }
        let mut reach = self.reach();
        let ended = reach.reached(&(), Instant::now);
        self.failing.store(false, Ordering::Release);
        drop(reach);
        if let Some(Ended { refused, after }) = ended {
            tracing::info!(
                endpoint = %self.endpoint,
                refused,
                after = ?after,
                "the destination is reached again"
            );
        }
    }

    fn not_sent(&self, why: SendFailure) -> ZmqError {
        ZmqError::Send {
            endpoint: self.endpoint.clone(),
            source: why,
        }
    }
}

/// Sends through a socket's task; cheap to clone.
///
/// A caller on the socket's runtime that finds the socket idle sends inline, even with
/// messages queued (concurrent publishes have no order among them, and each caller's own
/// messages leave in order, since it waits for each); the send finishes there when the client
/// takes the message at once (the usual case), and is otherwise handed to the runtime to
/// finish, never dropped half way. A caller that finds the socket busy queues its message for
/// the task, which sends everything queued under one hold of the socket.
#[derive(Clone)]
pub(crate) struct Writer {
    jobs: mpsc::Sender<Job>,
    shared: Arc<WriterState>,
    socket: HeldSocket,
    runtime: Handle,
}

/// The task of a [`Writer`]: closing it closes the socket.
pub(crate) struct WriterTask {
    /// Stops the task, with how long its socket lingers.
    stop: oneshot::Sender<Duration>,
    task: JoinHandle<Flush>,
}

impl Writer {
    /// Starts the task that owns `socket` (sending to `endpoint`) on the current runtime.
    pub(crate) fn start(socket: AnyWriteSocket, endpoint: String) -> (Self, WriterTask) {
        let (jobs, queue) = mpsc::channel(QUEUE);
        let (stop, stopped) = oneshot::channel();
        let shared = Arc::new(WriterState {
            endpoint,
            reach: Mutex::new(Episodes::new(1)),
            failing: AtomicBool::new(false),
        });
        let socket = Arc::new(tokio::sync::Mutex::new(Some(socket)));
        let task = tokio::spawn(run(
            Arc::clone(&socket),
            queue,
            Arc::clone(&shared),
            stopped,
        ));
        let writer = Self {
            jobs,
            shared,
            socket,
            runtime: Handle::current(),
        };
        (writer, WriterTask { stop, task })
    }

    /// Sends one message: it leaves, or fails naming why, by `deadline`.
    pub(crate) async fn send(&self, frames: Frames, deadline: Instant) -> Result<(), ZmqError> {
        if let Err(failing) = self.shared.admit() {
            return Err(self.shared.not_sent(SendFailure::Unreached(format!(
                "not reached for {:?} ({}); sends fail at once until it is reached again",
                failing.since.elapsed(),
                failing.reason
            ))));
        }
        let on_runtime = Handle::try_current().is_ok_and(|here| here.id() == self.runtime.id());
        if on_runtime && let Ok(socket) = Arc::clone(&self.socket).try_lock_owned() {
            let shared = Arc::clone(&self.shared);
            let mut sending = Box::pin(async move {
                let mut socket = socket;
                send_on(&mut socket, frames, deadline, &shared).await
            });
            if let Poll::Ready(sent) = futures::poll!(sending.as_mut()) {
                return sent;
            }
            // It waits (for a connection, for room at the peer): the runtime finishes it.
            let sending = self.runtime.spawn(sending);
            return Box::pin(async move {
                match timeout_at(deadline, sending).await {
                    Ok(sent) => sent.map_err(|_| gone())?,
                    Err(_) => Err(self.did_not_leave()),
                }
            })
            .await;
        }
        // The waits are boxed: the future of a send that leaves at once (the usual case) stays
        // small, and a retry copy's waits out its delay in memory.
        Box::pin(self.queued(frames, deadline)).await
    }

    /// Waits until the socket has a peer (a dialing one has connected), by `deadline`.
    pub(crate) async fn reach(&self, deadline: Instant) -> Result<(), ZmqError> {
        let not_reached = || ZmqError::Connect {
            endpoint: self.shared.endpoint.clone(),
            source: "no peer was connected by the deadline".into(),
        };
        let socket = Arc::clone(&self.socket);
        let reached = async move {
            let mut held = socket.lock_owned().await;
            let Some(sending) = held.as_mut() else {
                return Err(gone());
            };
            sending.reach().await;
            Ok(())
        };
        // On the socket's runtime, as its sends are, and ended by the deadline there: a wait
        // left running would hold the socket from every send after it.
        match self.runtime.spawn(timeout_at(deadline, reached)).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => Err(not_reached()),
            Err(_) => Err(gone()),
        }
    }

    /// Hands one message to the socket's task and waits for the outcome, by `deadline`.
    async fn queued(&self, frames: Frames, deadline: Instant) -> Result<(), ZmqError> {
        let Ok(permit) = timeout_at(deadline, self.jobs.reserve()).await else {
            let why = "the peer is not reading: the socket's queue stayed full until the \
                       deadline"
                .to_owned();
            self.shared.failed(why.clone());
            return Err(self.shared.not_sent(SendFailure::NotReading(why)));
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
            Err(_) => Err(self.did_not_leave()),
        }
    }

    /// A send that did not leave by its deadline, while the socket was busy: the destination
    /// fails from now on.
    fn did_not_leave(&self) -> ZmqError {
        let why = "it did not leave by its deadline: no peer took it, or the peer is not reading"
            .to_owned();
        self.shared.failed(why.clone());
        self.shared.not_sent(SendFailure::Late(why))
    }
}

impl WriterTask {
    /// Stops the task and closes its socket once what it queued left, for at most `linger`
    /// (and the close wait for the task itself); sends still queued for the task fail with a
    /// shut-down error. Answers whether what the socket queued left.
    pub(crate) async fn close(self, linger: Duration) -> Flush {
        let _ = self.stop.send(linger);
        let abort = self.task.abort_handle();
        match timeout(linger + CLOSE_WAIT, self.task).await {
            Ok(flush) => flush.unwrap_or(Flush::LingerRanOut),
            Err(_) => {
                abort.abort();
                Flush::LingerRanOut
            }
        }
    }
}

/// Sends one message on the socket, waiting until `deadline` for a peer, and notes the outcome.
async fn send_on(
    socket: &mut Option<AnyWriteSocket>,
    frames: Frames,
    deadline: Instant,
    shared: &WriterState,
) -> Result<(), ZmqError> {
    let Some(socket) = socket.as_mut() else {
        return Err(gone());
    };
    let sent = socket.send(frames, deadline).await;
    match &sent {
        Ok(()) => shared.reached(),
        Err(err) => shared.failed(err.to_string()),
    }
    sent
}

/// Sends `job` and the jobs queued by then under one hold of the socket: one wait for its lock,
/// not one a message. At most a queue's worth, so that a stop is seen between holds however fast
/// callers queue.
async fn send_queued(
    held: &mut Option<AnyWriteSocket>,
    mut job: Job,
    jobs: &mut mpsc::Receiver<Job>,
    shared: &WriterState,
) {
    for turn in 1..=QUEUE {
        let sent = if Instant::now() >= job.deadline {
            Err(late_for_its_turn(&shared.endpoint))
        } else {
            send_on(held, job.frames, job.deadline, shared).await
        };
        let _ = job.done.send(sent);
        if turn == QUEUE || shared.failing.load(Ordering::Acquire) {
            break;
        }
        match jobs.try_recv() {
            Ok(queued) => job = queued,
            Err(_) => break,
        }
    }
}

/// The task: sends each queued message before its deadline, one at a time; while the
/// destination fails, tries to reach it again; closes the socket at the end.
async fn run(
    socket: HeldSocket,
    mut jobs: mpsc::Receiver<Job>,
    shared: Arc<WriterState>,
    mut stop: oneshot::Receiver<Duration>,
) -> Flush {
    // A task dropped without a close lingers for nothing.
    let mut linger = Duration::ZERO;
    let looks = socket
        .lock()
        .await
        .as_ref()
        .is_some_and(AnyWriteSocket::looks);
    loop {
        if shared.failing.load(Ordering::Acquire) {
            let mut held = Arc::clone(&socket).lock_owned().await;
            let Some(sending) = held.as_mut() else { break };
            tokio::select! {
                biased;
                asked = &mut stop => {
                    linger = asked.unwrap_or_default();
                    break;
                }
                () = sending.reach() => shared.reached(),
            }
            continue;
        }
        let job = tokio::select! {
            biased;
            asked = &mut stop => {
                linger = asked.unwrap_or_default();
                break;
            }
            job = jobs.recv() => match job {
                Some(job) => job,
                None => break,
            },
            () = tokio::time::sleep(LOOK_EVERY), if looks => {
                if let Ok(mut held) = socket.try_lock()
                    && let Some(sending) = held.as_mut()
                {
                    sending.look().await;
                }
                continue;
            }
        };
        send_queued(&mut *socket.lock().await, job, &mut jobs, &shared).await;
    }
    // What is still queued fails with a shut-down error as its senders are dropped.
    drop(jobs);
    let closing = socket.lock().await.take();
    match closing {
        Some(sending) => sending.close(linger).await,
        None => Flush::Flushed,
    }
}
