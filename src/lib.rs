//! `ruststream-zmq`: the ZeroMQ transport of the [RustStream](ruststream) messaging framework.
//!
//! A service writes `#[subscriber("payments")]` handlers and mounts them on [`ZmqQueue`]
//! (PUSH/PULL), [`ZmqFanout`] (PUB/SUB) or [`ZmqRpc`] (ROUTER responder, DEALER requester), each
//! over a [`ZmqEndpoint<Bound>`](ZmqEndpoint) or a [`ZmqEndpoint<Dialing>`](ZmqEndpoint); peers
//! written with libzmq speak the wire format of [`wire`].
//!
//! ZeroMQ settles nothing. `ack` and `nack` answer [`AckError::Unsupported`](ruststream::AckError),
//! a plain `retry()` delivers nothing again, and every retry is a copy this service publishes:
//! a bound queue or fan-out subscription's copies go to its own listener; a dialing one's, and
//! every responder's, go to the destination its registration names.
//!
//! # Socket backends
//!
//! The sockets come from one of two clients, each compiled in by its feature, and a broker runs
//! on the one its type names ([`ZmqBroker`]'s third parameter, a [`Backend`]); nothing above the
//! transport differs. [`zeromq::Zeromq`] (feature `zeromq`, on by default) is the pure-Rust
//! client, with no C toolchain; the crate root's [`ZmqQueue`], [`ZmqFanout`] and [`ZmqRpc`] run
//! on it whenever it is compiled ([`DefaultBackend`]). [`libzmq::Libzmq`] (feature `libzmq`) is
//! the library every pyzmq and C++ peer runs, and adds what only it has: ZMTP heartbeats
//! (`ZmqBroker::heartbeat`), a handshake timeout, per-peer queues (`ZmqBroker::peer_queue`),
//! frames over [`WireLimits::max_message_bytes`] refused before they are read, and CURVE: a bound
//! endpoint says who may connect (`ZmqEndpoint::curve`, then `allow_clients` or
//! `allow_any_client`), and a broker gives each destination keys of its own (`destination`;
//! `CurveKeyPair`). Those settings exist only on a libzmq broker ([`libzmq::ZmqQueue`] and its
//! siblings). Each backend's module has a prelude with its brokers under the names of
//! [`prelude`] ([`zeromq::prelude`], [`libzmq::prelude`]).
//! The README compares the two, and says what a peer that stops reading gets on each.
//!
//! # Testing a service
//!
//! Under the `testing` feature, `TestApp::start(app())` runs the production app with its
//! brokers connected in process: the same connection, wire format, limits and routing of copies
//! as on the sockets, over a bus that stands in for them (scoped to the test's runtime, so tests
//! that start the same app do not meet). `tb.broker::<ZmqQueue>()` (or `broker_named(label)`)
//! injects messages and reads what the service published; see `examples/testing_payments.rs`.
//! A queue or a responder keeps what a peer sent before the subscription opened
//! (`Backlog::Delivered`), a fan-out drops it (`Backlog::Missed`), as the sockets do.
//!
//! # Conformance
//!
//! `tests/conformance/` runs the framework's suites, in process and live over loopback:
//! `harness::run_suite` (every pattern, both sides), `harness::lifecycle`,
//! `lifecycle::shared_handle_closes`, `retry::redelivery_address` (descriptors and the bare
//! name), `settlement::suite`, `settlement::matches_in_process`,
//! `in_process::backlog_matches_server`, `in_process::refuses_like_the_server`,
//! `capabilities::batches`, `capabilities::request_reply` and `message_shape::keyed_order`
//! (keys in the `zmq-partition-key` header); and, under the `asyncapi`
//! feature, `harness::describes_without_credentials`,
//! `message_shape::publishes_without_credentials` and
//! `message_shape::describes_addresses_without_credentials` (an address typed with user
//! information is described by its host and port alone).
//!
//! The ones that do not apply, and why:
//!
//! - `lifecycle::shutdown_flushes` reads, on a new connection, what the old one published right
//!   before it shut down. There is no server between ZeroMQ peers to hold it: what a subscription
//!   had read and not handled is lost when it closes, which is the at-most-once rule of this transport.
//! - `message_shape::publish_options`: the publishers have no per-message options
//!   (`Options = ()`), so there is no override to check.
//! - `retry::broker_moves`, `capabilities::transactions`, `owned_transactions`, `seeking`,
//!   `batch_seeking`, `carries`, `carries_batch`: the transport has none of these capabilities,
//!   and the crate emulates none.
//!
//! # Keyed worker lanes
//!
//! `workers(n, by_key)` lanes deliveries by [`IncomingMessage::partition_key`](ruststream::IncomingMessage::partition_key).
//! ZeroMQ has no partitions, so, as `ruststream-nats` (`nats-partition-key`) and
//! `ruststream-fred` (`redis-partition-key`) do, the key is a header the sender sets:
//! [`PARTITION_KEY_HEADER`] (`zmq-partition-key`) unless the broker or the subscription names
//! another (`partition_header`). A responder can key each request by its requester's identity
//! instead (`partition_by_requester`), so that one requester's requests run in the order it
//! sent them; that choice on the subscription is the shape `ruststream-rdkafka`'s `LaneKey`
//! gives its record key. `ZmqMessage` implements `Partitioned` with the same key, as the
//! sister crates' deliveries do.
//!
//! # Shutdown
//!
//! `ConnectedBroker::shutdown` answers a [`ClosedZmqBroker`], the shape of `ruststream-nats`'s
//! `ClosedNatsBroker` and `ruststream-fred`'s `ClosedRedisBroker`: plain data, no surface. It
//! lists each socket the broker opened ([`SocketSummary`]: what for, the endpoint, messages sent
//! and received) with the peers its sockets saw, and counts what at most once makes the figure
//! that matters: messages a subscription had read ahead of its handler, lost when it closed
//! ([`ClosedZmqBroker::unhandled`]). Those are counted from the read-ahead queue as it is
//! dropped, and from a socket's task when it read one the subscription was gone for. The
//! runtime drops what `shutdown` answers, so the broker also logs it (`closed`, at info).
//!
//! # Readiness
//!
//! The runtime's `HealthProbe` says whether the service runs and its subscriptions consume, not
//! whether a dialing socket has a peer. [`Readiness`] adds that from the brokers'
//! [`ZmqMonitor::peers_connected`]: ready while the service runs, every subscription consumes,
//! and each broker named with `needs_peer` has a peer; else [`NotReady`] says why.
//! `ruststream-nats` and `ruststream-fred` ship no readiness type to follow, so it takes the
//! shape of the runtime's own `/readyz` example over `HealthProbe` (running, and every
//! subscription active), adding the peers; `examples/healthz.rs` serves it on `/healthz`.
//!
//! # Metrics
//!
//! Two layers count, and each counts what only it can see:
//!
//! - **The framework** (`ruststream`'s `metrics` feature, `ruststream::metrics::Metrics`) counts
//!   what the handlers did: `ruststream_messages_consumed_total{name, status}` is one per handled
//!   delivery, `status` the settlement the handler chose (`ack`, or `nack` for a drop or a retry;
//!   ZeroMQ then answers `Unsupported` to either, and a retry is a copy this service publishes);
//!   `ruststream_messages_published_total{name, status}` counts the publishes its publish layer
//!   sees.
//! - **This crate** (feature `metrics`, `ZmqMonitor::register_metrics`) counts the sockets:
//!   `ruststream_zmq_messages_refused_total{broker, endpoint, rule}` (messages a peer sent that no
//!   handler ever saw, because the wire format or the limits refused them),
//!   `ruststream_zmq_messages_sent_total` and `ruststream_zmq_send_failures_total` (what reached a
//!   socket and what did not: publishes, answers, retry copies, dead letters) and
//!   `ruststream_zmq_peers_lost_total`.
//!
//! So each message a peer sends is either refused (ours) or handled (the framework's, once per
//! attempt), and each retry copy is sent (ours) and then handled again. Register both in one
//! registry, and one scrape shows both:
//!
//! ```
//! # #[cfg(feature = "metrics")]
//! # fn main() -> Result<(), prometheus::Error> {
//! use ruststream::metrics::Metrics;
//! use ruststream::runtime::{App, AppInfo, RustStream};
//! use ruststream_zmq::{ZmqEndpoint, ZmqQueue};
//!
//! let metrics = Metrics::with_registry(prometheus::Registry::new())?;
//! let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
//! broker.monitor().register_metrics(metrics.registry(), "payments")?;
//! let app = RustStream::new(AppInfo::new("payments", "0.1.0"))
//!     .layer(metrics.consume_layer())
//!     .publish_layer(metrics.publish_layer())
//!     .with_broker_labeled("payments", broker, |_b| {});
//! // `metrics.export()` renders both for a `/metrics` route.
//! # let _ = app;
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "metrics"))]
//! # fn main() {}
//! ```
//!
//! The framework's OpenTelemetry setup (its `otel` feature, `ruststream::otel::Otel`) records the
//! handler and publish figures as OTLP instruments; name this transport in them with
//! `Otel::builder().messaging_system("zeromq")`. The socket figures are Prometheus series only.
//!
//! # AsyncAPI
//!
//! Under the `asyncapi` feature, `cargo run -- asyncapi gen` prints the service's document (see
//! `examples/asyncapi.rs`). Each broker is a server of protocol `zeromq` at protocol version
//! `3.0` (ZMTP). The specification lists no protocol for ZeroMQ, so the name is a choice:
//! `zeromq`, the project's name and what `ruststream-zeromq` writes, so that documents of services
//! on either crate name one protocol the same way (`zmq` is the C library's prefix, not a
//! protocol's name).
//!
//! Its bindings ride an `x-zeromq` extension (the protocol keys of the specification are a closed
//! list): the server says its `transport`, `endpoint`, `role` (`bind` or `connect`: the side this
//! service takes) and `socketPair`; a channel says the `socket` this service uses on it, its
//! `role`, the `frames` (`name`, `headers`, `payload`), what frame 0 holds (`nameFrame`; on a
//! fan-out `nameMatch: prefix`), the `endpoint` of a `name@endpoint` destination, and on a
//! responder's answer its `replyAddress` (`zmq-reply:<hex of the requester's identity>`, read from
//! the request's `reply-to` header, which the operation's `reply.address` points at) and
//! `correlationHeader`. A subscription declared with one of this crate's builders
//! (`QueueSubscription`, `FanoutSubscription`, `Responder`) describes its channel; one opened by a
//! bare name has no hook for it, and its server still says the socket pair and the side.
//!
//! # How the crate is built
//!
//! Each module imports only modules listed above it, so the layers read from the bottom up:
//!
//! 1. **Leaves**: `error`, `wire` (frames in and out, limits), `endpoint` (the side and
//!    mechanism typestates), `curve` (feature `libzmq`: CURVE keys, and the endpoint's CURVE
//!    steps; imports `endpoint`),
//!    `host` (this host's names, for the loop-back rule), `lane` (what a delivery's partition
//!    key is read from), `throttle` (one log line a burst of
//!    refusals), `monitor` (live figures), then
//!    `metrics` (feature `metrics`: the monitor's figures in a Prometheus registry; imports
//!    `monitor`).
//! 2. **Pure decisions**: [`routing`] (where a publish goes, what is refused), `pattern` (each
//!    pattern's sockets and admission rules, as data), `settings`, then `bindings` (feature
//!    `asyncapi`: the `x-zeromq` extensions of the document; imports `pattern`, `routing`, `wire`).
//! 3. **Transport**: `transport::backend` is the contract a backend meets (`SocketBackend`:
//!    its reading, writing and duplex sockets, what each can do, its options); the `zeromq`
//!    client's module and libzmq's (with the CURVE authentication handler) each implement it
//!    once, and only they name their client's types. A connection holds the backend erased
//!    (`Transport`), so nothing above names one. Above the backends, `writer` (a sending
//!    socket's task), `duplex` (a ROUTER's or DEALER's task, one loop for every backend: what it
//!    takes and hands on, and the sends and reads that skip it), `requesters` (a ROUTER's
//!    requesters that stop reading) and `reading_end` (a socket read by its subscription, in the
//!    handler's task) are the same for all. Under the `testing` feature, the in-process bus
//!    stands in for them.
//! 4. **Intake and requests**: `message` (a delivery), `intake` (reading, decoding, refusing,
//!    and how a responder answers each requester), `requests` (the DEALER's requests in flight);
//!    each built from the transport and the settings.
//! 5. **Connection**: `outbound` (writers, sends, answers), then `connection` (who holds the
//!    endpoint, subscribe, publish, shutdown).
//! 6. **What a service uses**: `context` (what a handler reads of its delivery), `delivery`
//!    (subscribers), `publish`, `broker`, `subscription`, `rpc`, `readiness` (the runtime's
//!    health probe with the monitors' peers), then [`zeromq`] and
//!    [`libzmq`] (the brokers pinned to each backend, and libzmq's own settings).
//! 7. **`testing`** (feature `testing`): the framework's `InProcess` and `TestableBroker` impls;
//!    no other module names it.
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

