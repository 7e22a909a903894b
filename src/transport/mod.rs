//! The transport under a connection: real ZeroMQ sockets of one backend (the pure-Rust
//! `zeromq` client, libzmq), or (under the `testing` feature) the in-process bus that stands in
//! for them. Everything above this module is the same for all of them, so the in-process mode
//! decides, refuses and routes exactly as the sockets do.
//!
//! A backend meets the contract in [`backend`]; a connection holds it erased
//! ([`Transport::sockets`]), so nothing above names one.
//!
//! Imports: the leaves (`error`, `wire`, `endpoint`, `monitor`, `throttle`), `pattern`,
//! `routing` and `settings`. Only
//! the `zeromq` and `libzmq` modules name a client's types.

mod backend;
#[cfg(feature = "testing")]
pub(crate) mod bus;
mod duplex;
mod episodes;
#[cfg(feature = "libzmq")]
pub(crate) mod libzmq;
mod reading_end;
mod requesters;
mod writer;
#[cfg(feature = "zeromq")]
pub(crate) mod zeromq;

pub use backend::{Backend, DefaultBackend, Speaks};
pub(crate) use backend::{
    SocketBackend, fault, late_for_its_turn, refused_send, sealed, transport_of,
};
pub(crate) use duplex::{Direct, DirectSend, socket_gone};
pub(crate) use duplex::{Done, DuplexSender, Inbound, Started};
pub(crate) use reading_end::ReadingEnd;
pub(crate) use writer::{CLOSE_WAIT, Writer, WriterTask};

use std::sync::Arc;

use futures::future::BoxFuture;
#[cfg(feature = "testing")]
use ruststream::{Bytes, HeaderMap};
use tokio::{runtime::Handle, sync::watch, task::JoinHandle, time::Instant};

use self::backend::{DuplexSocket, Opening, ReadSocket, WriteSocket};
use crate::{
    error::ZmqError, monitor::ZmqMonitor, pattern::Role, routing::beyond_loopback, wire::Frames,
};

/// A task a socket runs: a duplex socket's loop.
pub(crate) type BoxTask = std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Where a connection opens its sockets, and the runtime they live on.
///
/// The `zeromq` client spawns a socket's tasks on the runtime that creates it, and a publish may
/// come from a runtime that stops (a handler's dedicated thread, a caller's own): every socket
/// is made and driven on the runtime the broker connected on.
#[derive(Clone)]
pub struct Transport {
    via: Via,
    runtime: Handle,
}

#[derive(Clone)]
enum Via {
    /// ZeroMQ sockets of one backend.
    Sockets(Arc<dyn Opens>),
    /// The in-process bus of the `testing` feature.
    #[cfg(feature = "testing")]
    InProcess(bus::Peer),
}

/// Opens the sockets of one backend, its type erased: what a connection holds.
trait Opens: Send + Sync {
    fn bind_reader(
        &self,
        role: Role,
        address: String,
        topics: Vec<String>,
    ) -> BoxFuture<'static, Result<(Reader, String), ZmqError>>;
    fn dial_reader(
        &self,
        role: Role,
        address: String,
        topics: Vec<String>,
    ) -> BoxFuture<'static, Result<Reader, ZmqError>>;
    fn bind_writer(
        &self,
        role: Role,
        address: String,
    ) -> BoxFuture<'static, Result<(Sending, String), ZmqError>>;
    fn dial_writer(
        &self,
        role: Role,
        address: String,
    ) -> BoxFuture<'static, Result<Sending, ZmqError>>;
    fn duplex(
        &self,
        opening: (Role, String, bool),
        inbound: Inbound,
        shutdown: watch::Receiver<bool>,
    ) -> BoxFuture<'static, Result<(Started, Option<String>), ZmqError>>;
}

/// Backend `B`'s sockets, opened with these options; lost peer connections are counted on the
/// monitor.
struct Sockets<B: SocketBackend> {
    monitor: ZmqMonitor,
    options: B::Options,
}

