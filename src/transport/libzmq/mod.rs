//! The libzmq sockets (`libzmq` feature): the only modules that name the `zmq` binding's types.
//!
//! libzmq does most of what the transport needs by itself: a dialing socket reconnects with a
//! backoff, a PUSH passes over a peer whose queue is full, a ROUTER refuses an identity it does
//! not know, and a frame over the size limit is refused before it is allocated. What is left
//! here is driving each socket from the one task that waits on it without blocking a runtime
//! thread, letting a ROUTER or DEALER send from the tasks that send (an answer leaves from its
//! handler's task), and reading its monitor: who is connected, and who left.
//!
//! - [`driven`]: a socket driven through its notification descriptor by the task that waits on
//!   it, and sent through from others;
//! - [`watcher`]: who a socket is connected to, from its monitor, read by a thread of its own;
//! - [`security`]: CURVE on a socket, as its endpoint says; [`zap`]: who may connect.
//!
//! Imports: its parent `transport`, and `curve`, `endpoint`, `error`, `monitor`, `pattern` and
//! `wire`.

mod driven;
mod security;
mod watcher;
pub(super) mod zap;

use std::{
    sync::{Arc, LazyLock, Mutex, PoisonError},
    time::Duration,
};

use ruststream::Bytes;
use tokio::{
    sync::watch,
    time::{Instant, sleep_until},
};

use self::{
    driven::{Driven, Sending},
    security::{curve_available, secure},
    watcher::Watched,
};
use super::{
    Closed, Direct, DirectSend, DuplexSender, Inbound, Outbound, Received, Release, SocketOptions,
    Started, socket_gone, stopped,
};
use crate::{
    endpoint::bind_form, error::ZmqError, monitor::ZmqMonitor, pattern::Role, wire::Frames,
};

/// One libzmq context for the process: its I/O thread serves every socket.
pub(super) static CONTEXT: LazyLock<zmq::Context> = LazyLock::new(zmq::Context::new);

/// How soon a dialing socket tries again after a failed or lost connection, and the most it
/// backs off to.
const RECONNECT: Duration = Duration::from_millis(100);
const RECONNECT_MAX: Duration = Duration::from_millis(1_000);

/// How long a closed sending socket keeps trying to deliver what it already took.
const LINGER: Duration = super::CLOSE_WAIT;

/// How many queued messages a duplex socket's task reads in a row before it looks at its sends
/// and at shutdown again.
const READ_BATCH: usize = 32;

/// Runs a blocking libzmq call until it ends with anything but `EINTR`. A signal the process
/// handles (tokio installs handlers for child processes and for shutdown) interrupts a blocking
/// wait, and is no reason for the crate's threads to stop reading.
fn resumed<T>(mut call: impl FnMut() -> Result<T, zmq::Error>) -> Result<T, zmq::Error> {
    loop {
        match call() {
            Err(zmq::Error::EINTR) => {}
            ended => return ended,
        }
    }
}

fn fault(err: zmq::Error) -> crate::error::SocketFault {
    Box::new(err)
}

fn kind(role: Role) -> zmq::SocketType {
    match role {
        Role::Pull => zmq::PULL,
        Role::Push => zmq::PUSH,
        Role::Sub => zmq::SUB,
        Role::Pub => zmq::PUB,
        Role::Router => zmq::ROUTER,
        Role::Dealer => zmq::DEALER,
    }
}

fn millis(duration: Duration) -> i32 {
    i32::try_from(duration.as_millis()).unwrap_or(i32::MAX)
}

/// A socket opened, not yet bound or connected: the socket its monitor reports to, and the
/// allow-list its handshakes are checked against.
struct Opened {
    socket: zmq::Socket,
    events: zmq::Socket,
    admits: Option<zap::Registered>,
}

/// A libzmq socket with its monitor, and what the transport keeps about it.
struct Socket {
    driven: Driven,
    /// Who is connected, kept by the socket's watcher.
    peers: Arc<Watched>,
    monitor: ZmqMonitor,
    role: Role,
    address: String,
    binds: bool,
    /// How many messages the socket queues for one peer.
    peer_queue: usize,
    /// The allow-list this socket's CURVE handshakes are checked against, while it lives.
    _admits: Option<zap::Registered>,
}

