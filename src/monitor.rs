//! What a running broker reports: the address it listens on and what it refused.
//!
//! These are the socket-level figures: what crossed (or failed to cross) this broker's sockets.
//! Under the `metrics` feature, `ZmqMonitor::register_metrics` exports them beside the
//! framework's own settlement counters.

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
};

use crate::wire::Refusal;

/// A handle on a broker's live figures, taken before the broker moves into the app.
///
/// # Examples
///
/// ```
/// use ruststream_zmq::{ZmqEndpoint, ZmqQueue};
///
/// let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
/// let monitor = broker.monitor();
/// assert_eq!(monitor.bound_address(), None); // known once the service has started
/// assert_eq!(monitor.refused(), 0);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ZmqMonitor {
    inner: Arc<Figures>,
}

#[derive(Debug, Default)]
struct Figures {
    /// The endpoint as configured, user information dropped: the `endpoint` label of the metrics.
    endpoint: String,
    bound_address: Mutex<Option<String>>,
    refused: AtomicU64,
    sent: AtomicU64,
    send_failures: AtomicU64,
    peers_lost: AtomicU64,
    peers_refused: AtomicU64,
    dropped_not_reading: AtomicU64,
    peers_connected: AtomicU64,
    peers_seen: AtomicU64,
    reconnects: AtomicU64,
    /// Each socket the broker opened, in the order it opened them.
    sockets: Mutex<Vec<Arc<SocketFigures>>>,
    /// Refusals by the subscription (or requester) that read them, and the rule.
    by_rule: Mutex<BTreeMap<(String, &'static str), u64>>,
}

impl ZmqMonitor {
    /// The figures of a broker configured with `address`.
    pub(crate) fn for_endpoint(address: &str) -> Self {
        Self {
            inner: Arc::new(Figures {
                endpoint: without_user_information(address),
                ..Figures::default()
            }),
        }
    }

    /// The endpoint the broker was configured with, as it was written (`tcp://127.0.0.1:0`,
    /// `tcp://*:5555`), never with user information; the resolved address is
    /// [`bound_address`](Self::bound_address).
    #[must_use]
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint
    }

    /// The address the broker's subscription listens on, port resolved; `None` before it binds.
    #[must_use]
    pub fn bound_address(&self) -> Option<String> {
        self.inner
            .bound_address
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many messages from peers were refused, all rules together.
    #[must_use]
    pub fn refused(&self) -> u64 {
        self.inner.refused.load(Ordering::Relaxed)
    }

    /// How many were refused under one rule ([`Refusal::rule`], such as `"max-header-lines"`),
    /// whichever subscription read them.
    #[must_use]
    pub fn refused_by(&self, rule: &str) -> u64 {
        self.inner
            .by_rule
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|((_, refused_by), _)| *refused_by == rule)
            .map(|(_, count)| count)
            .sum()
    }

    /// How many peer connections the broker's sockets have open now, all together, each counted
    /// once its handshake succeeded, not at TCP connect or accept: a gauge for readiness (a
    /// dialing service has its peer once it is above zero).
    #[must_use]
    pub fn peers_connected(&self) -> u64 {
        self.inner.peers_connected.load(Ordering::Relaxed)
    }

    /// How many times a dialing socket connected again after its peer went away.
    #[must_use]
    pub fn reconnects(&self) -> u64 {
        self.inner.reconnects.load(Ordering::Relaxed)
    }

    /// How many peer connections the broker's sockets have made in all, reconnections counted,
    /// each once its handshake succeeded: the peers it has seen.
    #[must_use]
    pub fn peers_seen(&self) -> u64 {
        self.inner.peers_seen.load(Ordering::Relaxed)
    }

    pub(crate) fn count_peer_connected(&self) {
        self.inner.peers_connected.fetch_add(1, Ordering::Relaxed);
        self.inner.peers_seen.fetch_add(1, Ordering::Relaxed);
    }

