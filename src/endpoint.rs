//! Where a broker's sockets live: an address, and the side of it this process takes.
//!
//! The side is a type parameter, so what a subscription may do with its copies (send them to its
//! own listener, or be told where they go) is settled at compile time.
//!
//! Imports: `error` only (a leaf).

use std::{fmt, marker::PhantomData};

use ruststream::{AddressedCopies, CopyPath, NamedCopies};

#[cfg(feature = "libzmq")]
use crate::curve::{AllowList, CurveKeyPair, CurvePublicKey, Security};
use crate::error::ZmqError;

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Bound {}
    impl Sealed for super::Dialing {}
}

/// The side of an endpoint this process takes: [`Bound`] listens, [`Dialing`] connects.
///
/// Sealed: the two sides are all there is, and the retry routing of every pattern is written
/// against them.
pub trait Side: sealed::Sealed + Send + Sync + 'static {
    /// `true` where this process listens on the address.
    const BINDS: bool;
    /// The word logs and errors use for the side.
    const NAME: &'static str;
    /// What a queue or fan-out subscription on this side declares about its retry copies:
    /// [`AddressedCopies`] on a bound endpoint (they go to its own listener), [`NamedCopies`] on
    /// a dialing one (the mount site names where).
    type Copies: CopyPath;
    /// The state a queue or fan-out subscription builder starts in: [`Ready`] on a bound endpoint,
    /// [`WantsRetryDestination`] on a dialing one.
    type Fresh: Send + Sync + 'static;
}

/// A subscription builder that is complete: it can be mounted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Ready;

/// A subscription builder that still has to be told where its retry copies go: call
/// `.out_retry(destination)` on it (or on the `#[subscriber]` definition) to move it to [`Ready`].
///
/// ```
/// use ruststream_zmq::{Dialing, QueueSubscription};
///
/// let payments = QueueSubscription::<Dialing>::new("payments")
///     .out_retry("payments.retry@tcp://127.0.0.1:5556");
/// # let _ = payments;
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct WantsRetryDestination;

/// The side of an endpoint this process listens on ([`ZmqEndpoint::bind`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Bound;

/// The side of an endpoint this process connects to ([`ZmqEndpoint::dial`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Dialing;

impl Side for Bound {
    const BINDS: bool = true;
    const NAME: &'static str = "bound";
    type Copies = AddressedCopies;
    type Fresh = Ready;
}

impl Side for Dialing {
    const BINDS: bool = false;
    const NAME: &'static str = "dialing";
    type Copies = NamedCopies;
    type Fresh = WantsRetryDestination;
}

/// A ZeroMQ address (`tcp://host:port` or `ipc://path`) and the side this process takes on it.
///
/// Construction records the address and does no I/O; the address is checked when the broker
/// connects, and a scheme other than `tcp://` or `ipc://` is refused there with an error naming it.
///
/// # Examples
///
/// ```
/// use ruststream_zmq::{Bound, Dialing, ZmqEndpoint};
///
/// let listen: ZmqEndpoint<Bound> = ZmqEndpoint::bind("tcp://127.0.0.1:0");
/// let upstream: ZmqEndpoint<Dialing> = ZmqEndpoint::dial("tcp://127.0.0.1:5555");
/// assert_eq!(upstream.address(), "tcp://127.0.0.1:5555");
/// # let _ = listen;
/// ```
pub struct ZmqEndpoint<S: Side> {
    address: String,
    /// CURVE on this endpoint's sockets, when set.
    #[cfg(feature = "libzmq")]
    security: Option<Security>,
    side: PhantomData<fn() -> S>,
}

impl ZmqEndpoint<Bound> {
    /// An endpoint this process listens on. Port `0` picks a free port when the service starts;
    /// the broker reports the real address once it has.
    #[must_use]
    pub fn bind(address: impl Into<String>) -> Self {
        Self::new(address.into())
    }

    /// Serves CURVE on this endpoint with the server's key pair (`libzmq` feature): every
    /// connection is encrypted, and a client must know `server.public()`. Any client that does
    /// is admitted, unless [`allow_clients`](Self::allow_clients) lists the ones that are.
    ///
    /// The broker's own sockets that dial this endpoint (copies to its own listener) use a key
    /// pair of their own, admitted by the allow-list.
    ///
    /// # Examples
    ///
    /// ```
    /// use ruststream_zmq::{CurveKeyPair, ZmqEndpoint};
    ///
    /// let server = CurveKeyPair::generate().unwrap();
    /// let client = CurveKeyPair::generate().unwrap();
    /// let endpoint = ZmqEndpoint::bind("tcp://0.0.0.0:5555")
    ///     .curve(server)
    ///     .allow_clients([client.public()]);
    /// assert!(format!("{endpoint:?}").contains("curve: \"server, clients allowed: 1\""));
    /// ```
    #[cfg(feature = "libzmq")]
    #[must_use]
    pub fn curve(mut self, server: CurveKeyPair) -> Self {
        let allowed = match self.security.take() {
            Some(Security::Server { allowed, .. }) => allowed,
            _ => None,
        };
        self.security = Some(Security::Server {
            keys: server,
            allowed,
        });
        self
    }

    /// Admits only these client keys (`libzmq` feature; after [`curve`](Self::curve)). A client
    /// with another key is refused at its handshake: counted in
    /// [`ZmqMonitor::peers_refused`](crate::ZmqMonitor::peers_refused), and logged once per key
    /// with the key's fingerprint. Without `curve` there is no handshake to refuse, and the
    /// list does nothing.
    #[cfg(feature = "libzmq")]
    #[must_use]
    pub fn allow_clients(mut self, clients: impl IntoIterator<Item = CurvePublicKey>) -> Self {
        if let Some(Security::Server { allowed, .. }) = &mut self.security {
            let listed = allowed.get_or_insert_with(AllowList::default);
            for client in clients {
                listed.add(client);
            }
        }
        self
    }
}

