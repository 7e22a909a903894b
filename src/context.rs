//! What a handler can read about the delivery it handles: [`ZmqContext`] and its keys, taken
//! as `Ctx<..>` parameters.

use std::sync::Arc;

use ruststream::{
    BuildContext, Bytes, ContextField, Field, IncomingMessage, Str, runtime::RETRY_COUNT_HEADER,
};

use crate::message::ZmqMessage;

/// A delivery as a handler can see it, built for each one with no allocation.
///
/// Read a field with its key as a handler parameter:
///
/// ```
/// use ruststream_zmq::prelude::*;
/// use ruststream_zmq::{Attempt, MessageName};
/// use serde::Deserialize;
///
/// #[derive(Deserialize)]
/// struct Order { id: u64 }
///
/// // A fan-out subscription `orders` also receives `orders.eu` and `orders.us`.
/// #[subscriber(FanoutSubscription::<Bound>)]
/// async fn route(order: &Order, Ctx(name): Ctx<MessageName>, Ctx(attempt): Ctx<Attempt>) -> HandlerOutcome {
///     tracing::info!(order.id, region = %name, attempt, "routed");
///     HandlerOutcome::ack()
/// }
/// ```
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct ZmqContext {
    /// The name the sender published under (frame 0): on a fan-out, the topic that matched the
    /// subscription's prefix. A retry copy is published to the subscription's own address, so
    /// it arrives under the subscription's name (on a fan-out, the prefix, not the topic).
    pub name: Str,
    /// The endpoint the subscription reads from: the address it listens on (port resolved), or
    /// the one it dials.
    pub endpoint: Arc<str>,
    /// On a responder, the identity of the requester that sent the request.
    pub requester: Option<Bytes>,
    /// Which attempt this delivery is: 1 for a first delivery, one more for each retry copy.
    pub attempt: u32,
}

impl BuildContext<ZmqMessage> for ZmqContext {
    fn build(message: &ZmqMessage) -> Self {
        let retries = message
            .headers()
            .get_str(RETRY_COUNT_HEADER)
            .and_then(|count| count.trim().parse::<u32>().ok())
            .unwrap_or(0);
        Self {
            name: message.name_str().clone(),
            endpoint: Arc::clone(message.endpoint()),
            requester: message.requester().cloned(),
            attempt: retries.saturating_add(1),
        }
    }
}

/// `Ctx<MessageName>`: the name the message arrived under (on a fan-out, the topic).
#[derive(Debug, Default, Clone, Copy)]
pub struct MessageName;

/// `Ctx<SubscriptionEndpoint>`: the endpoint the delivery arrived on.
#[derive(Debug, Default, Clone, Copy)]
pub struct SubscriptionEndpoint;

/// `Ctx<RequesterIdentity>`: on a responder, the identity of the requester (`None` elsewhere).
#[derive(Debug, Default, Clone, Copy)]
pub struct RequesterIdentity;

/// `Ctx<Attempt>`: 1 for a first delivery, one more for each retry copy.
#[derive(Debug, Default, Clone, Copy)]
pub struct Attempt;

/// Each key reads one field by reference and, as a `Ctx` parameter, yields an owned copy (a
/// reference count, never a new allocation).
macro_rules! keys {
    ($($key:ident: $field:ident -> $value:ty),+ $(,)?) => {$(
        impl ContextField for $key {
            type Context = ZmqContext;
            type Value = $value;
            fn read(self, src: &ZmqContext) -> $value {
                src.$field.clone()
            }
        }

        impl Field<ZmqContext> for $key {
            type Value<'a> = &'a $value;
            fn get(self, src: &ZmqContext) -> &$value {
                &src.$field
            }
        }
    )+};
}

keys! {
    MessageName: name -> Str,
    SubscriptionEndpoint: endpoint -> Arc<str>,
    RequesterIdentity: requester -> Option<Bytes>,
    Attempt: attempt -> u32,
}
