//! The outbound half of a connection: the writers a broker opens on first use (one per target,
//! each owned by a task), every send bounded by the deadline of its call, the probe that tells a
//! bound fan-out its own publisher is heard, and a responder's answers through its own socket.
//!
//! It decides nothing about where a message goes: the connection routes, this half sends.

use std::{
    collections::HashMap,
    sync::{Arc, OnceLock, PoisonError, RwLock},
    time::Duration,
};

use ruststream::Bytes;
use tokio::{
    sync::{Mutex, Notify},
    time::{Instant, timeout, timeout_at},
};

use crate::{
    error::{SendFailure, ZmqError},
    monitor::{Flush, SocketFigures, SocketUse, ZmqMonitor},
    pattern::Role,
    routing::Target,
    settings::Settings,
    transport::{DuplexSender, Transport, Writer, WriterTask},
    wire::Frames,
};

/// How long a bound fan-out waits for its probe to come back before it sends another.
const PROBE_EVERY: Duration = Duration::from_millis(20);

/// A writer open for a target: its task, and its socket's figures, found with it by one lookup
/// a send.
struct Open {
    writer: Arc<Writer>,
    figures: Arc<SocketFigures>,
    task: WriterTask,
}

/// A writer open for a target and its socket's figures, a shut-down error once closed, or
/// nothing yet.
type Found = Option<Result<(Arc<Writer>, Arc<SocketFigures>), ZmqError>>;

/// The writers open so far, each with its task; none opens once they are closed.
#[derive(Default)]
struct Writers {
    open: HashMap<Target, Open>,
    /// The figures of each target's socket, kept across a writer's release and reopening.
    figures: HashMap<Target, Arc<SocketFigures>>,
    closed: bool,
}

impl Writers {
    fn found(&self, target: &Target) -> Found {
        if self.closed {
            return Some(Err(ZmqError::ShutDown {
                what: "a publisher",
            }));
        }
        self.open
            .get(target)
            .map(|open| Ok((Arc::clone(&open.writer), Arc::clone(&open.figures))))
    }
}

/// A connection's sending sockets.
pub(crate) struct Outbound {
    transport: Transport,
    /// The socket a publish to the broker's own endpoint leaves through.
    writes_with: Role,
    send_timeout: Duration,
    /// How long a graceful shutdown waits for each writer's socket to hand on what it queued.
    linger: Duration,
    monitor: ZmqMonitor,
    /// Read by every send, and held only to look up or change the map: never across a wait.
    writers: RwLock<Writers>,
    /// Held while a writer opens (and by `release` and `close`), so that a target opens once and
    /// sends to writers already open never wait behind an opening one.
    opening: Mutex<()>,
    /// The responder's ROUTER, once it opened: answers leave through it.
    responder: OnceLock<(DuplexSender, Arc<SocketFigures>)>,
}

impl Outbound {
    pub(crate) fn new(
        transport: Transport,
        writes_with: Role,
        settings: &Settings,
        monitor: ZmqMonitor,
    ) -> Self {
        Self {
            transport,
            writes_with,
            send_timeout: settings.send_timeout,
            linger: settings.linger,
            monitor,
            writers: RwLock::default(),
            opening: Mutex::default(),
            responder: OnceLock::new(),
        }
    }

