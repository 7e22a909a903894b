//! The transport under a connection: real ZeroMQ sockets of one backend (the pure-Rust
//! `zeromq` client, libzmq), or (under the `testing` feature) the in-process bus that stands in
//! for them. Everything above this module is the same for all of them, so the in-process mode
//! decides, refuses and routes exactly as the sockets do.
//!
//! Each backend meets the contract in [`backend`], which imports nothing above it; this module
//! declares the backends, picks the default one, and dispatches to the one a connection runs
//! on ([`dispatch`]), so nothing above it names one.

pub(crate) mod backend;
#[cfg(feature = "testing")]
pub(crate) mod bus;
#[cfg(curve)]
pub(crate) mod curve_keys;
mod dispatch;
mod duplex;
mod episodes;
#[cfg(feature = "libzmq")]
pub(crate) mod libzmq;
#[cfg(feature = "omq")]
pub(crate) mod omq;
mod reading;
pub(crate) mod reading_end;
pub(crate) mod requesters;
#[cfg(curve)]
pub(crate) mod socket_config;
mod writer;
#[cfg(feature = "zeromq")]
pub(crate) mod zeromq;

pub(crate) use backend::{BoxTask, CLOSE_WAIT, Done};
pub(crate) use duplex::{DuplexSender, Handoff, Started};
pub(crate) use reading::{Probe, ReadInto};
pub(crate) use reading_end::{ReadingEnd, Received, Release};
pub(crate) use writer::{Writer, WriterTask};

use std::{sync::Arc, time::Duration};

#[cfg(feature = "testing")]
use ruststream::{Bytes, HeaderMap};
use tokio::{runtime::Handle, sync::watch};

#[cfg(feature = "libzmq")]
use self::libzmq::Libzmq;
use self::{
    backend::{DuplexSocket, ReadSocket, SocketBackend, WriteSocket},
    dispatch::{AnyOpener, AnyWriteSocket, Opener, each},
};
#[cfg(curve)]
use crate::curve::Curve;
use crate::{
    endpoint::{Mechanism, Plain},
    error::ZmqError,
    monitor::ZmqMonitor,
    pattern::Role,
    settings::Settings,
};

/// The socket backend a broker runs on: [`Zeromq`](zeromq::Zeromq), the pure-Rust client
/// (feature `zeromq`, on by default), or [`Libzmq`](libzmq::Libzmq), the C library (feature
/// `libzmq`). Each feature adds its backend; a broker runs on the one its type names.
///
/// Sealed: a backend meets a contract that is the crate's own.
pub trait Backend: sealed::SealedBackend + Send + Sync + 'static {
    /// What only this backend's brokers set (libzmq: its socket options and CURVE).
    #[doc(hidden)]
    type Config: Clone + Default + Send + Sync + 'static;

    /// Where a broker on this backend opens its sockets, made on the current runtime.
    #[doc(hidden)]
    fn transport(monitor: ZmqMonitor, settings: &Settings, config: Self::Config) -> Transport;

    /// Whether a socket of a broker with `config` may dial `address`: one of a CURVE broker
    /// only with keys for it ([`ZmqError::CurveDestination`] otherwise); any other, always.
    #[doc(hidden)]
    fn dials(config: &Self::Config, address: &str) -> Result<(), ZmqError> {
        let _ = (config, address);
        Ok(())
    }

    /// Whether the endpoint of a broker with `config` speaks CURVE.
    #[doc(hidden)]
    fn speaks_curve(config: &Self::Config) -> bool {
        let _ = config;
        false
    }
}

pub(crate) mod sealed {
    pub trait SealedBackend {}
}

#[cfg(feature = "zeromq")]
impl sealed::SealedBackend for zeromq::Zeromq {}

#[cfg(feature = "zeromq")]
impl Backend for zeromq::Zeromq {
    type Config = ();