impl<B: SocketBackend> Sockets<B> {
    /// What to say, as a socket binds, of where it listens ([`say_bound`]).
    fn bound(&self) -> impl Fn(&str) + Send + 'static {
        let curve = B::curve(&self.options);
        move |address| say_bound(address, B::NAME, curve)
    }

    fn opening(&self, role: Role, address: String) -> Opening<B::Options> {
        Opening {
            role,
            address,
            monitor: self.monitor.clone(),
            options: self.options.clone(),
        }
    }
}

/// Says once, as a socket binds, that it listens beyond the loopback: a warning in clear, a
/// note under CURVE.
fn say_bound(address: &str, backend: &'static str, curve: bool) {
    if !beyond_loopback(address) {
        return;
    }
    if curve {
        tracing::info!(
            endpoint = %address,
            backend,
            curve,
            "listening beyond the loopback under CURVE: only clients that hold the server's key \
             (and, with an allow-list, a listed key of their own) get through"
        );
    } else {
        tracing::warn!(
            endpoint = %address,
            backend,
            curve,
            "listening beyond the loopback in clear: any host that reaches this address can \
             connect, unauthenticated and unencrypted, and send what it likes; bind 127.0.0.1, or \
             turn on CURVE with an allow-list on the libzmq backend (docs.rs: ruststream_zmq::guide::security)"
        );
    }
}

impl<B: SocketBackend> Opens for Sockets<B> {
    fn bind_reader(
        &self,
        role: Role,
        address: String,
        topics: Vec<String>,
    ) -> BoxFuture<'static, Result<(Reader, String), ZmqError>> {
        let at = self.opening(role, address);
        let say = self.bound();
        Box::pin(async move {
            let (reader, bound) = B::Reader::bind(at, topics).await?;
            say(&bound);
            Ok((Reader::Sockets(Box::new(reader)), bound))
        })
    }

    fn dial_reader(
        &self,
        role: Role,
        address: String,
        topics: Vec<String>,
    ) -> BoxFuture<'static, Result<Reader, ZmqError>> {
        let at = self.opening(role, address);
        Box::pin(async move {
            let reader = B::Reader::dial(at, topics).await?;
            Ok(Reader::Sockets(Box::new(reader)))
        })
    }

    fn bind_writer(
        &self,
        role: Role,
        address: String,
    ) -> BoxFuture<'static, Result<(Sending, String), ZmqError>> {
        let at = self.opening(role, address);
        let say = self.bound();
        Box::pin(async move {
            let (writer, bound) = B::Writer::bind(at).await?;
            say(&bound);
            Ok((Sending::Sockets(Box::new(writer)), bound))
        })
    }

    fn dial_writer(
        &self,
        role: Role,
        address: String,
    ) -> BoxFuture<'static, Result<Sending, ZmqError>> {
        let at = self.opening(role, address);
        Box::pin(async move {
            let writer = B::Writer::dial(at).await?;
            Ok(Sending::Sockets(Box::new(writer)))
        })
    }

    fn duplex(
        &self,
        (role, address, binds): (Role, String, bool),
        inbound: Inbound,
        shutdown: watch::Receiver<bool>,
    ) -> BoxFuture<'static, Result<(Started, Option<String>), ZmqError>> {
        let at = self.opening(role, address);
        let say = self.bound();
        Box::pin(async move {
            let (duplex, bound) = if binds {
                let (duplex, bound) = B::Duplex::bind(at).await?;
                say(&bound);
                (duplex, Some(bound))
            } else {
                (B::Duplex::dial(at).await?, None)
            };
            let reads_itself = matches!(inbound, Inbound::Channel(..));
            let started = duplex::run(duplex.drive(reads_itself), inbound, shutdown);
            Ok((started, bound))
        })
    }
}

/// A receiving socket.
pub(crate) enum Reader {
    Sockets(Box<dyn Reads>),
    #[cfg(feature = "testing")]
    InProcess(bus::BusReader),
}

