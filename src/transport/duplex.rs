//! What a duplex socket's task (ROUTER, DEALER) exchanges with the rest of the crate: the sends
//! handed to it, where each send's outcome goes, and where what it reads goes.
//!
//! Every hop between tasks is a wake-up, and a request-reply round trip is made of little else,
//! so hops are skipped where a backend allows: a message leaves from the task that sends it
//! when the socket can be shared ([`DirectSend`]), a request's outcome goes straight to the wait
//! for its answer ([`Done::Call`]), answers are matched inside the socket's task
//! ([`Handoff::Direct`]), and a ROUTER whose answers never need its task is read by the
//! subscription itself ([`ReadingEnd`]).

use std::{sync::Arc, task::Poll, time::Duration};

use futures::future::BoxFuture;
use tokio::{
    sync::{
        mpsc::{self, error::TrySendError},
        oneshot, watch,
    },
    time::{Instant, timeout_at},
};

use super::{
    backend::{
        BoxTask, Direct, DirectSend, Done, Driving, DuplexDriver, HandedSend, late_for_its_turn,
        socket_gone, stopped,
    },
    reading_end::{ReadingEnd, Received},
};
use crate::{
    error::{SendFailure, ZmqError},
    monitor::{Flush, SocketFigures},
    wire::Frames,
};

/// How many sends wait for a duplex socket's task.
const SENDS: usize = 64;

/// How many queued messages a duplex socket's task reads in a row before it looks at its sends
/// and at shutdown again.
const READ_BATCH: usize = 32;

/// What a duplex socket's task reads its sends from.
pub(crate) type Outbox = mpsc::Receiver<HandedSend>;

/// Where a duplex socket's task hands each message it reads.
pub(crate) enum Handoff {
    /// Into a channel another task reads; the socket stops reading while it is full. What it
    /// read and could not hand on (the reader closed first) is counted on the figures.
    Channel(mpsc::Sender<Received>, Arc<SocketFigures>),
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

impl Handoff {
    /// Hands `received` over at once if there is room, or answers it back to wait for room
    /// ([`room`](Self::room)).
    pub(crate) fn offer(&self, received: Received) -> Result<Option<Received>, Closed> {
        match self {
            Self::Channel(tx, figures) => match tx.try_send(received) {
                Ok(()) => {
                    figures.count_received();
                    Ok(None)
                }
                Err(TrySendError::Full(received)) => Ok(Some(received)),
                Err(TrySendError::Closed(_)) => {
                    figures.count_lost();
                    Err(Closed)
                }
            },
            Self::Direct(take) => {
                take(received);
                Ok(None)
            }
        }
    }

    /// Resolves once nobody takes what the socket reads: for a socket whose reading end went to
    /// the subscription, which reads it while it lives.
    pub(crate) async fn closed(&self) {
        match self {
            Self::Channel(tx, _) => tx.closed().await,
            Self::Direct(_) => std::future::pending().await,
        }
    }

    /// Waits for room, then hands `received` over: for a message [`offer`](Self::offer)
    /// answered back. Cancel-safe: `received` stays with the caller until there is room.
    pub(crate) async fn room(&self) -> Result<mpsc::Permit<'_, Received>, Closed> {
        match self {
            Self::Channel(tx, _) => tx.reserve().await.map_err(|_| Closed),
            // A function takes everything at once, so nothing ever waits for it.
            Self::Direct(_) => std::future::pending().await,
        }
    }

    /// Hands on a message that waited for `permit`.
    pub(crate) fn hand(&self, permit: mpsc::Permit<'_, Received>, received: Received) {
        permit.send(received);
        if let Self::Channel(_, figures) = self {
            figures.count_received();
        }
    }

    /// How the socket's close went, on the figures of a socket whose reads go to a channel (a
    /// responder's, whose answers it sends), and said once where answers were left behind.
    fn closed_with(&self, flush: Flush, endpoint: &str) {
        let Self::Channel(_, figures) = self else {
            return;
        };
        figures.closed(flush);
        if flush == Flush::LingerRanOut {
            tracing::warn!(
                endpoint,
                handed_to_socket = figures.sent(),
                "the linger ran out before the answers this socket queued left: the rest is lost \
                 (how much, the client does not say); lengthen `linger`, or make sure the \
                 requesters read before the service shuts down"
            );
        }
    }