    fn transport(monitor: ZmqMonitor, settings: &Settings, config: Self::Config) -> Transport {
        Transport::new(AnyOpener::Zeromq(opener::<Self>(monitor, settings, config)))
    }
}

#[cfg(feature = "libzmq")]
impl sealed::SealedBackend for libzmq::Libzmq {}

#[cfg(feature = "libzmq")]
impl Backend for libzmq::Libzmq {
    type Config = socket_config::Config;

    fn transport(monitor: ZmqMonitor, settings: &Settings, config: Self::Config) -> Transport {
        Transport::new(AnyOpener::Libzmq(opener::<Self>(monitor, settings, config)))
    }

    fn dials(config: &Self::Config, address: &str) -> Result<(), ZmqError> {
        curve_keys::plan(&config.keys, false, address).map(drop)
    }

    fn speaks_curve(config: &Self::Config) -> bool {
        config.keys.speaks_curve()
    }
}

#[cfg(feature = "omq")]
impl sealed::SealedBackend for omq::Omq {}

#[cfg(feature = "omq")]
impl Backend for omq::Omq {
    type Config = socket_config::Config;

    fn transport(monitor: ZmqMonitor, settings: &Settings, config: Self::Config) -> Transport {
        Transport::new(AnyOpener::Omq(opener::<Self>(monitor, settings, config)))
    }

    fn dials(config: &Self::Config, address: &str) -> Result<(), ZmqError> {
        curve_keys::plan(&config.keys, false, address).map(drop)
    }

    fn speaks_curve(config: &Self::Config) -> bool {
        config.keys.speaks_curve()
    }
}

/// The backend of the brokers at the crate root ([`ZmqQueue`](crate::ZmqQueue) and its
/// siblings): [`Zeromq`](zeromq::Zeromq) whenever the `zeromq` feature is on, so that turning on
/// `libzmq` never moves them; [`Libzmq`](libzmq::Libzmq) in a build with only `libzmq`.
#[cfg(feature = "zeromq")]
pub type DefaultBackend = zeromq::Zeromq;
/// The backend of the brokers at the crate root in a build without `zeromq`:
/// [`Libzmq`](libzmq::Libzmq) where this build has it; with the `zeromq` feature on, that one.
#[cfg(all(not(feature = "zeromq"), feature = "libzmq"))]
pub type DefaultBackend = libzmq::Libzmq;
/// The backend of the brokers at the crate root in a build with only `omq`:
/// [`Omq`](omq::Omq).
#[cfg(not(any(feature = "zeromq", feature = "libzmq")))]
pub type DefaultBackend = omq::Omq;

/// Backend `Self` speaks mechanism `M`: every backend speaks ZeroMQ's NULL
/// ([`Plain`](crate::Plain)); libzmq and omq speak CURVE. A broker takes an
/// endpoint only if its backend speaks the endpoint's mechanism.
#[diagnostic::on_unimplemented(
    message = "a broker on `{Self}` takes no endpoint secured by `{M}`",
    label = "this endpoint's mechanism",
    note = "CURVE is spoken by the brokers on libzmq and omq: `ruststream_zmq::omq::ZmqQueue` or \
            `ruststream_zmq::libzmq::ZmqQueue` and their siblings (features `omq`, `libzmq`)",
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

/// A mechanism no endpoint has: every backend's second `Speaks`, so that the compiler reads the
/// mechanism a broker is given off its endpoint rather than infer it from a backend's one impl,
/// and a backend that lacks it answers with `Speaks`'s message (naming the backends that speak
/// CURVE) instead of a type mismatch naming none (`ui-tests/backends/curve_on_zeromq.rs`).
mod unspoken {
    use super::{Backend, Speaks};
    use crate::endpoint::{Mechanism, sealed_mechanism::SealedMechanism};

    #[doc(hidden)]
    #[derive(Debug, Clone, Copy)]
    pub enum Unspoken {}

    impl SealedMechanism for Unspoken {
        fn describe(&self) -> Option<String> {
            match *self {}
        }
    }

