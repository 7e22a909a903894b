//! Live tests: real sockets on loopback. One test binary, a module per topic.

mod support;

mod queue_settlement;