/// A backend's reading socket, its type erased.
pub(crate) trait Reads: Send {
    fn recv(&mut self) -> BoxFuture<'_, Frames>;
    fn close(self: Box<Self>) -> BoxFuture<'static, ()>;
    fn hand_over(
        self: Box<Self>,
        subscriber: tokio::sync::mpsc::Sender<Received>,
        shutdown: watch::Receiver<bool>,
    ) -> HandOver<Box<dyn Reads>>;
}

impl<R: ReadSocket> Reads for R {
    fn recv(&mut self) -> BoxFuture<'_, Frames> {
        Box::pin(ReadSocket::recv(self))
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(ReadSocket::close(*self))
    }

    fn hand_over(
        self: Box<Self>,
        subscriber: tokio::sync::mpsc::Sender<Received>,
        shutdown: watch::Receiver<bool>,
    ) -> HandOver<Box<dyn Reads>> {
        match ReadSocket::hand_over(*self, subscriber, shutdown) {
            HandOver::Handed(reading, task) => HandOver::Handed(reading, task),
            HandOver::Kept(reader) => HandOver::Kept(Box::new(reader)),
        }
    }
}

/// How handing a reader over to its subscription went.
pub(crate) enum HandOver<R> {
    /// The subscription reads the socket through this end; the task keeps its peers and closes
    /// it.
    Handed(ReadingEnd, BoxTask),
    /// The backend keeps the socket to a reader task.
    Kept(R),
}

/// A sending socket, owned by its [`Writer`]'s task.
pub(crate) enum Sending {
    Sockets(Box<dyn Writes>),
    #[cfg(feature = "testing")]
    InProcess(bus::BusWriter),
}

/// A backend's sending socket, its type erased.
pub(crate) trait Writes: Send {
    fn send(&mut self, frames: Frames, deadline: Instant) -> BoxFuture<'_, Result<(), ZmqError>>;
    fn reach(&mut self) -> BoxFuture<'_, ()>;
    fn looks(&self) -> bool;
    fn look(&mut self) -> BoxFuture<'_, ()>;
    fn close(self: Box<Self>) -> BoxFuture<'static, ()>;
}

impl<W: WriteSocket> Writes for W {
    fn send(&mut self, frames: Frames, deadline: Instant) -> BoxFuture<'_, Result<(), ZmqError>> {
        Box::pin(WriteSocket::send(self, frames, deadline))
    }

    fn reach(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(WriteSocket::reach(self))
    }

    fn looks(&self) -> bool {
        W::LOOKS
    }

    fn look(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(WriteSocket::look(self))
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(WriteSocket::close(*self))
    }
}

/// One message as a socket read it, and what goes with it.
pub(crate) struct Received {
    pub(crate) frames: Frames,
    pub(crate) release: Release,
}

/// Travels with a message read from the transport until the last handle on it goes. In process
/// it tells the test harness the delivery is done with (settled, refused, or dropped); on the
/// sockets it is empty.
#[derive(Debug, Clone, Default)]
pub(crate) struct Release {
    #[cfg(feature = "testing")]
    _consumed: Option<std::sync::Arc<bus::Consumed>>,
}

impl Transport {
    /// Sockets of backend `B`, opened with `options`, made on the current runtime.
    pub(crate) fn sockets<B: SocketBackend>(monitor: ZmqMonitor, options: B::Options) -> Self {
        Self {
            via: Via::Sockets(Arc::new(Sockets::<B> { monitor, options })),
            runtime: Handle::current(),
        }
    }

    /// The in-process bus, scoped to the current runtime.
    #[cfg(feature = "testing")]
    pub(crate) fn in_process() -> Self {
        Self {
            via: Via::InProcess(bus::Peer::new()),
            runtime: Handle::current(),
        }
    }