    /// The writer for `target`, opened on first use and kept until the connection closes.
    async fn writer(&self, target: &Target) -> Result<(Arc<Writer>, Arc<SocketFigures>), ZmqError> {
        if let Some(found) = self.open_writer(target) {
            return found;
        }
        let _opening = self.opening.lock().await;
        if let Some(found) = self.open_writer(target) {
            return found;
        }
        let (role, binds) = match target {
            Target::Dial(_) => (self.writes_with, false),
            Target::Queue(_) => (Role::Push, false),
            Target::Bind(_) => (self.writes_with, true),
        };
        let (writer, task, bound) = self
            .transport
            .open_writer(role, target.address(), binds)
            .await?;
        if let Some(resolved) = bound {
            tracing::info!(
                endpoint = %resolved,
                "publishers listening: peers dial in here to take what this broker publishes \
                 (a subscription opened on the broker takes the endpoint over)"
            );
            self.monitor.set_bound_address(Some(resolved));
        }
        let opened = (writer, task);
        let writer = Arc::new(opened.0);
        let mut writers = self.writers_mut();
        let figures = Arc::clone(
            writers
                .figures
                .entry(target.clone())
                .or_insert_with(|| self.monitor.socket(SocketUse::Publisher, target.address())),
        );
        let open = Open {
            writer: Arc::clone(&writer),
            figures: Arc::clone(&figures),
            task: opened.1,
        };
        writers.open.insert(target.clone(), open);
        Ok((writer, figures))
    }

    /// The writer for `target` if it is open (a shut-down error once closed), without a wait.
    fn open_writer(&self, target: &Target) -> Found {
        // No code panics while it holds the lock, so a poisoned one still holds a whole map.
        self.writers
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .found(target)
    }

    fn writers_mut(&self) -> std::sync::RwLockWriteGuard<'_, Writers> {
        self.writers.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens the writer for `target` now, so that peers can reach it before anything is sent.
    pub(crate) async fn open(&self, target: &Target) -> Result<(), ZmqError> {
        self.writer(target).await.map(drop)
    }

    /// Opens the writer for `target` now and waits until it has a peer, by the send deadline.
    pub(crate) async fn open_reached(&self, target: &Target) -> Result<(), ZmqError> {
        let deadline = self.deadline();
        let (writer, _) = timeout_at(deadline, self.writer(target))
            .await
            .unwrap_or_else(|_| {
                Err(ZmqError::Connect {
                    endpoint: target.address().to_owned(),
                    source: "its socket did not open before the deadline".into(),
                })
            })?;
        writer.reach(deadline).await
    }

    /// The deadline of a send called now.
    pub(crate) fn deadline(&self) -> Instant {
        Instant::now() + self.send_timeout
    }

    /// Sends one message through the writer for `target`: it leaves, or fails naming why, by
    /// `deadline` (the call's own, taken before any wait); counted either way.
    pub(crate) async fn send(
        &self,
        target: &Target,
        frames: Frames,
        deadline: Instant,
    ) -> Result<(), ZmqError> {
        // A writer already open is found without a wait, however many tasks send at once;
        // opening one is boxed, so that the future of every send (a retry copy's waits out its
        // delay in memory) stays small.
        let writer = match self.open_writer(target) {
            Some(writer) => writer,
            None => Box::pin(timeout_at(deadline, self.writer(target)))
                .await
                .unwrap_or_else(|_| {
                    Err(ZmqError::Send {
                        endpoint: target.address().to_owned(),
                        source: SendFailure::NotOpened(
                            "its socket did not open before the send's deadline".to_owned(),
                        ),
                    })
                }),
        };
        let sent = match writer {
            Ok((writer, figures)) => {
                let sent = writer.send(frames, deadline).await;
                if sent.is_ok() {
                    figures.count_sent();
                }
                sent
            }
            Err(err) => Err(err),
        };
        self.count(&sent);
        sent
    }

    fn count(&self, sent: &Result<(), ZmqError>) {
        match sent {
            Ok(()) => self.monitor.count_sent(),
            Err(ZmqError::ShutDown { .. }) => {}
            Err(_) => self.monitor.count_send_failed(),
        }
    }

