//! The supervised sockets: the only module that names the `zeromq` client's types.
//!
//! The client covers less than a transport needs, and this module makes up for it: dialing
//! sockets are re-created when their peer goes away (the client reconnects only SUB), a send
//! that finds no peer waits for one up to a deadline instead of failing at once, and closing a
//! socket really closes its connections (a dropped PULL keeps them open).
//!
//! Imports: its parent `transport`, and `endpoint`, `error`, `monitor`, `pattern` and `wire`.

use std::{
    sync::{Arc, Mutex, PoisonError, Weak},
    time::Duration,
};

use futures::{StreamExt, channel::mpsc::Receiver};
use tokio::{
    sync::{OwnedMutexGuard, mpsc, watch},
    time::{Instant, sleep, timeout},
};
use zeromq::{
    DealerRecvHalf, DealerSendHalf, DealerSocket, MultiPeerBackend, PubSocket, PullSocket,
    PushSocket, RouterRecvHalf, RouterSendHalf, RouterSocket, Socket, SocketEvent, SocketOptions,
    SocketRecv, SocketSend, SubSocket, ZmqError as ClientError, ZmqMessage as ClientMessage,
};

use super::{
    Closed, Direct, DirectSend, DuplexSender, HandOver, Inbound, ReadingEnd, Received, Release,
    SocketOptions as Options, Started, socket_gone, stopped,
};
use crate::{
    endpoint::bind_form, error::ZmqError, monitor::ZmqMonitor, pattern::Role, wire::Frames,
};

/// How long one attempt to reach a peer may take before the supervisor tries again.
const CONNECT_ATTEMPT: Duration = Duration::from_millis(500);

enum ReadSocket {
    Pull(PullSocket),
    Sub(SubSocket),
}

enum WriteSocket {
    Push(PushSocket),
    Pub(PubSocket),
}

enum DuplexSocket {
    Router(RouterSocket),
    Dealer(DealerSocket),
    /// A dialing DEALER once connected: its task reads with this half, and the send half is
    /// in the slot it shares with the senders ([`DealerDirect`]).
    SplitDealer(DealerRecvHalf, DealerSlot),
}

/// A connected DEALER's send half, shared by its task and the tasks that send; empty while it
/// is not connected. An async lock: a send may wait in it for room in the peer's queue.
type DealerSlot = Arc<tokio::sync::Mutex<Option<DealerSendHalf>>>;

fn options() -> SocketOptions {
    let mut options = SocketOptions::default();
    options.connect_timeout(CONNECT_ATTEMPT);
    options
}

/// Runs `$body` with `$s` bound to whichever client socket `$socket` holds.
macro_rules! each {
    ($socket:expr, $s:ident => $body:expr, $($variant:path),+) => {
        match $socket {
            $($variant($s) => $body,)+
        }
    };
}

/// Closes a client socket: its listeners first, then every connection (the client's own close
/// leaves a PULL's connections open).
///
/// A peer whose handshake began before the listener stopped joins the socket afterwards, and the
/// client would hold that connection open for good, so each late arrival the monitor reports
/// is shut out in turn, until the socket is gone.
async fn close_client<S: Socket + 'static>(socket: S, events: Receiver<SocketEvent>) {
    let state = Arc::downgrade(&socket.backend());
    close_client_of(socket, events, state).await;
}

/// [`close_client`], where the peers' state is not (or no longer) `socket`'s own: a split
/// ROUTER's, whose listeners were moved into `socket`.
async fn close_client_of<S: Socket + 'static>(
    socket: S,
    events: Receiver<SocketEvent>,
    state: Weak<dyn MultiPeerBackend>,
) {
    // The client's shutdown takes locks that block the thread (`scc`'s `_sync` calls) while its
    // own tasks may hold them across an await: on runtime workers, two such waits stalled every
    // worker for good (seen under load). Closing on the blocking pool leaves the workers free.
    let runtime = tokio::runtime::Handle::current();
    let closing =
        tokio::task::spawn_blocking(move || runtime.block_on(close_here(socket, events, state)));
    let _ = closing.await;
}

/// Closes a split dialing DEALER: no send starts after this, and its peer is cut once both
/// halves are gone, on the blocking pool for the reason [`close_client_of`] gives.
async fn close_split_dealer(recv: DealerRecvHalf, slot: &DealerSlot) {
    let send = slot.lock().await.take();
    let _ = tokio::task::spawn_blocking(move || drop((send, recv))).await;
}

