//! Live tests: real sockets on loopback. One test binary, a module per topic, and every topic
//! once per compiled backend: `on_zeromq::queue_wire::...` runs on the pure-Rust client,
//! `on_libzmq::queue_wire::...` on libzmq. A topic's file is written once; it takes its brokers
//! from the backend's module (`super::prelude::*`, `super::ZmqQueue`) and reads `super::BACKEND`
//! where the two backends differ by design.

// Each topic's file is a module of each backend's: loaded twice, on purpose.
#![allow(clippy::duplicate_mod)]

#[path = "../common/backend.rs"]
mod backend;
#[path = "../common/memory.rs"]
mod memory;
mod support;

// The README's first service and the examples, once: they take no backend of the suite's.
mod examples;

// Brokers of both backends in one process, against each other.
#[cfg(all(feature = "zeromq", feature = "libzmq"))]
mod both_backends;
// CURVE between libzmq and omq brokers of one process.
#[cfg(all(feature = "libzmq", feature = "omq"))]
mod curve_across_backends;
// The health example as a process, once: it runs on the default backend.
#[cfg(feature = "zeromq")]
mod healthz_example;

/// The topics on the pure-Rust `zeromq` client.
#[cfg(feature = "zeromq")]
#[path = "."]
mod on_zeromq {
    pub(crate) use ruststream_zmq::zeromq::{ZmqFanout, ZmqQueue, ZmqRpc, prelude};

    use crate::backend::Backend;

    pub(crate) const BACKEND: Backend = Backend::Zeromq;
    /// A peer feeding a queue, on this backend.
    pub(crate) type Feeder = crate::support::Feeder<ruststream_zmq::zeromq::Zeromq>;

    /// A fan-out broker whose queue for each subscriber holds `messages`: the `zeromq` client's
    /// PUB queues 100,000 messages for each, and has no setting for it.
    pub(crate) fn with_subscriber_queue<S: ruststream_zmq::Side>(
        broker: ZmqFanout<S>,
        messages: usize,
    ) -> ZmqFanout<S> {
        assert!(messages <= 100_000, "the client's queue holds 100,000");
        broker
    }

    // The topics: the same list in both backends' modules.
    mod batches;
    mod closed;
    mod context;
    mod demo;
    mod dropped_broker;
    mod exposure;
    mod fanout;
    mod fleet;
    mod keyed;
    mod listening_at_start;
    mod loop_back;
    #[cfg(feature = "metrics")]
    mod metrics;
    mod queue_lifecycle;
    mod queue_settlement;
    mod queue_wire;
    mod read_ahead;
    mod readiness;
    mod readiness_handshake;
    mod requester;
    mod rpc;
    mod start_live;
    mod tuning;
    mod unreachable;
    mod wildcard;
}

/// The topics on libzmq.
#[cfg(feature = "libzmq")]
#[path = "."]
mod on_libzmq {
    pub(crate) use ruststream_zmq::libzmq::{ZmqFanout, ZmqQueue, ZmqRpc, prelude};

    use crate::backend::Backend;

    pub(crate) const BACKEND: Backend = Backend::Libzmq;
    /// A peer feeding a queue, on this backend.
    pub(crate) type Feeder = crate::support::Feeder<ruststream_zmq::libzmq::Libzmq>;

    /// A fan-out broker whose queue for each subscriber holds `messages`: libzmq's
    /// `peer_queue`, past which a PUB drops for that subscriber.
    pub(crate) fn with_subscriber_queue<S: ruststream_zmq::Side>(
        broker: ZmqFanout<S>,
        messages: usize,
    ) -> ZmqFanout<S> {
        broker.peer_queue(messages)
    }

    // The topics: the same list in both backends' modules.
    mod batches;
    mod closed;
    mod context;
    // CURVE is libzmq's and omq's: the `zeromq` copy has no CURVE broker to refuse.
    mod curve_copies_at_start;
    mod demo;
    mod dropped_broker;
    mod exposure;
    // CURVE is libzmq's and omq's: the `zeromq` copy has no such listener to say anything of.
    mod exposure_under_curve;
    mod fanout;
    mod fleet;
    mod keyed;
    mod listening_at_start;
    mod loop_back;
    #[cfg(feature = "metrics")]
    mod metrics;
    mod queue_lifecycle;
    mod queue_settlement;
    mod queue_wire;
    mod read_ahead;
    mod readiness;
    mod readiness_handshake;
    // CURVE is libzmq's and omq's.
    mod readiness_under_curve;
    mod requester;
    mod rpc;
    mod start_live;
    mod tuning;
    mod unreachable;
    mod wildcard;
}

/// The topics on omq.
#[cfg(feature = "omq")]
#[path = "."]
mod on_omq {
    pub(crate) use ruststream_zmq::omq::{ZmqFanout, ZmqQueue, ZmqRpc, prelude};

    use crate::backend::Backend;

    pub(crate) const BACKEND: Backend = Backend::Omq;
    /// A peer feeding a queue, on this backend.
    pub(crate) type Feeder = crate::support::Feeder<ruststream_zmq::omq::Omq>;

    /// A fan-out broker whose queue for each subscriber holds `messages`: omq's
    /// `peer_queue`, past which a PUB drops for that subscriber.
    pub(crate) fn with_subscriber_queue<S: ruststream_zmq::Side>(
        broker: ZmqFanout<S>,
        messages: usize,
    ) -> ZmqFanout<S> {
        broker.peer_queue(messages)
    }

    // The topics: the same list in both backends' modules.
    mod batches;
    mod closed;
    mod context;
    mod curve_copies_at_start;
    mod demo;
    mod dropped_broker;
    mod exposure;
    mod exposure_under_curve;
    mod fanout;
    mod fleet;
    mod keyed;
    mod listening_at_start;
    mod loop_back;
    #[cfg(feature = "metrics")]
    mod metrics;
    mod queue_lifecycle;
    mod queue_settlement;
    mod queue_wire;
    mod read_ahead;
    mod readiness;
    mod readiness_handshake;
    // CURVE is libzmq's and omq's.
    mod readiness_under_curve;
    mod requester;
    mod rpc;
    mod start_live;
    mod tuning;
    mod unreachable;
    mod wildcard;
}
