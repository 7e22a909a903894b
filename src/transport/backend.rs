//! The contract a socket backend meets: the three sockets it provides, what each can do, and
//! the options it opens them with. The `zeromq` and `libzmq` modules each implement it once;
//! everything above erases the backend at connect ([`Sockets`](super::Sockets)), so no code
//! above this module names one.
//!
//! Imports: its parent `transport`, and `endpoint`, `error`, `monitor`, `pattern`, `settings` and `wire`.

use std::sync::Arc;

use tokio::{
    sync::{mpsc, watch},
    time::Instant,
};

use super::{DirectSend, HandOver, ReadingEnd, Received, Transport, duplex::HandedSend};
use crate::{
    endpoint::{Mechanism, Plain},
    error::{SendFailure, SocketFault, ZmqError},
    monitor::ZmqMonitor,
    pattern::Role,
    settings::Settings,
    wire::Frames,
};

/// The socket backend a broker runs on: [`Zeromq`](super::zeromq::Zeromq), the pure-Rust client
/// (feature `zeromq`, on by default), or [`Libzmq`](super::libzmq::Libzmq), the C library
/// (feature `libzmq`). Each feature adds its backend; a broker runs on the one its type names.
///
/// Sealed: a backend meets a contract that is the crate's own (`SocketBackend`).
pub trait Backend: sealed::Sealed + Send + Sync + 'static {
    /// What only this backend's brokers set (libzmq: its socket options and CURVE).
    #[doc(hidden)]
    type Config: Clone + Default + Send + Sync + 'static;

    /// Where a broker on this backend opens its sockets, made on the current runtime.
    #[doc(hidden)]
    fn transport(monitor: ZmqMonitor, settings: &Settings, config: Self::Config) -> Transport;
}

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// The one [`Backend::transport`] of every backend: its sockets, erased.
pub(crate) fn transport_of<B: SocketBackend>(
    monitor: ZmqMonitor,
    settings: &Settings,
    config: B::Config,
) -> Transport {
    Transport::sockets::<B>(monitor, B::options(settings, config))
}

/// The backend of the brokers at the crate root ([`ZmqQueue`](crate::ZmqQueue) and its
/// siblings): [`Zeromq`](super::zeromq::Zeromq) whenever the `zeromq` feature is on, so that
/// turning on `libzmq` never moves them; [`Libzmq`](super::libzmq::Libzmq) in a build with only
/// `libzmq`.
#[cfg(feature = "zeromq")]
pub type DefaultBackend = super::zeromq::Zeromq;
/// The backend of the brokers at the crate root: [`Libzmq`](super::libzmq::Libzmq), the only
/// one this build has; with the `zeromq` feature on, it is that one.
#[cfg(not(feature = "zeromq"))]
pub type DefaultBackend = super::libzmq::Libzmq;

/// Backend `Self` speaks mechanism `M`: every backend speaks ZeroMQ's NULL
/// ([`Plain`](crate::Plain)), only [`Libzmq`](super::libzmq::Libzmq) speaks CURVE. A broker takes
/// an endpoint only if its backend speaks the endpoint's mechanism.
#[diagnostic::on_unimplemented(
    message = "a broker on `{Self}` takes no endpoint secured by `{M}`",
    label = "this endpoint's mechanism",
    note = "CURVE is spoken by the brokers on libzmq only: `ruststream_zmq::libzmq::ZmqQueue` and \
            its siblings (feature `libzmq`)",
    note = "a bound CURVE endpoint (`WantsClients`) is taken once it says who may connect: \
            `.allow_clients(keys)` or `.allow_any_client()`"
)]
pub trait Speaks<M: Mechanism>: Backend {
    /// `config`, with the mechanism the sockets on the endpoint at `address` speak.
    #[doc(hidden)]
    fn secured(config: Self::Config, address: &str, mechanism: M) -> Self::Config;
}

impl<B: Backend> Speaks<Plain> for B {
    fn secured(config: B::Config, _address: &str, Plain: Plain) -> B::Config {
        config
    }
}

