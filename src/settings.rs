//! What a broker is configured with besides its endpoint and pattern.

use std::time::Duration;

use crate::{lane::LaneKey, wire::WireLimits};

/// A broker's settings, copied into every part that acts on them.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub(crate) limits: WireLimits,
    /// How long a publish (or a request's send) waits for a peer when none is connected.
    pub(crate) send_timeout: Duration,
    /// How long a graceful shutdown waits for each sending socket to hand on what it queued.
    pub(crate) linger: Duration,
    /// How long a partial batch waits for more messages, unless a subscription says.
    pub(crate) batch_wait: Duration,
    /// How many messages read from the socket wait for the handler before the socket stops
    /// being read, unless a subscription says.
    pub(crate) read_ahead: usize,
    /// What deliveries are keyed by, unless a subscription says.
    pub(crate) lane_key: LaneKey,
}

/// What one subscription sets for itself; what it leaves unset comes from its broker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tuning {
    pub(crate) read_ahead: Option<usize>,
    pub(crate) batch_wait: Option<Duration>,
    pub(crate) lane_key: Option<LaneKey>,
}

impl Settings {
    /// The read-ahead and batch wait of a subscription tuned with `tuning`.
    pub(crate) fn tuned(&self, tuning: Tuning) -> (usize, Duration) {
        (
            tuning.read_ahead.unwrap_or(self.read_ahead).max(1),
            tuning.batch_wait.unwrap_or(self.batch_wait),
        )
    }

    /// What the deliveries of a subscription tuned with `tuning` are keyed by.
    pub(crate) fn lane_key(&self, tuning: Tuning) -> LaneKey {
        tuning.lane_key.unwrap_or(self.lane_key)
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            limits: WireLimits::default(),
            send_timeout: Duration::from_secs(5),
            linger: Duration::from_secs(2),
            batch_wait: Duration::from_millis(20),
            read_ahead: 256,
            lane_key: LaneKey::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subscription_tunes_what_it_sets_and_takes_the_rest_from_its_broker() {
        let broker = Settings::default();
        assert_eq!(
            broker.tuned(Tuning::default()),
            (broker.read_ahead, broker.batch_wait)
        );
        let tuned = Tuning {
            read_ahead: Some(1_024),
            batch_wait: None,
            lane_key: None,
        };
        assert_eq!(broker.tuned(tuned), (1_024, broker.batch_wait));
        let waits = Tuning {
            read_ahead: None,
            batch_wait: Some(Duration::from_secs(2)),
            lane_key: None,
        };
        assert_eq!(
            broker.tuned(waits),
            (broker.read_ahead, Duration::from_secs(2))
        );
        // A channel of no room would never hand anything over.
        let none = Tuning {
            read_ahead: Some(0),
            batch_wait: None,
            lane_key: None,
        };
        assert_eq!(broker.tuned(none).0, 1);
    }
}
