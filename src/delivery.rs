//! Deliveries: what a subscription hands the framework, and the task that reads them off a socket.

use std::time::Duration;

use futures::Stream;
use ruststream::{
    AckError, BatchSubscriber, BufferedSubscriber, Bytes, HeaderMap, IncomingMessage, Str,
    Subscriber,
};
use tokio::sync::{mpsc, watch};

use crate::{
    error::ZmqError,
    monitor::ZmqMonitor,
    socket::{Reader, stopped},
    wire::{Frames, Inbound, WireLimits, decode},
};

/// How many decoded messages wait between the socket and the handler before the reader stops
/// reading (and the socket's own queue takes the pressure).
const INBOX: usize = 256;

/// One delivery from a ZeroMQ socket.
///
/// ZeroMQ settles nothing: [`ack`](IncomingMessage::ack) and [`nack`](IncomingMessage::nack)
/// answer [`AckError::Unsupported`], and [`redelivery_count`](IncomingMessage::redelivery_count)
/// is `None` (the framework counts attempts in the `x-ruststream-retry-count` header).
#[derive(Debug, Clone)]
pub struct ZmqMessage {
    name: Str,
    headers: HeaderMap,
    payload: Bytes,
}

impl ZmqMessage {
    /// The name the sender published under (frame 0).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl From<Inbound> for ZmqMessage {
    fn from(inbound: Inbound) -> Self {
        Self {
            name: inbound.name,
            headers: inbound.headers,
            payload: inbound.payload,
        }
    }
}

impl IncomingMessage for ZmqMessage {
    fn payload(&self) -> &[u8] {
        &self.payload
    }

    fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The socket kept no copy, so there is nothing to settle.
    async fn ack(self) -> Result<(), AckError> {
        Err(AckError::Unsupported)
    }

    /// Nothing can be given back to a socket: a retry is a copy the runtime publishes.
    async fn nack(self, _requeue: bool) -> Result<(), AckError> {
        Err(AckError::Unsupported)
    }
}

/// The deliveries of one subscription, one at a time or in batches.
pub struct ZmqSubscriber {
    buffered: BufferedSubscriber<Inbox>,
}

/// The channel the reader task fills.
struct Inbox {
    rx: mpsc::Receiver<ZmqMessage>,
}

impl Subscriber for Inbox {
    type Message = ZmqMessage;
    type Error = ZmqError;

    fn stream(&mut self) -> impl Stream<Item = Result<ZmqMessage, ZmqError>> + Send + '_ {
        futures::stream::poll_fn(|cx| self.rx.poll_recv(cx).map(|next| next.map(Ok)))
    }
}

impl ZmqSubscriber {
    pub(crate) fn new(rx: mpsc::Receiver<ZmqMessage>, max_wait: Duration) -> Self {
        Self {
            buffered: BufferedSubscriber::new(Inbox { rx }).max_wait(max_wait),
        }
    }
}

impl Subscriber for ZmqSubscriber {
    type Message = ZmqMessage;
    type Error = ZmqError;

    fn stream(&mut self) -> impl Stream<Item = Result<ZmqMessage, ZmqError>> + Send + '_ {
        self.buffered.stream()
    }
}

impl BatchSubscriber for ZmqSubscriber {
    type Batch = Vec<ZmqMessage>;

    fn batches(
        &mut self,
        size: std::num::NonZeroUsize,
    ) -> impl Stream<Item = Result<Vec<ZmqMessage>, ZmqError>> + Send + '_ {
        self.buffered.batches(size)
    }
}

/// What the reader task needs to know about its subscription.
pub(crate) struct Intake {
    /// The subscription's name, for logs and for a lone frame's name.
    pub subscription: Str,
    /// Whether a lone frame is a payload here (the queue and the responder) or refused (the
    /// fan-out, which filters on the name).
    pub lone_frame_is_payload: bool,
    pub limits: WireLimits,
    pub monitor: ZmqMonitor,
}

impl Intake {
    /// Decodes one message, or warns once and counts why it was refused.
    pub(crate) fn admit(&self, frames: &Frames) -> Option<ZmqMessage> {
        let lone = self.lone_frame_is_payload.then_some(&self.subscription);
        match decode(frames, &self.limits, lone) {
            Ok(inbound) => Some(inbound.into()),
            Err(refusal) => {
                self.monitor.count_refusal(&refusal);
                let bytes: usize = frames.iter().map(Bytes::len).sum();
                tracing::warn!(
                    subscription = %self.subscription,
                    rule = refusal.rule(),
                    frames = frames.len(),
                    bytes,
                    "refused a message from a peer: {refusal}"
                );
                None
            }
        }
    }
}

/// Opens the channel between a reader task and its subscriber.
pub(crate) fn inbox(max_wait: Duration) -> (mpsc::Sender<ZmqMessage>, ZmqSubscriber) {
    let (tx, rx) = mpsc::channel(INBOX);
    (tx, ZmqSubscriber::new(rx, max_wait))
}

/// Reads, decodes and hands over until the broker shuts down or the subscriber is dropped, then
/// closes the socket.
pub(crate) async fn pump(
    mut reader: Reader,
    intake: Intake,
    tx: mpsc::Sender<ZmqMessage>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let frames = tokio::select! {
            frames = reader.recv() => frames,
            () = stopped(&mut shutdown) => break,
            () = tx.closed() => break,
        };
        let Some(message) = intake.admit(&frames) else {
            continue;
        };
        tokio::select! {
            sent = tx.send(message) => if sent.is_err() { break },
            () = stopped(&mut shutdown) => break,
        }
    }
    reader.close().await;
}