    /// Connects a writer to a bound fan-out's own listener at `address` and waits until the
    /// listener hears it (`heard` is told), so that no copy is lost to the slow joiner.
    pub(crate) async fn reach(
        &self,
        address: &str,
        heard: &Notify,
        probe: &Bytes,
    ) -> Result<(), ZmqError> {
        // The probes are not the broker's messages: its figures leave them out.
        let (writer, _) = self.writer(&Target::Dial(address.to_owned())).await?;
        let deadline = self.deadline();
        loop {
            let frames = vec![probe.clone()];
            writer.send(frames, deadline).await?;
            if timeout(PROBE_EVERY, heard.notified()).await.is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(ZmqError::Connect {
                    endpoint: address.to_owned(),
                    source: format!(
                        "the broker's own publisher did not reach its listener within {:?}",
                        self.send_timeout
                    )
                    .into(),
                });
            }
        }
    }

    /// Closes the writer for `target`, if one is open: a subscription is about to take the
    /// address it listened on. Answers whether one was open.
    pub(crate) async fn release(&self, target: &Target) -> bool {
        let opened = {
            let _opening = self.opening.lock().await;
            let mut writers = self.writers_mut();
            let opened = writers.open.remove(target);
            // One that sent nothing (bound at connect, for publishers that never came) is not
            // counted among the broker's sockets: the subscription is.
            if opened.as_ref().is_some_and(|open| open.figures.sent() == 0) {
                writers.figures.remove(target);
            }
            opened
        };
        let Some(open) = opened else {
            return false;
        };
        if open.figures.sent() == 0 {
            self.monitor.forget(&open.figures);
        }
        // The subscription binds the address next: nothing waits for the publisher's peers.
        open.task.close(Duration::ZERO).await;
        true
    }

    /// Keeps the responder's socket: answers leave through it.
    pub(crate) fn answer_through(&self, responder: DuplexSender, figures: Arc<SocketFigures>) {
        let _ = self.responder.set((responder, figures));
    }

    /// Sends an answer (already framed for its requester) through the responder's socket by
    /// `deadline`; `address` names the requester in errors.
    pub(crate) async fn answer(
        &self,
        frames: Frames,
        address: &str,
        deadline: Instant,
    ) -> Result<(), ZmqError> {
        let (responder, figures) = self.responder.get().ok_or_else(|| ZmqError::ReplyAddress {
            address: address.to_owned(),
            why: "this broker has no responder to answer through",
        })?;
        let sent = match responder.send(frames, deadline).await {
            Err(ZmqError::UnknownPeer { .. }) => Err(ZmqError::ReplyAddress {
                address: address.to_owned(),
                why: "no peer with that identity is connected: it went away before its answer",
            }),
            sent => sent,
        };
        if sent.is_ok() {
            figures.count_sent();
        }
        self.count(&sent);
        sent
    }

    /// Closes every writer at once, each within the writers' close wait; none opens afterwards.
    /// (A dropped connection closes them too: each task ends when its handle goes.)
    pub(crate) async fn close(&self) {
        let open = {
            let _opening = self.opening.lock().await;
            let mut writers = self.writers_mut();
            writers.closed = true;
            std::mem::take(&mut writers.open)
        };
        // Together, so that the shutdown takes one linger, not one a writer.
        let linger = self.linger;
        futures::future::join_all(open.into_iter().map(|(target, open)| {
            // The address a bound writer really listens on, as the warning names it.
            let endpoint = match &target {
                Target::Bind(_) => self.monitor.bound_address(),
                Target::Dial(_) | Target::Queue(_) => None,
            }
            .unwrap_or_else(|| target.address().to_owned());
            async move {
                // Held until the task closed: a task ends at once, lingering for nothing, when
                // its last handle goes.
                let Open {
                    writer,
                    figures,
                    task,
                } = open;
                let flush = task.close(linger).await;
                drop(writer);
                figures.closed(flush);
                if flush == Flush::LingerRanOut {
                    tracing::warn!(
                        %endpoint,
                        handed_to_socket = figures.sent(),
                        linger = ?linger,
                        "the linger ran out before what this socket queued left: the rest is \
                         lost (how much, the client does not say); lengthen `linger`, or make \
                         sure the peer reads before the service shuts down"
                    );
                }
            }
        }))
        .await;
    }
}
