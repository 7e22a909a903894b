//! What a duplex socket's task (ROUTER, DEALER) exchanges with the rest of the crate: the sends
//! handed to it, where each send's outcome goes, and where what it reads goes.
//!
//! Every hop between tasks is a wake-up, and a request-reply round trip is made of little else,
//! so hops are skipped where a backend allows: a message leaves from the task that sends it
//! when the socket can be shared ([`DirectSend`]), a request's outcome goes straight to the wait
//! for its answer ([`Done::Call`]), answers are matched inside the socket's task
//! ([`Inbound::Direct`]), and a ROUTER whose answers never need its task is read by the
//! subscription itself ([`ReadingEnd`]).
//!
//! Imports: its parent `transport`, and `error` and `wire`.

use std::{sync::Arc, task::Poll};

use futures::future::BoxFuture;
use tokio::{
    sync::{
        mpsc::{self, error::TrySendError},
        oneshot,
    },
    time::{Instant, timeout_at},
};

use super::{BoxTask, ReadingEnd, Received};
use crate::{error::ZmqError, wire::Frames};

/// How many sends wait for a duplex socket's task.
const SENDS: usize = 64;

/// Where the outcome of one send goes.
pub(crate) enum Done {
    /// To a caller waiting for it.
    Tell(oneshot::Sender<Result<(), ZmqError>>),
    /// To a function called in the socket's task, which must not wait: a request hands a
    /// failure to the wait for its answer, so the caller wakes once, for the answer or the error.
    Call(Box<dyn FnOnce(Result<(), ZmqError>) + Send>),
}

impl Done {
    /// Reports the outcome; a caller that stopped waiting misses nothing it still needs.
    pub(crate) fn settle(self, outcome: Result<(), ZmqError>) {
        match self {
            Self::Tell(caller) => {
                let _ = caller.send(outcome);
            }
            Self::Call(call) => call(outcome),
        }
    }
}

/// A send handed to a duplex socket's task, its deadline, and where its outcome goes.
pub(crate) type HandedSend = (Frames, Instant, Done);

/// What a duplex socket's task reads its sends from.
pub(crate) type Outbox = mpsc::Receiver<HandedSend>;

/// Where a duplex socket's task hands each message it reads.
pub(crate) enum Inbound {
    /// Into a channel another task reads; the socket stops reading while it is full.
    Channel(mpsc::Sender<Received>),
    /// To a function called in the socket's task, which must not wait.
    Direct(Box<dyn Fn(Received) + Send + Sync>),
}

/// A duplex socket, started.
pub(crate) struct Started {
    /// Sends through the socket.
    pub(crate) sender: DuplexSender,
    /// The socket's task, to spawn; it ends at shutdown, or once nobody takes what the socket
    /// reads.
    pub(crate) task: BoxTask,
    /// The socket's reading end, when the subscription reads the socket in its own task.
    pub(crate) reader: Option<ReadingEnd>,
}

/// Nobody takes what the socket reads any more: its task ends.
#[derive(Debug)]
pub(crate) struct Closed;

impl Inbound {
    /// Hands `received` over at once if there is room, or answers it back to wait for room
    /// ([`room`](Self::room)).
    pub(crate) fn offer(&self, received: Received) -> Result<Option<Received>, Closed> {
        match self {
            Self::Channel(tx) => match tx.try_send(received) {
                Ok(()) => Ok(None),
                Err(TrySendError::Full(received)) => Ok(Some(received)),
                Err(TrySendError::Closed(_)) => Err(Closed),
            },
            Self::Direct(take) => {
                take(received);
                Ok(None)
            }
        }
    }

    /// Resolves once nobody takes what the socket reads: for a socket whose reading end went to
    /// the subscription, which reads it while it lives.
    #[cfg_attr(
        not(feature = "zeromq"),
        expect(
            dead_code,
            reason = "only the zeromq backend hands a ROUTER's reading end over"
        )
    )]
    pub(crate) async fn closed(&self) {
        match self {
            Self::Channel(tx) => tx.closed().await,
            Self::Direct(_) => std::future::pending().await,
        }
    }

    /// Waits for room, then hands `received` over: for a message [`offer`](Self::offer)
    /// answered back. Cancel-safe: `received` stays with the caller until there is room.
    pub(crate) async fn room(&self) -> Result<mpsc::Permit<'_, Received>, Closed> {
        match self {
            Self::Channel(tx) => tx.reserve().await.map_err(|_| Closed),
            // A function takes everything at once, so nothing ever waits for it.
            Self::Direct(_) => std::future::pending().await,
        }
    }
}

/// A send that needs no socket task: a backend whose socket can send from any task offers one
/// (a bound ROUTER and a dialing DEALER of the `zeromq` client, every ROUTER and DEALER of
/// libzmq), and a message then leaves from the sender's own task, with no wake-up of the
/// socket's task and none back.
pub(crate) trait DirectSend: Send + Sync {
    /// Sends one message, or answers it back when only the socket's task can send it.
    fn send(&self, frames: Frames) -> Direct;
}

/// How a [`DirectSend`] went.
pub(crate) enum Direct {
    /// It left, or failed for good.
    Now(Result<(), ZmqError>),
    /// It is under way (a client whose sends are futures), and ends in one of the other two:
    /// a DEALER whose peer went away hands it to its task, which reconnects. The caller bounds
    /// the wait.
    #[cfg_attr(
        not(feature = "zeromq"),
        expect(
            dead_code,
            reason = "only the zeromq client's sends are futures; libzmq's leave or answer back"
        )
    )]
    Later(BoxFuture<'static, Direct>),
    /// The socket's task sends it: the socket has no room now, and that task waits for room.
    ToTask(Frames),
}

