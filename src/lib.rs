//! The ZeroMQ transport of the [RustStream](ruststream) messaging framework: the brokers under
//! `#[subscriber]` handlers, over PUSH/PULL, PUB/SUB and ROUTER/DEALER sockets.
//!
//! ```
//! use ruststream_zmq::prelude::*;
//!
//! #[subscriber("payments")]
//! async fn charge(payment: &serde_json::Value) -> HandlerOutcome {
//!     HandlerOutcome::ack()
//! }
//!
//! fn app() -> impl App {
//!     RustStream::new(AppInfo::new("payments", "0.1.0"))
//!         .with_broker(ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:5555")), |b| {
//!             b.include(charge).max_attempts(nonzero!(3u32));
//!         })
//! }
//! # let _ = app();
//! ```
//!
//! # Map
//!
//! | Item | What it is |
//! |---|---|
//! | [`prelude`] | what a routes file imports: the framework's prelude and this crate's types |
//! | [`ZmqQueue`], [`ZmqFanout`], [`ZmqRpc`] | the brokers, on the default backend ([`ZmqBroker`]) |
//! | [`ZmqEndpoint`] | where a broker listens ([`Bound`]) or dials ([`Dialing`]) |
//! | [`QueueSubscription`], [`FanoutSubscription`], [`Responder`] | subscription builders that type the side |
//! | [`ZmqContext`] and its keys | what a handler reads of its delivery |
//! | [`ZmqPublisher`], [`ZmqRequester`], [`ToRequester`] | publishing, requests and answers |
//! | [`ZmqMonitor`] | a broker's live figures |
//! | [`Readiness`], [`ClosedZmqBroker`] | readiness for a health route; what `shutdown` reports ([`guide::operations`]) |
//! | [`WireLimits`], [`wire`] | the wire format and what a reader refuses |
//! | [`routing`] | where a publish goes, as pure functions |
//! | [`zeromq`], [`libzmq`], [`omq`] | the brokers pinned to one backend |
//! | [`ZmqError`] | what can fail, naming the endpoint and the cause |
//! | [`guide`] | the guides: settlement, wire, backends, security, and more |
//!
//! # Features
//!
//! | Feature | Adds |
//! |---|---|
//! | `zeromq` (default) | the pure-Rust socket backend |
//! | `libzmq` | the libzmq backend: heartbeats, per-peer queues, CURVE ([`guide::backends`]) |
//! | `omq` | the omq backend, pure Rust: heartbeats, per-peer queues, CURVE ([`guide::backends`]) |
//! | `testing` | the in-process mode for `TestApp` ([`guide::testing`]) |
//! | `metrics` | [`ZmqMonitor::register_metrics`] ([`guide::metrics`]) |
//! | `asyncapi` | the `x-zeromq` bindings of the AsyncAPI document ([`guide::asyncapi`]) |
//! | `cli` | the `zmqs` binary: send, tail, ask, keys ([`guide::cli`]) |
// Two calls outside safe Rust, each argued where it is (`transport::libzmq::seed`, and the
// registration in `transport::libzmq::driven`); each must say why it is safe, alone in its block.
#![deny(unsafe_code)]
#![deny(
    clippy::undocumented_unsafe_blocks,
    clippy::multiple_unsafe_ops_per_block
)]
#![warn(missing_docs)]

// The README's Rust snippets, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

// CONTRIBUTING.md draws the layers (rustfmt keeps these sorted by name).
mod assertions;
#[cfg(feature = "asyncapi")]
mod bindings;
mod broker;
mod connection;
mod context;
#[cfg(curve)]
mod curve;
mod delivery;
mod endpoint;
mod error;
pub mod guide;
mod host;
mod inbound;
mod intake;
mod lane;
#[cfg(test)]
mod layering;
#[cfg(feature = "libzmq")]
pub mod libzmq;
#[cfg(feature = "logs")]
pub mod logs;
mod message;
#[cfg(feature = "metrics")]
mod metrics;
mod monitor;
#[cfg(feature = "omq")]
pub mod omq;
mod outbound;
mod pattern;
mod publish;
mod readiness;
mod requests;
pub mod routing;
mod rpc;
mod settings;
#[cfg(curve)]
mod socket_settings;
mod subscription;
#[cfg(feature = "testing")]
mod testing;
mod throttle;
mod transport;
pub mod wire;
#[cfg(feature = "zeromq")]
pub mod zeromq;

#[cfg(not(any(feature = "zeromq", feature = "libzmq", feature = "omq")))]
compile_error!(
    "ruststream-zmq needs a socket backend: turn on the `zeromq` feature (the default), `libzmq` \
     or `omq`"
);

pub use broker::{
    ClosedZmqBroker, ConnectedZmq, ConnectedZmqFanout, ConnectedZmqQueue, ConnectedZmqRpc,
    FanoutKind, OneWay, Pattern, QueueKind, RpcKind, ZmqBroker, ZmqFanout, ZmqQueue, ZmqRpc,
};
pub use context::{Attempt, MessageName, RequesterIdentity, SubscriptionEndpoint, ZmqContext};
#[cfg(curve)]
pub use curve::{Curve, CurveKeyPair, CurvePublicKey, WantsClients};
pub use delivery::{ZmqResponderSubscriber, ZmqSubscriber};
pub use endpoint::{
    Bound, Dialing, Mechanism, Mountable, Plain, Ready, Side, WantsRetryDestination, ZmqEndpoint,
};
pub use error::{SendFailure, SocketFault, ZmqError};
pub use lane::PARTITION_KEY_HEADER;
pub use message::ZmqMessage;
pub use monitor::{Flush, SocketSummary, SocketUse, ZmqMonitor};
pub use publish::{ZmqPublish, ZmqPublisher};
pub use readiness::{NotReady, Readiness};
pub use rpc::{ToRequester, ZmqRequest, ZmqRequester};
pub use subscription::{
    FanoutSubscription, OutRetry, QueueSubscription, Responder, Subscription, Tune, TuneStep,
    WantsDestination,
};
pub use transport::{Backend, DefaultBackend, Speaks};
pub use wire::WireLimits;

/// What a routes file imports: the framework's prelude, this crate's service-facing types, and
/// the publish policies under the framework's uniform names.
pub mod prelude {
    pub use ruststream::prelude::*;

    pub use crate::{
        Attempt, Bound, Dialing, FanoutSubscription, MessageName, OutRetry, QueueSubscription,
        RequesterIdentity, Responder, SendFailure, Side, SubscriptionEndpoint, ToRequester, Tune,
        WireLimits, ZmqContext, ZmqEndpoint, ZmqError, ZmqFanout, ZmqMessage, ZmqMonitor, ZmqQueue,
        ZmqRpc,
    };
    pub use crate::{ZmqPublish as Publish, ZmqRequest as Request};
}