/// A socket backend: the sockets a broker opens, and how its settings reach them.
pub(crate) trait SocketBackend: Backend {
    /// The backend's name, as the logs say it.
    const NAME: &'static str;
    /// What the backend opens every socket with, from the broker's settings and its own.
    type Options: Clone + Send + Sync + 'static;
    /// A socket that receives (PULL, SUB).
    type Reader: ReadSocket<Options = Self::Options>;
    /// A socket that sends (PUSH, PUB).
    type Writer: WriteSocket<Options = Self::Options>;
    /// A socket that sends and receives (ROUTER, DEALER).
    type Duplex: DuplexSocket<Options = Self::Options>;

    /// The options a broker with `settings` and `config` opens its sockets with.
    fn options(settings: &Settings, config: Self::Config) -> Self::Options;

    /// Whether sockets opened with `options` speak CURVE; a backend without it never does.
    fn curve(options: &Self::Options) -> bool {
        let _ = options;
        false
    }
}

/// What every socket is opened with: its role, its address, where its figures go, and the
/// backend's options.
pub(crate) struct Opening<O> {
    pub(crate) role: Role,
    pub(crate) address: String,
    pub(crate) monitor: ZmqMonitor,
    pub(crate) options: O,
}

/// A socket that receives: bound once, or dialing and reconnecting whenever its peer goes away.
pub(crate) trait ReadSocket: Sized + Send + 'static {
    /// What the socket is opened with.
    type Options;

    /// Binds the address; answers the socket and the address it really listens on (port 0
    /// resolved). A SUB subscribes to `topics`.
    fn bind(
        at: Opening<Self::Options>,
        topics: Vec<String>,
    ) -> impl Future<Output = Result<(Self, String), ZmqError>> + Send;

    /// A socket that dials the address, connecting in the background or on its first read, so
    /// a peer that is not up yet does not hold up startup.
    fn dial(
        at: Opening<Self::Options>,
        topics: Vec<String>,
    ) -> impl Future<Output = Result<Self, ZmqError>> + Send;

    /// The next message; a dialing socket also keeps its connection.
    fn recv(&mut self) -> impl Future<Output = Frames> + Send;

    /// Closes the socket and all its connections.
    fn close(self) -> impl Future<Output = ()> + Send;

    /// Hands the socket to the subscription, to read in its own task, where the backend allows
    /// it: its reading end, and a task that keeps its peers and closes it, ending at `shutdown`
    /// or once `subscriber` is gone. A backend whose sockets are read by their own tasks keeps
    /// them.
    fn hand_over(
        self,
        subscriber: mpsc::Sender<Received>,
        shutdown: watch::Receiver<bool>,
    ) -> HandOver<Self> {
        let _ = (subscriber, shutdown);
        HandOver::Kept(self)
    }
}

/// A socket that sends, owned by one writer's task.
pub(crate) trait WriteSocket: Sized + Send + 'static {
    /// What the socket is opened with.
    type Options;
    /// Whether the socket learns of lost peers only when asked ([`look`](Self::look)); a
    /// backend that watches its sockets by itself needs no asking.
    const LOOKS: bool = false;

    /// Binds the address; answers the socket and the address it really listens on.
    fn bind(
        at: Opening<Self::Options>,
    ) -> impl Future<Output = Result<(Self, String), ZmqError>> + Send;

    /// A socket that dials the address; it connects in the background or on its first send.
    fn dial(at: Opening<Self::Options>) -> impl Future<Output = Result<Self, ZmqError>> + Send;

    /// Sends one message, waiting until `deadline` for a peer with room; then fails, naming the
    /// endpoint and why.
    fn send(
        &mut self,
        frames: Frames,
        deadline: Instant,
    ) -> impl Future<Output = Result<(), ZmqError>> + Send;

    /// Waits until the socket has a peer again.
    fn reach(&mut self) -> impl Future<Output = ()> + Send;

    /// Takes in what the socket's monitor reported since the last look; called only where
    /// [`LOOKS`](Self::LOOKS).
    fn look(&mut self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Closes the socket and all its connections.
    fn close(self) -> impl Future<Output = ()> + Send;
}

