//! The socket settings of the backends that have their own (libzmq, omq): how many messages a
//! socket queues for one peer, heartbeats, the handshake timeout, and the CURVE keys of the
//! endpoint and its destinations. Each such backend reads the same settings, so a broker moves
//! between them by its type alone.

use std::time::Duration;

use super::curve_keys::Keys;
use crate::{
    curve::Curve,
    error::{SendFailure, ZmqError},
};

/// What a broker on a backend with socket options of its own sets (libzmq, omq): its per-peer
/// queue, heartbeat, handshake timeout and CURVE keys.
#[derive(Debug, Clone)]
pub struct Config {
    /// How many messages a socket queues for one peer, each way; by default as many of the
    /// largest a peer may send as [`PEER_BUDGET`] holds.
    pub(crate) peer_queue: Option<usize>,
    /// How often a connection is checked with a PING, and how long it may stay silent after
    /// one before it is cut; none when off.
    pub(crate) heartbeat: Option<(Duration, Duration)>,
    /// How long a new connection may take to finish its handshake before it is cut.
    pub(crate) handshake_timeout: Duration,
    /// The CURVE keys of the endpoint, and of destinations.
    pub(crate) keys: Keys,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            peer_queue: None,
            heartbeat: Some((Duration::from_secs(2), Duration::from_secs(10))),
            handshake_timeout: Duration::from_secs(10),
            keys: Keys::default(),
        }
    }
}

impl Config {
    /// How many messages a socket queues for one peer, each way, where a peer may send messages
    /// of up to `message_bytes`: as set, or as many as [`PEER_BUDGET`] holds.
    pub(crate) fn peer_queue_for(&self, message_bytes: usize) -> usize {
        self.peer_queue
            .unwrap_or_else(|| peer_queue_within(PEER_BUDGET, message_bytes))
    }

    /// The endpoint at `address` speaks CURVE with `curve`.
    pub(crate) fn secure_endpoint(&mut self, address: &str, curve: Curve) {
        self.keys.secure_endpoint(address, curve);
    }

    /// The keys the broker's sockets dial `address` with: a dialing endpoint's CURVE.
    pub(crate) fn destination(&mut self, address: &str, curve: Curve) {
        self.keys.destination(address, curve);
    }
}

/// Why a send to `endpoint` did not leave by its deadline, on a socket that queues `peer_queue`
/// messages for each peer: its peer, if `reached`, is not reading; else there is none.
pub(crate) fn not_taken(endpoint: &str, reached: bool, peer_queue: usize) -> ZmqError {
    let why = if reached {
        SendFailure::NotReading(format!(
            "the peer is not reading: its queue of {peer_queue} messages is full"
        ))
    } else {
        SendFailure::NoPeer("no peer is connected".to_owned())
    };
    ZmqError::Send {
        endpoint: endpoint.to_owned(),
        source: why,
    }
}

/// The bytes a socket queues for one peer each way, by default: the per-peer queue holds as many
/// messages of the largest size a peer may send.
pub(crate) const PEER_BUDGET: usize = 64 << 20;

/// The most messages a per-peer queue holds by default, however small the largest message.
const PEER_QUEUE_MOST: usize = 1_000;

/// How many messages of up to `message_bytes` fit in `budget`: at least 1, at most
/// [`PEER_QUEUE_MOST`].
pub(crate) fn peer_queue_within(budget: usize, message_bytes: usize) -> usize {
    (budget / message_bytes.max(1)).clamp(1, PEER_QUEUE_MOST)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_queue_holds_the_budget_in_messages_of_the_largest_size() {
        assert_eq!(peer_queue_within(PEER_BUDGET, 64 << 10), 1_000);
        assert_eq!(peer_queue_within(PEER_BUDGET, 1 << 20), 64);
        assert_eq!(peer_queue_within(PEER_BUDGET, 8 << 20), 8);
        assert_eq!(peer_queue_within(PEER_BUDGET, 128 << 20), 1, "never none");
        assert_eq!(
            peer_queue_within(PEER_BUDGET, 16),
            1_000,
            "never past the most"
        );
    }
}
