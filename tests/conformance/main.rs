//! The framework's conformance suites (`ruststream::conformance`), in process and live over
//! loopback, for every pattern and both sides where a suite takes them. The live suites run once
//! per compiled backend (`on_zeromq::live`, `on_libzmq::live`, `on_omq::live`); what runs in process, or only
//! describes a service, runs once.

// The live suites' file is a module of each backend's: loaded twice, on purpose.
#![allow(clippy::duplicate_mod)]

#[cfg(feature = "asyncapi")]
mod credentials;
#[cfg(feature = "asyncapi")]
mod document;
mod in_process;
mod test_app;

/// The live suites on the pure-Rust `zeromq` client.
#[cfg(feature = "zeromq")]
#[path = "."]
mod on_zeromq {
    pub(crate) use ruststream_zmq::zeromq::{ZmqFanout, ZmqQueue, ZmqRpc};

    mod live;
}

/// The live suites on libzmq.
#[cfg(feature = "libzmq")]
#[path = "."]
mod on_libzmq {
    pub(crate) use ruststream_zmq::libzmq::{ZmqFanout, ZmqQueue, ZmqRpc};

    mod live;
}

/// The live suites on omq.
#[cfg(feature = "omq")]
#[path = "."]
mod on_omq {
    pub(crate) use ruststream_zmq::omq::{ZmqFanout, ZmqQueue, ZmqRpc};

    mod live;
}
