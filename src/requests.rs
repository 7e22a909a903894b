//! The requester's side of request-reply: one DEALER, many requests in flight, each answer
//! matched to its request by `correlation-id`.
//!
//! Built from the transport and the settings; its tasks hold nothing of the connection, so
//! dropping the broker ends them.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
};

use ruststream::{Bytes, HeaderMap, Str};
use tokio::{
    sync::{oneshot, watch},
    time::Instant,
};

use crate::{
    error::ZmqError,
    lane::LaneKey,
    message::ZmqMessage,
    monitor::{SocketFigures, SocketUse, ZmqMonitor},
    pattern::Role,
    settings::Settings,
    throttle::{Say, Throttle},
    transport::{BoxTask, Done, DuplexSender, Handoff, Received, Transport},
    wire::{self, CORRELATION_ID, Refusal, WireLimits},
};

/// A request waiting for its answer, or for the error that ends its wait: its own number, so
/// that only its own wait removes it.
struct Waiter {
    request: u64,
    answer: oneshot::Sender<Result<ZmqMessage, ZmqError>>,
}

/// The requests in flight, by the `correlation-id` their answers carry back. Two requests in
/// flight never share one: the second is refused.
type Pending = Arc<Mutex<HashMap<Str, Waiter>>>;

/// The broker's one DEALER and the requests waiting for their answers.
pub(crate) struct RequestChannel {
    sender: DuplexSender,
    /// The DEALER's figures: requests out, answers in.
    figures: Arc<SocketFigures>,
    pending: Pending,
    /// Numbers requests, and mints the `correlation-id` of those that bring none.
    requests: AtomicU64,
    prefix: String,
    endpoint: String,
    /// How long a request sent without waiting for an answer may take to leave.
    send_timeout: std::time::Duration,
}

impl RequestChannel {
    /// Opens the DEALER on `endpoint` (bound or dialing): answers the channel and the socket's
    /// task to spawn, which also matches each answer to its request.
    pub(crate) async fn open(
        transport: &Transport,
        endpoint: &str,
        binds: bool,
        settings: &Settings,
        monitor: &ZmqMonitor,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(Self, BoxTask), ZmqError> {
        let pending = Pending::default();
        let figures = monitor.socket(SocketUse::Requester, endpoint);
        let matcher = Matcher {
            figures: Arc::clone(&figures),
            pending: FailAll(Arc::clone(&pending)),
            limits: settings.limits,
            monitor: monitor.clone(),
            from: endpoint.into(),
            refusals: Mutex::new(Throttle::new(Refusal::RULES)),
        };
        let inbound = Handoff::Direct(Box::new(move |answer| matcher.hand(answer)));
        // A DEALER's answers are matched in its task (`Handoff::Direct`), so no reading end is
        // handed over.
        // Nothing to linger for: a shutdown fails every request still in flight.
        let (started, bound) = transport
            .duplex(
                Role::Dealer,
                endpoint,
                binds,
                inbound,
                shutdown,
                std::time::Duration::ZERO,
            )
            .await?;
        let (sender, socket_task) = (started.sender, started.task);
        if let Some(address) = bound {
            tracing::info!(endpoint = %address, "requesting from responders that dial in");
            monitor.set_bound_address(Some(address));
        }
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos());
        let channel = Self {
            sender,
            figures,
            pending,
            requests: AtomicU64::new(0),
            prefix: format!("{:x}-{:x}", std::process::id(), started),
            endpoint: endpoint.to_owned(),
            send_timeout: settings.send_timeout,
        };
        Ok((channel, socket_task))
    }

    /// Answers every request in flight with a shut-down error at once.
    pub(crate) fn fail_all(&self) {
        fail_all(&self.pending);
    }