/// A socket that both sends and receives (ROUTER, DEALER), run by a task of its own so that a
/// reply can leave while requests wait to be handled. The task's loop is the same for every
/// backend ([`duplex::run`](super::duplex::run)); a backend drives its socket through it.
pub(crate) trait DuplexSocket: Sized + Send + 'static {
    /// What the socket is opened with.
    type Options;
    /// What the socket's task drives.
    type Driver: DuplexDriver;

    /// Binds the address; answers the socket and the address it really listens on.
    fn bind(
        at: Opening<Self::Options>,
    ) -> impl Future<Output = Result<(Self, String), ZmqError>> + Send;

    /// A socket that dials the address, connecting in its task.
    fn dial(at: Opening<Self::Options>) -> impl Future<Output = Result<Self, ZmqError>> + Send;

    /// Readies the socket for its task: what the task drives, the sends that skip the task, and
    /// the socket's reading end where the backend lets the subscription read it itself (asked
    /// only with `reads_itself`, when what the socket reads goes into a channel).
    fn drive(self, reads_itself: bool) -> Driving<Self::Driver>;
}

/// A duplex socket readied for its task ([`DuplexSocket::drive`]).
pub(crate) struct Driving<D> {
    /// What the task drives.
    pub(crate) driver: D,
    /// The endpoint, as errors name it.
    pub(crate) endpoint: String,
    /// Sends that leave from the tasks that send them, where the socket can be shared.
    pub(crate) direct: Option<Arc<dyn DirectSend>>,
    /// The socket's reading end, when the subscription reads it itself; the task then only
    /// keeps the socket's peers and sends.
    pub(crate) reader: Option<ReadingEnd>,
}

/// A duplex socket as its task drives it, one event at a time.
pub(crate) trait DuplexDriver: Send + 'static {
    /// Readies the socket for the next event: a dialing socket that lost its peer connects
    /// again here, the task waiting for nothing else but shutdown.
    fn ready(&mut self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Whether the socket takes a send now; one that holds a send until there is room takes
    /// no other meanwhile.
    fn takes_sends(&self) -> bool {
        true
    }

    /// Sends a message handed to the task, whose deadline has not passed, and settles it; or
    /// holds it until there is room, settling it by its deadline.
    fn take(&mut self, send: HandedSend) -> impl Future<Output = ()> + Send;

    /// Waits for the socket's next event: a message read (only with `read`), room for a send it
    /// holds, a peer that came or went. Answers the message read, if that was the event.
    fn next(&mut self, read: bool) -> impl Future<Output = Option<Frames>> + Send;

    /// A message the socket already holds, read without waiting.
    fn read_queued(&mut self) -> Option<Frames> {
        None
    }

    /// Closes the socket; a send it still holds fails.
    fn close(self) -> impl Future<Output = ()> + Send;
}

/// A client's error, as the crate's errors carry it.
pub(crate) fn fault(err: impl std::error::Error + Send + Sync + 'static) -> SocketFault {
    Box::new(err)
}

/// What a send to `endpoint` that the client refused fails with: [`ZmqError::UnknownPeer`]
/// where the backend says the client refused a ROUTER's answer to an identity that is gone,
/// else the client's own error.
pub(crate) fn refused_send(
    endpoint: &str,
    err: impl std::error::Error + Send + Sync + 'static,
    unknown_peer: bool,
) -> ZmqError {
    if unknown_peer {
        ZmqError::UnknownPeer {
            endpoint: endpoint.to_owned(),
        }
    } else {
        ZmqError::Send {
            endpoint: endpoint.to_owned(),
            source: SendFailure::Client(fault(err)),
        }
    }
}

/// Why a send handed to a socket's task failed without being tried: its deadline passed while
/// it waited for its turn.
pub(crate) fn late_for_its_turn(endpoint: &str) -> ZmqError {
    ZmqError::Send {
        endpoint: endpoint.to_owned(),
        source: SendFailure::Late("its deadline passed before its turn came".to_owned()),
    }
}