/// [`close_client`]'s work, on the thread that runs it.
async fn close_here<S: Socket>(
    mut socket: S,
    mut events: Receiver<SocketEvent>,
    backend: Weak<dyn MultiPeerBackend>,
) {
    // Only a socket that listened can see a late arrival: a dialing one, renewed at every
    // reconnect, needs no watcher.
    let listened = !socket.binds().is_empty();
    // Room in the monitor channel, so that no late arrival goes unreported.
    while events.try_recv().is_ok() {}
    let _ = socket.close().await;
    let Some(still_held) = backend.upgrade() else {
        return;
    };
    still_held.shutdown();
    drop(still_held);
    if !listened {
        return;
    }
    tokio::spawn(async move {
        // Ends when the last holder of the socket's state lets go, and the monitor with it.
        while let Some(event) = events.next().await {
            if matches!(event, SocketEvent::Accepted(..)) {
                let Some(late) = backend.upgrade() else {
                    return;
                };
                let _ = tokio::task::spawn_blocking(move || late.shutdown()).await;
            }
        }
    });
}

impl ReadSocket {
    /// A fresh socket; a SUB subscribes to `topics` at once, so a reconnect keeps its filter.
    async fn new(role: Role, topics: &[String]) -> Self {
        match role {
            Role::Pull => Self::Pull(PullSocket::with_options(options())),
            Role::Sub => {
                let mut socket = SubSocket::with_options(options());
                for topic in topics {
                    // Only fails on a closed socket, and this one is new.
                    let _ = socket.subscribe(topic).await;
                }
                Self::Sub(socket)
            }
            _ => unreachable!("{} does not read alone", role.name()),
        }
    }

    async fn recv(&mut self) -> Result<ClientMessage, ClientError> {
        each!(self, s => s.recv().await, Self::Pull, Self::Sub)
    }
}

impl WriteSocket {
    async fn new(role: Role, _topics: &[String]) -> Self {
        match role {
            Role::Push => Self::Push(PushSocket::with_options(options())),
            Role::Pub => Self::Pub(PubSocket::with_options(options())),
            _ => unreachable!("{} does not write alone", role.name()),
        }
    }

    async fn send(&mut self, message: ClientMessage) -> Result<(), ClientError> {
        each!(self, s => s.send(message).await, Self::Push, Self::Pub)
    }
}

impl DuplexSocket {
    async fn new(role: Role, _topics: &[String]) -> Self {
        match role {
            Role::Router => Self::Router(RouterSocket::with_options(options())),
            Role::Dealer => Self::Dealer(DealerSocket::with_options(options())),
            _ => unreachable!("{} is not a duplex socket", role.name()),
        }
    }

    async fn recv(&mut self) -> Result<ClientMessage, ClientError> {
        match self {
            Self::Router(s) => s.recv().await,
            Self::Dealer(s) => s.recv().await,
            Self::SplitDealer(s, _) => s.recv().await,
        }
    }

    async fn send(&mut self, message: ClientMessage) -> Result<(), ClientError> {
        match self {
            Self::Router(s) => s.send(message).await,
            Self::Dealer(s) => s.send(message).await,
            Self::SplitDealer(_, slot) => match slot.lock().await.as_mut() {
                Some(half) => half.send(message).await,
                None => Err(ClientError::ReturnToSender {
                    reason: "the socket is being closed",
                    message,
                }),
            },
        }
    }

    /// Splits a connected dialing DEALER, its send half going into `slot`.
    async fn split_dealer(&mut self, slot: &DealerSlot) {
        let placeholder = Self::Router(RouterSocket::new());
        let Self::Dealer(dealer) = std::mem::replace(self, placeholder) else {
            return;
        };
        let (send, recv) = dealer.split();
        *slot.lock().await = Some(send);
        *self = Self::SplitDealer(recv, Arc::clone(slot));
    }
}

fn fault(err: ClientError) -> crate::error::SocketFault {
    Box::new(err)
}

/// What a send to `endpoint` that the client refused fails with: a ROUTER asked to answer an
/// identity that is gone, or the client's own error.
fn send_error(endpoint: &str, err: ClientError) -> ZmqError {
    match err {
        ClientError::Other(reason) if reason.contains("not found") => ZmqError::UnknownPeer {
            endpoint: endpoint.to_owned(),
        },
        err => ZmqError::Send {
            endpoint: endpoint.to_owned(),
            source: fault(err),
        },
    }
}

/// What every client socket kind offers the supervisor.
trait ClientSocket: Sized + Send {
    async fn fresh(role: Role, topics: &[String]) -> Self;
    async fn bind(&mut self, address: &str) -> Result<String, ClientError>;
    async fn connect(&mut self, address: &str) -> Result<(), ClientError>;
    fn monitor(&mut self) -> Receiver<SocketEvent>;
    /// Closes the socket; `events` is its monitor, watched for peers that join late.
    async fn close(self, events: Receiver<SocketEvent>);
}