impl ZmqEndpoint<Dialing> {
    /// An endpoint this process connects to; the peer listens there.
    #[must_use]
    pub fn dial(address: impl Into<String>) -> Self {
        Self::new(address.into())
    }

    /// Speaks CURVE to this endpoint's server (`libzmq` feature): this process's `client` key
    /// pair, and the public key of the `server` it expects. A server with another key is never
    /// connected to; every socket the broker dials (copies to `name@endpoint` destinations too)
    /// expects that server key.
    ///
    /// # Examples
    ///
    /// ```
    /// use ruststream_zmq::{CurveKeyPair, CurvePublicKey, ZmqEndpoint};
    ///
    /// let server = CurvePublicKey::from_z85("rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7").unwrap();
    /// let endpoint = ZmqEndpoint::dial("tcp://10.0.0.5:5555")
    ///     .curve(CurveKeyPair::generate().unwrap(), server);
    /// assert!(format!("{endpoint:?}").contains("curve: \"client of rq:rM>}U\""));
    /// ```
    #[cfg(feature = "libzmq")]
    #[must_use]
    pub fn curve(mut self, client: CurveKeyPair, server: CurvePublicKey) -> Self {
        self.security = Some(Security::Client {
            keys: client,
            server,
        });
        self
    }
}

impl<S: Side> ZmqEndpoint<S> {
    fn new(address: String) -> Self {
        Self {
            address,
            #[cfg(feature = "libzmq")]
            security: None,
            side: PhantomData,
        }
    }

    /// CURVE on this endpoint's sockets, when set.
    #[cfg(feature = "libzmq")]
    pub(crate) fn security(&self) -> Option<&Security> {
        self.security.as_ref()
    }

    /// The address as it was given.
    #[must_use]
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Refuses an address the sockets cannot use, naming it and what is accepted.
    pub(crate) fn checked(&self) -> Result<&str, ZmqError> {
        check_address(&self.address)?;
        Ok(&self.address)
    }
}

/// Whether `address` is one the sockets accept: `tcp://host:port` or `ipc://path`.
pub(crate) fn check_address(address: &str) -> Result<(), ZmqError> {
    let accepted = address.strip_prefix("tcp://").is_some_and(|rest| {
        // No user information: ZeroMQ's NULL mechanism has no credentials to carry.
        rest.rsplit_once(':').is_some_and(|(host, port)| {
            !host.is_empty() && !host.contains(['@', '/']) && port.parse::<u16>().is_ok()
        })
    }) || address
        .strip_prefix("ipc://")
        .is_some_and(|path| !path.is_empty());
    if accepted {
        Ok(())
    } else {
        Err(ZmqError::UnsupportedEndpoint {
            endpoint: address.to_owned(),
        })
    }
}

impl<S: Side> Clone for ZmqEndpoint<S> {
    fn clone(&self) -> Self {
        Self {
            address: self.address.clone(),
            #[cfg(feature = "libzmq")]
            security: self.security.clone(),
            side: PhantomData,
        }
    }
}

impl<S: Side> fmt::Debug for ZmqEndpoint<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown = f.debug_struct("ZmqEndpoint");
        shown
            .field("address", &self.address)
            .field("side", &S::NAME);
        // Which keys, never the secret ones.
        #[cfg(feature = "libzmq")]
        if let Some(security) = &self.security {
            shown.field("curve", &security.describe());
        }
        shown.finish()
    }
}

impl<S: Side> fmt::Display for ZmqEndpoint<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.address, S::NAME)
    }
}

/// The address the `zeromq` client is asked to bind: libzmq's wildcard host `*`
/// (`tcp://*:5555`, every interface) is written `0.0.0.0`, which the client understands; any
/// other address is passed as it is. Errors keep naming the address the user wrote.
pub(crate) fn bind_form(address: &str) -> std::borrow::Cow<'_, str> {
    match address.strip_prefix("tcp://*:") {
        Some(port) => format!("tcp://0.0.0.0:{port}").into(),
        None => address.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_and_ipc_addresses_are_accepted() {
        for ok in [
            "tcp://127.0.0.1:0",
            "tcp://0.0.0.0:5555",
            "tcp://*:5555",
            "tcp://localhost:1",
            "ipc:///tmp/x.sock",
        ] {
            assert!(check_address(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn other_schemes_are_refused_naming_the_endpoint() {
        for bad in [
            "inproc://x",
            "udp://1.2.3.4:5",
            "tcp://nohost",
            "tcp://:5",
            "tcp://user:secret@127.0.0.1:5555",
            "127.0.0.1:5555",
            "ipc://",
            "",
        ] {
            let err = check_address(bad).unwrap_err().to_string();
            assert!(err.contains(bad), "{err}");
            assert!(err.contains("tcp://") && err.contains("ipc://"), "{err}");
        }
    }

    #[test]
    fn a_wildcard_host_is_bound_as_every_ipv4_interface_and_nothing_else_changes() {
        assert_eq!(bind_form("tcp://*:5555"), "tcp://0.0.0.0:5555");
        assert_eq!(bind_form("tcp://*:0"), "tcp://0.0.0.0:0");
        for same in [
            "tcp://127.0.0.1:5555",
            "tcp://0.0.0.0:5555",
            "tcp://pay-1:5555",
            "ipc:///tmp/*:5555",
        ] {
            assert_eq!(bind_form(same), same);
        }
    }
}