    /// How many requests are waiting for an answer right now.
    pub(crate) fn in_flight(&self) -> usize {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Sends a request and waits for the answer carrying its `correlation-id` (the caller's, or
    /// one minted here); the send leaves by `deadline`, and the caller bounds the wait.
    pub(crate) async fn request(
        &self,
        name: &str,
        mut headers: HeaderMap,
        payload: Bytes,
        deadline: tokio::time::Instant,
    ) -> Result<ZmqMessage, ZmqError> {
        let request = self.requests.fetch_add(1, Ordering::Relaxed);
        let id = headers
            .correlation_id()
            .map_or_else(|| mint(&self.prefix, request), Str::from);
        headers.insert(CORRELATION_ID, id.clone());
        let frames = wire::encode(name, &headers, payload)?;
        let (tx, answer) = oneshot::channel();
        {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            if pending.contains_key(&id) {
                return Err(ZmqError::CorrelationIdInFlight {
                    id: id.to_string(),
                    endpoint: self.endpoint.clone(),
                });
            }
            pending.insert(
                id.clone(),
                Waiter {
                    request,
                    answer: tx,
                },
            );
        }
        let _waiting = Waiting {
            pending: &self.pending,
            id: id.clone(),
            request,
        };
        // A send that fails ends the wait for the answer with its error, so the caller wakes
        // once: for the answer, or for why there is none.
        let pending = Arc::clone(&self.pending);
        let figures = Arc::clone(&self.figures);
        let failed = move |sent: Result<(), ZmqError>| {
            if sent.is_ok() {
                figures.count_sent();
            }
            if let Err(err) = sent
                && let Some(waiter) = take_waiter(&pending, &id, request)
            {
                let _ = waiter.answer.send(Err(err));
            }
        };
        self.sender
            .hand(frames, deadline, Done::Call(Box::new(failed)))
            .await?;
        answer.await.map_err(|_| ZmqError::ShutDown {
            what: "a requester",
        })?
    }

    /// Sends without waiting for an answer.
    pub(crate) async fn send(
        &self,
        name: &str,
        headers: &HeaderMap,
        payload: Bytes,
    ) -> Result<(), ZmqError> {
        let deadline = tokio::time::Instant::now() + self.send_timeout;
        let sent = self
            .sender
            .send(wire::encode(name, headers, payload)?, deadline)
            .await;
        if sent.is_ok() {
            self.figures.count_sent();
        }
        sent
    }
}

/// The longest minted `correlation-id`: a prefix of at most 41 characters (a process id and a
/// start time in nanoseconds, in hex, and a dash), a dash and a request number of at most 20.
const MINTED_MAX: usize = 64;

/// A minted `correlation-id`, written in place.
struct Minted {
    bytes: [u8; MINTED_MAX],
    len: usize,
}

impl AsRef<[u8]> for Minted {
    fn as_ref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// The `correlation-id` of request number `request`: `<prefix>-<request>`. Written in place and
/// shared as it is, it takes one allocation; a `String` made shared takes two.
fn mint(prefix: &str, request: u64) -> Str {
    use std::io::Write as _;
    let mut minted = Minted {
        bytes: [0; MINTED_MAX],
        len: 0,
    };
    let mut rest = &mut minted.bytes[..];
    if write!(rest, "{prefix}-{request}").is_ok() {
        minted.len = MINTED_MAX - rest.len();
        if let Ok(id) = Str::from_inner(Bytes::from_owner(minted)) {
            return id;
        }
    }
    // Not reached with the prefix `open` makes; kept so that a longer one stays correct.
    Str::from(format!("{prefix}-{request}"))
}

/// What a refused answer is counted under, where a subscription's refusals carry its name.
const ANSWERS_LABEL: &str = "(answers to requests)";

/// Hands each answer to the request waiting for its `correlation-id`, in the DEALER's task.
/// Dropped with that task (shutdown, a dropped broker), it fails every request still waiting.
struct Matcher {
    figures: Arc<SocketFigures>,
    pending: FailAll,
    limits: WireLimits,
    monitor: ZmqMonitor,
    from: Arc<str>,
    /// One warning a burst of refused answers by the same rule.
    refusals: Mutex<Throttle<&'static str>>,
}

impl Matcher {
    /// Warns of a refused answer once a burst of refusals by its rule, as a subscription does.
    fn warn(&self, refusal: &Refusal) {
        let note = self
            .refusals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .note(refusal.rule(), Instant::now());
        match note.say {
            Say::First { untold } => tracing::warn!(
                endpoint = %self.from,
                rule = refusal.rule(),
                untold_before = untold,
                "refused an answer from a responder: {refusal}; more refused by this rule are \
                 counted, and told once a minute while they go on"
            ),
            Say::Again { untold, since } => tracing::warn!(
                endpoint = %self.from,
                rule = refusal.rule(),
                refused = untold,
                since = ?since.elapsed(),
                "still refusing answers from a responder by this rule: {refusal}"
            ),
            Say::Nothing => {}
        }
    }

    fn hand(&self, Received { frames, release }: Received) {
        self.figures.count_received();
        let answer = match wire::decode(&frames, &self.limits, None) {
            Ok(answer) => ZmqMessage::new(
                answer,
                Arc::clone(&self.from),
                None,
                LaneKey::default(),
                release,
            ),
            Err(refusal) => {
                self.monitor.count_refusal(ANSWERS_LABEL, &refusal);
                self.warn(&refusal);
                return;
            }
        };
        let waiter = answer.correlation_id().and_then(|id| {
            self.pending
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(id)
        });
        match waiter {
            Some(waiter) => {
                let _ = waiter.answer.send(Ok(answer));
            }
            None => tracing::debug!(
                endpoint = %self.from,
                correlation_id = answer.correlation_id().unwrap_or("none"),
                "an answer no request waits for (it timed out, or was never asked)"
            ),
        }
    }
}

/// Takes request `request`'s entry out of `pending`, if it is still there; never a later
/// request's under the same id.
fn take_waiter(pending: &Pending, id: &Str, request: u64) -> Option<Waiter> {
    let mut pending = pending.lock().unwrap_or_else(PoisonError::into_inner);
    if pending
        .get(id)
        .is_some_and(|waiter| waiter.request == request)
    {
        pending.remove(id)
    } else {
        None
    }
}

/// Removes a request's entry however its wait ends, so that memory stays flat; only its own
/// entry, never a later request's under the same id.
struct Waiting<'a> {
    pending: &'a Pending,
    id: Str,
    request: u64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        take_waiter(self.pending, &self.id, self.request);
    }
}

/// Drops every waiter's sender, so each request in flight fails with a shut-down error.
fn fail_all(pending: &Pending) {
    pending
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
}

struct FailAll(Pending);

impl Drop for FailAll {
    fn drop(&mut self) {
        fail_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::{MINTED_MAX, mint};

    #[test]
    fn a_minted_id_is_the_prefix_a_dash_and_the_number_even_at_their_longest() {
        let longest = format!("{:x}-{:x}", u32::MAX, u128::MAX);
        for (prefix, request) in [("1f-2a", 0), ("1f-2a", 7), (longest.as_str(), u64::MAX)] {
            assert_eq!(&*mint(prefix, request), format!("{prefix}-{request}"));
        }
        let too_long = "x".repeat(MINTED_MAX);
        assert_eq!(&*mint(&too_long, 1), format!("{too_long}-1"));
    }
}
