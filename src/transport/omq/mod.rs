//! The omq sockets (`omq` feature): a pure-Rust ZeroMQ, and the only modules that name its
//! types.
//!
//! omq does by itself most of what the transport needs: a dialing socket reconnects with a
//! backoff, a message over the size limit is refused as its frames arrive, a handshake has a
//! timeout, heartbeats cut a silent peer, and a ROUTER refuses a peer that claims an identity
//! starting with a zero byte. Its sockets are async and may be shared among tasks, so an answer
//! leaves from its handler's task. Its defaults are not the crate's: linger 0 and no size limit;
//! every socket here is opened with the broker's own settings instead.
//!
//! - [`watcher`]: who a socket is connected to, from its monitor;
//! - [`security`]: CURVE as omq's options, the allow-list as its authenticator;
//! - [`duplex`]: the ROUTER's and DEALER's task, and the sends that skip it.

mod duplex;
mod security;
mod watcher;

use std::{sync::Arc, time::Duration};

use omq_tokio::{
    Error as OmqError, Message, Options as OmqOptions, ReconnectPolicy, Socket, SocketType,
    TrySendError,
};
use ruststream::Bytes;
use tokio::{
    sync::{mpsc, watch},
    time::{Instant, sleep_until},
};

pub(crate) use self::duplex::OmqDuplexSocket;
use self::{security::Admission, watcher::Watched};
use super::{
    backend::{
        HandOver, Opening, ReadSocket, SocketBackend, WriteSocket, fault, refused_send,
        socket_gone, stopped,
    },
    curve_keys::{self, Keys, KnownListener},
    reading_end::{ReadingEnd, Received},
    socket_config::{Config, not_taken},
};
use crate::{
    endpoint::bind_form,
    error::ZmqError,
    monitor::{Flush, ZmqMonitor},
    pattern::Role,
    settings::Settings,
    wire::Frames,
};

/// omq, a pure-Rust ZeroMQ (feature `omq`): ZMTP heartbeats, per-peer queues
/// ([`peer_queue`](crate::ZmqBroker::peer_queue)), a handshake timeout, messages over the size
/// limit refused as they arrive, CURVE, and nothing to install.
#[derive(Debug, Clone, Copy, Default)]
pub struct Omq;

impl SocketBackend for Omq {
    const NAME: &'static str = "omq";
    type Config = Config;
    type Options = Options;
    type ReadSocket = OmqReadSocket;
    type WriteSocket = OmqWriteSocket;
    type DuplexSocket = OmqDuplexSocket;

    fn options(settings: &Settings, config: Config) -> Options {
        let message_bytes = settings.limits.message_bytes();
        Options {
            peer_queue: config.peer_queue_for(message_bytes),
            message_size: message_size(message_bytes, settings.limits.frames()),
            heartbeat: config.heartbeat,
            handshake_timeout: config.handshake_timeout,
            keys: Arc::new(config.keys),
        }
    }

    fn curve(options: &Options) -> bool {
        options.keys.speaks_curve()
    }
}

/// What every omq socket is opened with, from its broker's settings.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// How many messages a socket queues for one peer, each way.
    peer_queue: usize,
    /// The most a message may cost as omq counts it ([`message_size`]).
    message_size: usize,
    /// The heartbeat's interval and timeout, when on.
    heartbeat: Option<(Duration, Duration)>,
    /// How long a new connection may take to finish its handshake.
    handshake_timeout: Duration,
    /// The CURVE keys each socket chooses from.
    keys: Arc<Keys>,
}

/// What omq charges each frame of a message beyond its bytes, toward the size limit.
const FRAME_COST: usize = 64;

/// The size limit omq checks a message against as its frames arrive, for messages of at most
/// `message_bytes` in at most `frames` frames (and a ROUTER's envelope): omq counts each frame's
/// bytes and [`FRAME_COST`] more, so the limit also bounds how many frames a message may have,
/// and what it costs to hold, before the crate reads it.
pub(crate) fn message_size(message_bytes: usize, frames: usize) -> usize {
    message_bytes.saturating_add(FRAME_COST.saturating_mul(frames.saturating_add(2)))
}