    /// The bus peer, when this transport runs in process.
    #[cfg(feature = "testing")]
    pub(crate) fn peer(&self) -> Option<&bus::Peer> {
        match &self.via {
            Via::InProcess(peer) => Some(peer),
            Via::Sockets(_) => None,
        }
    }

    /// Runs socket work on the runtime the sockets live on; inline when already on it (a
    /// handler of the service, the usual case).
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, ZmqError>> + Send + 'static,
    ) -> Result<T, ZmqError> {
        if Handle::try_current().is_ok_and(|current| current.id() == self.runtime.id()) {
            return work.await;
        }
        self.runtime
            .spawn(work)
            .await
            .unwrap_or(Err(ZmqError::ShutDown { what: "a socket" }))
    }

    /// Spawns a task on the sockets' runtime.
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) -> JoinHandle<()> {
        self.runtime.spawn(task)
    }

    /// Binds a reader; answers it and the address it really listens on (port 0 resolved).
    pub(crate) async fn bind_reader(
        &self,
        role: Role,
        address: &str,
        topics: Vec<String>,
    ) -> Result<(Reader, String), ZmqError> {
        match &self.via {
            Via::Sockets(sockets) => {
                self.run(sockets.bind_reader(role, address.to_owned(), topics))
                    .await
            }
            #[cfg(feature = "testing")]
            Via::InProcess(peer) => peer
                .bind_reader(role, address, topics)
                .map(|(reader, at)| (Reader::InProcess(reader), at)),
        }
    }

    /// A reader dialing `address`; it connects on its first read, and again whenever the peer
    /// goes away.
    pub(crate) async fn dial_reader(
        &self,
        role: Role,
        address: &str,
        topics: Vec<String>,
    ) -> Result<Reader, ZmqError> {
        match &self.via {
            Via::Sockets(sockets) => {
                self.run(sockets.dial_reader(role, address.to_owned(), topics))
                    .await
            }
            #[cfg(feature = "testing")]
            Via::InProcess(peer) => Ok(Reader::InProcess(peer.dial_reader(role, address, topics))),
        }
    }

    /// Binds a writer for peers that dial in; answers it, its task, and the address it listens
    /// on.
    pub(crate) async fn bind_writer(
        &self,
        role: Role,
        address: &str,
    ) -> Result<(Writer, WriterTask, String), ZmqError> {
        let (socket, resolved) = match &self.via {
            Via::Sockets(sockets) => {
                self.run(sockets.bind_writer(role, address.to_owned()))
                    .await
            }
            #[cfg(feature = "testing")]
            Via::InProcess(peer) => peer
                .bind_writer(role, address)
                .map(|(writer, at)| (Sending::InProcess(writer), at)),
        }?;
        let (writer, task) = self.start_writer(socket, resolved.clone()).await?;
        Ok((writer, task, resolved))
    }

    /// A writer dialing `address`, and its task; it connects on its first send.
    pub(crate) async fn dial_writer(
        &self,
        role: Role,
        address: &str,
    ) -> Result<(Writer, WriterTask), ZmqError> {
        let socket = match &self.via {
            Via::Sockets(sockets) => {
                self.run(sockets.dial_writer(role, address.to_owned()))
                    .await?
            }
            #[cfg(feature = "testing")]
            Via::InProcess(peer) => Sending::InProcess(peer.dial_writer(role, address)),
        };
        self.start_writer(socket, address.to_owned()).await
    }

    /// Starts a writer's task over `socket`, on the sockets' runtime.
    async fn start_writer(
        &self,
        socket: Sending,
        endpoint: String,
    ) -> Result<(Writer, WriterTask), ZmqError> {
        self.run(async move { Ok(Writer::start(socket, endpoint)) })
            .await
    }

    /// Opens a duplex socket (ROUTER, DEALER), bound or dialing: answers the handle that sends
    /// through it, the task that runs it (handing what it reads to `inbound`, ending at
    /// `shutdown`) or the reading end a subscription reads itself (a channel `inbound` allows
    /// that), and the bound address.
    pub(crate) async fn duplex(
        &self,
        role: Role,
        address: &str,
        binds: bool,
        inbound: Inbound,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(Started, Option<String>), ZmqError> {
        match &self.via {
            Via::Sockets(sockets) => {
                let opening = (role, address.to_owned(), binds);
                self.run(sockets.duplex(opening, inbound, shutdown)).await
            }
            #[cfg(feature = "testing")]
            Via::InProcess(peer) => peer.duplex(role, address, binds, inbound, shutdown),
        }
    }

    /// Notes a message the broker published, for the test harness's publish log.
    #[cfg(feature = "testing")]
    pub(crate) fn published(&self, destination: &str, headers: &HeaderMap, payload: &Bytes) {
        if let Via::InProcess(peer) = &self.via {
            peer.record(destination, headers, payload.clone());
        }
    }
}

