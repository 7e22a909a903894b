//! Who reads a subscription's one-way socket (PULL, SUB), decided in one place ([`start`]): the
//! subscription itself where the backend hands the socket over, else a task of its own that
//! pumps what the socket reads into the subscription's channel.

use std::sync::Arc;

use ruststream::Bytes;
use tokio::sync::{Notify, mpsc, watch};

use super::{
    backend::{BoxTask, HandOver, ReadSocket, stopped},
    reading_end::{ReadingEnd, Received},
};
use crate::monitor::SocketFigures;

/// A bound fan-out's check that its own publisher reaches its listener: the one frame the
/// publisher sends, and the signal the listener's reader gives when it reads that frame.
#[derive(Clone)]
pub(crate) struct Probe {
    pub(crate) frame: Bytes,
    pub(crate) heard: Arc<Notify>,
}

impl Probe {
    /// The probe of `subscription`. Its frame begins with the subscription's name, so that the
    /// listener keeps its one filter. With two, the SUB sent two subscription messages at once,
    /// and under load about one start in a thousand never heard its probe: the `zeromq` client's
    /// PUB takes each message in under a lock that blocks the thread, and a hung run had a
    /// worker blocked there for good. With one filter, none did in 16,000 starts.
    pub(crate) fn new(subscription: &str) -> Self {
        Self {
            frame: Bytes::from(format!("{subscription}\u{1}ruststream-zmq.probe")),
            heard: Arc::new(Notify::new()),
        }
    }
}

/// Where a subscription's socket hands what it reads, and when it stops.
pub(crate) struct ReadInto {
    pub(crate) tx: mpsc::Sender<Received>,
    pub(crate) figures: Arc<SocketFigures>,
    /// On a bound fan-out: the frame of its own publisher, picked out of what it reads.
    pub(crate) probe: Option<Probe>,
    pub(crate) shutdown: watch::Receiver<bool>,
}

/// Starts reading `socket`: answers its reading end where the subscription reads it itself (the
/// backend hands it over, and no probe has to be picked out of its messages), and the task to
/// spawn, which keeps the socket's peers or reads it, and closes it at the end.
pub(crate) fn start<R: ReadSocket>(socket: R, into: ReadInto) -> (Option<ReadingEnd>, BoxTask) {
    let socket = if into.probe.is_none() {
        match socket.hand_over(into.tx.clone(), into.shutdown.clone()) {
            HandOver::Handed(end, task) => return (Some(end), task),
            HandOver::Kept(socket) => socket,
        }
    } else {
        socket
    };
    (None, Box::pin(pump(socket, into)))
}

/// Reads and hands over until the broker shuts down (or is dropped) or the subscriber is
/// dropped, then closes the socket. On a bound fan-out, `probe` is told when the broker's own
/// publisher reaches the listener.
async fn pump<R: ReadSocket>(
    mut reader: R,
    ReadInto {
        tx,
        figures,
        probe,
        mut shutdown,
    }: ReadInto,
) {
    // Both ends are watched by one future each for the whole loop: making them anew for every
    // message cost more than reading it.
    let stop = stopped(&mut shutdown);
    let closed = tx.closed();
    tokio::pin!(stop, closed);
    loop {
        let received = tokio::select! {
            biased;
            () = &mut stop => break,
            () = &mut closed => break,
            received = reader.recv() => received,
        };
        if let Some(probe) = &probe
            && received.frames.len() == 1
            && received.frames[0] == probe.frame
        {
            probe.heard.notify_one();
            continue;
        }
        // The subscriber keeps up, as a rule: only a full channel needs a wait.
        // A message read here and not handed on (the subscription closed first) is counted.
        let received = match tx.try_send(received) {
            Ok(()) => {
                figures.count_received();
                continue;
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                figures.count_lost();
                break;
            }
            Err(mpsc::error::TrySendError::Full(received)) => received,
        };
        let handed = tokio::select! {
            biased;
            () = &mut stop => false,
            sent = tx.send(received) => sent.is_ok(),
        };
        if !handed {
            figures.count_lost();
            break;
        }
        figures.count_received();
    }
    reader.close().await;
}
