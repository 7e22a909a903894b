//! Who a libzmq socket is connected to: its monitor's events, read by a thread of its own. A
//! peer counts in [`ZmqMonitor::peers_connected`] once its handshake succeeded (CURVE and the
//! allow-list included), not at TCP connect or accept: a silent listener, or a CURVE peer with
//! another key, is never a peer.

use std::sync::{
    Arc, Mutex, PoisonError,
    atomic::{AtomicU64, Ordering},
};

use tokio::sync::Notify;

use super::{CONTEXT, resumed};
use crate::{monitor::ZmqMonitor, pattern::Role};

/// Numbers the monitor endpoints, which are process-wide names.
static MONITORS: AtomicU64 = AtomicU64::new(0);

/// What a socket's monitor reports that the transport acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Event {
    /// A connection opened: accepted on a bound socket, made by a dialing one.
    Opened,
    /// A connection finished its handshake: messages flow.
    Ready,
    /// A connection closed.
    Closed,
    /// A connection failed its handshake: a protocol error, or (`auth`) refused credentials.
    Refused {
        auth: bool,
    },
    /// A listener closed: its address is free again.
    ListenerClosed,
    /// The socket is gone: the monitor says nothing more.
    Stopped,
    Other,
}

impl Event {
    /// Reads a monitor message by its first frame: the event (16 bits), then a value.
    fn parse(first: &[u8]) -> Self {
        let [low, high, ..] = *first else {
            return Self::Other;
        };
        let code = u16::from_le_bytes([low, high]);
        use zmq::SocketEvent as E;
        match code {
            c if c == E::ACCEPTED.to_raw() || c == E::CONNECTED.to_raw() => Self::Opened,
            c if c == E::HANDSHAKE_SUCCEEDED.to_raw() => Self::Ready,
            c if c == E::DISCONNECTED.to_raw() => Self::Closed,
            c if c == E::HANDSHAKE_FAILED_AUTH.to_raw() => Self::Refused { auth: true },
            c if c == E::HANDSHAKE_FAILED_PROTOCOL.to_raw()
                || c == E::HANDSHAKE_FAILED_NO_DETAIL.to_raw() =>
            {
                Self::Refused { auth: false }
            }
            c if c == E::MONITOR_STOPPED.to_raw() => Self::Stopped,
            c if c == E::CLOSED.to_raw() => Self::ListenerClosed,
            _ => Self::Other,
        }
    }
}

/// Who a socket is connected to, as its monitor told.
///
/// libzmq names a connection (its file descriptor) when it opens and closes, not when its
/// handshake succeeds or fails, and it does not report every failure (most refusals of clients
/// that leave at once go untold). So the peers through their handshake are counted up at each
/// success and, at each close, down to what the connections still open allow: never fewer than
/// are there, and more only while a peer left and connections still in (or failed in) their
/// handshake stay open, at most the handshake timeout.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Peers {
    /// Connections open.
    open: usize,
    /// Connections through their handshake, open (at least; see above).
    handshook: usize,
    /// Failures reported and not yet matched by a close (at most as many as are open).
    failed: usize,
    /// Whether a connection finished its handshake since the last time none was open.
    ready: bool,
    /// Whether a peer through its handshake was ever lost: on a dialing socket, the next one is
    /// a reconnect.
    ever_lost: bool,
    /// Whether the socket's listener closed.
    pub(super) unbound: bool,
    /// Whether libzmq destroyed the socket: after its close, once what it queued left or its
    /// linger ran out.
    pub(super) stopped: bool,
}

/// What one event changes in the broker's figures.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counted {
    /// A connection finished its handshake: a peer joined.
    joined: bool,
    /// ... after a peer through its handshake was lost: a dialing socket's reconnect.
    rejoined: bool,
    /// A connection closed, whichever.
    closed: bool,
    /// Peers through their handshake that this close shows gone.
    left: usize,
}

impl Peers {
    /// Takes in one event; answers what it changes in the figures.
    fn note(&mut self, event: Event) -> Counted {
        let mut counted = Counted::default();
        match event {
            Event::Opened => self.open += 1,
            Event::Ready => {
                self.ready = true;
                self.handshook += 1;
                counted.joined = true;
                counted.rejoined = self.ever_lost;
            }
            Event::Refused { .. } => self.failed += 1,
            Event::Closed => {
                self.open = self.open.saturating_sub(1);
                self.ready &= self.open > 0;
                counted.closed = true;
                // Each close is taken as a failed connection's while failures wait: it can
                // only make the bound below higher than the truth, never lower.
                self.failed = self.failed.saturating_sub(1);
                let most = self.open.saturating_sub(self.failed);
                if self.handshook > most {
                    counted.left = self.handshook - most;
                    self.handshook = most;
                    self.ever_lost = true;
                }
            }
            Event::ListenerClosed => self.unbound = true,
            Event::Stopped => self.stopped = true,
            Event::Other => {}
        }
        counted
    }

