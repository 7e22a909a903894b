//! The settings of the backends whose sockets take them, libzmq and omq (features `libzmq`,
//! `omq`): per-peer queues, heartbeats, the handshake timeout, and the CURVE keys toward
//! destinations. They do not compile on a broker of the `zeromq` backend, which has none of them.
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

use std::time::Duration;

#[cfg(doc)]
use crate::{WireLimits, ZmqError, ZmqMonitor};
use crate::{
    broker::{Pattern, ZmqBroker},
    curve::Curve,
    endpoint::{Dialing, Side, ZmqEndpoint},
    transport::{Backend, socket_config::Config},
};

impl<P: Pattern, S: Side, B: Backend<Config = Config>> ZmqBroker<P, S, B> {
    /// How many messages a socket queues for one peer, each way, before that peer counts as
    /// not reading (the high-water marks). A peer's queue holds at most this many messages;
    /// by default as many of [`WireLimits::max_message_bytes`] as fit in 64 MiB (1,000 of the
    /// default 64 KiB; 64 of 1 MiB), and at most 1,000. libzmq applies that limit to each
    /// frame and counts no frames, so there the queue bounds messages, not bytes
    /// ([`guide::security`](crate::guide::security)). A requester with more
    /// requests in flight than half its responder's queue may see answers dropped as not read.
    /// omq's queues hold a power of two: it rounds the queue up to one (1,000 to 1,024).
    /// What a full peer gets depends on the pattern: see [`guide::backpressure`](crate::guide::backpressure).
    ///
    /// ```
    /// use ruststream_zmq::{ZmqEndpoint, libzmq::ZmqQueue};
    ///
    /// // Small messages, a deep queue: 10,000 of at most 4 KiB a peer each way.
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
    /// whose host vanished is noticed and counted in [`ZmqMonitor::peers_lost`]. A libzmq or omq
    /// peer answers PINGs by itself.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ruststream_zmq::{ZmqEndpoint, libzmq::ZmqQueue};
    ///
    /// let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
    ///     .heartbeat(Duration::from_millis(500), Duration::from_secs(2));
    /// # let _ = broker;
    /// ```
    #[must_use]
    pub fn heartbeat(mut self, interval: Duration, timeout: Duration) -> Self {
        self.config.heartbeat = Some((interval, timeout));
        self
    }

    /// Sends no heartbeats: a silent peer keeps its connection until TCP notices.
    ///
    /// ```
    /// use ruststream_zmq::{ZmqEndpoint, libzmq::ZmqQueue};
    ///
    /// let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0")).without_heartbeat();
    /// # let _ = broker;
    /// ```
    #[must_use]
    pub fn without_heartbeat(mut self) -> Self {
        self.config.heartbeat = None;
        self
    }

    /// How long a new connection may take to finish its ZMTP handshake before it is cut
    /// (default 10 s): a peer that connects and says nothing holds no connection for longer.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ruststream_zmq::{ZmqEndpoint, libzmq::ZmqQueue};
    ///
    /// let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
    ///     .handshake_timeout(Duration::from_secs(3));
    /// # let _ = broker;
    /// ```
    #[must_use]
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.config.handshake_timeout = timeout;
        self
    }

    /// The CURVE keys this broker's sockets use toward another endpoint, where its
    /// `name@endpoint` destinations go (retry copies, dead letters): the client key pair this
    /// process shows there and that server's public key, given as a dialing endpoint with CURVE
    /// (the address as destinations name it). Given again for the same address, the last wins.
    ///
    /// A socket the broker dials takes the first of: the keys given here for its address; the
    /// endpoint's own client keys, where it dials the endpoint; this process's own key pair,
    /// where a CURVE listener of this process listens there (a queue the service binds for its
    /// own copies needs nothing here, and no other process's secret). On a broker whose
    /// endpoint speaks CURVE, a destination with none of these is refused at its first send
    /// ([`ZmqError::CurveDestination`]): nothing leaves in clear.
    ///
    /// ```
    /// use ruststream_zmq::{CurveKeyPair, ZmqEndpoint, libzmq::ZmqQueue};
    ///
    /// // A worker: its own key pair, the public keys of the ventilator and the sink.
    /// let worker = CurveKeyPair::generate().unwrap();
    /// let (vent, sink) = (
    ///     CurveKeyPair::generate().unwrap().public(),
    ///     CurveKeyPair::generate().unwrap().public(),
    /// );
    /// // Its jobs come from the ventilator; the results of those it gives up on go to
    /// // `failed@tcp://10.0.0.20:5571`, the sink's, which knows this worker by the same key.
    /// let jobs = ZmqEndpoint::dial("tcp://10.0.0.10:5550").curve(worker.clone(), vent);
    /// let failed = ZmqEndpoint::dial("tcp://10.0.0.20:5571").curve(worker, sink);
    /// let broker = ZmqQueue::new(jobs).destination(failed);
    /// # let _ = broker;
    /// ```
    #[must_use]
    pub fn destination(mut self, endpoint: ZmqEndpoint<Dialing, Curve>) -> Self {
        let (endpoint, curve) = endpoint.into_parts();
        self.config.destination(endpoint.address(), curve);
        self
    }
}