    // Never offered to a user as one the compiler would take instead.
    #[diagnostic::do_not_recommend]
    impl Mechanism for Unspoken {}

    #[diagnostic::do_not_recommend]
    impl<B: Backend> Speaks<Unspoken> for B {
        fn secured(_config: B::Config, _address: &str, unspoken: Unspoken) -> B::Config {
            match unspoken {}
        }
    }
}

#[cfg(feature = "libzmq")]
impl Speaks<Curve> for Libzmq {
    fn secured(mut config: Self::Config, address: &str, curve: Curve) -> Self::Config {
        config.secure_endpoint(address, curve);
        config
    }
}

#[cfg(feature = "omq")]
impl Speaks<Curve> for omq::Omq {
    fn secured(mut config: Self::Config, address: &str, curve: Curve) -> Self::Config {
        config.secure_endpoint(address, curve);
        config
    }
}

/// Backend `B`'s opener, with the options a broker with `settings` and `config` opens with.
fn opener<B: SocketBackend>(
    monitor: ZmqMonitor,
    settings: &Settings,
    config: B::Config,
) -> Opener<B> {
    Opener {
        monitor,
        options: B::options(settings, config),
    }
}

/// Where a connection opens its sockets, and the runtime they live on.
///
/// The `zeromq` client spawns a socket's tasks on the runtime that creates it, and a publish may
/// come from a runtime that stops (a handler's dedicated thread, a caller's own): every socket
/// is made and driven on the runtime the broker connected on.
#[derive(Clone)]
pub struct Transport {
    opener: Arc<AnyOpener>,
    runtime: Handle,
}

impl Transport {
    /// Sockets of one backend, made on the current runtime.
    fn new(opener: AnyOpener) -> Self {
        Self {
            opener: Arc::new(opener),
            runtime: Handle::current(),
        }
    }

    /// The in-process bus, scoped to the current runtime.
    #[cfg(feature = "testing")]
    pub(crate) fn in_process(monitor: ZmqMonitor) -> Self {
        Self::new(AnyOpener::Bus(Opener {
            monitor,
            options: bus::Peer::new(),
        }))
    }

