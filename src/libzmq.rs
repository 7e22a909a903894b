//! The brokers on libzmq (feature `libzmq`), the C library every pyzmq and C++ peer runs:
//! ZMTP heartbeats, per-peer queues, a handshake timeout, frames over the size limit refused
//! before they are allocated, and CURVE. The settings only this backend has are here, so they do
//! not compile on a broker of another.
//!
//! ```
//! use std::time::Duration;
//!
//! use ruststream_zmq::{ZmqEndpoint, libzmq::ZmqQueue};
//!
//! let exposed = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
//!     .peer_queue(100)
//!     .heartbeat(Duration::from_secs(1), Duration::from_secs(5));
//! # let _ = exposed;
//! ```

#[doc(inline)]
pub use crate::transport::libzmq::Libzmq;
use crate::{
    broker::{FanoutKind, QueueKind, RpcKind, ZmqBroker},
    endpoint::Bound,
};

/// The queue pattern on libzmq: [`ZmqQueue`](crate::ZmqQueue), pinned to this backend.
pub type ZmqQueue<S = Bound> = ZmqBroker<QueueKind, S, Libzmq>;
/// The fan-out pattern on libzmq: [`ZmqFanout`](crate::ZmqFanout), pinned to this backend.
pub type ZmqFanout<S = Bound> = ZmqBroker<FanoutKind, S, Libzmq>;
/// Request-reply on libzmq: [`ZmqRpc`](crate::ZmqRpc), pinned to this backend.
pub type ZmqRpc<S = Bound> = ZmqBroker<RpcKind, S, Libzmq>;

// Connected, a broker is the same type on every backend: `ConnectedZmqQueue` and its siblings.

/// The crate's [prelude](crate::prelude) with the brokers on libzmq: a routes file that imports
/// it runs there whatever else the build turns on, and may use libzmq's own settings.
///
/// ```
/// use std::time::Duration;
///
/// use ruststream_zmq::libzmq::prelude::*;
///
/// let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
///     .heartbeat(Duration::from_secs(1), Duration::from_secs(5));
/// # let _ = broker;
/// ```
pub mod prelude {
    pub use super::{ZmqFanout, ZmqQueue, ZmqRpc};
    pub use crate::prelude::*;
}
