//! The crate's one error type. Each message says what failed, where, and what fixes it.

use std::error::Error as StdError;

/// A boxed error of the socket client, kept opaque so that the client stays behind one module.
pub type SocketFault = Box<dyn StdError + Send + Sync + 'static>;

/// Why a send failed ([`ZmqError::Send`]). Each kind carries its reason as the logs say it.
///
/// ```
/// use ruststream_zmq::{SendFailure, ZmqError};
///
/// fn worth_retrying(err: &ZmqError) -> bool {
///     matches!(
///         err,
///         ZmqError::Send { source: SendFailure::NoPeer(_) | SendFailure::NotReading(_), .. }
///     )
/// }
/// # let _ = worth_retrying;
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SendFailure {
    /// No peer was connected to take it by its deadline.
    #[error("{0}")]
    NoPeer(String),
    /// Its peer is connected and not reading: the queue toward it stayed full.
    #[error("{0}")]
    NotReading(String),
    /// It did not leave by its deadline, and the socket cannot tell which of the two above held
    /// it; or its deadline passed before its turn came.
    #[error("{0}")]
    Late(String),
    /// An earlier send to the destination failed and it is not reached again: sends fail at once
    /// until it is.
    #[error("{0}")]
    Unreached(String),
    /// Its socket did not open before its deadline.
    #[error("{0}")]
    NotOpened(String),
    /// The socket client refused it.
    #[error("{0}")]
    Client(SocketFault),
}

