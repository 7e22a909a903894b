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
//!   it, and sent through from others; [`handed`]: a bound PULL read by its subscription;
//! - [`watcher`]: who a socket is connected to, from its monitor, read by a thread of its own;
//! - [`security`]: the CURVE keys of each socket, as its endpoint, its broker's destinations and
//!   this process's own listeners say; [`zap`]: who may connect.

mod driven;
mod duplex;
mod handed;
mod security;
mod seed;
mod watcher;
pub(super) mod zap;

use std::{
    sync::{Arc, LazyLock},
    time::Duration,
};

use tokio::{
    sync::{mpsc, watch},
    time::{Instant, sleep_until},
};

pub(crate) use self::duplex::LibzmqDuplexSocket;
use self::{driven::Driven, watcher::Watched};
use super::{
    backend::{
        CLOSE_WAIT, HandOver, Opening, ReadSocket, SocketBackend, WriteSocket, fault, refused_send,
    },
    curve_keys::{self, Keys, KnownListener, Plan},
    reading_end::Received,
    socket_config::{Config, not_taken},
};
use crate::{
    endpoint::bind_form,
    error::{SocketFault, ZmqError},
    monitor::{Flush, ZmqMonitor},
    pattern::Role,
    settings::Settings,
    wire::Frames,
};

/// libzmq, the C library every pyzmq and C++ peer runs (feature `libzmq`): ZMTP heartbeats,
/// per-peer queues ([`peer_queue`](crate::ZmqBroker::peer_queue)), a handshake timeout,
/// frames over the size limit refused before they are allocated, and CURVE.
#[derive(Debug, Clone, Copy, Default)]
pub struct Libzmq;

impl SocketBackend for Libzmq {
    const NAME: &'static str = "libzmq";
    type Config = Config;
    type Options = Options;
    type ReadSocket = LibzmqReadSocket;
    type WriteSocket = LibzmqWriteSocket;
    type DuplexSocket = LibzmqDuplexSocket;

    fn options(settings: &Settings, config: Config) -> Options {
        Options {
            peer_queue: config.peer_queue_for(settings.limits.message_bytes()),
            max_message_bytes: settings.limits.message_bytes(),
            max_frames: settings.limits.frames(),
            heartbeat: config.heartbeat,
            handshake_timeout: config.handshake_timeout,
            keys: Arc::new(config.keys),
        }
    }

    fn curve(options: &Options) -> bool {
        options.keys.speaks_curve()
    }
}

/// What every libzmq socket is opened with, from its broker's settings.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// How many messages a socket queues for one peer, each way, before that peer counts as
    /// not reading (the high-water marks).
    peer_queue: usize,
    /// The largest frame a peer may send; a larger one is refused before it is read.
    max_message_bytes: usize,
    /// The most frames a message may have: past it, the rest of a message's frames are dropped
    /// as they are read, never copied (libzmq's size limit is per frame).
    max_frames: usize,
    /// The heartbeat's interval and timeout, when on.
    heartbeat: Option<(Duration, Duration)>,
    /// How long a new connection may take to finish its handshake.
    handshake_timeout: Duration,
    /// The CURVE keys each socket chooses from.
    keys: Arc<Keys>,
}

/// One libzmq context for the process: its I/O thread serves every socket. Made once C's
/// `rand()` is seeded, so that the routing ids a ROUTER gives anonymous peers start where a
/// blind peer cannot foresee (`seed.rs`; a peer that reads its own id still can).
pub(super) static CONTEXT: LazyLock<zmq::Context> = LazyLock::new(|| {
    seed::seed_routing_ids();
    zmq::Context::new()
});

/// How soon a dialing socket tries again after a failed or lost connection, and the most it
/// backs off to.
const RECONNECT: Duration = Duration::from_millis(100);
const RECONNECT_MAX: Duration = Duration::from_millis(1_000);

/// How long a closed sending socket keeps trying to deliver what it already took.
const LINGER: Duration = CLOSE_WAIT;

/// How long past its linger a closed socket's monitor may take to say it is gone.
const STOP_MARGIN: Duration = Duration::from_millis(250);

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
struct MonitoredSocket {
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
    /// This CURVE listener, known to the process's dialing sockets while it lives.
    _listening: Option<KnownListener>,
}

impl MonitoredSocket {
    /// A libzmq socket for `role`, set up with `options` and speaking as `plan` says, and the
    /// socket its monitor reports to; not yet bound or connected.
    fn open(
        role: Role,
        address: &str,
        topics: &[String],
        options: &Options,
        plan: &Plan,
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
        let admits = security::apply(&socket, plan, address)?;
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
        (role, address, binds): (Role, String, bool),
        monitor: ZmqMonitor,
        options: &Options,
        listening: Option<KnownListener>,
    ) -> Result<Self, SocketFault> {
        Ok(Self {
            peers: Watched::start(opened.events, role, &address, binds, monitor.clone())
                .map_err(fault)?,
            monitor,
            driven: Driven::new(opened.socket, options.max_frames)?,
            role,
            address,
            binds,
            peer_queue: options.peer_queue,
            _admits: opened.admits,
            _listening: listening,
        })
    }