/// The supervisor's view of a socket kind, forwarded to whichever client socket it holds.
macro_rules! client_socket {
    ($kind:ident: $($variant:ident),+) => {
        impl ClientSocket for $kind {
            async fn fresh(role: Role, topics: &[String]) -> Self {
                Self::new(role, topics).await
            }

            async fn bind(&mut self, address: &str) -> Result<String, ClientError> {
                each!(self, s => s.bind(address).await.map(|e| e.to_string()), $(Self::$variant),+)
            }

            async fn connect(&mut self, address: &str) -> Result<(), ClientError> {
                each!(self, s => s.connect(address).await, $(Self::$variant),+)
            }

            fn monitor(&mut self) -> Receiver<SocketEvent> {
                each!(self, s => s.monitor(), $(Self::$variant),+)
            }

            async fn close(self, events: Receiver<SocketEvent>) {
                each!(self, s => close_client(s, events).await, $(Self::$variant),+)
            }
        }
    };
}

client_socket!(ReadSocket: Pull, Sub);
client_socket!(WriteSocket: Push, Pub);

impl ClientSocket for DuplexSocket {
    async fn fresh(role: Role, topics: &[String]) -> Self {
        Self::new(role, topics).await
    }

    async fn bind(&mut self, address: &str) -> Result<String, ClientError> {
        match self {
            Self::Router(s) => s.bind(address).await.map(|e| e.to_string()),
            Self::Dealer(s) => s.bind(address).await.map(|e| e.to_string()),
            Self::SplitDealer(..) => Err(ClientError::Socket("a dialing DEALER does not bind")),
        }
    }

    async fn connect(&mut self, address: &str) -> Result<(), ClientError> {
        match self {
            Self::Router(s) => s.connect(address).await,
            Self::Dealer(s) => s.connect(address).await,
            // Split only once connected; renewed, not reconnected, when its peer goes away.
            Self::SplitDealer(..) => Ok(()),
        }
    }

    fn monitor(&mut self) -> Receiver<SocketEvent> {
        match self {
            Self::Router(s) => s.monitor(),
            Self::Dealer(s) => s.monitor(),
            // Its monitor was taken before the split, and stays with its supervisor.
            Self::SplitDealer(..) => futures::channel::mpsc::channel(0).1,
        }
    }

    async fn close(self, events: Receiver<SocketEvent>) {
        match self {
            Self::Router(s) => close_client(s, events).await,
            Self::Dealer(s) => close_client(s, events).await,
            Self::SplitDealer(recv, slot) => close_split_dealer(recv, &slot).await,
        }
    }
}

/// A socket kind that sends.
trait SendingSocket: ClientSocket {
    async fn send(&mut self, message: ClientMessage) -> Result<(), ClientError>;
}

impl SendingSocket for WriteSocket {
    async fn send(&mut self, message: ClientMessage) -> Result<(), ClientError> {
        Self::send(self, message).await
    }
}

impl SendingSocket for DuplexSocket {
    async fn send(&mut self, message: ClientMessage) -> Result<(), ClientError> {
        Self::send(self, message).await
    }
}

/// A client socket and what keeps it usable: a bound one listens for good; a dialing one is
/// re-created and reconnected whenever its peer goes away (the client reconnects only SUB, and
/// only with a backoff of up to 30 s).
struct Supervised<S: ClientSocket> {
    socket: S,
    /// Where lost peer connections are counted.
    monitor: ZmqMonitor,
    events: Receiver<SocketEvent>,
    role: Role,
    topics: Vec<String>,
    address: String,
    binds: bool,
    connected: bool,
    /// On a bound socket: the peers connected, as far as the monitor has told.
    peers: usize,
    /// On a dialing socket: whether it was ever connected, so that the next connection is a
    /// reconnect.
    was_connected: bool,
}

impl<S: ClientSocket> Supervised<S> {
    async fn bind(
        role: Role,
        address: &str,
        topics: Vec<String>,
        monitor: ZmqMonitor,
    ) -> Result<(Self, String), ZmqError> {
        let mut socket = S::fresh(role, &topics).await;
        let events = socket.monitor();
        // libzmq's `tcp://*:port` is every interface; the client reads `*` as a host name.
        let resolved = socket
            .bind(&bind_form(address))
            .await
            .map_err(|err| ZmqError::Bind {
                endpoint: address.to_owned(),
                source: fault(err),
            })?;
        let supervised = Self {
            socket,
            monitor,
            events,
            role,
            topics,
            address: resolved.clone(),
            binds: true,
            connected: true,
            peers: 0,
            was_connected: false,
        };
        Ok((supervised, resolved))
    }

