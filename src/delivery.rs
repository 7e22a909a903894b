//! Deliveries: what a subscription hands the framework, and the task that reads them off a socket.

use std::time::Duration;

use futures::Stream;
use ruststream::{
    AckError, BatchSubscriber, BufferedSubscriber, Bytes, HeaderMap, IncomingMessage, Str,
    Subscriber,
};
use std::sync::Arc;

use tokio::sync::{Notify, mpsc, watch};

use crate::{
    error::ZmqError,
    monitor::ZmqMonitor,
    rpc::ReplyBook,
    socket::stopped,
    wire::{Frames, Inbound, WireLimits, decode, decode_request},
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
    /// In process, the harness's count of deliveries in flight, released once when the last
    /// handle on this delivery goes: settled, or dropped unsettled.
    #[cfg(feature = "testing")]
    release: Option<Arc<Release>>,
}

/// Tells the in-process harness a delivery is done with, once, when dropped.
#[cfg(feature = "testing")]
#[derive(Debug)]
pub(crate) struct Release(ruststream::testing::Coordinator);

#[cfg(feature = "testing")]
impl Drop for Release {
    fn drop(&mut self) {
        self.0.consumed();
    }
}

impl ZmqMessage {
    /// The name the sender published under (frame 0).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The `correlation-id` header, which matches an answer to its request.
    #[must_use]
    pub fn correlation_id(&self) -> Option<&str> {
        self.headers.correlation_id()
    }
}

impl From<Inbound> for ZmqMessage {
    fn from(inbound: Inbound) -> Self {
        Self {
            name: inbound.name,
            headers: inbound.headers,
            payload: inbound.payload,
            #[cfg(feature = "testing")]
            release: None,
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
pub struct Inbox {
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
    pub(crate) fn new(inbox: Inbox, max_wait: Duration) -> Self {
        Self {
            buffered: BufferedSubscriber::new(inbox).max_wait(max_wait),
        }
    }
}

/// The requests of one responder, one at a time.
///
/// It offers no batches: a ROUTER answers each peer at its own address, and the replies of a
/// batch would share one context.
pub struct ZmqResponderSubscriber {
    inbox: Inbox,
}

impl ZmqResponderSubscriber {
    pub(crate) fn new(inbox: Inbox) -> Self {
        Self { inbox }
    }
}

impl Subscriber for ZmqResponderSubscriber {
    type Message = ZmqMessage;
    type Error = ZmqError;

    fn stream(&mut self) -> impl Stream<Item = Result<ZmqMessage, ZmqError>> + Send + '_ {
        self.inbox.stream()
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

/// How a subscription reads its frames.
pub(crate) enum Reading {
    /// `[name][headers][payload]`; a lone frame is a payload (the queue) or refused (the
    /// fan-out, which filters on the name).
    OneWay { lone_frame_is_payload: bool },
    /// A ROUTER's requests, whose senders the book remembers for the answers.
    Requests { book: Arc<ReplyBook> },
}

/// What the reader task needs to know about its subscription.
pub(crate) struct Intake {
    /// The subscription's name, for logs and for a lone frame's name.
    pub subscription: Str,
    pub reading: Reading,
    pub limits: WireLimits,
    pub monitor: ZmqMonitor,
    /// Set on a bound fan-out: told when the broker's own publisher reaches the listener.
    pub probe: Option<Arc<Notify>>,
    /// In process: the harness's count, which every frame read here was added to.
    #[cfg(feature = "testing")]
    pub peer: Option<crate::testing::Peer>,
}

impl Intake {
    /// Decodes one message, or warns once and counts why it was refused.
    pub(crate) fn admit(&self, frames: &Frames) -> Option<ZmqMessage> {
        let admitted = self.decode(frames);
        #[cfg(feature = "testing")]
        if let Some(coordinator) = self
            .peer
            .as_ref()
            .and_then(crate::testing::Peer::coordinator)
        {
            return match admitted {
                Some(mut message) => {
                    message.release = Some(Arc::new(Release(coordinator.clone())));
                    Some(message)
                }
                None => {
                    // A probe or a refused frame ends here: nothing will settle it.
                    coordinator.consumed();
                    None
                }
            };
        }
        admitted
    }

    fn decode(&self, frames: &Frames) -> Option<ZmqMessage> {
        if let Some(probe) = &self.probe
            && frames.len() == 1
            && frames[0] == PROBE_TOPIC.as_bytes()
        {
            probe.notify_one();
            return None;
        }
        let decoded = match &self.reading {
            Reading::OneWay {
                lone_frame_is_payload,
            } => decode(
                frames,
                &self.limits,
                lone_frame_is_payload.then_some(&self.subscription),
            ),
            Reading::Requests { book } => decode_request(frames, &self.limits, &self.subscription)
                .map(|(requester, inbound)| {
                    book.remember(requester);
                    inbound
                }),
        };
        match decoded {
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

/// The topic a bound fan-out's own publisher sends to learn that its listener hears it.
pub(crate) const PROBE_TOPIC: &str = "\u{1}ruststream-zmq.probe";

/// Opens the channel between a reader task and its subscriber.
pub(crate) fn inbox() -> (mpsc::Sender<ZmqMessage>, Inbox) {
    let (tx, rx) = mpsc::channel(INBOX);
    (tx, Inbox { rx })
}

/// Where a reader task takes its frames from: a socket of its own, or a duplex socket's task.
pub(crate) enum FrameSource {
    Socket(crate::transport::Reader),
    Channel(mpsc::Receiver<Frames>),
}

impl FrameSource {
    async fn next(&mut self) -> Option<Frames> {
        match self {
            Self::Socket(reader) => Some(reader.recv().await),
            Self::Channel(rx) => rx.recv().await,
        }
    }

    async fn close(self) {
        if let Self::Socket(reader) = self {
            reader.close().await;
        }
    }
}

/// Reads, decodes and hands over until the broker shuts down or the subscriber is dropped, then
/// closes the socket.
pub(crate) async fn pump(
    mut source: FrameSource,
    intake: Intake,
    tx: mpsc::Sender<ZmqMessage>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let frames = tokio::select! {
            frames = source.next() => match frames {
                Some(frames) => frames,
                None => break,
            },
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
    source.close().await;
}