    /// A message read and never handed on: it waited for room when the socket stopped.
    pub(crate) fn lost(&self, received: Received) {
        drop(received);
        if let Self::Channel(_, figures) = self {
            figures.count_lost();
        }
    }
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
            source: SendFailure::Late(
                "it did not leave by its deadline: no peer is connected, or the peer is not \
                 reading"
                    .to_owned(),
            ),
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

/// Starts a duplex socket's task: it takes the sends handed to it, hands what the socket reads
/// to `inbound` (one message waiting for room while the handler side is full, the socket sending
/// meanwhile, so that a reply is never stuck behind the requests it answers), and ends at
/// shutdown, or once nobody takes what the socket reads, closing the socket once what it
/// queued left, for at most `linger`.
pub(crate) fn run<D: DuplexDriver>(
    driving: Driving<D>,
    inbound: Handoff,
    mut shutdown: watch::Receiver<bool>,
    linger: Duration,
) -> Started {
    let Driving {
        mut driver,
        endpoint,
        direct,
        reader,
    } = driving;
    let (sender, mut outbox) = DuplexSender::channel(&endpoint);
    let sender = match direct {
        Some(direct) => sender.direct(direct),
        None => sender,
    };
    // A subscription that reads the socket itself is gone once it no longer reads.
    let handed_over = reader.is_some();
    let task = async move {
        let mut pending: Option<Received> = None;
        // One wait for shutdown for the whole loop: a new one for every message (registered,
        // then dropped) cost a measurable share of a round trip (BENCHMARKS.md).
        let stop = stopped(&mut shutdown);
        tokio::pin!(stop);
        loop {
            tokio::select! {
                biased;
                () = &mut stop => break,
                () = driver.ready() => {}
            }
            tokio::select! {
                biased;
                () = &mut stop => break,
                Some((frames, deadline, done)) = outbox.recv(), if driver.takes_sends() => {
                    if Instant::now() >= deadline {
                        done.settle(Err(late_for_its_turn(&endpoint)));
                    } else {
                        driver.take((frames, deadline, done)).await;
                    }
                }
                permit = inbound.room(), if pending.is_some() => match (permit, pending.take()) {
                    (Ok(permit), Some(received)) => inbound.hand(permit, received),
                    // Kept, to be counted as lost below.
                    (_, received) => {
                        pending = received;
                        break;
                    }
                },
                () = inbound.closed(), if handed_over => break,
                read = driver.next(pending.is_none() && !handed_over) => {
                    if hand_on(read, &mut driver, &inbound, &mut pending).is_err() {
                        break;
                    }
                }
            }
        }
        if let Some(received) = pending {
            inbound.lost(received);
        }
        let flush = driver.close(linger).await;
        inbound.closed_with(flush, &endpoint);
    };
    Started {
        sender,
        task: Box::pin(task),
        reader,
    }
}

/// Hands a message read, and what the socket already holds after it (up to a batch), to
/// `inbound`; stops at the first that must wait for room, keeping it in `pending`.
fn hand_on<D: DuplexDriver>(
    read: Option<Received>,
    driver: &mut D,
    inbound: &Handoff,
    pending: &mut Option<Received>,
) -> Result<(), Closed> {
    let Some(mut received) = read else {
        return Ok(());
    };
    for turn in 1..=READ_BATCH {
        *pending = inbound.offer(received)?;
        if pending.is_some() || turn == READ_BATCH {
            break;
        }
        match driver.read_queued() {
            Some(more) => received = more,
            None => break,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use ruststream::Bytes;

    use super::*;

    /// A socket holding messages already read, numbered from 0.
    struct Holding(VecDeque<Received>);

    impl Holding {
        fn new(messages: u8) -> Self {
            Self(
                (0..messages)
                    .map(|n| Received::new(vec![Bytes::from(vec![n])]))
                    .collect(),
            )
        }
    }

    impl DuplexDriver for Holding {
        async fn take(&mut self, _: HandedSend) {}

        async fn next(&mut self, _: bool) -> Option<Received> {
            self.0.pop_front()
        }

        fn read_queued(&mut self) -> Option<Received> {
            self.0.pop_front()
        }

        async fn close(self, _: Duration) -> Flush {
            Flush::Flushed
        }
    }

    fn numbers(rx: &mut mpsc::Receiver<Received>) -> Vec<u8> {
        std::iter::from_fn(|| rx.try_recv().ok())
            .map(|received| received.frames[0][0])
            .collect()
    }

    #[test]
    fn a_batch_hands_on_every_message_it_reads_and_reads_no_more() {
        let mut socket = Holding::new(40);
        let (tx, mut rx) = mpsc::channel(100);
        let inbound = Handoff::Channel(tx, Arc::default());
        let mut pending = None;
        let first = socket.0.pop_front();
        hand_on(first, &mut socket, &inbound, &mut pending).unwrap();
        assert_eq!(numbers(&mut rx), (0..32).collect::<Vec<_>>());
        assert!(pending.is_none());
        assert_eq!(socket.0.len(), 8, "the rest stay with the socket");
    }

    #[test]
    fn a_full_channel_keeps_the_message_that_found_no_room_and_reads_no_more() {
        let mut socket = Holding::new(10);
        let (tx, mut rx) = mpsc::channel(3);
        let inbound = Handoff::Channel(tx, Arc::default());
        let mut pending = None;
        let first = socket.0.pop_front();
        hand_on(first, &mut socket, &inbound, &mut pending).unwrap();
        assert_eq!(numbers(&mut rx), vec![0, 1, 2]);
        assert_eq!(pending.map(|received| received.frames[0][0]), Some(3));
        assert_eq!(socket.0.len(), 6, "the rest stay with the socket");
    }
}
