//! One delivery: the name, headers and payload a peer sent, as the framework reads it.
//!
//! Imports: the leaves (`wire`) and `transport` (the release a delivery carries).

use std::sync::Arc;

use ruststream::{AckError, Bytes, HeaderMap, IncomingMessage, Str};

use crate::{transport::Release, wire::Inbound};

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
    /// The endpoint the subscription reads from.
    endpoint: Arc<str>,
    /// On a responder, the identity of the requester.
    requester: Option<Bytes>,
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
        release: Release,
    ) -> Self {
        Self {
            name: inbound.name,
            headers: inbound.headers,
            payload: inbound.payload,
            endpoint,
            requester,
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

    /// The socket kept no copy, so there is nothing to settle.
    async fn ack(self) -> Result<(), AckError> {
        Err(AckError::Unsupported)
    }

    /// Nothing can be given back to a socket: a retry is a copy the runtime publishes.
    async fn nack(self, _requeue: bool) -> Result<(), AckError> {
        Err(AckError::Unsupported)
    }
}