// The layers are drawn in the crate docs above (rustfmt keeps these sorted by name).
mod assertions;
#[cfg(feature = "asyncapi")]
mod bindings;
mod broker;
mod connection;
mod context;
#[cfg(feature = "libzmq")]
mod curve;
mod delivery;
mod endpoint;
mod error;
mod host;
mod intake;
mod lane;
#[cfg(feature = "libzmq")]
pub mod libzmq;
mod message;
#[cfg(feature = "metrics")]
mod metrics;
mod monitor;
mod outbound;
mod pattern;
mod publish;
mod readiness;
mod requests;
pub mod routing;
mod rpc;
mod settings;
mod subscription;
#[cfg(feature = "testing")]
mod testing;
mod throttle;
mod transport;
pub mod wire;
#[cfg(feature = "zeromq")]
pub mod zeromq;

#[cfg(not(any(feature = "zeromq", feature = "libzmq")))]
compile_error!(
    "ruststream-zmq needs a socket backend: turn on the `zeromq` feature (the default) or `libzmq`"
);

pub use broker::{
    ClosedZmqBroker, ConnectedZmq, ConnectedZmqFanout, ConnectedZmqQueue, ConnectedZmqRpc,
    FanoutKind, OneWay, Pattern, QueueKind, RpcKind, ZmqBroker, ZmqFanout, ZmqQueue, ZmqRpc,
};
pub use context::{Attempt, MessageName, RequesterIdentity, SubscriptionEndpoint, ZmqContext};
#[cfg(feature = "libzmq")]
pub use curve::{Curve, CurveKeyPair, CurvePublicKey, WantsClients};
pub use delivery::{ZmqResponderSubscriber, ZmqSubscriber};
pub use endpoint::{
    Bound, Dialing, Mechanism, Plain, Ready, Side, WantsRetryDestination, ZmqEndpoint,
};
pub use error::{SocketFault, ZmqError};
pub use lane::PARTITION_KEY_HEADER;
pub use message::ZmqMessage;
pub use monitor::{SocketSummary, SocketUse, ZmqMonitor};
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
        RequesterIdentity, Responder, Side, SubscriptionEndpoint, ToRequester, Tune, WireLimits,
        ZmqContext, ZmqEndpoint, ZmqError, ZmqFanout, ZmqMessage, ZmqMonitor, ZmqQueue, ZmqRpc,
    };
    pub use crate::{ZmqPublish as Publish, ZmqRequest as Request};
}
