//! The transport under a connection: real ZeroMQ sockets, through the pure-Rust `zeromq` client
//! or (under the `libzmq` feature) through libzmq, or (under the `testing` feature) the
//! in-process bus that stands in for them. Everything above this
//! module is the same for both, so the in-process mode decides, refuses and routes exactly as
//! the sockets do.
//!
//! Imports: the leaves (`error`, `wire`, `endpoint`, `monitor`), `pattern` and `settings`. Only [`zeromq`] and [`libzmq`]
//! name a client's types, and only one of them is built.

#[cfg(feature = "testing")]
pub(crate) mod bus;
mod duplex;
#[cfg(feature = "libzmq")]
mod libzmq;
mod reading_end;
mod writer;
#[cfg(not(feature = "libzmq"))]
mod zeromq;

// The socket backend, chosen at compile time; both offer the same `Reader`, `Writer` and
// `Duplex`.
#[cfg(feature = "libzmq")]
use libzmq as sockets;
#[cfg(not(feature = "libzmq"))]
use zeromq as sockets;

#[cfg(feature = "libzmq")]
pub(crate) use duplex::Outbound;
pub(crate) use duplex::{Closed, Done, DuplexSender, Inbound, Started};
pub(crate) use duplex::{Direct, DirectSend, socket_gone};
pub(crate) use reading_end::ReadingEnd;
pub(crate) use writer::{CLOSE_WAIT, Writer, WriterTask};

use std::time::Duration;

#[cfg(feature = "testing")]
use ruststream::{Bytes, HeaderMap};
use tokio::{runtime::Handle, sync::watch, task::JoinHandle, time::Instant};

use crate::{
    error::ZmqError, monitor::ZmqMonitor, pattern::Role, settings::Settings, wire::Frames,
};

/// A task a socket runs: a duplex socket's loop.
pub(crate) type BoxTask = std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Where a connection opens its sockets, and the runtime they live on.
///
/// The `zeromq` client spawns a socket's tasks on the runtime that creates it, and a publish may
/// come from a runtime that stops (a handler's dedicated thread, a caller's own): every socket
/// is made and driven on the runtime the broker connected on.
#[derive(Clone)]
pub(crate) struct Transport {
    backend: Backend,
    runtime: Handle,
}

#[derive(Clone)]
enum Backend {
    /// ZeroMQ sockets, opened with these options; lost peer connections are counted on the
    /// monitor.
    Sockets(ZmqMonitor, SocketOptions),
    /// The in-process bus of the `testing` feature.
    #[cfg(feature = "testing")]
    InProcess(bus::Peer),
}

/// What every socket is opened with, from its broker's settings.
#[derive(Debug, Clone)]
#[cfg_attr(
    not(feature = "libzmq"),
    expect(dead_code, reason = "the `zeromq` client's limits are its own")
)]
pub(crate) struct SocketOptions {
    /// How many messages a socket queues for one peer, each way, before that peer counts as
    /// not reading (libzmq's high-water marks; the `zeromq` client's queue is fixed).
    pub(crate) peer_queue: usize,
    /// The largest frame a peer may send; a larger one is refused before it is read (libzmq).
    pub(crate) max_message_bytes: usize,
    /// The heartbeat's interval and timeout, when on (libzmq).
    pub(crate) heartbeat: Option<(Duration, Duration)>,
    /// How long a new connection may take to finish its handshake (libzmq).
    pub(crate) handshake_timeout: Duration,
    /// CURVE on every socket, when the endpoint has it (libzmq).
    #[cfg(feature = "libzmq")]
    pub(crate) security: Option<crate::curve::Security>,
}

impl SocketOptions {
    /// The options a broker with `settings` opens its sockets with.
    pub(crate) fn from_settings(settings: &Settings) -> Self {
        Self {
            peer_queue: settings.peer_queue,
            max_message_bytes: settings.limits.message_bytes(),
            heartbeat: settings.heartbeat,
            handshake_timeout: settings.handshake_timeout,
            #[cfg(feature = "libzmq")]
            security: None,
        }
    }

    /// These options with CURVE as the endpoint says.
    #[cfg(feature = "libzmq")]
    pub(crate) fn secured(self, security: Option<crate::curve::Security>) -> Self {
        Self { security, ..self }
    }
}

/// A receiving socket.
pub(crate) enum Reader {
    Sockets(sockets::Reader),
    #[cfg(feature = "testing")]
    InProcess(bus::BusReader),
}

/// How handing a reader over to its subscription went.
pub(crate) enum HandOver<R> {
    /// The subscription reads the socket through this end; the task keeps its peers and closes
    /// it.
    #[cfg_attr(
        feature = "libzmq",
        expect(dead_code, reason = "libzmq's sockets are read by their tasks")
    )]
    Handed(ReadingEnd, BoxTask),
    /// The backend keeps the socket to a reader task.
    Kept(R),
}

/// A sending socket, owned by its [`Writer`]'s task.
pub(crate) enum Sending {
    Sockets(sockets::Writer),
    #[cfg(feature = "testing")]
    InProcess(bus::BusWriter),
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
    /// Real sockets, made on the current runtime.
    pub(crate) fn sockets(monitor: ZmqMonitor, options: SocketOptions) -> Self {
        Self {
            backend: Backend::Sockets(monitor, options),
            runtime: Handle::current(),
        }
    }

