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
//!
//! Imports: `broker`, `endpoint`, `pattern` and `transport` (its backend's marker); its
//! [`prelude`] imports the crate's.

use std::time::Duration;

#[doc(inline)]
pub use crate::transport::libzmq::Libzmq;
#[cfg(doc)]
use crate::{WireLimits, ZmqMonitor};
use crate::{
    broker::{FanoutKind, Pattern, QueueKind, RpcKind, ZmqBroker},
    endpoint::{Bound, Side},
};

/// The queue pattern on libzmq: [`ZmqQueue`](crate::ZmqQueue), pinned to this backend.
pub type ZmqQueue<S = Bound> = ZmqBroker<QueueKind, S, Libzmq>;
/// The fan-out pattern on libzmq: [`ZmqFanout`](crate::ZmqFanout), pinned to this backend.
pub type ZmqFanout<S = Bound> = ZmqBroker<FanoutKind, S, Libzmq>;
/// Request-reply on libzmq: [`ZmqRpc`](crate::ZmqRpc), pinned to this backend.
pub type ZmqRpc<S = Bound> = ZmqBroker<RpcKind, S, Libzmq>;

// Connected, a broker is the same type on every backend: `ConnectedZmqQueue` and its siblings.

impl<P: Pattern, S: Side> ZmqBroker<P, S, Libzmq> {
    /// How many messages a socket queues for one peer, each way, before that peer counts as
    /// not reading (libzmq's high-water marks). A peer's queue holds at most this many messages
    /// of at most [`WireLimits::max_message_bytes`] each; by default as many as fit in 64 MiB
    /// (1,000 of the default 64 KiB; 64 of 1 MiB), and at most 1,000. A requester with more
    /// requests in flight than half its responder's queue may see answers dropped as not read. What a full peer gets depends on the
    /// pattern: see the README, "When a peer is down or does not read".
    ///
    /// ```
    /// use ruststream_zmq::{ZmqEndpoint, libzmq::ZmqQueue};
    ///
    /// // Small messages, a deep queue: 10,000 of at most 4 KiB, 40 MiB a peer each way.
    /// let queue = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
    ///     .limits(ruststream_zmq::WireLimits::default().max_message_bytes(4 << 10))
    ///     .peer_queue(10_000);
    /// # let _ = queue;
    /// ```
    #[must_use]
    pub fn peer_queue(mut self, messages: usize) -> Self {
        self.config.peer_queue = Some(messages.max(1));
        self
    }

    /// Checks every connection with a ZMTP PING each `interval`, and cuts one that stays
    /// silent for `timeout` (default every 2 s, cut after 10 s): a peer that stopped or
    /// whose host vanished is noticed and counted in [`ZmqMonitor::peers_lost`]. A libzmq
    /// peer answers PINGs by itself.
    #[must_use]
    pub fn heartbeat(mut self, interval: Duration, timeout: Duration) -> Self {
        self.config.heartbeat = Some((interval, timeout));
        self
    }

    /// Sends no heartbeats: a silent peer keeps its connection until TCP notices.
    #[must_use]
    pub fn without_heartbeat(mut self) -> Self {
        self.config.heartbeat = None;
        self
    }

    /// How long a new connection may take to finish its ZMTP handshake before it is cut
    /// (default 10 s): a peer that connects and says nothing holds no connection for longer.
    #[must_use]
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.config.handshake_timeout = timeout;
        self
    }
}

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