    /// The bus peer, when this transport runs in process.
    #[cfg(feature = "testing")]
    pub(crate) fn peer(&self) -> Option<&bus::Peer> {
        match &*self.opener {
            AnyOpener::Bus(opener) => Some(&opener.options),
            #[allow(unreachable_patterns, reason = "the sockets' variants are cfg-gated")]
            _ => None,
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
    pub(crate) fn spawn(
        &self,
        task: impl Future<Output = ()> + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        self.runtime.spawn(task)
    }

    /// Opens a one-way receiving socket (PULL, SUB subscribed to `topics`), bound or dialing,
    /// and starts reading it into `into` ([`reading::start`]): answers its reading end where the
    /// subscription reads it itself, the task to spawn, and the bound address (port 0
    /// resolved). A dialing socket connects in the background, and again whenever its peer
    /// goes away.
    pub(crate) async fn open_reader(
        &self,
        role: Role,
        address: &str,
        binds: bool,
        topics: Vec<String>,
        into: ReadInto,
    ) -> Result<(Option<ReadingEnd>, BoxTask, Option<String>), ZmqError> {
        let address = address.to_owned();
        each!(AnyOpener, &*self.opener, opener => {
            let opener = opener.clone();
            self.run(open_reader(opener, role, address, binds, topics, into)).await
        })
    }

    /// Opens a sending socket (PUSH, PUB), bound for peers that dial in or dialing `address`,
    /// and starts its writer's task: answers the writer, its task, and the bound address. A
    /// dialing socket connects on its first send.
    pub(crate) async fn open_writer(
        &self,
        role: Role,
        address: &str,
        binds: bool,
    ) -> Result<(Writer, WriterTask, Option<String>), ZmqError> {
        let at = address.to_owned();
        let (socket, bound) = each!(AnyOpener, &*self.opener, opener => {
            let opener = opener.clone();
            self.run(open_writer(opener, role, at, binds)).await?
        });
        let endpoint = bound.clone().unwrap_or_else(|| address.to_owned());
        let (writer, task) = self
            .run(async move { Ok(Writer::start(socket, endpoint)) })
            .await?;
        Ok((writer, task, bound))
    }

    /// Opens a duplex socket (ROUTER, DEALER), bound or dialing: answers the handle that sends
    /// through it, the task that runs it (handing what it reads to `inbound`, ending at
    /// `shutdown` and closing the socket once what it queued left, for at most `linger`) or the reading end a subscription reads itself (a channel `inbound` allows
    /// that), and the bound address.
    pub(crate) async fn duplex(
        &self,
        role: Role,
        address: &str,
        binds: bool,
        inbound: Handoff,
        shutdown: watch::Receiver<bool>,
        linger: Duration,
    ) -> Result<(Started, Option<String>), ZmqError> {
        let address = address.to_owned();
        each!(AnyOpener, &*self.opener, opener => {
            let opener = opener.clone();
            let opening = open_duplex(opener, role, address, binds, inbound, shutdown, linger);
            self.run(opening).await
        })
    }

    /// Notes a message the broker published, for the test harness's publish log.
    #[cfg(feature = "testing")]
    pub(crate) fn published(&self, destination: &str, headers: &HeaderMap, payload: &Bytes) {
        if let Some(peer) = self.peer() {
            peer.record(destination, headers, payload.clone());
        }
    }
}

/// Opens backend `B`'s receiving socket and starts reading it ([`Transport::open_reader`]).
async fn open_reader<B: SocketBackend>(
    opener: Opener<B>,
    role: Role,
    address: String,
    binds: bool,
    topics: Vec<String>,
    into: ReadInto,
) -> Result<(Option<ReadingEnd>, BoxTask, Option<String>), ZmqError> {
    let at = opener.opening(role, address);
    let (socket, bound) = if binds {
        let (socket, bound) = B::ReadSocket::bind(at, topics).await?;
        opener.say_bound(&bound);
        (socket, Some(bound))
    } else {
        (B::ReadSocket::dial(at, topics).await?, None)
    };
    let (end, task) = reading::start(socket, into);
    Ok((end, task, bound))
}

/// Opens backend `B`'s sending socket ([`Transport::open_writer`]).
async fn open_writer<B: SocketBackend>(
    opener: Opener<B>,
    role: Role,
    address: String,
    binds: bool,
) -> Result<(AnyWriteSocket, Option<String>), ZmqError>
where
    AnyWriteSocket: From<B::WriteSocket>,
{
    let at = opener.opening(role, address);
    Ok(if binds {
        let (socket, bound) = B::WriteSocket::bind(at).await?;
        opener.say_bound(&bound);
        (socket.into(), Some(bound))
    } else {
        (B::WriteSocket::dial(at).await?.into(), None)
    })
}

/// Opens backend `B`'s duplex socket and starts its task ([`Transport::duplex`]).
async fn open_duplex<B: SocketBackend>(
    opener: Opener<B>,
    role: Role,
    address: String,
    binds: bool,
    inbound: Handoff,
    shutdown: watch::Receiver<bool>,
    linger: Duration,
) -> Result<(Started, Option<String>), ZmqError> {
    let at = opener.opening(role, address);
    let (socket, bound) = if binds {
        let (socket, bound) = B::DuplexSocket::bind(at).await?;
        opener.say_bound(&bound);
        (socket, Some(bound))
    } else {
        (B::DuplexSocket::dial(at).await?, None)
    };
    let reads_itself = matches!(inbound, Handoff::Channel(..));
    let started = duplex::run(socket.drive(reads_itself), inbound, shutdown, linger);
    Ok((started, bound))
}
