//! Request-reply, as a service uses it: the reply transform a responder mounts
//! ([`ToRequester`]) and the requester policy and its live form ([`ZmqRequest`],
//! [`ZmqRequester`]).

use std::{sync::Arc, time::Duration};

use ruststream::{
    BytesMut, OutgoingMessage, PairError, PublishPolicy, Publisher, RequestReply, Str, Take,
    runtime::{ForReply, Names, Outgoing, PublishContext, PublishTransform},
};

use crate::{
    broker::{ConnectedZmq, RpcKind},
    connection::Connection,
    endpoint::Side,
    error::ZmqError,
    message::ZmqMessage,
    wire::{CORRELATION_ID, NOT_A_REPLY, REPLY_PREFIX, REPLY_TO},
};

/// The reply transform of a responder: sends the answer to the requester the request's
/// `reply-to` names, carrying its `correlation-id`. Only a `zmq-reply:` address, which the
/// responder stamps on every request, is answered; any other `reply-to` (on a queue or a fan-out,
/// a peer writes it) fails the answer with [`ZmqError::ReplyAddress`], and no socket is opened to
/// an address a peer wrote.
///
/// ```
/// use ruststream_zmq::prelude::*;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Deserialize)]
/// struct Ask { id: u64 }
///
/// #[derive(Serialize, Outgoing)]
/// struct Quote { price: u64 }
///
/// #[subscriber(Responder::<Bound>, reply("reply"))]
/// async fn quote(ask: &Ask) -> Quote {
///     Quote { price: ask.id * 10 }
/// }
///
/// fn app() -> RustStream {
///     RustStream::new(AppInfo::new("quotes", "0.1.0")).with_broker(
///         ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:5559")),
///         |b| {
///             b.include(quote.name("quotes").out_retry("quotes.retry@tcp://127.0.0.1:5560"))
///                 .out_reply(Publish)
///                 .transform(ToRequester);
///         },
///     )
/// }
/// # let _ = app;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ToRequester;

impl<C, Options> PublishTransform<ForReply<C>, Options> for ToRequester {
    type Destination = Names;

    fn apply(
        &self,
        out: &mut Outgoing<'_>,
        _options: &mut Option<Options>,
        cx: &PublishContext<'_, C>,
    ) {
        let headers = cx.headers();
        let address = headers
            .get_shared(REPLY_TO)
            .and_then(|address| Str::try_from(address).ok())
            .filter(|address| address.starts_with(REPLY_PREFIX))
            .unwrap_or_else(|| Str::from_static(NOT_A_REPLY));
        out.set_name(address);
        if let Some(id) = headers.get_shared(CORRELATION_ID) {
            out.headers_mut().insert(CORRELATION_ID, id);
        }
    }
}

/// The requester policy (`Request` in the prelude): pairs into a [`ZmqRequester`], which keeps
/// many requests in flight over the broker's one DEALER connection.
#[derive(Debug, Clone, Copy, Default)]
pub struct ZmqRequest;

/// A live requester. `request` sends through the broker's DEALER and waits for the answer that
/// carries the same `correlation-id` (its own, or one it mints); the timeout covers connecting,
/// sending and waiting.
#[derive(Clone)]
pub struct ZmqRequester {
    connection: Arc<Connection>,
}

impl std::fmt::Debug for ZmqRequester {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZmqRequester")
            .field("endpoint", &self.connection.endpoint())
            .finish()
    }
}

impl<S: Side> PublishPolicy<ConnectedZmq<RpcKind, S>> for ZmqRequest {
    type Live = ZmqRequester;

    async fn pair(self, connected: &ConnectedZmq<RpcKind, S>) -> Result<ZmqRequester, PairError> {
        connected
            .connection
            .ensure_open("a requester")
            .map_err(PairError::new)?;
        Ok(connected.requester())
    }

    /// The DEALER the requests leave through and what frame 0 holds.
    #[cfg(feature = "asyncapi")]
    fn channel_bindings(&self, channel: &str) -> ruststream::asyncapi::Bindings {
        crate::bindings::requesting(S::BINDS, channel)
    }
}

impl<S: Side> ConnectedZmq<RpcKind, S> {
    /// A live requester over this broker's DEALER.
    #[must_use]
    pub fn requester(&self) -> ZmqRequester {
        ZmqRequester {
            connection: Arc::clone(&self.connection),
        }
    }
}

impl ZmqRequester {
    /// How many requests are waiting for an answer right now.
    #[must_use]
    pub fn in_flight(&self) -> usize {
        self.connection
            .requests_opened()
            .map_or(0, |requests| requests.in_flight())
    }
}

impl Publisher for ZmqRequester {
    type Payload = Take;
    type Error = ZmqError;
    type Options = ();

    /// Sends without waiting for an answer.
    async fn publish(
        &self,
        msg: OutgoingMessage<'_, BytesMut>,
        _options: Option<&()>,
    ) -> Result<(), ZmqError> {
        let (name, payload, headers) = msg.into_parts();
        self.connection
            .requests()
            .await?
            .send(name, &headers, payload.freeze())
            .await
    }
}

impl RequestReply for ZmqRequester {
    type Reply = ZmqMessage;

    async fn request(
        &self,
        msg: OutgoingMessage<'_, BytesMut>,
        timeout: Duration,
    ) -> Result<ZmqMessage, ZmqError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let (name, payload, headers) = msg.into_parts();
        let asked = async {
            // A statement of its own, so that the `?` it needs ends before the request's wait.
            let requests = self.connection.requests().await?;
            requests
                .request(name, headers, payload.freeze(), deadline)
                .await
        };
        let timed_out = || ZmqError::RequestTimeout {
            destination: name.to_owned(),
            timeout,
        };
        match tokio::time::timeout_at(deadline, asked).await {
            // The send itself ran out of the same time: the request timed out.
            Ok(Err(ZmqError::Send { .. })) if tokio::time::Instant::now() >= deadline => {
                Err(timed_out())
            }
            Ok(answered) => answered,
            Err(_) => Err(timed_out()),
        }
    }
}