    fn bind(at: Opening<Options>, topics: &[String]) -> Result<(Self, String), ZmqError> {
        let Opening {
            role,
            ref address,
            monitor,
            options,
        } = at;
        let failed = |err| ZmqError::Bind {
            endpoint: address.to_owned(),
            source: fault(err),
        };
        let plan = security::plan(&options.keys, true, address)?;
        let opened = Self::open(role, address, topics, &options, &plan).map_err(failed)?;
        opened.socket.bind(&bind_form(address)).map_err(failed)?;
        let resolved = match opened.socket.get_last_endpoint() {
            Ok(Ok(resolved)) => resolved,
            _ => address.to_owned(),
        };
        if let Some(admits) = &opened.admits {
            admits.listening_on(&resolved, &monitor);
        }
        let listening = curve_keys::listening(&plan, &resolved);
        let opening = (role, resolved.clone(), true);
        let socket = Self::start(opened, opening, monitor, &options, listening);
        let socket = socket.map_err(|source| ZmqError::Bind {
            endpoint: address.to_owned(),
            source,
        })?;
        Ok((socket, resolved))
    }

    fn dial(at: Opening<Options>, topics: &[String]) -> Result<Self, ZmqError> {
        let Opening {
            role,
            ref address,
            monitor,
            options,
        } = at;
        let failed = |err| ZmqError::Connect {
            endpoint: address.to_owned(),
            source: fault(err),
        };
        let plan = security::plan(&options.keys, false, address)?;
        let opened = Self::open(role, address, topics, &options, &plan).map_err(failed)?;
        // libzmq dials in the background, and again whenever the peer goes away.
        opened.socket.connect(address).map_err(failed)?;
        let opening = (role, address.to_owned(), false);
        Self::start(opened, opening, monitor, &options, None).map_err(|source| ZmqError::Connect {
            endpoint: address.to_owned(),
            source,
        })
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

    /// Closes the socket, keeping what it queued for its peers for at most `linger`. libzmq
    /// closes it in the background, and its monitor says when the socket is gone: what it
    /// queued left, or the linger ran out. A bound one is also waited for until its listener
    /// closed, so that its address is free again when this returns, as the broker's `shutdown`
    /// promises.
    async fn close(self, linger: Duration) -> Flush {
        let Self {
            driven,
            peers,
            binds,
            ..
        } = self;
        driven.set_linger(linger);
        let began = Instant::now();
        drop(driven);
        let gone = tokio::time::timeout(linger + STOP_MARGIN, peers.until(|peers| peers.stopped))
            .await
            .is_ok();
        if binds {
            let _ = tokio::time::timeout(LINGER, peers.until(|peers| peers.unbound)).await;
        }
        // Gone before the linger ran out: nothing was left to drop.
        if gone && began.elapsed() < linger {
            Flush::Flushed
        } else {
            Flush::LingerRanOut
        }
    }

    /// Why a send did not leave by its deadline.
    fn not_taken(&self) -> ZmqError {
        not_taken(&self.address, self.reached(), self.peer_queue)
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
    async fn recv(&mut self) -> Received {
        loop {
            match self.driven.try_recv() {
                Ok(Some(frames)) => return Received::new(frames),
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
pub(crate) struct LibzmqReadSocket(MonitoredSocket);

impl ReadSocket for LibzmqReadSocket {
    type Options = Options;

    async fn bind(at: Opening<Options>, topics: Vec<String>) -> Result<(Self, String), ZmqError> {
        let (socket, resolved) = MonitoredSocket::bind(at, &topics)?;
        Ok((Self(socket), resolved))
    }

    /// It dials in the background, and again whenever the peer goes away.
    async fn dial(at: Opening<Options>, topics: Vec<String>) -> Result<Self, ZmqError> {
        MonitoredSocket::dial(at, &topics).map(Self)
    }

    async fn recv(&mut self) -> Received {
        self.0.recv().await
    }

    async fn close(self) {
        // A reading socket queues nothing to send.
        self.0.close(Duration::ZERO).await;
    }

    /// Hands a bound PULL over to the subscription, which reads it in its own task
    /// ([`handed`]). Any other socket comes back.
    fn hand_over(
        self,
        subscriber: mpsc::Sender<Received>,
        shutdown: watch::Receiver<bool>,
    ) -> HandOver<Self> {
        if self.0.role != Role::Pull || !self.0.binds {
            return HandOver::Kept(self);
        }
        let (reading, task) = handed::hand_over(self.0, subscriber, shutdown);
        HandOver::Handed(reading, task)
    }
}

/// A socket that sends: bound, or dialing and reconnecting whenever its peer goes away.
pub(crate) struct LibzmqWriteSocket(MonitoredSocket);

impl WriteSocket for LibzmqWriteSocket {
    // Its watcher keeps the socket's peers up to date: nothing to ask.
    type Options = Options;

    async fn bind(at: Opening<Options>) -> Result<(Self, String), ZmqError> {
        let (socket, resolved) = MonitoredSocket::bind(at, &[])?;
        Ok((Self(socket), resolved))
    }

    async fn dial(at: Opening<Options>) -> Result<Self, ZmqError> {
        MonitoredSocket::dial(at, &[]).map(Self)
    }

    async fn send(&mut self, frames: Frames, deadline: Instant) -> Result<(), ZmqError> {
        self.0.send(&frames, deadline).await
    }

    async fn reach(&mut self) {
        self.0.reach().await;
    }

    /// libzmq keeps delivering what it took for a short while.
    async fn close(self, linger: Duration) -> Flush {
        self.0.close(linger).await
    }
}

/// Why libzmq refused a send on the socket at `address`: a ROUTER asked to answer an identity
/// that is gone, or a fault.
fn send_failed(address: &str, err: zmq::Error) -> ZmqError {
    let unknown_peer = err == zmq::Error::EHOSTUNREACH;
    refused_send(address, err, unknown_peer)
}