impl Socket {
    /// A libzmq socket for `role`, set up with `options`, and the socket its monitor reports
    /// to; not yet bound or connected.
    fn open(
        role: Role,
        address: &str,
        binds: bool,
        topics: &[String],
        options: &SocketOptions,
    ) -> Result<Opened, zmq::Error> {
        let socket = CONTEXT.socket(kind(role))?;
        let queue = i32::try_from(options.peer_queue).unwrap_or(i32::MAX);
        socket.set_sndhwm(queue)?;
        socket.set_rcvhwm(queue)?;
        socket.set_maxmsgsize(i64::try_from(options.max_message_bytes).unwrap_or(i64::MAX))?;
        // Only a sending socket has something to deliver after it closes.
        socket.set_linger(if matches!(role, Role::Pull | Role::Sub) {
            0
        } else {
            millis(LINGER)
        })?;
        // A message waits for a peer that finished its handshake, not for one being dialed, so a
        // send to a destination that is down fails by its deadline instead of queueing.
        socket.set_immediate(true)?;
        socket.set_handshake_ivl(millis(options.handshake_timeout))?;
        if let Some((interval, timeout)) = options.heartbeat {
            socket.set_heartbeat_ivl(millis(interval))?;
            socket.set_heartbeat_timeout(millis(timeout))?;
        }
        socket.set_reconnect_ivl(millis(RECONNECT))?;
        socket.set_reconnect_ivl_max(millis(RECONNECT_MAX))?;
        if address.contains('[') {
            socket.set_ipv6(true)?;
        }
        if role == Role::Router {
            // An answer to an identity that left fails, and one to a full peer fails at once,
            // rather than being dropped without a word.
            socket.set_router_mandatory(true)?;
        }
        for topic in topics {
            socket.set_subscribe(topic.as_bytes())?;
        }
        let admits = secure(&socket, options.security.as_ref(), binds, address)?;
        let events = Watched::attach(&socket)?;
        Ok(Opened {
            socket,
            events,
            admits,
        })
    }

    /// Drives a bound or dialing `socket` on `address`, and watches its monitor.
    fn start(
        opened: Opened,
        role: Role,
        address: String,
        binds: bool,
        monitor: ZmqMonitor,
        options: &SocketOptions,
    ) -> Result<Self, zmq::Error> {
        Ok(Self {
            peers: Watched::start(opened.events, role, &address, binds, monitor.clone())?,
            monitor,
            driven: Driven::new(opened.socket)?,
            role,
            address,
            binds,
            peer_queue: options.peer_queue,
            _admits: opened.admits,
        })
    }

    fn bind(
        role: Role,
        address: &str,
        topics: &[String],
        monitor: ZmqMonitor,
        options: SocketOptions,
    ) -> Result<(Self, String), ZmqError> {
        let failed = |err| ZmqError::Bind {
            endpoint: address.to_owned(),
            source: fault(err),
        };
        curve_available(&options, address)?;
        let opened = Self::open(role, address, true, topics, &options).map_err(failed)?;
        opened.socket.bind(&bind_form(address)).map_err(failed)?;
        let resolved = match opened.socket.get_last_endpoint() {
            Ok(Ok(resolved)) => resolved,
            _ => address.to_owned(),
        };
        if let Some(admits) = &opened.admits {
            admits.listening_on(&resolved);
        }
        let socket = Self::start(opened, role, resolved.clone(), true, monitor, &options);
        Ok((socket.map_err(failed)?, resolved))
    }

    fn dial(
        role: Role,
        address: &str,
        topics: &[String],
        monitor: ZmqMonitor,
        options: SocketOptions,
    ) -> Result<Self, ZmqError> {
        let failed = |err| ZmqError::Connect {
            endpoint: address.to_owned(),
            source: fault(err),
        };
        curve_available(&options, address)?;
        let opened = Self::open(role, address, false, topics, &options).map_err(failed)?;
        // libzmq dials in the background, and again whenever the peer goes away.
        opened.socket.connect(address).map_err(failed)?;
        Self::start(opened, role, address.to_owned(), false, monitor, &options).map_err(failed)
    }