/// How soon a dialing socket tries again after a failed or lost connection, and the most it
/// backs off to.
const RECONNECT: Duration = Duration::from_millis(100);
const RECONNECT_MAX: Duration = Duration::from_millis(1_000);

/// Events a socket's monitor holds for its watcher: enough that only a runtime stalled for long
/// makes it skip any.
const MONITOR_EVENTS: usize = 4_096;

/// How many connections may be in their handshake at once on one socket; past them a new
/// connection is refused at once. omq holds a remote host other than the loopback to an eighth.
const PENDING_HANDSHAKES: usize = 128;

/// How long past its linger a closing socket may take to end.
const STOP_MARGIN: Duration = Duration::from_millis(250);

fn kind(role: Role) -> SocketType {
    match role {
        Role::Pull => SocketType::Pull,
        Role::Push => SocketType::Push,
        Role::Sub => SocketType::Sub,
        Role::Pub => SocketType::Pub,
        Role::Router => SocketType::Router,
        Role::Dealer => SocketType::Dealer,
    }
}

/// omq's options for a socket in `role`, from the broker's.
fn socket_options(role: Role, options: &Options) -> OmqOptions {
    let queue = u32::try_from(options.peer_queue).unwrap_or(u32::MAX);
    let mut set = OmqOptions::default()
        .send_hwm(queue)
        // omq reads a peer's messages into a queue of that peer's, then into the socket's, each
        // of this length: half the peer's queue each holds the peer to it.
        .recv_hwm(queue.div_ceil(2))
        .max_message_size(options.message_size)
        .handshake_timeout(options.handshake_timeout)
        .max_pending_handshakes(PENDING_HANDSHAKES)
        .reconnect(ReconnectPolicy::Exponential {
            min: RECONNECT,
            max: RECONNECT_MAX,
        })
        .monitor_capacity(MONITOR_EVENTS)
        // What a closing socket still delivers is bounded by the broker's linger, at its close.
        .linger(Duration::ZERO);
    if let Some((interval, timeout)) = options.heartbeat {
        set = set.heartbeat_interval(interval).heartbeat_timeout(timeout);
    }
    if role == Role::Router {
        // An answer to an identity that left fails, and one to a full peer fails at once,
        // rather than being dropped without a word.
        set = set.router_mandatory(true);
    }
    set
}

/// An omq socket, and what the transport keeps about it.
struct OmqSocket {
    socket: Socket,
    /// Who is connected, kept by the socket's watcher.
    peers: Arc<Watched>,
    monitor: ZmqMonitor,
    role: Role,
    address: String,
    binds: bool,
    /// How many messages the socket queues for one peer.
    peer_queue: usize,
    /// The allow-list this socket's CURVE handshakes are checked against.
    _admission: Option<Arc<Admission>>,
    /// This CURVE listener, known to the process's dialing sockets while it lives.
    _listening: Option<KnownListener>,
}

impl OmqSocket {
    /// Opens a socket on `address` for `at`, bound or dialing; a SUB subscribes to `topics`.
    /// Answers it and the address it really listens on (or dials).
    async fn open(
        at: Opening<Options>,
        topics: &[String],
        binds: bool,
    ) -> Result<(Self, String), ZmqError> {
        let Opening {
            role,
            address,
            monitor,
            options,
        } = at;
        let failed = |err: OmqError| {
            let (endpoint, source) = (address.clone(), fault(err));
            if binds {
                ZmqError::Bind { endpoint, source }
            } else {
                ZmqError::Connect { endpoint, source }
            }
        };
        let plan = curve_keys::plan(&options.keys, binds, &address)?;
        let (set, admission) = security::apply(socket_options(role, &options), &plan, &address);
        let socket = Socket::try_new(kind(role), set).map_err(&failed)?;
        // Taken before the socket binds or dials, so that no event is missed.
        let events = socket.monitor();
        for topic in topics {
            let prefix = Bytes::copy_from_slice(topic.as_bytes());
            socket.subscribe(prefix).await.map_err(&failed)?;
        }
        let resolved = if binds {
            let bound = socket.bind(bind_form(&address).as_ref()).await;
            bound.map_err(&failed)?.to_string()
        } else {
            // omq dials in the background, and again whenever the peer goes away.
            socket.connect(address.as_str()).await.map_err(&failed)?;
            address.clone()
        };
        if let Some(admission) = &admission {
            admission.listening_on(&resolved);
        }
        let listening = binds
            .then(|| curve_keys::listening(&plan, &resolved))
            .flatten();
        let peers = Watched::start(events, role, &resolved, binds, monitor.clone());
        let opened = Self {
            socket,
            peers,
            monitor,
            role,
            address: resolved.clone(),
            binds,
            peer_queue: options.peer_queue,
            _admission: admission,
            _listening: listening,
        };
        Ok((opened, resolved))
    }

