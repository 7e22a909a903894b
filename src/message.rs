//! One delivery: the name, headers and payload a peer sent, as the framework reads it.

use std::sync::Arc;

use ruststream::{AckError, Bytes, HeaderMap, IncomingMessage, Partitioned, Str};

use crate::{lane::LaneKey, transport::Release, wire::Inbound};

/// One delivery from a ZeroMQ socket.
///
/// ZeroMQ settles nothing: [`ack`](IncomingMessage::ack) and [`nack`](IncomingMessage::nack)
/// answer [`AckError::Unsupported`], and [`redelivery_count`](IncomingMessage::redelivery_count)
/// is `None` (the framework counts attempts in the `x-ruststream-retry-count` header).
///
/// Its [`partition_key`](IncomingMessage::partition_key), which `workers(n, by_key)` lanes by,
/// is the value of the [`PARTITION_KEY_HEADER`](crate::PARTITION_KEY_HEADER) header, or of the
/// header its broker or subscription names (`partition_header`), or on a responder keyed with
/// `partition_by_requester` the requester's identity.
#[derive(Debug, Clone)]
pub struct ZmqMessage {
    name: Str,
    headers: HeaderMap,
    payload: Bytes,
    /// The endpoint the subscription reads from.
    endpoint: Arc<str>,
    /// On a responder, the identity of the requester.
    requester: Option<Bytes>,
    /// What the partition key is read from.
    lane: LaneKey,
    /// Let go once, when the last handle on this delivery goes: settled, or dropped unsettled.
    _release: Release,
}

impl ZmqMessage {
    /// A delivery of what was decoded on `endpoint` (from `requester`, on a responder),
    /// carrying what the transport handed with it.
    pub(crate) fn new(
        inbound: Inbound,
        endpoint: Arc<str>,
        requester: Option<Bytes>,
        lane: LaneKey,
        release: Release,
    ) -> Self {
        Self {
            name: inbound.name,
            headers: inbound.headers,
            payload: inbound.payload,
            endpoint,
            requester,
            lane,
            _release: release,
        }
    }

    pub(crate) fn name_str(&self) -> &Str {
        &self.name
    }

    pub(crate) fn endpoint(&self) -> &Arc<str> {
        &self.endpoint
    }

    pub(crate) fn requester(&self) -> Option<&Bytes> {
        self.requester.as_ref()
    }

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

impl IncomingMessage for ZmqMessage {
    fn payload(&self) -> &[u8] {
        &self.payload
    }

    fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The key its subscription lanes it by (see [`ZmqMessage`]); `None` where the message
    /// carries none, and the runtime then rotates it over the lanes.
    fn partition_key(&self) -> Option<&[u8]> {
        self.lane.of(&self.headers, self.requester.as_ref())
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

/// The same key as [`IncomingMessage::partition_key`], for code bound on the capability.
impl Partitioned for ZmqMessage {
    fn partition_key(&self) -> Option<&[u8]> {
        IncomingMessage::partition_key(self)
    }
}