    /// Waits until the socket has a peer: a dialing one finished its handshake, a bound one
    /// has a peer connected.
    async fn reach(&mut self) {
        let binds = self.binds;
        self.peers.until(|peers| peers.reached(binds)).await;
    }

    fn reached(&self) -> bool {
        self.peers.now().reached(self.binds)
    }

    /// Closes the socket. libzmq closes it in the background: a bound one is waited for until
    /// its listener closed (at most the close wait), so that its address is free again when
    /// this returns, as the broker's `shutdown` promises.
    async fn close(self) {
        let Self {
            driven,
            peers,
            binds,
            ..
        } = self;
        drop(driven);
        if !binds {
            return;
        }
        let _ = tokio::time::timeout(LINGER, peers.until(|peers| peers.unbound)).await;
    }

    /// Why a send did not leave by its deadline.
    fn not_taken(&self) -> ZmqError {
        let why = if self.reached() {
            format!(
                "the peer is not reading: its queue of {} messages is full",
                self.peer_queue
            )
        } else {
            "no peer is connected".to_owned()
        };
        ZmqError::Send {
            endpoint: self.address.clone(),
            source: why.into(),
        }
    }

    /// Sends one message, waiting up to `deadline` for room: for a peer to connect, or for a
    /// full peer to read. A dialing PUB waits for its handshake, since a PUB drops what it has
    /// no subscriber for.
    async fn send(&mut self, frames: &Frames, deadline: Instant) -> Result<(), ZmqError> {
        if frames.is_empty() {
            return Ok(());
        }
        // A send that leaves at once (the usual case) waits for nothing; the waits are boxed, so
        // that the future of every send stays small.
        if !self.waits_for_handshake() {
            match self.driven.try_send(frames) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(err) => return Err(send_failed(&self.address, err)),
            }
        }
        Box::pin(self.send_waiting(frames, deadline)).await
    }

    /// Whether a send must wait for the handshake first: a dialing PUB drops what it has no
    /// subscriber for.
    fn waits_for_handshake(&self) -> bool {
        self.role == Role::Pub && !self.binds && !self.reached()
    }

    /// Sends one message, waiting until `deadline` for room.
    async fn send_waiting(&mut self, frames: &Frames, deadline: Instant) -> Result<(), ZmqError> {
        loop {
            let waits_for_handshake = self.waits_for_handshake();
            if !waits_for_handshake {
                match self.driven.try_send(frames) {
                    Ok(true) => return Ok(()),
                    Ok(false) => {}
                    Err(err) => return Err(send_failed(&self.address, err)),
                }
            }
            // Only a send that waits listens to the monitor (a send that leaves at once takes no
            // lock for it), and from before a second look, so that a handshake that finished
            // in between is not missed.
            let changed = self.peers.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if waits_for_handshake && self.reached() {
                continue;
            }
            tokio::select! {
                _ = self.driven.ready(zmq::POLLOUT), if !waits_for_handshake => {}
                () = changed => {}
                () = sleep_until(deadline) => return Err(self.not_taken()),
            }
        }
    }

    /// The next message.
    async fn recv(&mut self) -> Frames {
        loop {
            match self.driven.try_recv() {
                Ok(Some(frames)) => return frames,
                Ok(None) => {}
                Err(err) => {
                    tracing::debug!(endpoint = %self.address, socket = self.role.name(), error = %err, "a read failed");
                }
            }
            self.driven.ready(zmq::POLLIN).await;
        }
    }
}

/// A socket that receives: bound, or dialing and reconnecting whenever its peer goes away.
pub(crate) struct Reader(Socket);

impl Reader {
    /// Binds `address`; answers the reader and the address it really listens on (port 0
    /// resolved). A SUB subscribes to `topics`.
    pub(crate) async fn bind(
        role: Role,
        address: &str,
        topics: Vec<String>,
        monitor: ZmqMonitor,
        options: SocketOptions,
    ) -> Result<(Self, String), ZmqError> {
        let (socket, resolved) = Socket::bind(role, address, &topics, monitor, options)?;
        Ok((Self(socket), resolved))
    }

