//! Readiness: the runtime's [`HealthProbe`] and the peers the brokers have, in one answer a
//! `/healthz` or `/readyz` route can give.
//!
//! The runtime reports whether the service runs and how many subscriptions consume; it cannot
//! know whether a dialing ZeroMQ socket has a peer at all, which only the broker's
//! [`ZmqMonitor`] sees. The decision is [`verdict`], a pure function of the two.

use std::fmt;

use ruststream::runtime::{HealthProbe, HealthState, SubscriptionCount};

use crate::monitor::ZmqMonitor;

/// Whether a service is ready for work: it runs, every subscription it started still consumes,
/// and each broker it needs a peer on has one. The runtime's [`HealthProbe`] answers the first
/// two, as the framework's `http_outbox` example does on `/healthz`; the [`ZmqMonitor`]s the third.
///
/// ```no_run
/// use ruststream_zmq::{Readiness, ZmqEndpoint, ZmqQueue};
/// use ruststream::runtime::{App, AppInfo, RustStream};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let broker = ZmqQueue::new(ZmqEndpoint::dial("tcp://ledger:5555"));
/// let monitor = broker.monitor();
/// let running = RustStream::new(AppInfo::new("ledger", "0.1.0"))
///     .with_broker(broker, |_b| {})
///     .start()
///     .await?;
/// let readiness = Readiness::new(running.health()).needs_peer(monitor);
/// match readiness.check() {
///     Ok(()) => println!("200 ready"),
///     Err(why) => println!("503 {why}"),
/// }
/// # Ok(())
/// # }
/// ```
///
/// `examples/healthz.rs` serves it on a `/healthz` route.
#[derive(Debug, Clone)]
pub struct Readiness {
    health: HealthProbe,
    peers: Vec<ZmqMonitor>,
}

impl Readiness {
    /// Ready while the service the probe watches runs with every subscription consuming.
    #[must_use]
    pub fn new(health: HealthProbe) -> Self {
        Self {
            health,
            peers: Vec::new(),
        }
    }

    /// Ready only while the broker `monitor` watches has a peer connected, counted once its
    /// handshake succeeded (a listener that accepts and says nothing, or a CURVE peer of another
    /// key, is none): for a broker that dials, or a bound one that is useless until a peer dials
    /// in.
    #[must_use]
    pub fn needs_peer(mut self, monitor: ZmqMonitor) -> Self {
        self.peers.push(monitor);
        self
    }

    /// Ready, or why not.
    ///
    /// # Errors
    ///
    /// [`NotReady`] naming the first reason: the service's state, a subscription that ended,
    /// or an endpoint with no peer.
    pub fn check(&self) -> Result<(), NotReady> {
        let peers: Vec<(&str, u64)> = self
            .peers
            .iter()
            .map(|monitor| (monitor.endpoint(), monitor.peers_connected()))
            .collect();
        verdict(&self.health.state(), self.health.subscriptions(), &peers)
    }

    /// Whether [`check`](Self::check) answers ready.
    #[must_use]
    pub fn is_ready(&self) -> bool {
        self.check().is_ok()
    }
}

/// Why a service is not ready.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotReady {
    /// The service is not running (starting up is not seen here: `start` resolves once
    /// subscriptions are open).
    NotRunning(HealthState),
    /// A subscription's stream ended while the service runs.
    SubscriptionEnded {
        /// The subscriptions consuming.
        active: usize,
        /// The subscriptions the service started.
        started: usize,
    },
    /// A broker that needs a peer has none connected.
    NoPeer {
        /// Its endpoint, as configured.
        endpoint: String,
    },
}

impl fmt::Display for NotReady {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotRunning(state) => write!(f, "the service is not running: {state:?}"),
            Self::SubscriptionEnded { active, started } => {
                write!(f, "{active} of {started} subscriptions consume")
            }
            Self::NoPeer { endpoint } => write!(f, "no peer is connected on `{endpoint}`"),
        }
    }
}

impl std::error::Error for NotReady {}

/// The readiness of a service in `state` with `subscriptions`, whose brokers that need a peer
/// have `peers` connected each (by endpoint).
pub(crate) fn verdict(
    state: &HealthState,
    subscriptions: SubscriptionCount,
    peers: &[(&str, u64)],
) -> Result<(), NotReady> {
    if !state.is_running() {
        return Err(NotReady::NotRunning(state.clone()));
    }
    let SubscriptionCount {
        active, started, ..
    } = subscriptions;
    if active < started {
        return Err(NotReady::SubscriptionEnded { active, started });
    }
    match peers.iter().find(|(_, connected)| *connected == 0) {
        Some((endpoint, _)) => Err(NotReady::NoPeer {
            endpoint: (*endpoint).to_owned(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runtime's count: `SubscriptionCount` is non-exhaustive, so set its fields.
    fn consuming(active: usize, started: usize) -> SubscriptionCount {
        let mut count = SubscriptionCount::default();
        count.active = active;
        count.started = started;
        count
    }

    #[test]
    fn ready_only_running_with_every_subscription_and_a_peer_where_one_is_needed() {
        let all = consuming(3, 3);
        assert_eq!(verdict(&HealthState::Running, all, &[]), Ok(()));
        // One of three ended: not ready, though it runs and every peer is there.
        assert_eq!(
            verdict(&HealthState::Running, consuming(2, 3), &[("tcp://a:1", 1)]),
            Err(NotReady::SubscriptionEnded {
                active: 2,
                started: 3
            })
        );
        assert_eq!(
            verdict(&HealthState::Running, consuming(0, 1), &[]),
            Err(NotReady::SubscriptionEnded {
                active: 0,
                started: 1
            })
        );
        assert_eq!(
            verdict(&HealthState::Running, consuming(0, 0), &[]),
            Ok(()),
            "a service that started no subscription lacks none"
        );
        assert_eq!(
            verdict(&HealthState::Running, all, &[("tcp://a:1", 2)]),
            Ok(())
        );
        assert_eq!(
            verdict(
                &HealthState::Running,
                all,
                &[("tcp://a:1", 1), ("tcp://b:2", 0)]
            ),
            Err(NotReady::NoPeer {
                endpoint: "tcp://b:2".into()
            })
        );
        assert_eq!(
            verdict(&HealthState::ShuttingDown, all, &[("tcp://a:1", 1)]),
            Err(NotReady::NotRunning(HealthState::ShuttingDown))
        );
    }
}