    /// The figures of a socket the broker opens: `what` it is for, on `endpoint`.
    pub(crate) fn socket(&self, what: SocketUse, endpoint: &str) -> Arc<SocketFigures> {
        let figures = Arc::new(SocketFigures {
            what,
            endpoint: without_user_information(endpoint),
            ..SocketFigures::default()
        });
        self.inner
            .sockets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::clone(&figures));
        figures
    }

    /// Leaves out the figures of a socket that closed having sent nothing: a publisher that
    /// bound the endpoint at connect and handed it to a subscription, which is the socket the
    /// broker is then known by.
    pub(crate) fn forget(&self, figures: &Arc<SocketFigures>) {
        self.inner
            .sockets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|socket| !Arc::ptr_eq(socket, figures));
    }

    /// What each socket the broker opened so far has done, in the order it opened them; its
    /// shutdown answers the same ([`ClosedZmqBroker::sockets`](crate::ClosedZmqBroker::sockets)).
    #[must_use]
    pub fn sockets(&self) -> Vec<SocketSummary> {
        self.inner
            .sockets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|figures| figures.summary())
            .collect()
    }

    pub(crate) fn count_peer_disconnected(&self) {
        let _ =
            self.inner
                .peers_connected
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |open| {
                    Some(open.saturating_sub(1))
                });
    }

    pub(crate) fn count_reconnect(&self) {
        self.inner.reconnects.fetch_add(1, Ordering::Relaxed);
    }

    /// How many messages this broker's publishers handed to a socket (retry copies included).
    #[must_use]
    pub fn sent(&self) -> u64 {
        self.inner.sent.load(Ordering::Relaxed)
    }

    /// How many publishes, answers and retry copies failed to leave: no peer took them by their
    /// deadline, the peer was not reading, or the destination was still failing (each failure is
    /// returned to its caller, naming the endpoint and the reason).
    #[must_use]
    pub fn send_failures(&self) -> u64 {
        self.inner.send_failures.load(Ordering::Relaxed)
    }

    /// How many times a peer's connection was lost: the peer went away, or its connection
    /// failed (a broken frame, a libzmq heartbeat). Messages in flight on it may be lost with it;
    /// a dialing socket reconnects.
    #[must_use]
    pub fn peers_lost(&self) -> u64 {
        self.inner.peers_lost.load(Ordering::Relaxed)
    }

    /// How many connections failed their handshake: a peer that spoke no ZMTP, or whose
    /// credentials were refused (libzmq and omq backends): every one an allow-list refused, a
    /// flood of them included. On libzmq each is also a peer lost.
    #[must_use]
    pub fn peers_refused(&self) -> u64 {
        self.inner.peers_refused.load(Ordering::Relaxed)
    }

    /// How many answers were dropped because their requester was not reading: its queue was
    /// full (libzmq backend; each is also a send failure, returned to the caller).
    #[must_use]
    pub fn dropped_not_reading(&self) -> u64 {
        self.inner.dropped_not_reading.load(Ordering::Relaxed)
    }

    #[cfg_attr(
        not(any(feature = "libzmq", feature = "omq")),
        expect(dead_code, reason = "libzmq and omq report these")
    )]
    pub(crate) fn count_peer_refused(&self) {
        self.inner.peers_refused.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_dropped_not_reading(&self) {
        self.inner
            .dropped_not_reading
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Every subscription and rule that refused a message so far, with its count.
    #[cfg(feature = "metrics")]
    pub(crate) fn refusals(&self) -> Vec<(String, &'static str, u64)> {
        self.inner
            .by_rule
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|((subscription, rule), count)| (subscription.clone(), *rule, *count))
            .collect()
    }

    pub(crate) fn count_peer_lost(&self) {
        self.inner.peers_lost.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_sent(&self) {
        self.inner.sent.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_send_failed(&self) {
        self.inner.send_failures.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn set_bound_address(&self, address: Option<String>) {
        *self
            .inner
            .bound_address
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = address;
    }

    /// Counts a refusal by the subscription that read it (for a requester's answers, the
    /// requester's own label).
    pub(crate) fn count_refusal(&self, subscription: &str, refusal: &Refusal) {
        self.inner.refused.fetch_add(1, Ordering::Relaxed);
        *self
            .inner
            .by_rule
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((subscription.to_owned(), refusal.rule()))
            .or_default() += 1;
    }
}

/// What a socket of a broker is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SocketUse {
    /// A subscription's socket (on a responder, also the one its answers leave through).
    #[default]
    Subscriber,
    /// A socket publishes leave through (retry copies and dead letters too), one per endpoint.
    Publisher,
    /// The requester's socket: requests out, answers in.
    Requester,
}

/// One socket's figures, counted as the socket works.
#[derive(Debug, Default)]
pub(crate) struct SocketFigures {
    what: SocketUse,
    endpoint: String,
    sent: AtomicU64,
    received: AtomicU64,
    unhandled: AtomicU64,
    /// How the socket's close went ([`Flush`], as its index).
    flush: std::sync::atomic::AtomicU8,
}

impl SocketFigures {
    pub(crate) fn count_sent(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    /// A message read off the socket.
    pub(crate) fn count_received(&self) {
        self.received.fetch_add(1, Ordering::Relaxed);
    }

    /// Messages read off the socket (and counted) that no handler will see: they waited for
    /// the subscription when it closed.
    pub(crate) fn count_unhandled(&self, messages: u64) {
        self.unhandled.fetch_add(messages, Ordering::Relaxed);
    }

    /// A message read off the socket that could not be handed on: the subscription was gone.
    pub(crate) fn count_lost(&self) {
        self.count_received();
        self.count_unhandled(1);
    }

    /// How the socket's close went.
    pub(crate) fn closed(&self, flush: Flush) {
        self.flush.store(flush as u8, Ordering::Relaxed);
    }

    pub(crate) fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    fn summary(&self) -> SocketSummary {
        SocketSummary {
            what: self.what,
            endpoint: self.endpoint.clone(),
            sent: self.sent.load(Ordering::Relaxed),
            received: self.received.load(Ordering::Relaxed),
            unhandled: self.unhandled.load(Ordering::Relaxed),
            flush: Flush::from_index(self.flush.load(Ordering::Relaxed)),
        }
    }
}

/// How a sending socket's close went: whether what it had queued left before it closed.
///
/// "Left" is as far as this process can see: handed to the operating system's connection to
/// the peer, not read by the peer. Neither client counts what it still queues, so a socket whose
/// linger ran out says that much and no figure ([`SocketSummary::left`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Flush {
    /// Not closed by a graceful shutdown (yet), or a socket that only reads.
    StillOpen = 0,
    /// Closed after everything handed to it left, within the linger.
    Flushed = 1,
    /// The linger ran out first: what the socket still held is lost. How much, neither client
    /// says.
    LingerRanOut = 2,
}

impl Flush {
    const fn from_index(index: u8) -> Self {
        match index {
            1 => Self::Flushed,
            2 => Self::LingerRanOut,
            _ => Self::StillOpen,
        }
    }
}

/// What one socket of a broker did over its life, as its broker's shutdown reports it
/// ([`ClosedZmqBroker::sockets`](crate::ClosedZmqBroker::sockets)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketSummary {
    what: SocketUse,
    endpoint: String,
    sent: u64,
    received: u64,
    unhandled: u64,
    flush: Flush,
}

impl SocketSummary {
    /// How the socket's close went: everything it was handed left, or its linger ran out first.
    #[must_use]
    pub const fn flush(&self) -> Flush {
        self.flush
    }

    /// How many messages are known to have left it: all it was handed ([`sent`](Self::sent))
    /// once it closed flushed; `None` while it is open, or after its linger ran out (neither
    /// client says how many it still held).
    #[must_use]
    pub const fn left(&self) -> Option<u64> {
        match self.flush {
            Flush::Flushed => Some(self.sent),
            Flush::StillOpen | Flush::LingerRanOut => None,
        }
    }

    /// What the socket was for.
    #[must_use]
    pub const fn what(&self) -> SocketUse {
        self.what
    }

    /// The endpoint it bound or dialed, as configured (a bound port `0` reads `0`), without
    /// user information.
    #[must_use]
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// How many messages left through it: publishes, retry copies, dead letters, answers,
    /// requests.
    #[must_use]
    pub const fn sent(&self) -> u64 {
        self.sent
    }

    /// How many messages it read: requests, answers, or what a subscription reads; refused ones
    /// and [`unhandled`](Self::unhandled) ones included.
    #[must_use]
    pub const fn received(&self) -> u64 {
        self.received
    }

    /// How many of those it read and never handed to a handler: read ahead of the handler, and
    /// still waiting when the subscription closed. At most once, these are lost.
    #[must_use]
    pub const fn unhandled(&self) -> u64 {
        self.unhandled
    }
}

/// `address` with any user information before the host dropped (`tcp://user:secret@host:5555`
/// reads `tcp://host:5555`): the sockets refuse such an address, but a monitor exists before
/// they check it, and its endpoint is a label a scrape publishes. An `ipc://` path is kept whole.
fn without_user_information(address: &str) -> String {
    match address.split_once("://") {
        Some((scheme, rest)) if scheme != "ipc" => {
            let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            let (authority, tail) = rest.split_at(authority_end);
            let host = authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host);
            format!("{scheme}://{host}{tail}")
        }
        _ => address.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_label_keeps_the_address_and_drops_user_information() {
        for (written, label) in [
            ("tcp://127.0.0.1:0", "tcp://127.0.0.1:0"),
            ("tcp://*:5555", "tcp://*:5555"),
            ("tcp://user:secret@pay-1:5555", "tcp://pay-1:5555"),
            ("tcp://a@b:c@pay-1:5555", "tcp://pay-1:5555"),
            ("ipc:///tmp/user@x.sock", "ipc:///tmp/user@x.sock"),
        ] {
            assert_eq!(ZmqMonitor::for_endpoint(written).endpoint(), label);
        }
    }
}