    /// Whether a peer finished its handshake.
    fn reached(&self) -> bool {
        self.peers.ready() > 0
    }

    /// Whether a send waits for a peer through its handshake first: every one but a bound PUB's,
    /// which drops what no subscriber takes. omq would otherwise queue a dialing socket's sends
    /// for a peer not yet there, and a send to a destination that is down would not fail by its
    /// deadline.
    fn waits_for_peer(&self) -> bool {
        !(self.role == Role::Pub && self.binds)
    }

    /// Waits until the socket has a peer.
    async fn reach(&self) {
        self.peers.until(|ready| ready > 0).await;
    }

    /// Why a send did not leave by its deadline.
    fn not_taken(&self) -> ZmqError {
        not_taken(&self.address, self.reached(), self.peer_queue)
    }

    /// Tries one send without waiting: answers the message back while there is no peer or no
    /// room.
    fn try_send(&self, message: Message) -> Result<Option<Message>, ZmqError> {
        if self.waits_for_peer() && !self.reached() {
            return Ok(Some(message));
        }
        match self.socket.try_send(message) {
            Ok(()) => Ok(None),
            Err(TrySendError::Full(back)) => Ok(Some(back)),
            Err(TrySendError::Closed) => Err(socket_gone()),
            Err(TrySendError::Error(err)) => Err(send_failed(&self.address, err)),
        }
    }

    /// Sends one message, waiting up to `deadline` for room: for a peer to finish its
    /// handshake, or for a full peer to read.
    async fn send(&self, frames: Frames, deadline: Instant) -> Result<(), ZmqError> {
        if frames.is_empty() {
            return Ok(());
        }
        let mut message = Message::multipart(frames);
        loop {
            // Enabled before the try, so that a peer that arrives in between is not missed.
            let changed = self.peers.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            match self.try_send(message)? {
                None => return Ok(()),
                Some(back) => message = back,
            }
            let reached = self.reached();
            tokio::select! {
                () = self.socket.wait_send_ready(), if reached => {}
                () = changed => {}
                () = sleep_until(deadline) => return Err(self.not_taken()),
            }
        }
    }

    /// The next message.
    async fn recv(&self) -> Received {
        match next_message(&self.socket, &self.address, self.role).await {
            Some(received) => received,
            // Only this socket's own close ends it, and that takes the socket.
            None => std::future::pending().await,
        }
    }

    /// Closes the socket, keeping what it queued for its peers for at most `linger`. omq ends
    /// the socket once what it queued left, or once the linger ran out, and says nothing of
    /// which: a close that ends before the linger ran out left nothing behind. A bound socket's
    /// address is free again when this returns: omq closes its listener before it answers.
    async fn close(self, linger: Duration) -> Flush {
        let began = Instant::now();
        let closing = self.socket.close_with_linger(Some(linger));
        let ended = tokio::time::timeout(linger + STOP_MARGIN, closing)
            .await
            .is_ok();
        if ended && began.elapsed() < linger {
            Flush::Flushed
        } else {
            Flush::LingerRanOut
        }
    }
}

/// Why omq refused a send on the socket at `address`: a ROUTER asked to answer an identity that
/// is gone, or a fault.
fn send_failed(address: &str, err: OmqError) -> ZmqError {
    let unknown_peer = matches!(err, OmqError::Unroutable);
    refused_send(address, err, unknown_peer)
}

/// A socket that receives: bound, or dialing and reconnecting whenever its peer goes away.
pub(crate) struct OmqReadSocket(OmqSocket);