    async fn dial(role: Role, address: &str, topics: Vec<String>, monitor: ZmqMonitor) -> Self {
        let mut socket = S::fresh(role, &topics).await;
        let events = socket.monitor();
        Self {
            socket,
            monitor,
            events,
            role,
            topics,
            address: address.to_owned(),
            binds: false,
            connected: false,
            peers: 0,
            was_connected: false,
        }
    }

    /// Replaces the socket with a fresh one: the old one's connections are closed.
    async fn renew(&mut self) {
        let mut fresh = S::fresh(self.role, &self.topics).await;
        let fresh_events = fresh.monitor();
        let old = std::mem::replace(&mut self.socket, fresh);
        old.close(std::mem::replace(&mut self.events, fresh_events))
            .await;
        if std::mem::take(&mut self.connected) && !self.binds {
            self.monitor.count_peer_disconnected();
        }
    }

    /// Takes in one event of the monitor: a bound socket counts its peers and the ones that
    /// leave; answers whether a dialing socket lost its peer (the caller renews it).
    fn note(&mut self, event: &SocketEvent) -> bool {
        match event {
            SocketEvent::Accepted(..) => {
                self.peers += 1;
                self.monitor.count_peer_connected();
                false
            }
            SocketEvent::Disconnected(_) if self.binds => {
                self.peers = self.peers.saturating_sub(1);
                self.monitor.count_peer_lost();
                self.monitor.count_peer_disconnected();
                tracing::debug!(endpoint = %self.address, socket = self.role.name(), "a peer left");
                false
            }
            SocketEvent::Disconnected(_) => self.connected,
            _ => false,
        }
    }

    /// Reacts to what the monitor reported since the last look: a dialing socket whose peer went
    /// away is renewed.
    async fn notice_disconnects(&mut self) {
        if self.take_in_events() {
            self.peer_went_away().await;
        }
    }

    /// Takes in what the monitor reported since the last look, without waiting; answers whether
    /// a dialing socket lost its peer (the caller renews it).
    fn take_in_events(&mut self) -> bool {
        let mut lost = false;
        while let Ok(event) = self.events.try_recv() {
            lost |= self.note(&event);
        }
        lost
    }

    /// Takes in one event of the monitor, renewing a dialing socket that lost its peer.
    async fn take(&mut self, event: &SocketEvent) {
        if self.note(event) {
            self.peer_went_away().await;
        }
    }

    /// Waits for the next event of the monitor and takes it in.
    async fn watch(&mut self) {
        match self.events.next().await {
            Some(event) => self.take(&event).await,
            // The monitor is gone with its socket: nothing more will come.
            None => std::future::pending().await,
        }
    }

    /// Waits until the socket has a peer: a dialing one connects, a bound one waits for a peer
    /// to dial in.
    async fn reach(&mut self) {
        if !self.binds {
            let _ = self.ensure_connected(None).await;
            return;
        }
        self.notice_disconnects().await;
        while self.peers == 0 {
            self.watch().await;
        }
    }

    async fn peer_went_away(&mut self) {
        self.monitor.count_peer_lost();
        tracing::info!(endpoint = %self.address, socket = self.role.name(), "the peer went away; reconnecting");
        self.renew().await;
    }