    /// A reader that dials `address`, in the background and again whenever the peer goes away.
    pub(crate) async fn dial(
        role: Role,
        address: &str,
        topics: Vec<String>,
        monitor: ZmqMonitor,
        options: SocketOptions,
    ) -> Result<Self, ZmqError> {
        Socket::dial(role, address, &topics, monitor, options).map(Self)
    }

    /// The next message.
    pub(crate) async fn recv(&mut self) -> Frames {
        self.0.recv().await
    }

    /// Closes the socket and all its connections.
    pub(crate) async fn close(self) {
        self.0.close().await;
    }
}

/// A socket that sends: bound, or dialing and reconnecting whenever its peer goes away.
pub(crate) struct Writer(Socket);

impl Writer {
    /// Binds `address`; answers the writer and the address it really listens on.
    pub(crate) async fn bind(
        role: Role,
        address: &str,
        monitor: ZmqMonitor,
        options: SocketOptions,
    ) -> Result<(Self, String), ZmqError> {
        let (socket, resolved) = Socket::bind(role, address, &[], monitor, options)?;
        Ok((Self(socket), resolved))
    }

    /// A writer that dials `address`, in the background.
    pub(crate) async fn dial(
        role: Role,
        address: &str,
        monitor: ZmqMonitor,
        options: SocketOptions,
    ) -> Result<Self, ZmqError> {
        Socket::dial(role, address, &[], monitor, options).map(Self)
    }

    /// Sends one message, waiting until `deadline` for a peer with room; then fails, naming
    /// the endpoint and whether no peer was there or the peer was not reading.
    pub(crate) async fn send(&mut self, frames: Frames, deadline: Instant) -> Result<(), ZmqError> {
        self.0.send(&frames, deadline).await
    }

    /// Waits until the socket has a peer again.
    pub(crate) async fn reach(&mut self) {
        self.0.reach().await;
    }

    /// Takes in what the socket's monitor reported since the last look: nothing to do, its
    /// watcher keeps it up to date.
    #[expect(clippy::unused_async, reason = "the same call as on the other backend")]
    pub(crate) async fn look(&mut self) {}

    /// Closes the socket; libzmq keeps delivering what it took for a short while.
    pub(crate) async fn close(self) {
        self.0.close().await;
    }
}

/// A socket that both sends and receives (ROUTER, DEALER), run by a task of its own so that a
/// reply can leave while requests wait to be handled.
pub(crate) struct Duplex(Socket);

impl Duplex {
    /// Binds `address`; answers the socket and the address it really listens on.
    pub(crate) async fn bind(
        role: Role,
        address: &str,
        monitor: ZmqMonitor,
        options: SocketOptions,
    ) -> Result<(Self, String), ZmqError> {
        let (socket, resolved) = Socket::bind(role, address, &[], monitor, options)?;
        Ok((Self(socket), resolved))
    }

    /// A socket that dials `address`, in the background.
    pub(crate) async fn dial(
        role: Role,
        address: &str,
        monitor: ZmqMonitor,
        options: SocketOptions,
    ) -> Result<Self, ZmqError> {
        Socket::dial(role, address, &[], monitor, options).map(Self)
    }