    /// The in-process bus, scoped to the current runtime.
    #[cfg(feature = "testing")]
    pub(crate) fn in_process() -> Self {
        Self {
            backend: Backend::InProcess(bus::Peer::new()),
            runtime: Handle::current(),
        }
    }

    /// The bus peer, when this transport runs in process.
    #[cfg(feature = "testing")]
    pub(crate) fn peer(&self) -> Option<&bus::Peer> {
        match &self.backend {
            Backend::InProcess(peer) => Some(peer),
            Backend::Sockets(..) => None,
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
        let (backend, address) = (self.backend.clone(), address.to_owned());
        self.run(async move {
            match backend {
                Backend::Sockets(monitor, options) => {
                    sockets::Reader::bind(role, &address, topics, monitor, options)
                        .await
                        .map(|(reader, at)| (Reader::Sockets(reader), at))
                }
                #[cfg(feature = "testing")]
                Backend::InProcess(peer) => peer
                    .bind_reader(role, &address, topics)
                    .map(|(reader, at)| (Reader::InProcess(reader), at)),
            }
        })
        .await
    }

    /// A reader dialing `address`; it connects on its first read, and again whenever the peer
    /// goes away.
    pub(crate) async fn dial_reader(
        &self,
        role: Role,
        address: &str,
        topics: Vec<String>,
    ) -> Result<Reader, ZmqError> {
        let (backend, address) = (self.backend.clone(), address.to_owned());
        self.run(async move {
            Ok(match backend {
                Backend::Sockets(monitor, options) => Reader::Sockets(
                    sockets::Reader::dial(role, &address, topics, monitor, options).await?,
                ),
                #[cfg(feature = "testing")]
                Backend::InProcess(peer) => {
                    Reader::InProcess(peer.dial_reader(role, &address, topics))
                }
            })
        })
        .await
    }

    /// Binds a writer for peers that dial in; answers it, its task, and the address it listens
    /// on.
    pub(crate) async fn bind_writer(
        &self,
        role: Role,
        address: &str,
    ) -> Result<(Writer, WriterTask, String), ZmqError> {
        let (backend, address) = (self.backend.clone(), address.to_owned());
        self.run(async move {
            let (socket, resolved) = match backend {
                Backend::Sockets(monitor, options) => {
                    sockets::Writer::bind(role, &address, monitor, options)
                        .await
                        .map(|(writer, at)| (Sending::Sockets(writer), at))
                }
                #[cfg(feature = "testing")]
                Backend::InProcess(peer) => peer
                    .bind_writer(role, &address)
                    .map(|(writer, at)| (Sending::InProcess(writer), at)),
            }?;
            let (writer, task) = Writer::start(socket, resolved.clone());
            Ok((writer, task, resolved))
        })
        .await
    }

    /// A writer dialing `address`, and its task; it connects on its first send.
    pub(crate) async fn dial_writer(
        &self,
        role: Role,
        address: &str,
    ) -> Result<(Writer, WriterTask), ZmqError> {
        let (backend, address) = (self.backend.clone(), address.to_owned());
        self.run(async move {
            let socket = match backend {
                Backend::Sockets(monitor, options) => {
                    Sending::Sockets(sockets::Writer::dial(role, &address, monitor, options).await?)
                }
                #[cfg(feature = "testing")]
                Backend::InProcess(peer) => Sending::InProcess(peer.dial_writer(role, &address)),
            };
            Ok(Writer::start(socket, address))
        })
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
        let (backend, address) = (self.backend.clone(), address.to_owned());
        self.run(async move {
            match backend {
                Backend::Sockets(monitor, options) => {
                    let (duplex, bound) = if binds {
                        let (duplex, at) =
                            sockets::Duplex::bind(role, &address, monitor, options).await?;
                        (duplex, Some(at))
                    } else {
                        let duplex = sockets::Duplex::dial(role, &address, monitor, options);
                        (duplex.await?, None)
                    };
                    Ok((duplex.run(inbound, shutdown), bound))
                }
                #[cfg(feature = "testing")]
                Backend::InProcess(peer) => peer.duplex(role, &address, binds, inbound, shutdown),
            }
        })
        .await
    }

    /// Notes a message the broker published, for the test harness's publish log.
    #[cfg(feature = "testing")]
    pub(crate) fn published(&self, destination: &str, headers: &HeaderMap, payload: &Bytes) {
        if let Backend::InProcess(peer) = &self.backend {
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
            #[cfg(not(feature = "libzmq"))]
            Self::Sockets(reader) => match reader.hand_over(subscriber, shutdown) {
                HandOver::Handed(reading, task) => HandOver::Handed(reading, task),
                HandOver::Kept(reader) => HandOver::Kept(Self::Sockets(reader)),
            },
            #[cfg(any(feature = "libzmq", feature = "testing"))]
            other => {
                let _ = (subscriber, shutdown);
                HandOver::Kept(other)
            }
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

    /// Whether the socket has a monitor to look at (the bus has none).
    fn has_monitor(&self) -> bool {
        matches!(self, Self::Sockets(_))
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
