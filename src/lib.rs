//! `ruststream-zmq`: the ZeroMQ transport of the [RustStream](ruststream) messaging framework.
//!
//! A service writes `#[subscriber("payments")]` handlers and mounts them on [`ZmqQueue`]
//! (PUSH/PULL), [`ZmqFanout`] (PUB/SUB) or [`ZmqRpc`] (ROUTER responder, DEALER requester), each
//! over a [`ZmqEndpoint<Bound>`](ZmqEndpoint) or a [`ZmqEndpoint<Dialing>`](ZmqEndpoint); peers
//! written with libzmq speak the wire format of [`wire`].
//!
//! ZeroMQ settles nothing. `ack` and `nack` answer [`AckError::Unsupported`](ruststream::AckError),
//! a plain `retry()` delivers nothing again, and every retry is a copy this service publishes:
//! a bound queue or fan-out subscription's copies go to its own listener; a dialing one's, and
//! every responder's, go to the destination its registration names.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod assertions;
mod broker;
mod connection;
mod delivery;
mod endpoint;
mod error;
mod monitor;
mod publish;
pub mod routing;
mod rpc;
mod socket;
mod subscription;
#[cfg(feature = "testing")]
mod testing;
mod transport;
pub mod wire;

/// A task a broker spawns: a socket's loop, a reader's pump.
type BoxTask = std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

pub use broker::{
    ConnectedZmq, ConnectedZmqFanout, ConnectedZmqQueue, ConnectedZmqRpc, FanoutKind, Pattern,
    QueueKind, RpcKind, ZmqBroker, ZmqFanout, ZmqQueue, ZmqRpc,
};
pub use delivery::{ZmqMessage, ZmqResponderSubscriber, ZmqSubscriber};
pub use endpoint::{Bound, Dialing, Ready, Side, WantsRetryDestination, ZmqEndpoint};
pub use error::{SocketFault, ZmqError};
pub use monitor::ZmqMonitor;
pub use publish::{ZmqPublish, ZmqPublisher};
pub use rpc::{Responder, ToRequester, ZmqRequest, ZmqRequester};
pub use subscription::{
    FanoutSubscription, OneWay, OutRetry, QueueSubscription, Subscription, WantsDestination,
};
pub use wire::WireLimits;

/// What a routes file imports: the framework's prelude, this crate's service-facing types, and
/// the publish policies under the framework's uniform names.
pub mod prelude {
    pub use ruststream::prelude::*;

    pub use crate::{
        Bound, Dialing, FanoutSubscription, OutRetry, QueueSubscription, Responder, Side,
        ToRequester, WireLimits, ZmqEndpoint, ZmqError, ZmqFanout, ZmqMessage, ZmqMonitor,
        ZmqQueue, ZmqRpc,
    };
    pub use crate::{ZmqPublish as Publish, ZmqRequest as Request};
}