    /// Starts the socket: answers the handle that sends through it, and the task to spawn,
    /// which hands every received message to `inbound` and ends at shutdown.
    ///
    /// A ROUTER never waits for one peer: an answer to a peer whose queue is full fails at
    /// once, so the other requesters keep being answered. A DEALER's request waits for room up
    /// to its deadline, while the socket goes on reading answers.
    pub(crate) fn run(self, inbound: Inbound, mut shutdown: watch::Receiver<bool>) -> Started {
        let (sender, mut outbox) = DuplexSender::channel(&self.0.address);
        let mut this = self.0;
        let sender = sender.direct(Arc::new(DuplexDirect {
            sending: this.driven.sending(),
            role: this.role,
            address: this.address.clone(),
            monitor: this.monitor.clone(),
            peer_queue: this.peer_queue,
            not_reading: Mutex::new(NotReading::default()),
        }));
        let task = async move {
            // One received message waits here while the handler side is full.
            let mut pending: Option<Received> = None;
            // One send waits here for room (a DEALER with no responder yet).
            let mut waiting: Option<Outbound> = None;
            // One wait for shutdown for the whole loop, not one made and dropped per message.
            let stop = stopped(&mut shutdown);
            tokio::pin!(stop);
            'run: loop {
                let mut wanted = zmq::PollEvents::empty();
                if pending.is_none() {
                    wanted |= zmq::POLLIN;
                }
                if waiting.is_some() {
                    wanted |= zmq::POLLOUT;
                }
                let deadline = waiting.as_ref().map(|(_, deadline, _)| *deadline);
                tokio::select! {
                    biased;
                    () = &mut stop => break,
                    () = sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                        if let Some((_, _, done)) = waiting.take() {
                            done.settle(Err(this.not_taken()));
                        }
                    }
                    Some(outbound) = outbox.recv(), if waiting.is_none() => {
                        waiting = this.offer(outbound);
                    }
                    permit = inbound.room(), if pending.is_some() => match (permit, pending.take()) {
                        (Ok(permit), Some(received)) => permit.send(received),
                        _ => break,
                    },
                    events = this.driven.ready(wanted), if !wanted.is_empty() => {
                        if events.contains(zmq::POLLOUT)
                            && let Some(outbound) = waiting.take()
                        {
                            waiting = this.offer(outbound);
                        }
                        if events.contains(zmq::POLLIN) {
                            // What is already queued is read in one go, up to a batch, so that a
                            // busy socket is not asked what it can do before every message.
                            for _ in 0..READ_BATCH {
                                if pending.is_some() {
                                    break;
                                }
                                match this.driven.try_recv() {
                                    Ok(Some(frames)) => match inbound.offer(Received {
                                        frames,
                                        release: Release::default(),
                                    }) {
                                        Ok(waits) => pending = waits,
                                        Err(Closed) => break 'run,
                                    },
                                    Ok(None) => break,
                                    Err(err) => {
                                        tracing::debug!(endpoint = %this.address, socket = this.role.name(), error = %err, "a read failed");
                                        break;
                                    }
                                }
                            }
                        }
                    }
                }
            }
            if let Some((_, _, done)) = waiting {
                done.settle(Err(socket_gone()));
            }
            this.close().await;
        };
        // libzmq's ROUTER and DEALER are read by their task.
        Started {
            sender,
            task: Box::pin(task),
            reader: None,
        }
    }
}

impl Socket {
    /// Tries a send handed to the socket's task once: answers it back while there is no room
    /// (only a DEALER's sends come here: a ROUTER's all leave through [`DuplexDirect`]).
    fn offer(&mut self, (frames, deadline, done): Outbound) -> Option<Outbound> {
        let outcome = if Instant::now() >= deadline {
            Err(ZmqError::Send {
                endpoint: self.address.clone(),
                source: "its deadline passed before its turn came".into(),
            })
        } else {
            match self.driven.try_send(&frames) {
                Ok(true) => Ok(()),
                Ok(false) => return Some((frames, deadline, done)),
                Err(err) => Err(send_failed(&self.address, err)),
            }
        };
        done.settle(outcome);
        None
    }
}

/// Why libzmq refused a send on the socket at `address`: a ROUTER asked to answer an identity
/// that is gone, or a fault.
fn send_failed(address: &str, err: zmq::Error) -> ZmqError {
    match err {
        zmq::Error::EHOSTUNREACH => ZmqError::UnknownPeer {
            endpoint: address.to_owned(),
        },
        err => ZmqError::Send {
            endpoint: address.to_owned(),
            source: fault(err),
        },
    }
}

/// Sends a duplex socket's messages from the tasks that send them, through the socket its task
/// drives. A ROUTER never waits for one peer: an answer to a requester whose queue is full fails
/// at once. A DEALER's send that finds no room goes to the socket's task, which waits for room.
struct DuplexDirect {
    sending: Sending,
    role: Role,
    address: String,
    monitor: ZmqMonitor,
    peer_queue: usize,
    /// A ROUTER's requesters whose answers are being dropped, for one warning an episode.
    not_reading: Mutex<NotReading>,
}

