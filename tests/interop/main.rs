//! Interop tests: this crate's sockets against libzmq peers (pyzmq, run as child processes by
//! `peer.py`), and against peers that break the wire format on purpose.
//!
//! The Python interpreter comes from `RUSTSTREAM_ZMQ_PYTHON` (scripts/test.sh sets it up); without
//! it every test here fails, saying so.

mod support;

#[cfg(not(feature = "zeromq"))]
mod curve;
mod fanout;
// What the `zeromq` client does with heartbeating peers; libzmq's counterparts are in
// `libzmq_faults`.
#[cfg(feature = "zeromq")]
mod heartbeat;
mod hostile;
#[cfg(not(feature = "zeromq"))]
mod libzmq_faults;
mod queue;
mod restarts;
mod rpc;
mod stalled;
mod with_ruststream_zeromq;
