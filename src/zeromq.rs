//! The brokers on the pure-Rust `zeromq` client (feature `zeromq`, on by default), pinned to
//! it: the crate root's names run here whenever this feature is on, and these stay here
//! whatever else a build turns on.
//!
//! ```
//! use ruststream_zmq::{ZmqEndpoint, zeromq::ZmqQueue};
//!
//! let loopback = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
//! # let _ = loopback;
//! ```

#[doc(inline)]
pub use crate::transport::zeromq::Zeromq;
use crate::{
    broker::{FanoutKind, QueueKind, RpcKind, ZmqBroker},
    endpoint::Bound,
};

/// The queue pattern on the `zeromq` client: [`ZmqQueue`](crate::ZmqQueue), pinned to it.
pub type ZmqQueue<S = Bound> = ZmqBroker<QueueKind, S, Zeromq>;
/// The fan-out pattern on the `zeromq` client: [`ZmqFanout`](crate::ZmqFanout), pinned to it.
pub type ZmqFanout<S = Bound> = ZmqBroker<FanoutKind, S, Zeromq>;
/// Request-reply on the `zeromq` client: [`ZmqRpc`](crate::ZmqRpc), pinned to it.
pub type ZmqRpc<S = Bound> = ZmqBroker<RpcKind, S, Zeromq>;

// Connected, a broker is the same type on every backend: `ConnectedZmqQueue` and its siblings.

/// The crate's [prelude](crate::prelude) with the brokers on the `zeromq` client: a routes file
/// that imports it runs there whatever else the build turns on.
///
/// ```
/// use ruststream_zmq::zeromq::prelude::*;
///
/// let broker: ruststream_zmq::zeromq::ZmqQueue =
///     ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
/// # let _ = broker;
/// ```
pub mod prelude {
    pub use super::{ZmqFanout, ZmqQueue, ZmqRpc};
    pub use crate::prelude::*;
}