impl DirectSend for DuplexDirect {
    fn send(&self, frames: Frames) -> Direct {
        Direct::Now(match self.sending.try_send(&frames) {
            Ok(true) => {
                self.answered(&frames);
                Ok(())
            }
            Ok(false) if self.role == Role::Dealer => return Direct::ToTask(frames),
            // Waiting for one requester would hold up every other answer.
            Ok(false) => Err(self.not_reading(&frames)),
            // The socket's task closed it.
            Err(zmq::Error::ETERM) => Err(socket_gone()),
            Err(err) => Err(send_failed(&self.address, err)),
        })
    }
}

impl DuplexDirect {
    fn episodes(&self) -> std::sync::MutexGuard<'_, NotReading> {
        self.not_reading
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A ROUTER's answer to a requester that is not reading is dropped: counted, and warned
    /// about once until that requester reads again.
    fn not_reading(&self, frames: &Frames) -> ZmqError {
        self.monitor.count_dropped_not_reading();
        let identity = frames.first().cloned().unwrap_or_default();
        if self.episodes().dropped(identity) {
            tracing::warn!(
                endpoint = %self.address,
                rule = "peer-not-reading",
                queue = self.peer_queue,
                "a requester is not reading its answers: they are dropped until it reads again"
            );
        }
        ZmqError::Send {
            endpoint: self.address.clone(),
            source: format!(
                "the requester is not reading: its queue of {} answers is full",
                self.peer_queue
            )
            .into(),
        }
    }

    /// An answer left: a requester that was not reading reads again.
    fn answered(&self, frames: &Frames) {
        if self.role != Role::Router {
            return;
        }
        let mut episodes = self.episodes();
        if episodes.is_empty() {
            return;
        }
        if let Some(dropped) = frames.first().and_then(|id| episodes.reads_again(id)) {
            drop(episodes);
            tracing::info!(endpoint = %self.address, dropped, "a requester reads its answers again");
        }
    }
}

/// The requesters whose answers are being dropped, and how many so far: one warning when an
/// episode begins, one line when it ends. Bounded: past [`NotReading::MOST`] requesters at once,
/// a new one's episode goes unrecorded (its drops are still counted and returned as errors).
#[derive(Debug, Default)]
struct NotReading(std::collections::HashMap<Bytes, u64>);

impl NotReading {
    const MOST: usize = 1_024;

    /// An answer to `identity` was dropped; answers whether that began an episode.
    fn dropped(&mut self, identity: Bytes) -> bool {
        if let Some(dropped) = self.0.get_mut(&identity) {
            *dropped += 1;
            return false;
        }
        if self.0.len() < Self::MOST {
            self.0.insert(identity, 1);
        }
        true
    }

    /// An answer to `identity` left; answers how many were dropped, if that ended an episode.
    fn reads_again(&mut self, identity: &Bytes) -> Option<u64> {
        self.0.remove(identity)
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requester_that_is_not_reading_is_warned_about_once_an_episode() {
        let mut episodes = NotReading::default();
        let slow = Bytes::from_static(b"slow");
        assert!(
            episodes.dropped(slow.clone()),
            "the first drop begins an episode"
        );
        assert!(!episodes.dropped(slow.clone()));
        assert!(!episodes.dropped(slow.clone()));
        assert!(
            episodes.dropped(Bytes::from_static(b"other")),
            "one episode a requester"
        );
        assert_eq!(episodes.reads_again(&slow), Some(3));
        assert_eq!(episodes.reads_again(&slow), None, "the episode ended");
        assert!(episodes.dropped(slow), "a new episode begins");
    }

    #[test]
    fn episodes_are_bounded_and_a_requester_past_the_bound_still_warns() {
        let mut episodes = NotReading::default();
        for n in 0..NotReading::MOST + 10 {
            assert!(episodes.dropped(Bytes::from(n.to_le_bytes().to_vec())));
        }
        assert_eq!(episodes.0.len(), NotReading::MOST);
    }
}
