//! Request-reply: the responder (a ROUTER subscription answering at the identity each request
//! carries) and the requester (one DEALER, many requests in flight, matched by
//! `correlation-id`).

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use ruststream::{
    Bytes, BytesMut, OutgoingMessage, PairError, PublishPolicy, Publisher, RequestReply, Str, Take,
    runtime::{ForReply, Names, Outgoing, PublishContext, PublishTransform},
};
use tokio::sync::{mpsc, oneshot};

use crate::{
    ZmqMessage,
    broker::{ConnectedZmq, RpcKind},
    connection::Connection,
    endpoint::Side,
    error::ZmqError,
    socket::{DuplexSender, Role},
    wire::{self, CORRELATION_ID, Frames, REPLY_TO, Requester},
};

/// How many identities a responder remembers as REQ peers (whose answers need the delimiter).
const BOOK_CAP: usize = 65_536;

/// Which requesters sent the REQ delimiter, so their answers carry it back.
#[derive(Debug, Default)]
pub(crate) struct ReplyBook {
    delimited: Mutex<HashSet<Bytes>>,
}

impl ReplyBook {
    pub(crate) fn remember(&self, requester: Requester) {
        let mut delimited = self
            .delimited
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if requester.delimited {
            // Bounded: identities change with every reconnect, and the book must not grow forever.
            if delimited.len() >= BOOK_CAP {
                delimited.clear();
            }
            delimited.insert(requester.identity);
        } else {
            delimited.remove(&requester.identity);
        }
    }

    pub(crate) fn requester(&self, identity: Bytes) -> Requester {
        let delimited = self
            .delimited
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&identity);
        Requester {
            identity,
            delimited,
        }
    }
}

/// The reply transform of a responder: sends the answer to the requester the request's
/// `reply-to` names, carrying its `correlation-id`.
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
        if let Some(address) = headers.get_shared(REPLY_TO)
            && let Ok(address) = Str::try_from(address)
        {
            out.set_name(address);
        }
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

type Pending = Arc<Mutex<HashMap<Str, oneshot::Sender<ZmqMessage>>>>;

/// The broker's one DEALER and the requests waiting for their answers.
pub(crate) struct RequestChannel {
    sender: DuplexSender,
    pending: Pending,
    minted: AtomicU64,
    prefix: String,
}

impl RequestChannel {
    async fn open(connection: &Arc<Connection>) -> Result<Self, ZmqError> {
        let (answers_tx, answers) = mpsc::channel(256);
        // Beside a responder this process binds, the requester dials that responder's listener.
        let (endpoint, binds) = match connection.own_listener() {
            Some(listener) => (listener, false),
            None => (connection.endpoint().to_owned(), connection.binds()),
        };
        let transport = connection.transport().clone();
        let (shutdown, patience) = (
            connection.shutdown_signal(),
            connection.settings.send_timeout,
        );
        let (sender, task, bound) = connection
            .on_own_runtime(async move {
                transport
                    .duplex(
                        Role::Dealer,
                        &endpoint,
                        binds,
                        answers_tx,
                        shutdown,
                        patience,
                    )
                    .await
            })
            .await?;
        if let Some(address) = bound {
            tracing::info!(endpoint = %address, "requesting from responders that dial in");
            connection.monitor.set_bound_address(Some(address));
        }
        connection.spawn(task);
        let pending = Pending::default();
        connection.spawn(match_answers(
            answers,
            Arc::clone(&pending),
            Arc::clone(connection),
        ));
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos());
        Ok(Self {
            sender,
            pending,
            minted: AtomicU64::new(0),
            prefix: format!("{:x}-{:x}", std::process::id(), started),
        })
    }

    fn mint(&self) -> String {
        format!(
            "{}-{}",
            self.prefix,
            self.minted.fetch_add(1, Ordering::Relaxed)
        )
    }
}

/// Hands each answer to the request waiting for its `correlation-id`.
async fn match_answers(
    mut answers: mpsc::Receiver<Frames>,
    pending: Pending,
    connection: Arc<Connection>,
) {
    while let Some(frames) = answers.recv().await {
        let answer = match wire::decode(&frames, &connection.settings.limits, None) {
            Ok(answer) => ZmqMessage::from(answer),
            Err(refusal) => {
                connection.monitor.count_refusal(&refusal);
                tracing::warn!(endpoint = %connection.endpoint(), rule = refusal.rule(), "refused an answer from a responder: {refusal}");
                continue;
            }
        };
        let waiter = answer.correlation_id().and_then(|id| {
            pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(id)
        });
        match waiter {
            Some(waiter) => {
                let _ = waiter.send(answer);
            }
            None => tracing::debug!(
                endpoint = %connection.endpoint(),
                correlation_id = answer.correlation_id().unwrap_or("none"),
                "an answer no request waits for (it timed out, or was never asked)"
            ),
        }
    }
}

/// Removes a request's entry however its wait ends, so that memory stays flat.
struct Waiting<'a> {
    pending: &'a Pending,
    id: Str,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
    }
}

impl ZmqRequester {
    async fn channel(&self) -> Result<&RequestChannel, ZmqError> {
        self.connection
            .requester
            .get_or_try_init(|| RequestChannel::open(&self.connection))
            .await
    }

    /// How many requests are waiting for an answer right now.
    #[must_use]
    pub fn in_flight(&self) -> usize {
        self.connection.requester.get().map_or(0, |channel| {
            channel
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len()
        })
    }

    async fn send_request(
        &self,
        msg: OutgoingMessage<'_, BytesMut>,
    ) -> Result<ZmqMessage, ZmqError> {
        self.connection.ensure_open("a requester")?;
        let channel = self.channel().await?;
        let (name, payload, mut headers) = msg.into_parts();
        let id = Str::from(
            headers
                .correlation_id()
                .map_or_else(|| channel.mint(), str::to_owned),
        );
        headers.insert(CORRELATION_ID, id.clone());
        let frames = wire::encode(name, &headers, payload.freeze())?;
        let (tx, answer) = oneshot::channel();
        channel
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone(), tx);
        let _waiting = Waiting {
            pending: &channel.pending,
            id,
        };
        channel.sender.send(frames).await?;
        answer.await.map_err(|_| ZmqError::ShutDown {
            what: "a requester",
        })
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
        self.connection.ensure_open("a requester")?;
        let channel = self.channel().await?;
        let (name, payload, headers) = msg.into_parts();
        channel
            .sender
            .send(wire::encode(name, &headers, payload.freeze())?)
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
        let destination = msg.name().to_owned();
        tokio::time::timeout(timeout, self.send_request(msg))
            .await
            .map_err(|_| ZmqError::RequestTimeout {
                destination,
                timeout,
            })?
    }
}
