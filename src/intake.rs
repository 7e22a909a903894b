//! Intake: reading a subscription's socket, decoding and refusing what peers send, and
//! stamping each request with the address its answer goes to.
//!
//! Imports: the leaves, `settings`, `transport` and `message`. Built from a transport reader (or
//! a duplex socket's channel) and the settings; knows nothing of the connection above it.

use std::sync::Arc;

use futures::Stream;
use ruststream::{Bytes, Str, Subscriber};
use tokio::sync::{Notify, mpsc, watch};

use crate::{
    error::ZmqError,
    message::ZmqMessage,
    monitor::ZmqMonitor,
    transport::{Reader, Received, stopped},
    wire::{WireLimits, decode, decode_request},
};

/// The topic a bound fan-out's own publisher sends to learn that its listener hears it.
pub(crate) const PROBE_TOPIC: &str = "\u{1}ruststream-zmq.probe";

/// The channel the reader task fills, as the framework reads a subscription.
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

/// How a subscription reads its frames.
pub(crate) enum Reading {
    /// `[name][headers][payload]`; a lone frame is a payload (the queue) or refused (the
    /// fan-out, which filters on the name).
    OneWay { lone_frame_is_payload: bool },
    /// A ROUTER's requests, each stamped with the reply address of its sender.
    Requests,
}

/// What the reader task needs to know about its subscription.
pub(crate) struct Intake {
    /// The subscription's name, for logs and for a lone frame's name.
    pub(crate) subscription: Str,
    /// The endpoint it reads from, which each delivery names.
    pub(crate) endpoint: Arc<str>,
    pub(crate) reading: Reading,
    pub(crate) limits: WireLimits,
    pub(crate) monitor: ZmqMonitor,
    /// Set on a bound fan-out: told when the broker's own publisher reaches the listener.
    pub(crate) probe: Option<Arc<Notify>>,
}

impl Intake {
    /// Decodes one message, or warns once and counts why it was refused; a refused message's
    /// release goes with it.
    fn admit(&self, received: Received) -> Option<ZmqMessage> {
        let Received { frames, release } = received;
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
                &frames,
                &self.limits,
                lone_frame_is_payload.then_some(&self.subscription),
            )
            .map(|inbound| (inbound, None)),
            Reading::Requests => decode_request(&frames, &self.limits, &self.subscription)
                .map(|(requester, inbound)| (inbound, Some(requester.identity))),
        };
        match decoded {
            Ok((inbound, requester)) => Some(ZmqMessage::new(
                inbound,
                Arc::clone(&self.endpoint),
                requester,
                release,
            )),
            Err(refusal) => {
                self.monitor.count_refusal(&self.subscription, &refusal);
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

/// Opens the channel between a reader task and its subscriber: `read_ahead` decoded messages
/// wait there before the reader stops reading (and the socket's own queue takes the pressure).
pub(crate) fn inbox(read_ahead: usize) -> (mpsc::Sender<ZmqMessage>, Inbox) {
    let (tx, rx) = mpsc::channel(read_ahead);
    (tx, Inbox { rx })
}

/// Where a reader task takes its frames from: a socket of its own, or a duplex socket's task.
pub(crate) enum FrameSource {
    Socket(Reader),
    Channel(mpsc::Receiver<Received>),
}

impl FrameSource {
    async fn next(&mut self) -> Option<Received> {
        match self {
            Self::Socket(reader) => Some(reader.recv().await),
            Self::Channel(rx) => rx.recv().await,
        }
    }

    pub(crate) async fn close(self) {
        if let Self::Socket(reader) = self {
            reader.close().await;
        }
    }
}

/// Reads, decodes and hands over until the broker shuts down (or is dropped) or the subscriber
/// is dropped, then closes the socket.
pub(crate) async fn pump(
    mut source: FrameSource,
    intake: Intake,
    tx: mpsc::Sender<ZmqMessage>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let received = tokio::select! {
            received = source.next() => match received {
                Some(received) => received,
                None => break,
            },
            () = stopped(&mut shutdown) => break,
            () = tx.closed() => break,
        };
        let Some(message) = intake.admit(received) else {
            continue;
        };
        tokio::select! {
            sent = tx.send(message) => if sent.is_err() { break },
            () = stopped(&mut shutdown) => break,
        }
    }
    source.close().await;
}
