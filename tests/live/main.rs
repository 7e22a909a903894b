//! Live tests: real sockets on loopback. One test binary, a module per topic.

mod support;

mod batches;
#[cfg(all(feature = "zeromq", feature = "libzmq"))]
mod both_backends;
mod context;
mod dropped_broker;
mod fanout;
mod fleet;
mod loop_back;
#[cfg(feature = "metrics")]
mod metrics;
mod queue_lifecycle;
mod queue_settlement;
mod queue_wire;
mod requester;
mod rpc;
mod start_live;
mod tuning;
mod unreachable;
mod wildcard;
