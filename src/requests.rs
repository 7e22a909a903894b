//! The requester's side of request-reply: one DEALER, many requests in flight, each answer
//! matched to its request by `correlation-id`.
//!
//! Imports: the leaves, `settings`, `pattern`, `transport` and `message`. Built from the
//! transport and the settings; its tasks hold nothing of the connection, so dropping the broker
//! ends them.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
};

use ruststream::{Bytes, HeaderMap, Str};
use tokio::sync::{mpsc, oneshot, watch};

use crate::{
    error::ZmqError,
    message::ZmqMessage,
    monitor::ZmqMonitor,
    pattern::Role,
    settings::Settings,
    transport::{BoxTask, DuplexSender, Received, Transport},
    wire::{self, CORRELATION_ID, WireLimits},
};

/// How many answers wait between the DEALER and the task that matches them.
const ANSWERS: usize = 256;

/// A request waiting for its answer: its own number, so that only its own wait removes it.
struct Waiter {
    request: u64,
    answer: oneshot::Sender<ZmqMessage>,
}

/// The requests in flight, by the `correlation-id` their answers carry back. Two requests in
/// flight never share one: the second is refused.
type Pending = Arc<Mutex<HashMap<Str, Waiter>>>;

/// The broker's one DEALER and the requests waiting for their answers.
pub(crate) struct RequestChannel {
    sender: DuplexSender,
    pending: Pending,
    /// Numbers requests, and mints the `correlation-id` of those that bring none.
    requests: AtomicU64,
    prefix: String,
    endpoint: String,
    /// How long a request sent without waiting for an answer may take to leave.
    send_timeout: std::time::Duration,
}

impl RequestChannel {
    /// Opens the DEALER on `endpoint` (bound or dialing): answers the channel and the two tasks
    /// to spawn, the socket's and the one that matches answers.
    pub(crate) async fn open(
        transport: &Transport,
        endpoint: &str,
        binds: bool,
        settings: &Settings,
        monitor: &ZmqMonitor,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(Self, [BoxTask; 2]), ZmqError> {
        let (answers_tx, answers) = mpsc::channel(ANSWERS);
        let (sender, socket_task, bound) = transport
            .duplex(Role::Dealer, endpoint, binds, answers_tx, shutdown)
            .await?;
        if let Some(address) = bound {
            tracing::info!(endpoint = %address, "requesting from responders that dial in");
            monitor.set_bound_address(Some(address));
        }
        let pending = Pending::default();
        let matcher = match_answers(
            answers,
            Arc::clone(&pending),
            settings.limits,
            monitor.clone(),
            endpoint.to_owned(),
        );
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos());
        let channel = Self {
            sender,
            pending,
            requests: AtomicU64::new(0),
            prefix: format!("{:x}-{:x}", std::process::id(), started),
            endpoint: endpoint.to_owned(),
            send_timeout: settings.send_timeout,
        };
        Ok((channel, [socket_task, Box::pin(matcher)]))
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
        let id = Str::from(
            headers
                .correlation_id()
                .map_or_else(|| format!("{}-{request}", self.prefix), str::to_owned),
        );
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
            id,
            request,
        };
        self.sender
            .send_within_callers_wait(frames, deadline)
            .await?;
        answer.await.map_err(|_| ZmqError::ShutDown {
            what: "a requester",
        })
    }

    /// Sends without waiting for an answer.
    pub(crate) async fn send(
        &self,
        name: &str,
        headers: &HeaderMap,
        payload: Bytes,
    ) -> Result<(), ZmqError> {
        let deadline = tokio::time::Instant::now() + self.send_timeout;
        self.sender
            .send(wire::encode(name, headers, payload)?, deadline)
            .await
    }
}

/// Hands each answer to the request waiting for its `correlation-id`.
/// What a refused answer is counted under, where a subscription's refusals carry its name.
const ANSWERS_LABEL: &str = "(answers to requests)";

async fn match_answers(
    mut answers: mpsc::Receiver<Received>,
    pending: Pending,
    limits: WireLimits,
    monitor: ZmqMonitor,
    endpoint: String,
) {
    // However this task ends (shutdown, a dropped broker), nobody waits on for an answer.
    let _fail = FailAll(&pending);
    let from: Arc<str> = endpoint.as_str().into();
    while let Some(Received { frames, release }) = answers.recv().await {
        let answer = match wire::decode(&frames, &limits, None) {
            Ok(answer) => ZmqMessage::new(answer, Arc::clone(&from), None, release),
            Err(refusal) => {
                monitor.count_refusal(ANSWERS_LABEL, &refusal);
                tracing::warn!(%endpoint, rule = refusal.rule(), "refused an answer from a responder: {refusal}");
                continue;
            }
        };
        let waiter = answer.correlation_id().and_then(|id| {
            pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(id)
        });
        match waiter {
            Some(waiter) => {
                let _ = waiter.answer.send(answer);
            }
            None => tracing::debug!(
                %endpoint,
                correlation_id = answer.correlation_id().unwrap_or("none"),
                "an answer no request waits for (it timed out, or was never asked)"
            ),
        }
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
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if pending
            .get(&self.id)
            .is_some_and(|waiter| waiter.request == self.request)
        {
            pending.remove(&self.id);
        }
    }
}

/// Drops every waiter's sender, so each request in flight fails with a shut-down error.
fn fail_all(pending: &Pending) {
    pending
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
}

struct FailAll<'a>(&'a Pending);

impl Drop for FailAll<'_> {
    fn drop(&mut self) {
        fail_all(self.0);
    }
}
