//! Settlement as a checked model (issue 6): a model of the transport's settlement and routing
//! rules, and properties that hold the crate's pure decisions and its real brokers to it.
//!
//! - `model`: what becomes of a delivery and where a publish leaves, from the rules alone;
//! - `routing_props`: `route`, `route_responder` and `dead_letter_fate`
//!   (`ruststream_zmq::routing`) against the model, for every declaration combination;
//! - `wire_props`: the wire format reads back what it writes and survives any frames;
//! - `live_props`: every declaration of the real queue, fan-out and responder, bound and
//!   dialing, over loopback, with fixed and random settlement plans, against the model; on each
//!   compiled backend (`on_zeromq::live_props`, `on_libzmq::live_props`).
//!
//! `RUSTSTREAM_ZMQ_PROPTEST_CASES` sets how many sets of random plans each live declaration runs
//! (1 by default; every declaration combination runs every time);
//! `RUSTSTREAM_ZMQ_MODEL_TRACE=1` prints each live case with the journeys the model expected.

// The live properties' file is a module of each backend's: loaded twice, on purpose.
#![allow(clippy::duplicate_mod)]

mod model;
#[path = "../common/poll.rs"]
mod poll;
#[path = "../common/ports.rs"]
mod ports;
mod routing_props;
mod wire_props;

/// The live properties on the pure-Rust `zeromq` client.
#[cfg(feature = "zeromq")]
#[path = "."]
mod on_zeromq {
    pub(crate) use ruststream_zmq::zeromq::prelude;

    mod live_props;
}

/// The live properties on libzmq.
#[cfg(feature = "libzmq")]
#[path = "."]
mod on_libzmq {
    pub(crate) use ruststream_zmq::libzmq::prelude;

    mod live_props;
}

/// The live properties on omq.
#[cfg(feature = "omq")]
#[path = "."]
mod on_omq {
    pub(crate) use ruststream_zmq::omq::prelude;

    mod live_props;
}
