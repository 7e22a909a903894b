//! A bound PULL read by its subscription, in the task that runs its handler.
//!
//! Read by a task of its own, a message waits for two turns of the runtime, the reading task's
//! and the handler's; when the runtime's queue is long (a burst of retry copies falling due, a
//! task each) every turn waits for the whole queue. Read here, it waits for one.
//!
//! The socket closes by dropping its [`Driven`], which lets go of its registration first; the
//! reading end and the task that closes it share it, and the reading end ends once it is gone.

use std::{
    sync::{Arc, Mutex, PoisonError},
    task::Poll,
};

use futures::task::AtomicWaker;
use tokio::sync::{mpsc, watch};

use super::{Driven, MonitoredSocket};
use crate::transport::{
    backend::{BoxTask, stopped},
    reading_end::{ReadingEnd, Received},
};

/// The socket, shared by its reading end and the task that closes it; `None` once closed.
struct Slot {
    driven: Mutex<Option<Driven>>,
    /// The reading end's wait, woken when the socket closes under it.
    waiting: AtomicWaker,
}

/// Hands `socket`, a bound PULL, to its subscription: its reading end, and the task that keeps
/// its peers and closes it at `shutdown`, or once `subscriber` is gone.
pub(super) fn hand_over(
    socket: MonitoredSocket,
    subscriber: mpsc::Sender<Received>,
    mut shutdown: watch::Receiver<bool>,
) -> (ReadingEnd, BoxTask) {
    let MonitoredSocket {
        driven,
        peers,
        monitor,
        address,
        _admits,
        _listening,
        ..
    } = socket;
    let slot = Arc::new(Slot {
        driven: Mutex::new(Some(driven)),
        waiting: AtomicWaker::new(),
    });
    let reading = Arc::clone(&slot);
    let messages = futures::stream::poll_fn(move |cx| {
        // Reading here takes a turn of the runtime's budget, as a channel's receive does, so
        // that a long run of messages lets the task's other work in.
        let budget = std::task::ready!(tokio::task::coop::poll_proceed(cx));
        let held = reading
            .driven
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(driven) = held.as_ref() else {
            return Poll::Ready(None);
        };
        match driven.poll_recv(cx) {
            Poll::Ready(Ok(frames)) => {
                budget.made_progress();
                Poll::Ready(Some(Received::new(frames)))
            }
            Poll::Ready(Err(zmq::Error::ETERM)) => Poll::Ready(None),
            Poll::Ready(Err(err)) => {
                tracing::debug!(endpoint = %address, socket = "PULL", error = %err, "a read failed");
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            Poll::Pending => {
                // Registered under the lock the closing task takes before it wakes this.
                reading.waiting.register(cx.waker());
                Poll::Pending
            }
        }
    });
    let task = async move {
        let stop = stopped(&mut shutdown);
        let gone = subscriber.closed();
        tokio::select! {
            () = stop => {}
            () = gone => {}
        }
        let closing = slot
            .driven
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(closing);
        slot.waiting.wake();
        let _ = tokio::time::timeout(super::LINGER, peers.until(|peers| peers.unbound)).await;
        drop((monitor, _admits, _listening));
    };
    (ReadingEnd::new(Box::pin(messages)), Box::pin(task))
}