/// Everything that can fail in this transport.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ZmqError {
    /// An address the sockets cannot use.
    #[error(
        "endpoint `{endpoint}` is not an address the ZeroMQ sockets accept: use `tcp://host:port` \
         (port 0 picks a free one on a bound endpoint) or `ipc://path`"
    )]
    UnsupportedEndpoint {
        /// The address as given.
        endpoint: String,
    },

    /// A CURVE key could not be read (`libzmq` feature). The secret is never quoted.
    #[error("reading {what} as a CURVE key failed: {why}")]
    CurveKey {
        /// What was read: the key, the file or the environment variable.
        what: String,
        /// Why it is not a key, and what one looks like.
        why: String,
    },

    /// CURVE asked of a libzmq built without it (`libzmq` feature): no libsodium.
    #[error(
        "CURVE on `{endpoint}` needs a libzmq built with libsodium, and libzmq {version}, the one \
         this service runs on, was built without it: build against the system's libzmq, which the \
         distributions build with libsodium (Debian and Ubuntu: `apt-get install libzmq3-dev \
         pkg-config`, and `libzmq5` where it runs; Fedora: `zeromq-devel pkgconf`; macOS: `brew \
         install zeromq pkg-config`), and unset `LIBZMQ_PREFIX` and `LIBZMQ_LIB_DIR` if they \
         point at another copy"
    )]
    CurveUnavailable {
        /// The endpoint that asked for CURVE.
        endpoint: String,
        /// The version of the libzmq this process runs on.
        version: String,
    },

    /// A socket of a CURVE broker toward an endpoint it has no CURVE keys for (`libzmq` feature):
    /// it would have gone in clear.
    #[error(
        "no CURVE keys for `{endpoint}`: this broker speaks CURVE and sends nothing in clear; give \
         the broker the keys for it with `.destination(ZmqEndpoint::dial(\"{endpoint}\")\
         .curve(client_keys, server_public_key))`, or, where this process listens there, bind it \
         under CURVE (its own sockets then reach it with keys of their own)"
    )]
    CurveDestination {
        /// The endpoint dialed.
        endpoint: String,
    },

    /// A CURVE broker's dead letters or retry copies aimed at an endpoint it has no CURVE keys
    /// for (`libzmq` and `omq` features): each would be refused as it is sent, so the
    /// registration is refused at startup.
    #[error(
        "the {what} of subscription `{subscription}` on `{endpoint}` go to `{destination}`, and \
         this broker speaks CURVE with no keys for `{target}`: each would be refused as it is \
         sent, never sent in clear; where this process listens on `{target}`, bind it under CURVE \
         (`ZmqEndpoint::bind(\"{target}\").curve(server).allow_clients(..)`: the process's own \
         sockets then reach it with keys of their own), or give the broker keys for it \
         (`.destination(ZmqEndpoint::dial(\"{target}\").curve(client_keys, server_public_key))`)"
    )]
    CurveCopiesUnreachable {
        /// `dead letters` or `retry copies`.
        what: &'static str,
        /// The subscription whose copies they are.
        subscription: String,
        /// The broker's endpoint, as configured.
        endpoint: String,
        /// The destination as declared.
        destination: String,
        /// The endpoint the destination names.
        target: String,
    },

    /// Binding the listener failed.
    #[error(
        "binding `{endpoint}` failed: {source}; is another process (or subscription) listening there?"
    )]
    Bind {
        /// The address.
        endpoint: String,
        /// The client's answer.
        #[source]
        source: SocketFault,
    },

    /// Opening a socket toward a peer failed.
    #[error("connecting to `{endpoint}` failed: {source}")]
    Connect {
        /// The address.
        endpoint: String,
        /// The client's answer.
        #[source]
        source: SocketFault,
    },

    /// A second subscription where a broker carries one: a bound queue or fan-out endpoint, or
    /// a responder.
    #[error(
        "subscription `{requested}` cannot open on `{endpoint}`: subscription `{existing}` already \
         holds it, and {why}; give `{requested}` a broker (and an endpoint) of its own"
    )]
    SecondSubscription {
        /// The endpoint.
        endpoint: String,
        /// The subscription that holds it.
        existing: String,
        /// The subscription that was refused.
        requested: String,
        /// Why the pattern carries one.
        why: &'static str,
    },

    /// A publish whose destination would land on a subscription other than the one it names.
    #[error(
        "publish to `{destination}` refused: `{endpoint}` is the listener of subscription \
         `{subscription}` in this process, so the message would reach `{subscription}` instead; \
         send it to another endpoint (`{destination}@tcp://host:port`)"
    )]
    WouldLoopBack {
        /// The destination the publish named.
        destination: String,
        /// The subscription bound on the endpoint.
        subscription: String,
        /// The endpoint.
        endpoint: String,
    },

    /// A bound subscription's dead letters aimed at its own listener under another address.
    #[error(
        "the dead letters of subscription `{subscription}` go to `{dead_letter}`, which reaches the \
         subscription's own listener `{listener}`, so they would come back to it; name an \
         endpoint another process listens on (`name@tcp://host:port`)"
    )]
    DeadLetterIntoOwnListener {
        /// The subscription.
        subscription: String,
        /// The dead-letter destination as declared.
        dead_letter: String,
        /// The address the subscription listens on, as configured.
        listener: String,
    },

    /// A bound queue's dead letter named like the subscription: its listener would take each one
    /// as one more retry copy, so the registration is refused at startup.
    #[error(
        "the dead letters of subscription `{subscription}` are named `{subscription}`, so they would \
         land on its own listener as one more retry copy; name a destination on another \
         endpoint (`{subscription}.dead@tcp://host:port`)"
    )]
    DeadLetterIsTheSubscription {
        /// The subscription.
        subscription: String,
    },

    /// A bare-name publish from a dialing broker whose subscription reads from the peer there:
    /// that peer only sends, so nothing there could take it.
    #[error(
        "publish to `{destination}` refused: `{endpoint}` is the peer subscription \
         `{subscription}` reads from, and it only sends; name a destination on another endpoint \
         (`{destination}@tcp://host:port`)"
    )]
    PeerOnlySends {
        /// The destination the publish named.
        destination: String,
        /// The subscription that reads from the peer.
        subscription: String,
        /// The dialing endpoint.
        endpoint: String,
    },

    /// A destination string that does not parse.
    #[error("destination `{destination}` is not valid: {why}")]
    InvalidDestination {
        /// The destination as given.
        destination: String,
        /// What is wrong with it.
        why: String,
    },

    /// A header the wire format cannot carry.
    #[error("header `{header}` cannot be sent: {why}; headers travel as `name: value` lines")]
    InvalidHeader {
        /// The header's name.
        header: String,
        /// What is wrong with it.
        why: &'static str,
    },

    /// A handle used after its broker shut down.
    #[error(
        "{what} used after its broker shut down; publish through a handle of the running broker"
    )]
    ShutDown {
        /// What was used: a publisher, a subscription.
        what: &'static str,
    },

    /// A send failed: [`SendFailure`] says why, to branch on.
    #[error("sending to `{endpoint}` failed: {source}")]
    Send {
        /// The address.
        endpoint: String,
        /// Why it failed.
        #[source]
        source: SendFailure,
    },

    /// A responder asked to answer a peer that is no longer connected.
    #[error(
        "no peer with that identity is connected to `{endpoint}`: the requester went away before \
         its answer was sent, so the answer is lost"
    )]
    UnknownPeer {
        /// The responder's address.
        endpoint: String,
    },

    /// A `zmq-reply:` address that does not name a peer of this responder.
    #[error("reply address `{address}` is not valid: {why}")]
    ReplyAddress {
        /// The address as given.
        address: String,
        /// What is wrong with it.
        why: &'static str,
    },

    /// A request whose `correlation-id` another request of the same requester still waits on:
    /// the answers could not be told apart.
    #[error(
        "a request with correlation-id `{id}` is already waiting for its answer on `{endpoint}`;          give each request in flight its own correlation-id, or leave it out and one is minted"
    )]
    CorrelationIdInFlight {
        /// The correlation-id used twice.
        id: String,
        /// The requester's endpoint.
        endpoint: String,
    },

    /// A request that got no answer in time.
    #[error("request to `{destination}` got no answer within {timeout:?}")]
    RequestTimeout {
        /// Where the request went.
        destination: String,
        /// The timeout that ran out.
        timeout: std::time::Duration,
    },
}