    /// Whether the socket has a peer to send to: a dialing one once its handshake is done, a
    /// bound one while a peer is connected.
    pub(super) fn reached(self, binds: bool) -> bool {
        if binds { self.open > 0 } else { self.ready }
    }
}

/// Who a socket is connected to, kept up to date by a thread of its own that reads the
/// socket's monitor.
///
/// libzmq reports monitor events with a blocking send from its own threads: a monitor left
/// unread, or closed while the socket still reports, would stall every socket of the process.
/// So the watcher reads every event as it comes, and only stops at the last one, sent once the
/// socket is gone.
pub(super) struct Watched {
    peers: Mutex<Peers>,
    /// Wakes whoever waits for a peer, or for a change of whether a send can wait.
    pub(super) changed: Notify,
}

impl Watched {
    /// Attaches a monitor to `socket`, before it binds or dials so that no event is missed;
    /// answers the socket the monitor reports to.
    pub(super) fn attach(socket: &zmq::Socket) -> Result<zmq::Socket, zmq::Error> {
        use zmq::SocketEvent as E;
        let endpoint = format!(
            "inproc://ruststream-zmq-monitor-{}",
            MONITORS.fetch_add(1, Ordering::Relaxed)
        );
        let wanted = [
            E::ACCEPTED,
            E::CONNECTED,
            E::DISCONNECTED,
            E::HANDSHAKE_SUCCEEDED,
            E::HANDSHAKE_FAILED_AUTH,
            E::HANDSHAKE_FAILED_PROTOCOL,
            E::HANDSHAKE_FAILED_NO_DETAIL,
            E::CLOSED,
            E::MONITOR_STOPPED,
        ]
        .iter()
        .fold(0, |mask, event| mask | i32::from(event.to_raw()));
        socket.monitor(&endpoint, wanted)?;
        let events = CONTEXT.socket(zmq::PAIR)?;
        events.connect(&endpoint)?;
        Ok(events)
    }

    /// Starts the watcher of the socket whose monitor reports to `events`; it counts lost
    /// peers on `monitor`.
    pub(super) fn start(
        events: zmq::Socket,
        role: Role,
        address: &str,
        binds: bool,
        monitor: ZmqMonitor,
    ) -> Result<Arc<Self>, zmq::Error> {
        let watched = Arc::new(Self {
            peers: Mutex::new(Peers::default()),
            changed: Notify::new(),
        });
        let watcher = Arc::clone(&watched);
        let address = address.to_owned();
        std::thread::Builder::new()
            .name("zmq-monitor".to_owned())
            .spawn(move || {
                // Resumed after a signal: a watcher that stopped reading would in the end stall
                // every socket of the process.
                while let Ok(event) = resumed(|| events.recv_bytes(0)) {
                    // The event's second frame names the connection's address; it came with
                    // the first, so reading it does not wait.
                    while events.get_rcvmore().unwrap_or(false) {
                        let _ = events.recv_bytes(0);
                    }
                    let event = Event::parse(&event);
                    watcher.take(event, role, &address, binds, &monitor);
                    if event == Event::Stopped {
                        return;
                    }
                }
                // The monitor failed: nothing more will be told, so no close waits for it.
                watcher.take(Event::Stopped, role, &address, binds, &monitor);
            })
            .map_err(|_| zmq::Error::EMFILE)?;
        Ok(watched)
    }

    fn take(&self, event: Event, role: Role, address: &str, binds: bool, monitor: &ZmqMonitor) {
        // A listener's refused credentials are its allow-list's: the authentication handler
        // counts each of them, where the monitor misses most.
        if let Event::Refused { auth } = event
            && !(auth && binds)
        {
            monitor.count_peer_refused();
            tracing::debug!(endpoint = %address, socket = role.name(), "a peer failed its handshake");
        }
        let counted = self
            .peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .note(event);
        if counted.joined {
            monitor.count_peer_connected();
        }
        if counted.rejoined && !binds {
            monitor.count_reconnect();
        }
        for _ in 0..counted.left {
            monitor.count_peer_disconnected();
        }
        if counted.closed {
            monitor.count_peer_lost();
            if binds {
                tracing::debug!(endpoint = %address, socket = role.name(), "a peer left");
            } else {
                tracing::info!(endpoint = %address, socket = role.name(), "the peer went away; reconnecting");
            }
        }
        self.changed.notify_waiters();
    }

    /// Waits until what the monitor told satisfies `done`.
    pub(super) async fn until(&self, done: impl Fn(Peers) -> bool) {
        loop {
            // Enabled before the check, so that a change between the two is not missed.
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if done(self.now()) {
                return;
            }
            changed.await;
        }
    }

