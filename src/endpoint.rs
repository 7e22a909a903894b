//! Where a broker's sockets live: an address, and the side of it this process takes.
//!
//! The side is a type parameter, so what a subscription may do with its copies (send them to its
//! own listener, or be told where they go) is settled at compile time.

use std::{fmt, marker::PhantomData};

use ruststream::{AddressedCopies, CopyPath, NamedCopies};

use crate::error::ZmqError;

mod sealed {
    pub trait SealedSide {}
    impl SealedSide for super::Bound {}
    impl SealedSide for super::Dialing {}
}

pub(crate) mod sealed_mechanism {
    /// What every state of an endpoint's security has, finished or not.
    pub trait SealedMechanism: Clone + Send + Sync + 'static {
        /// What `Debug` may say of it, never a secret key.
        fn describe(&self) -> Option<String>;
    }
    impl SealedMechanism for super::Plain {
        fn describe(&self) -> Option<String> {
            None
        }
    }
}

/// The side of an endpoint this process takes: [`Bound`] listens, [`Dialing`] connects.
///
/// Sealed: the two sides are all there is, and the retry routing of every pattern is written
/// against them.
pub trait Side: sealed::SealedSide + Send + Sync + 'static {
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

/// How an endpoint's connections are secured, finished: [`Plain`] (ZeroMQ's NULL mechanism,
/// every backend), or CURVE (`ZmqEndpoint::curve`, the libzmq and omq backends only: a broker on
/// the `zeromq` backend does not take such an endpoint). A broker takes an endpoint only once its mechanism
/// is one: a bound endpoint with CURVE first says who may connect (`WantsClients`). Sealed.
#[diagnostic::on_unimplemented(
    message = "this endpoint's security is not finished (`{Self}`): a CURVE server endpoint says \
               who may connect before a broker takes it",
    label = "this endpoint has `.curve(server)`, and no `.allow_clients(..)` or \
             `.allow_any_client()` yet",
    note = "call `.allow_clients(keys)` to admit those client keys only, or \
            `.allow_any_client()` to admit any holder of the server's public key"
)]
pub trait Mechanism: sealed_mechanism::SealedMechanism {}

/// ZeroMQ's NULL mechanism: no encryption, no authentication; what an endpoint has until
/// `curve` is called on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Plain;

impl Mechanism for Plain {}

/// A subscription builder that is complete: it can be mounted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Ready;

/// The state a subscription builder is mounted in: [`Ready`] alone. Its message is what a
/// builder mounted before `.out_retry(..)` answers (`ui-tests/responder_mounted_without_out_retry.rs`).
#[diagnostic::on_unimplemented(
    message = "this subscription does not say where its retry copies go: it is `{Self}`, and a \
               subscription is mounted `Ready`",
    label = "mounted before `.out_retry(destination)`",
    note = "a responder (bound or dialing) and a dialing queue or fan-out read from an endpoint \
            their copies cannot go back to: name a queue for them with \
            `.out_retry(\"name@tcp://host:port\")` on the subscription, or on the `#[subscriber]` \
            definition at the mount site (`b.include(handler.out_retry(..))`)"
)]
pub trait Mountable: sealed_state::SealedState {}

impl Mountable for Ready {}

mod sealed_state {
    pub trait SealedState {}
    impl SealedState for super::Ready {}
}

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
pub struct ZmqEndpoint<S: Side, M = Plain> {
    address: String,
    mechanism: M,
    side: PhantomData<fn() -> S>,
}

impl ZmqEndpoint<Bound> {
    /// An endpoint this process listens on. Port `0` picks a free port when the service starts;
    /// the broker reports the real address once it has.
    ///
    /// ```
    /// use ruststream_zmq::ZmqEndpoint;
    ///
    /// let loopback = ZmqEndpoint::bind("tcp://127.0.0.1:5555");
    /// let any_port = ZmqEndpoint::bind("tcp://127.0.0.1:0");
    /// # let _ = (loopback, any_port);
    /// ```
    #[must_use]
    pub fn bind(address: impl Into<String>) -> Self {
        Self::new(address.into())
    }
}

impl ZmqEndpoint<Dialing> {
    /// An endpoint this process connects to; the peer listens there.
    ///
    /// ```
    /// use ruststream_zmq::ZmqEndpoint;
    ///
    /// let upstream = ZmqEndpoint::dial("ipc:///tmp/payments.sock");
    /// assert_eq!(upstream.address(), "ipc:///tmp/payments.sock");
    /// ```
    #[must_use]
    pub fn dial(address: impl Into<String>) -> Self {
        Self::new(address.into())
    }
}

impl<S: Side> ZmqEndpoint<S> {
    fn new(address: String) -> Self {
        Self {
            address,
            mechanism: Plain,
            side: PhantomData,
        }
    }
}

impl<S: Side, M: sealed_mechanism::SealedMechanism> ZmqEndpoint<S, M> {
    /// This endpoint, secured by `mechanism` instead.
    #[cfg_attr(
        not(curve),
        expect(dead_code, reason = "only CURVE secures an endpoint")
    )]
    pub(crate) fn secured<N: sealed_mechanism::SealedMechanism>(
        self,
        mechanism: N,
    ) -> ZmqEndpoint<S, N> {
        ZmqEndpoint {
            address: self.address,
            mechanism,
            side: PhantomData,
        }
    }

    /// The address and the mechanism, apart.
    pub(crate) fn into_parts(self) -> (ZmqEndpoint<S>, M) {
        let plain = ZmqEndpoint::new(self.address);
        (plain, self.mechanism)
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

impl<S: Side, M: sealed_mechanism::SealedMechanism> Clone for ZmqEndpoint<S, M> {
    fn clone(&self) -> Self {
        Self {
            address: self.address.clone(),
            mechanism: self.mechanism.clone(),
            side: PhantomData,
        }
    }
}

impl<S: Side, M: sealed_mechanism::SealedMechanism> fmt::Debug for ZmqEndpoint<S, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown = f.debug_struct("ZmqEndpoint");
        shown
            .field("address", &self.address)
            .field("side", &S::NAME);
        // Which keys, never the secret ones.
        if let Some(described) = self.mechanism.describe() {
            shown.field("curve", &described);
        }
        shown.finish()
    }
}

impl<S: Side, M: sealed_mechanism::SealedMechanism> fmt::Display for ZmqEndpoint<S, M> {
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
