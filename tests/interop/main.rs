//! Interop tests: this crate's sockets against libzmq peers (pyzmq, run as child processes by
//! `peer.py`), and against peers that break the wire format on purpose.
//!
//! Every scenario runs once per compiled backend, its file included in `on_zeromq` and in
//! `on_libzmq` (each with its backend's prelude and `BACKEND`); what only one backend has (the
//! `zeromq` client's faults, libzmq's CURVE and its own faults) is in that backend's module alone.
//!
//! The Python interpreter comes from `RUSTSTREAM_ZMQ_PYTHON` (scripts/test.sh sets it up); without
//! it every test here fails, saying so.

// Each scenario's file is a module of each backend's: loaded twice, on purpose.
#![allow(clippy::duplicate_mod)]

#[path = "../common/backend.rs"]
mod backend;
mod support;

/// The scenarios on the pure-Rust `zeromq` client.
#[cfg(feature = "zeromq")]
#[path = "."]
mod on_zeromq {
    pub(crate) use ruststream_zmq::zeromq::{ZmqFanout, ZmqQueue, ZmqRpc, prelude};

    use crate::backend::Backend;

    pub(crate) const BACKEND: Backend = Backend::Zeromq;

    // The scenarios of every backend: the same list in every backend's module.
    mod fanout;
    mod flush;
    mod hostile;
    mod queue;
    mod restarts;
    mod rpc;
    mod stalled;
    mod stalled_requester;
    mod with_ruststream_zeromq;
    // The `zmqs` binary on this backend.
    #[cfg(feature = "cli")]
    mod cli;
    #[cfg(all(feature = "cli", feature = "metrics"))]
    mod cli_stat;

    // A message that never ends, held whole (omq cuts it: `on_omq::omq_faults`).
    mod endless_held;
    // What the `zeromq` client does with heartbeating libzmq peers; libzmq's counterparts are in
    // `on_libzmq::libzmq_faults`.
    mod heartbeat;
    // The attack the client itself does not survive.
    mod zeromq_faults;
}

/// The scenarios on libzmq.
#[cfg(feature = "libzmq")]
#[path = "."]
mod on_libzmq {
    pub(crate) use ruststream_zmq::libzmq::{ZmqFanout, ZmqQueue, ZmqRpc, prelude};

    use crate::backend::Backend;

    pub(crate) const BACKEND: Backend = Backend::Libzmq;

    // The scenarios of every backend: the same list in every backend's module.
    mod fanout;
    mod flush;
    mod hostile;
    mod queue;
    mod restarts;
    mod rpc;
    mod stalled;
    mod stalled_requester;
    mod with_ruststream_zeromq;
    // The `zmqs` binary on this backend.
    #[cfg(feature = "cli")]
    mod cli;
    #[cfg(all(feature = "cli", feature = "metrics"))]
    mod cli_stat;

    mod curve;
    // The authentication handler's thread, libzmq's alone.
    mod curve_zap;
    // A message that never ends, held whole (omq cuts it: `on_omq::omq_faults`).
    mod endless_held;
    // `zmqs keys`, and the binary's CURVE options.
    #[cfg(feature = "cli")]
    mod cli_curve;
    // An answer to a requester that left.
    mod gone_requester;
    mod libzmq_faults;
    // Heartbeats, a stopped peer, a silent one.
    mod liveness;
    // A stopped worker past libzmq's per-peer queue (`peer_queue`).
    mod stalled_past_the_peer_queue;
}

/// The scenarios on omq.
#[cfg(feature = "omq")]
#[path = "."]
mod on_omq {
    pub(crate) use ruststream_zmq::omq::{ZmqFanout, ZmqQueue, ZmqRpc, prelude};

    use crate::backend::Backend;

    pub(crate) const BACKEND: Backend = Backend::Omq;

    // The scenarios of every backend: the same list in every backend's module.
    mod fanout;
    mod flush;
    mod hostile;
    mod queue;
    mod restarts;
    mod rpc;
    mod stalled;
    mod stalled_requester;
    mod with_ruststream_zeromq;

    mod curve;
    // An answer to a requester that left.
    mod gone_requester;
    // Heartbeats, a stopped peer, a silent one.
    mod liveness;
    // Hostile peers against omq's limits and its ROUTER, speaking ZMTP by hand.
    mod omq_faults;
    // A stopped worker past the per-peer queue (`peer_queue`).
    mod stalled_past_the_peer_queue;
}
