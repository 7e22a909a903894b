//! The brokers on omq (feature `omq`), a pure-Rust ZeroMQ: ZMTP heartbeats, per-peer queues, a
//! handshake timeout, messages over the size limit refused as they arrive, and CURVE, with
//! nothing to install. They take the same settings as the brokers on libzmq.
//!
//! ```
//! use std::time::Duration;
//!
//! use ruststream_zmq::{ZmqEndpoint, omq::ZmqQueue};
//!
//! let exposed = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
//!     .peer_queue(100)
//!     .heartbeat(Duration::from_secs(1), Duration::from_secs(5));
//! # let _ = exposed;
//! ```

#[doc(inline)]
pub use crate::transport::omq::Omq;
use crate::{
    broker::{FanoutKind, QueueKind, RpcKind, ZmqBroker},
    endpoint::Bound,
};

/// The queue pattern on omq: [`ZmqQueue`](crate::ZmqQueue), pinned to this backend.
pub type ZmqQueue<S = Bound> = ZmqBroker<QueueKind, S, Omq>;
/// The fan-out pattern on omq: [`ZmqFanout`](crate::ZmqFanout), pinned to this backend.
pub type ZmqFanout<S = Bound> = ZmqBroker<FanoutKind, S, Omq>;
/// Request-reply on omq: [`ZmqRpc`](crate::ZmqRpc), pinned to this backend.
pub type ZmqRpc<S = Bound> = ZmqBroker<RpcKind, S, Omq>;

// Connected, a broker is the same type on every backend: `ConnectedZmqQueue` and its siblings.

/// The crate's [prelude](crate::prelude) with the brokers on omq: a routes file that imports it
/// runs there whatever else the build turns on, and may use the settings omq shares with libzmq.
///
/// ```
/// use std::time::Duration;
///
/// use ruststream_zmq::omq::prelude::*;
///
/// let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
///     .heartbeat(Duration::from_secs(1), Duration::from_secs(5));
/// # let _ = broker;
/// ```
pub mod prelude {
    pub use super::{ZmqFanout, ZmqQueue, ZmqRpc};
    pub use crate::prelude::*;
}