impl ReadSocket for OmqReadSocket {
    type Options = Options;

    async fn bind(at: Opening<Options>, topics: Vec<String>) -> Result<(Self, String), ZmqError> {
        let (socket, resolved) = OmqSocket::open(at, &topics, true).await?;
        Ok((Self(socket), resolved))
    }

    async fn dial(at: Opening<Options>, topics: Vec<String>) -> Result<Self, ZmqError> {
        let (socket, _) = OmqSocket::open(at, &topics, false).await?;
        Ok(Self(socket))
    }

    async fn recv(&mut self) -> Received {
        self.0.recv().await
    }

    async fn close(self) {
        // A reading socket queues nothing to send.
        self.0.close(Duration::ZERO).await;
    }

    /// Hands a bound PULL over to the subscription, which reads it in its own task: it reads
    /// nothing ahead of its handler. Answers its reading end, and the task that closes it at
    /// `shutdown` or once `subscriber` is gone. Any other socket comes back.
    fn hand_over(
        self,
        subscriber: mpsc::Sender<Received>,
        mut shutdown: watch::Receiver<bool>,
    ) -> HandOver<Self> {
        let Self(socket) = self;
        if socket.role != Role::Pull || !socket.binds {
            return HandOver::Kept(Self(socket));
        }
        let reading = reading(socket.socket.clone(), socket.address.clone());
        let task = async move {
            tokio::select! {
                () = stopped(&mut shutdown) => {}
                () = subscriber.closed() => {}
            }
            socket.close(Duration::ZERO).await;
        };
        HandOver::Handed(reading, Box::pin(task))
    }
}

/// What a bound PULL reads, for its subscription to take in its own task; the messages end once
/// the socket is closed.
fn reading(socket: Socket, address: String) -> ReadingEnd {
    let messages = futures::stream::unfold((socket, address), |(socket, address)| async move {
        let received = next_message(&socket, &address, Role::Pull).await?;
        Some((received, (socket, address)))
    });
    ReadingEnd::new(Box::pin(messages))
}

/// The next message `socket` reads, or none once it is closed. A failed read was one peer's,
/// whose connection omq dropped, and the socket reads on.
async fn next_message(socket: &Socket, address: &str, role: Role) -> Option<Received> {
    loop {
        match socket.recv().await {
            Ok(message) => return Some(Received::new(frames_of(message))),
            Err(OmqError::Closed) => return None,
            Err(err) => {
                tracing::debug!(endpoint = %address, socket = role.name(), error = %err, "a read failed");
            }
        }
    }
}

/// A message's frames, as the crate carries them.
fn frames_of(message: Message) -> Frames {
    message.into_iter().collect()
}

/// A socket that sends: bound, or dialing and reconnecting whenever its peer goes away.
pub(crate) struct OmqWriteSocket(OmqSocket);

impl WriteSocket for OmqWriteSocket {
    // Its watcher keeps the socket's peers up to date: nothing to ask.
    type Options = Options;

    async fn bind(at: Opening<Options>) -> Result<(Self, String), ZmqError> {
        let (socket, resolved) = OmqSocket::open(at, &[], true).await?;
        Ok((Self(socket), resolved))
    }

    async fn dial(at: Opening<Options>) -> Result<Self, ZmqError> {
        let (socket, _) = OmqSocket::open(at, &[], false).await?;
        Ok(Self(socket))
    }

    async fn send(&mut self, frames: Frames, deadline: Instant) -> Result<(), ZmqError> {
        self.0.send(frames, deadline).await
    }

    async fn reach(&mut self) {
        self.0.reach().await;
    }

    async fn close(self, linger: Duration) -> Flush {
        self.0.close(linger).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_size_limit_takes_every_message_the_crate_takes_and_bounds_its_frames() {
        // The largest message the default limits take, in its most frames and a ROUTER's
        // envelope, is within omq's count of it.
        let limit = message_size(64 << 10, 8);
        assert!((64 << 10) + FRAME_COST * 10 <= limit);
        // Empty frames cost omq 64 bytes each: a message has at most this many.
        assert_eq!(limit / FRAME_COST, 1_034);
    }
}
