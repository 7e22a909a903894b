//! Who an omq socket is connected to: its monitor's events, read by a task of its own. A peer
//! counts once its handshake is done (CURVE and the allow-list included), not at TCP connect.

use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicUsize, Ordering},
};

use omq_tokio::{DisconnectReason, MonitorEvent, MonitorRecvError, MonitorStream};
use tokio::sync::Notify;

use crate::{monitor::ZmqMonitor, pattern::Role};

/// What a socket's monitor reports that the transport acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Event {
    /// A peer finished its handshake: messages flow.
    Ready,
    /// A peer that was ready left; `ours` when this side closed it.
    Lost {
        ours: bool,
    },
    /// A connection failed its handshake: a protocol error, a refused key, a timeout.
    Refused(String),
    /// The server refused this dialing socket's credentials: omq does not dial it again.
    Stopped(String),
    /// The socket is gone.
    Closed,
    Other,
}

impl Event {
    /// Reads one of omq's events.
    pub(super) fn of(event: &MonitorEvent) -> Self {
        match event {
            MonitorEvent::HandshakeSucceeded { .. } => Self::Ready,
            MonitorEvent::Disconnected { reason, .. } => Self::Lost {
                ours: matches!(reason, DisconnectReason::LocalClose),
            },
            MonitorEvent::HandshakeFailed { reason, .. } => Self::Refused(reason.clone()),
            MonitorEvent::ConnectStopped { reason, .. } => Self::Stopped(format!("{reason:?}")),
            MonitorEvent::Closed => Self::Closed,
            _ => Self::Other,
        }
    }
}

/// Who a socket is connected to, kept up to date by a task that reads its monitor.
pub(super) struct Watched {
    /// Peers through their handshake.
    ready: AtomicUsize,
    /// Whether a peer was ever lost: on a dialing socket, the next one is a reconnect.
    ever_lost: AtomicBool,
    /// Wakes whoever waits for a peer.
    pub(super) changed: Notify,
}

impl Watched {
    /// Starts the watcher of the socket whose monitor is `events`, counting on `monitor`. The
    /// stream is taken before the socket binds or dials, so that no event is missed.
    pub(super) fn start(
        mut events: MonitorStream,
        role: Role,
        address: &str,
        binds: bool,
        monitor: ZmqMonitor,
    ) -> Arc<Self> {
        let watched = Arc::new(Self {
            ready: AtomicUsize::new(0),
            ever_lost: AtomicBool::new(false),
            changed: Notify::new(),
        });
        let watcher = Arc::clone(&watched);
        let address = address.to_owned();
        tokio::spawn(async move {
            loop {
                let event = match events.recv().await {
                    Ok(event) => Event::of(&event),
                    // The stream holds thousands of events: only a runtime stalled for long
                    // falls behind, and the figures then miss what it skipped.
                    Err(MonitorRecvError::Lagged(skipped)) => {
                        tracing::debug!(endpoint = %address, socket = role.name(), skipped, "the socket's monitor fell behind");
                        continue;
                    }
                    Err(_) => Event::Closed,
                };
                let closed = event == Event::Closed;
                watcher.take(event, role, &address, binds, &monitor);
                if closed {
                    return;
                }
            }
        });
        watched
    }

    fn take(&self, event: Event, role: Role, address: &str, binds: bool, monitor: &ZmqMonitor) {
        match event {
            Event::Ready => {
                self.ready.fetch_add(1, Ordering::AcqRel);
                monitor.count_peer_connected();
                if !binds && self.ever_lost.load(Ordering::Acquire) {
                    monitor.count_reconnect();
                }
            }
            Event::Lost { ours } => {
                let _ = self
                    .ready
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
                self.ever_lost.store(true, Ordering::Release);
                if !ours {
                    monitor.count_peer_lost();
                    monitor.count_peer_disconnected();
                    if binds {
                        tracing::debug!(endpoint = %address, socket = role.name(), "a peer left");
                    } else {
                        tracing::info!(endpoint = %address, socket = role.name(), "the peer went away; reconnecting");
                    }
                }
            }
            Event::Refused(reason) => {
                monitor.count_peer_refused();
                tracing::debug!(endpoint = %address, socket = role.name(), reason, "a peer failed its handshake");
            }
            // Once a socket: only the server this socket dials can cause it.
            Event::Stopped(reason) => tracing::warn!(
                endpoint = %address,
                socket = role.name(),
                reason,
                "the server refused this socket's credentials, and it does not dial again: check \
                 that its CURVE key is on the server's allow-list, then restart the service"
            ),
            Event::Closed | Event::Other => {}
        }
        self.changed.notify_waiters();
    }

    /// Peers through their handshake now.
    pub(super) fn ready(&self) -> usize {
        self.ready.load(Ordering::Acquire)
    }

    /// Waits until `done` holds of the socket's ready peers.
    pub(super) async fn until(&self, done: impl Fn(usize) -> bool) {
        loop {
            // Enabled before the check, so that a change between the two is not missed.
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if done(self.ready()) {
                return;
            }
            changed.await;
        }
    }
}
