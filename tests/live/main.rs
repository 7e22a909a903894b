//! Live tests: real sockets on loopback. One test binary, a module per topic.

mod support;

mod batches;
mod dropped_broker;
mod fanout;
mod loop_back;
mod queue_lifecycle;
mod queue_settlement;
mod queue_wire;
mod requester;
mod rpc;
mod unreachable;
mod wildcard;