    /// Connects a dialing socket, trying again until `deadline` (forever with none).
    async fn ensure_connected(&mut self, deadline: Option<Instant>) -> Result<(), ZmqError> {
        self.notice_disconnects().await;
        if self.binds || self.connected {
            return Ok(());
        }
        let mut pause = Duration::from_millis(20);
        loop {
            // An attempt ends by the deadline; a cut-short one leaves a socket that is renewed.
            let attempt = deadline.map_or(CONNECT_ATTEMPT * 2, |deadline| {
                deadline
                    .saturating_duration_since(Instant::now())
                    .min(CONNECT_ATTEMPT * 2)
            });
            let failure = match timeout(attempt, self.socket.connect(&self.address)).await {
                Ok(Ok(())) => {
                    self.connected = true;
                    self.monitor.count_peer_connected();
                    if std::mem::replace(&mut self.was_connected, true) {
                        self.monitor.count_reconnect();
                    }
                    return Ok(());
                }
                Ok(Err(err)) => fault(err),
                Err(_) => "the peer did not complete the handshake".into(),
            };
            if deadline.is_some_and(|deadline| Instant::now() + pause >= deadline) {
                return Err(ZmqError::Connect {
                    endpoint: self.address.clone(),
                    source: failure,
                });
            }
            tracing::debug!(endpoint = %self.address, socket = self.role.name(), error = %failure, "peer not reachable yet");
            // A failed connect can leave the socket half set up: start from a fresh one.
            self.renew().await;
            sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }

    /// Waits until a peer dials in, or `deadline`.
    async fn wait_for_peer(&mut self, deadline: Instant) {
        let _ = tokio::time::timeout_at(deadline, async {
            while let Some(event) = self.events.next().await {
                self.note(&event);
                if matches!(event, SocketEvent::Accepted(..)) {
                    return;
                }
            }
        })
        .await;
    }

    /// After a send found no peer: a dialing socket lost it, a bound one has none yet.
    async fn no_peer(&mut self, deadline: Instant) {
        if self.binds {
            self.wait_for_peer(deadline).await;
        } else {
            self.renew().await;
        }
    }

    async fn close(self) {
        self.socket.close(self.events).await;
    }
}

impl<S: SendingSocket> Supervised<S> {
    /// Sends one message. A dialing socket reconnects first when its peer went away; a socket
    /// with no peer waits for one until `deadline`, and then fails, naming the endpoint.
    async fn send(&mut self, frames: Frames, deadline: Instant) -> Result<(), ZmqError> {
        let Ok(message) = ClientMessage::try_from(frames) else {
            return Ok(());
        };
        // The usual send, on a connected socket the monitor reported nothing about, waits only
        // for the client; every other path is boxed, so that this future (which each publish
        // allocates) stays small.
        let lost = self.take_in_events();
        if !lost && (self.binds || self.connected) {
            return match self.socket.send(message).await {
                Ok(()) => Ok(()),
                Err(err) => Box::pin(self.send_again(err, deadline)).await,
            };
        }
        Box::pin(async move {
            if lost {
                self.peer_went_away().await;
            }
            self.send_until(message, deadline).await
        })
        .await
    }

    /// Sends `message` by `deadline`: connects first, and waits for a peer while the client
    /// hands the message back.
    async fn send_until(
        &mut self,
        mut message: ClientMessage,
        deadline: Instant,
    ) -> Result<(), ZmqError> {
        loop {
            self.ensure_connected(Some(deadline)).await?;
            match self.socket.send(message).await {
                Ok(()) => return Ok(()),
                Err(err) => message = self.refused(err, deadline).await?,
            }
        }
    }

    /// After the client refused a send: the message to send again, once there may be a peer,
    /// or the error the send fails with.
    async fn send_again(&mut self, err: ClientError, deadline: Instant) -> Result<(), ZmqError> {
        let message = self.refused(err, deadline).await?;
        self.send_until(message, deadline).await
    }

    /// What follows a send the client refused with `err`: the message back while `deadline`
    /// leaves time to wait for a peer, or the error the send fails with.
    async fn refused(
        &mut self,
        err: ClientError,
        deadline: Instant,
    ) -> Result<ClientMessage, ZmqError> {
        match err {
            ClientError::ReturnToSender { message, .. } if Instant::now() < deadline => {
                self.no_peer(deadline).await;
                Ok(message)
            }
            err => {
                let failed = send_error(&self.address, err);
                // A ROUTER asked to answer an identity that is gone keeps its socket.
                if !self.binds && !matches!(failed, ZmqError::UnknownPeer { .. }) {
                    self.renew().await;
                }
                Err(failed)
            }
        }
    }
}

/// A socket that receives: bound once, or dialing and re-created whenever its peer goes away.
pub(crate) struct Reader(Supervised<ReadSocket>);

impl Reader {
    /// Binds `address`; answers the reader and the address it really listens on (port 0
    /// resolved). A SUB subscribes to `topics`.
    pub(crate) async fn bind(
        role: Role,
        address: &str,
        topics: Vec<String>,
        monitor: ZmqMonitor,
        _fixed_by_the_client: Options,
    ) -> Result<(Self, String), ZmqError> {
        let (supervised, resolved) = Supervised::bind(role, address, topics, monitor).await?;
        Ok((Self(supervised), resolved))
    }

    /// A reader that dials `address`. It connects on the first [`recv`](Self::recv), and again
    /// whenever the peer goes away, so a peer that is not up yet does not hold up startup.
    pub(crate) async fn dial(
        role: Role,
        address: &str,
        topics: Vec<String>,
        monitor: ZmqMonitor,
        _fixed_by_the_client: Options,
    ) -> Result<Self, ZmqError> {
        Ok(Self(Supervised::dial(role, address, topics, monitor).await))
    }