impl Reader {
    /// The next message; a dialing reader also keeps its connection.
    pub(crate) async fn recv(&mut self) -> Received {
        match self {
            Self::Sockets(reader) => Received {
                frames: reader.recv().await,
                release: Release::default(),
            },
            #[cfg(feature = "testing")]
            Self::InProcess(reader) => reader.recv().await,
        }
    }

    /// Hands the socket over to the subscription where the backend allows (a bound PULL of the
    /// `zeromq` client): its reading end, and the task that keeps its peers; else the reader
    /// comes back.
    pub(crate) fn hand_over(
        self,
        subscriber: tokio::sync::mpsc::Sender<Received>,
        shutdown: watch::Receiver<bool>,
    ) -> HandOver<Self> {
        match self {
            Self::Sockets(reader) => match reader.hand_over(subscriber, shutdown) {
                HandOver::Handed(reading, task) => HandOver::Handed(reading, task),
                HandOver::Kept(reader) => HandOver::Kept(Self::Sockets(reader)),
            },
            #[cfg(feature = "testing")]
            in_process @ Self::InProcess(_) => HandOver::Kept(in_process),
        }
    }

    /// Closes the socket and all its connections.
    pub(crate) async fn close(self) {
        match self {
            Self::Sockets(reader) => reader.close().await,
            #[cfg(feature = "testing")]
            Self::InProcess(reader) => reader.close(),
        }
    }
}

impl Sending {
    /// Sends one message, waiting until `deadline` for a peer.
    async fn send(&mut self, frames: Frames, deadline: Instant) -> Result<(), ZmqError> {
        match self {
            Self::Sockets(writer) => writer.send(frames, deadline).await,
            #[cfg(feature = "testing")]
            Self::InProcess(writer) => writer.send(frames, deadline).await,
        }
    }

    /// Waits until the socket has a peer again.
    async fn reach(&mut self) {
        match self {
            Self::Sockets(writer) => writer.reach().await,
            #[cfg(feature = "testing")]
            Self::InProcess(writer) => writer.reach().await,
        }
    }

    /// Whether the socket learns of lost peers only when asked ([`look`](Self::look)).
    fn looks(&self) -> bool {
        match self {
            Self::Sockets(writer) => writer.looks(),
            #[cfg(feature = "testing")]
            Self::InProcess(_) => false,
        }
    }

    /// Takes in what the socket's monitor reported since the last look.
    async fn look(&mut self) {
        match self {
            Self::Sockets(writer) => writer.look().await,
            #[cfg(feature = "testing")]
            Self::InProcess(_) => {}
        }
    }

    /// Closes the socket and all its connections.
    async fn close(self) {
        match self {
            Self::Sockets(writer) => writer.close().await,
            #[cfg(feature = "testing")]
            Self::InProcess(writer) => writer.close(),
        }
    }
}

/// Resolves once the broker's shutdown switch is on, or the broker is gone.
pub(crate) async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    // The guard `wait_for` answers is not `Send`: drop it here, not across the caller's awaits.
    let _ = shutdown.wait_for(|down| *down).await;
}