    pub(super) fn now(&self) -> Peers {
        *self.peers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: zmq::SocketEvent) -> Vec<u8> {
        let mut first = kind.to_raw().to_le_bytes().to_vec();
        first.extend_from_slice(&7_u32.to_le_bytes());
        first
    }

    #[test]
    fn monitor_messages_read_as_the_events_the_transport_acts_on() {
        use zmq::SocketEvent as E;
        assert_eq!(Event::parse(&event(E::ACCEPTED)), Event::Opened);
        assert_eq!(Event::parse(&event(E::CONNECTED)), Event::Opened);
        assert_eq!(Event::parse(&event(E::HANDSHAKE_SUCCEEDED)), Event::Ready);
        assert_eq!(Event::parse(&event(E::DISCONNECTED)), Event::Closed);
        assert_eq!(
            Event::parse(&event(E::HANDSHAKE_FAILED_AUTH)),
            Event::Refused { auth: true }
        );
        assert_eq!(
            Event::parse(&event(E::HANDSHAKE_FAILED_NO_DETAIL)),
            Event::Refused { auth: false }
        );
        assert_eq!(Event::parse(&event(E::MONITOR_STOPPED)), Event::Stopped);
        assert_eq!(Event::parse(&event(E::CLOSED)), Event::ListenerClosed);
        assert_eq!(Event::parse(&event(E::LISTENING)), Event::Other);
        assert_eq!(Event::parse(&[]), Event::Other);
        assert_eq!(Event::parse(b"x"), Event::Other);
    }

    #[test]
    fn a_dialing_socket_is_reached_from_its_handshake_until_its_connection_closes() {
        let mut peers = Peers::default();
        assert_eq!(peers.note(Event::Opened), Counted::default());
        assert!(
            !peers.reached(false),
            "connected but not yet through the handshake"
        );
        assert!(peers.note(Event::Ready).joined);
        assert!(peers.reached(false));
        let closed = peers.note(Event::Closed);
        assert!(closed.closed && closed.left == 1, "a peer lost: {closed:?}");
        assert!(!peers.reached(false));
    }

    #[test]
    fn a_peer_counts_once_its_handshake_succeeded_not_at_connect_and_a_refused_one_never() {
        let mut peers = Peers::default();
        // A silent listener: connected, and never more.
        assert_eq!(peers.note(Event::Opened), Counted::default());
        // A CURVE server of another key: the handshake fails, the connection closes.
        let refusal = Event::Refused { auth: false };
        assert_eq!(peers.note(refusal), Counted::default());
        let refused = peers.note(Event::Closed);
        assert!(refused.closed && refused.left == 0, "{refused:?}");
        // Then the right peer: counted at its handshake, and as a reconnect only after a peer
        // through its handshake was lost.
        peers.note(Event::Opened);
        let joined = peers.note(Event::Ready);
        assert!(joined.joined && !joined.rejoined, "{joined:?}");
        assert_eq!(peers.note(Event::Closed).left, 1);
        peers.note(Event::Opened);
        assert!(peers.note(Event::Ready).rejoined);
    }

    #[test]
    fn a_bound_socket_keeps_its_peer_while_connections_it_refused_come_and_go() {
        let mut peers = Peers::default();
        peers.note(Event::Opened);
        peers.note(Event::Ready);
        // Refused clients, their failure told or not: the peer stays counted.
        for told in [true, false, true, false, false] {
            peers.note(Event::Opened);
            if told {
                peers.note(Event::Refused { auth: true });
            }
            assert_eq!(peers.note(Event::Closed).left, 0);
            assert_eq!(peers.handshook, 1);
        }
        // A refused client whose failure is told before the peer leaves, and closes after: the
        // peer is counted until the close that leaves no room for it.
        peers.note(Event::Opened);
        peers.note(Event::Refused { auth: true });
        assert_eq!(peers.note(Event::Closed).left, 0);
        assert_eq!(peers.note(Event::Closed).left, 1);
        assert_eq!((peers.handshook, peers.failed, peers.open), (0, 0, 0));
    }

    #[test]
    fn a_bound_socket_is_reached_while_any_peer_is_connected() {
        let mut peers = Peers::default();
        peers.note(Event::Opened);
        peers.note(Event::Opened);
        peers.note(Event::Closed);
        assert!(peers.reached(true));
        peers.note(Event::Closed);
        assert!(!peers.reached(true));
        // A report of a close the monitor never opened does not wrap around.
        assert!(peers.note(Event::Closed).closed);
        assert_eq!(peers.open, 0);
        assert_eq!(peers.handshook, 0);
    }
}