    /// The next message; on a dialing reader this also keeps the connection.
    pub(crate) async fn recv(&mut self) -> Frames {
        let this = &mut self.0;
        loop {
            // Without a deadline this only returns once connected. The monitor's events are
            // taken in below, so a connected socket goes straight to reading.
            if !this.binds && !this.connected {
                let _ = this.ensure_connected(None).await;
            }
            tokio::select! {
                received = this.socket.recv() => match received {
                    Ok(message) => return message.into_vec(),
                    // A broken frame or a reset connection: the client drops that peer (on a
                    // bound socket, the monitor's report of it is counted).
                    Err(err) => {
                        tracing::debug!(endpoint = %this.address, socket = this.role.name(), error = %err, "a peer's connection failed");
                        if !this.binds {
                            this.monitor.count_peer_lost();
                            this.renew().await;
                        }
                    }
                },
                Some(event) = this.events.next() => this.take(&event).await,
            }
        }
    }

    /// Closes the socket and all its connections.
    pub(crate) async fn close(self) {
        self.0.close().await;
    }

    /// Hands a bound PULL over to the subscription, which reads it in its own task
    /// ([`ReadingEnd`]): answers its reading end, and the task that keeps its peers and closes
    /// it, ending at shutdown or once `subscriber` is gone. Any other socket comes back.
    pub(crate) fn hand_over(
        self,
        subscriber: mpsc::Sender<Received>,
        mut shutdown: watch::Receiver<bool>,
    ) -> HandOver<Self> {
        let mut this = self.0;
        let ReadSocket::Pull(socket) = &mut this.socket else {
            return HandOver::Kept(Self(this));
        };
        if !this.binds {
            return HandOver::Kept(Self(this));
        }
        let pull = take_listened(socket);
        let state = Arc::downgrade(&pull.backend());
        let reading = reading(pull, this.address.clone(), "PULL");
        let task = async move {
            let stop = stopped(&mut shutdown);
            let gone = subscriber.closed();
            tokio::pin!(stop, gone);
            loop {
                tokio::select! {
                    () = &mut stop => break,
                    () = &mut gone => break,
                    () = this.watch() => {}
                }
            }
            let Supervised { socket, events, .. } = this;
            if let ReadSocket::Pull(listeners) = socket {
                close_client_of(listeners, events, state).await;
            }
        };
        HandOver::Handed(reading, Box::pin(task))
    }
}

/// Takes the socket out of `socket`, leaving in its place one that holds only its listeners, so
/// that closing that one stops them, as closing the socket would.
fn take_listened<S: Socket>(socket: &mut S) -> S {
    let mut taken = std::mem::replace(socket, S::new());
    std::mem::swap(socket.binds(), taken.binds());
    taken
}

/// A socket that sends: bound, or dialing and re-created when its peer goes away.
pub(crate) struct Writer(Supervised<WriteSocket>);

impl Writer {
    /// Binds `address`; answers the writer and the address it really listens on.
    pub(crate) async fn bind(
        role: Role,
        address: &str,
        monitor: ZmqMonitor,
        _fixed_by_the_client: Options,
    ) -> Result<(Self, String), ZmqError> {
        let (supervised, resolved) = Supervised::bind(role, address, Vec::new(), monitor).await?;
        Ok((Self(supervised), resolved))
    }

    /// A writer that dials `address`; it connects on the first send.
    pub(crate) async fn dial(
        role: Role,
        address: &str,
        monitor: ZmqMonitor,
        _fixed_by_the_client: Options,
    ) -> Result<Self, ZmqError> {
        Ok(Self(
            Supervised::dial(role, address, Vec::new(), monitor).await,
        ))
    }

    /// Sends one message. A dialing writer reconnects first when its peer went away; a writer
    /// with no peer waits for one until `deadline`, and then fails, naming the endpoint.
    pub(crate) async fn send(&mut self, frames: Frames, deadline: Instant) -> Result<(), ZmqError> {
        self.0.send(frames, deadline).await
    }

    /// Waits until the socket has a peer again.
    pub(crate) async fn reach(&mut self) {
        self.0.reach().await;
    }

    /// Takes in what the socket's monitor reported since the last look.
    pub(crate) async fn look(&mut self) {
        self.0.notice_disconnects().await;
    }

    /// Closes the socket and all its connections.
    pub(crate) async fn close(self) {
        self.0.close().await;
    }
}

/// A socket that both sends and receives (ROUTER, DEALER), run by a task of its own so that a
/// reply can leave while requests wait to be handled.
pub(crate) struct Duplex(Supervised<DuplexSocket>);

impl Duplex {
    /// Binds `address`; answers the socket and the address it really listens on.
    pub(crate) async fn bind(
        role: Role,
        address: &str,
        monitor: ZmqMonitor,
        _fixed_by_the_client: Options,
    ) -> Result<(Self, String), ZmqError> {
        let (supervised, resolved) = Supervised::bind(role, address, Vec::new(), monitor).await?;
        Ok((Self(supervised), resolved))
    }