/// What a direct send under way ([`Direct::Later`]) came to, or `None` when `deadline` passed
/// first. It is polled once in place, and boxed with its deadline only when it must wait, so the
/// future of a send that leaves at once stays small (a retry copy's waits out its delay in
/// memory, and every request holds one while it waits for its answer).
#[expect(
    clippy::manual_async_fn,
    reason = "an `async fn` keeps a second copy of its arguments: a request's future 32 bytes more"
)]
fn awaited(
    mut sending: BoxFuture<'static, Direct>,
    deadline: Instant,
) -> impl Future<Output = Option<Direct>> {
    async move {
        match futures::poll!(sending.as_mut()) {
            Poll::Ready(ended) => Some(ended),
            Poll::Pending => Box::pin(timeout_at(deadline, sending)).await.ok(),
        }
    }
}

/// Sends through a duplex socket's task, or straight through its socket when the backend
/// offers that; cheap to clone.
#[derive(Clone)]
pub(crate) struct DuplexSender {
    tx: mpsc::Sender<HandedSend>,
    direct: Option<Arc<dyn DirectSend>>,
    endpoint: Arc<str>,
}

impl DuplexSender {
    /// A sender and the outbox its socket task reads from, for the socket on `endpoint`.
    pub(crate) fn channel(endpoint: &str) -> (Self, Outbox) {
        let (tx, outbox) = mpsc::channel(SENDS);
        (
            Self {
                tx,
                direct: None,
                endpoint: endpoint.into(),
            },
            outbox,
        )
    }

    /// This sender, sending through `direct` rather than the socket's task.
    pub(crate) fn direct(self, direct: Arc<dyn DirectSend>) -> Self {
        Self {
            direct: Some(direct),
            ..self
        }
    }

    /// Sends one message through the socket: it leaves, or fails naming why, by `deadline`.
    /// The socket's task drops a message whose deadline passed before its turn.
    pub(crate) async fn send(&self, frames: Frames, deadline: Instant) -> Result<(), ZmqError> {
        // Every wait is boxed, and taken only when needed: the future of a send that leaves at
        // once stays small (a retry copy's waits out its delay in memory).
        let mut direct = self.try_direct(frames);
        loop {
            match direct {
                Direct::Now(sent) => return sent,
                Direct::ToTask(frames) => {
                    let sent = timeout_at(deadline, self.through_task(frames, deadline));
                    return Box::pin(sent).await.unwrap_or_else(|_| Err(self.late()));
                }
                Direct::Later(sending) => match awaited(sending, deadline).await {
                    Some(ended) => direct = ended,
                    None => return Err(self.late()),
                },
            }
        }
    }

    /// Sends straight through the socket, when the backend offers that.
    fn try_direct(&self, frames: Frames) -> Direct {
        match &self.direct {
            Some(direct) => direct.send(frames),
            None => Direct::ToTask(frames),
        }
    }

    /// Why a send did not leave by its deadline.
    fn late(&self) -> ZmqError {
        // The socket's task is busy connecting, or stuck in a send to a peer that stopped
        // reading: from here the two look alike.
        ZmqError::Send {
            endpoint: self.endpoint.to_string(),
            source: "it did not leave by its deadline: no peer is connected, or the peer is not \
                     reading"
                .into(),
        }
    }

    /// Sends through the socket's task and waits for the outcome.
    async fn through_task(&self, frames: Frames, deadline: Instant) -> Result<(), ZmqError> {
        let (done, outcome) = oneshot::channel();
        self.queue(frames, deadline, Done::Tell(done)).await?;
        outcome.await.map_err(|_| socket_gone())?
    }

    /// Sends through the socket, its outcome to go to `done`: straight away when the backend
    /// can, or handed to the socket's task. Waits only for room in that task's queue, or for a
    /// direct send, which the caller bounds (a request, whose timeout covers sending and
    /// answering).
    pub(crate) async fn hand(
        &self,
        frames: Frames,
        deadline: Instant,
        done: Done,
    ) -> Result<(), ZmqError> {
        let mut direct = self.try_direct(frames);
        loop {
            match direct {
                Direct::Now(sent) => {
                    done.settle(sent);
                    return Ok(());
                }
                // Boxed, as in `send`: a request's future holds this one while it waits.
                Direct::ToTask(frames) => {
                    return Box::pin(self.queue(frames, deadline, done)).await;
                }
                Direct::Later(sending) => match awaited(sending, deadline).await {
                    Some(ended) => direct = ended,
                    None => {
                        done.settle(Err(self.late()));
                        return Ok(());
                    }
                },
            }
        }
    }

    /// Hands a send to the socket's task; waits only for room in its queue.
    async fn queue(&self, frames: Frames, deadline: Instant, done: Done) -> Result<(), ZmqError> {
        self.tx
            .send((frames, deadline, done))
            .await
            .map_err(|_| socket_gone())
    }
}

/// What a send fails with once the duplex socket is closed.
pub(crate) fn socket_gone() -> ZmqError {
    ZmqError::ShutDown { what: "a socket" }
}