    /// A socket that dials `address`, connecting in its task.
    pub(crate) async fn dial(
        role: Role,
        address: &str,
        monitor: ZmqMonitor,
        _fixed_by_the_client: Options,
    ) -> Result<Self, ZmqError> {
        Ok(Self(
            Supervised::dial(role, address, Vec::new(), monitor).await,
        ))
    }

    /// Starts the socket: answers the handle that sends through it, the task to spawn, which
    /// hands every received message to `inbound` and ends at shutdown, and a bound ROUTER's
    /// reading end where the subscription reads it itself.
    pub(crate) fn run(self, inbound: Inbound, mut shutdown: watch::Receiver<bool>) -> Started {
        let (sender, mut outbox) = DuplexSender::channel(&self.0.address);
        let mut this = self.0;
        // A bound ROUTER's answers leave from the tasks that send them, never through this
        // task's outbox.
        let mut split = this
            .binds
            .then(|| SplitRouter::split(&mut this.socket))
            .flatten();
        // So a subscription reads it itself; this task then only watches its peers, and ends
        // when the subscription is gone.
        let reader = match (&mut split, &inbound) {
            (Some(split), Inbound::Channel(_)) => split
                .recv
                .take()
                .map(|recv| reading(recv, this.address.clone(), "ROUTER")),
            _ => None,
        };
        let handed_over = reader.is_some();
        // A dialing DEALER's sends leave from the tasks that send them while it is connected.
        let dealer = (!this.binds && this.role == Role::Dealer).then(DealerSlot::default);
        let sender = match (&split, &dealer) {
            (Some(split), _) => sender.direct(Arc::new(RouterDirect {
                send: Arc::clone(&split.send),
                endpoint: this.address.as_str().into(),
            })),
            (None, Some(slot)) => sender.direct(Arc::new(DealerDirect {
                slot: Arc::clone(slot),
                endpoint: this.address.as_str().into(),
            })),
            (None, None) => sender,
        };
        let task = async move {
            // One received message waits here while the handler side is full; the socket keeps
            // sending meanwhile, so a reply is never stuck behind the requests it answers.
            let mut pending: Option<Received> = None;
            // One wait for shutdown for the whole loop: a new one for every message (registered,
            // then dropped) cost about a twentieth of a round trip.
            let stop = stopped(&mut shutdown);
            tokio::pin!(stop);
            loop {
                if !this.binds && !this.connected {
                    tokio::select! {
                        _ = this.ensure_connected(None) => {}
                        () = &mut stop => break,
                    }
                }
                if let Some(slot) = &dealer
                    && this.connected
                    && matches!(this.socket, DuplexSocket::Dealer(_))
                {
                    this.socket.split_dealer(slot).await;
                }
                tokio::select! {
                    biased;
                    () = &mut stop => break,
                    Some((frames, deadline, done)) = outbox.recv() => {
                        let sent = if Instant::now() >= deadline {
                            Err(ZmqError::Send {
                                endpoint: this.address.clone(),
                                source: "its deadline passed before its turn came".into(),
                            })
                        } else {
                            this.send(frames, deadline).await
                        };
                        done.settle(sent);
                    }
                    permit = inbound.room(), if pending.is_some() => match (permit, pending.take()) {
                        (Ok(permit), Some(received)) => permit.send(received),
                        _ => break,
                    },
                    () = inbound.closed(), if handed_over => break,
                    received = read_duplex(&mut this.socket, split.as_mut()), if pending.is_none() && !handed_over => match received {
                        Ok(message) => match inbound.offer(Received {
                            frames: message.into_vec(),
                            release: Release::default(),
                        }) {
                            Ok(waits) => pending = waits,
                            Err(Closed) => break,
                        },
                        Err(err) => {
                            tracing::debug!(endpoint = %this.address, socket = this.role.name(), error = %err, "a peer's connection failed");
                            if !this.binds {
                                this.monitor.count_peer_lost();
                                this.renew().await;
                            }
                        }
                    },
                    Some(event) = this.events.next() => this.take(&event).await,
                }
            }
            match split {
                Some(split) => split.close(this).await,
                None => this.close().await,
            }
        };
        Started {
            sender,
            task: Box::pin(task),
            reader,
        }
    }
}

/// Reads a duplex socket: through its receiving half, once split.
async fn read_duplex(
    socket: &mut DuplexSocket,
    split: Option<&mut SplitRouter>,
) -> Result<ClientMessage, ClientError> {
    match split.and_then(|split| split.recv.as_mut()) {
        Some(recv) => recv.recv().await,
        None => socket.recv().await,
    }
}

/// What a socket's receiving side reads (a bound ROUTER's receiving half, a bound PULL), for a
/// subscription to take in its own task. A failed read was one peer's, whose connection the
/// client dropped, and the socket reads on; the messages end once the socket reads no more.
/// The client's PULL does nothing when dropped: its peers are cut by the socket's task, on the
/// blocking pool ([`close_client_of`]).
fn reading<S>(socket: S, address: String, kind: &'static str) -> ReadingEnd
where
    S: SocketRecv + Send + 'static,
{
    // The endpoint, for the log lines, rides along with the socket: nothing is copied a
    // message.
    let state = (socket, address);
    let messages = futures::stream::unfold(state, move |(mut socket, address)| async move {
        loop {
            match socket.recv().await {
                Ok(message) => {
                    let received = Received {
                        frames: message.into_vec(),
                        release: Release::default(),
                    };
                    return Some((received, (socket, address)));
                }
                Err(ClientError::NoMessage) => {
                    tracing::debug!(endpoint = %address, socket = kind, "the socket reads no more");
                    return None;
                }
                Err(err) => {
                    tracing::debug!(endpoint = %address, socket = kind, error = %err, "a peer's connection failed");
                }
            }
        }
    });
    ReadingEnd::new(Box::pin(messages))
}

/// A bound ROUTER in two halves: its task reads with one, and each answer leaves through the
/// other from the task that sends it ([`RouterDirect`]).
struct SplitRouter {
    /// Taken out when a subscription reads the socket itself.
    recv: Option<RouterRecvHalf>,
    /// Taken out at close, so that no send finds the socket after it.
    send: Arc<Mutex<Option<RouterSendHalf>>>,
    /// The peers' state the halves share, shut down at close even while a send still holds it.
    state: Weak<dyn MultiPeerBackend>,
}

impl SplitRouter {
    /// Splits the ROUTER in `socket`, leaving in its place a socket that holds only its
    /// listeners, so that closing that one stops them, as closing the ROUTER would.
    fn split(socket: &mut DuplexSocket) -> Option<Self> {
        let DuplexSocket::Router(listened) = socket else {
            return None;
        };
        let router = take_listened(listened);
        let state = Arc::downgrade(&router.backend());
        let (send, recv) = router.split();
        Some(Self {
            recv: Some(recv),
            send: Arc::new(Mutex::new(Some(send))),
            state,
        })
    }

    /// Closes the ROUTER: no send starts after this, its listeners stop, and its peers are cut.
    async fn close(self, supervised: Supervised<DuplexSocket>) {
        let Self { recv, send, state } = self;
        drop(send.lock().unwrap_or_else(PoisonError::into_inner).take());
        drop(recv);
        let Supervised { socket, events, .. } = supervised;
        if let DuplexSocket::Router(listeners) = socket {
            close_client_of(listeners, events, state).await;
        }
    }
}

/// Sends a dialing DEALER's messages from the tasks that send them, through the send half of
/// the socket it is connected with. While it is not connected, or another send holds that half,
/// a message goes through the socket's task, which connects first.
struct DealerDirect {
    slot: DealerSlot,
    endpoint: Arc<str>,
}

impl DirectSend for DealerDirect {
    fn send(&self, frames: Frames) -> Direct {
        // The send half, held for this send; none while another send holds it or the socket
        // is not connected.
        let half = Arc::clone(&self.slot)
            .try_lock_owned()
            .ok()
            .and_then(|slot| OwnedMutexGuard::try_map(slot, Option::as_mut).ok());
        let Some(mut half) = half else {
            return Direct::ToTask(frames);
        };
        let Ok(message) = ClientMessage::try_from(frames) else {
            return Direct::Now(Ok(()));
        };
        let endpoint = Arc::clone(&self.endpoint);
        Direct::Later(Box::pin(async move {
            match half.send(message).await {
                Ok(()) => Direct::Now(Ok(())),
                // The peer went away: the socket's task reconnects, and sends it then.
                Err(ClientError::ReturnToSender { message, .. }) => {
                    Direct::ToTask(message.into_vec())
                }
                Err(err) => Direct::Now(Err(send_error(&endpoint, err))),
            }
        }))
    }
}

/// Sends a bound ROUTER's answers from the task that sends them.
struct RouterDirect {
    send: Arc<Mutex<Option<RouterSendHalf>>>,
    endpoint: Arc<str>,
}

impl DirectSend for RouterDirect {
    fn send(&self, frames: Frames) -> Direct {
        let half = self
            .send
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let endpoint = Arc::clone(&self.endpoint);
        let Some(mut half) = half else {
            return Direct::Now(Err(socket_gone()));
        };
        let Ok(message) = ClientMessage::try_from(frames) else {
            return Direct::Now(Ok(()));
        };
        Direct::Later(Box::pin(async move {
            Direct::Now(
                half.send(message)
                    .await
                    .map_err(|err| send_error(&endpoint, err)),
            )
        }))
    }
}
