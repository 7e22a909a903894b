//! `ruststream-zmq`: the ZeroMQ transport of the [RustStream](ruststream) messaging framework.
//!
//! A service writes `#[subscriber("payments")]` handlers and mounts them on [`ZmqQueue`]
//! (PUSH/PULL) over a [`ZmqEndpoint<Bound>`](ZmqEndpoint) or a
//! [`ZmqEndpoint<Dialing>`](ZmqEndpoint); peers written with libzmq speak the wire format of
//! [`wire`].
//!
//! ZeroMQ settles nothing. `ack` and `nack` answer [`AckError::Unsupported`](ruststream::AckError),
//! a plain `retry()` delivers nothing again, and every retry is a copy this service publishes:
//! a bound subscription's copies go to its own listener, a dialing one's to the destination its
//! registration names.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod connection;
mod delivery;
mod endpoint;
mod error;
mod monitor;
mod publish;
mod queue;
pub mod routing;
mod socket;
pub mod wire;

pub use delivery::{ZmqMessage, ZmqSubscriber};
pub use endpoint::{Bound, Dialing, Ready, Side, WantsRetryDestination, ZmqEndpoint};
pub use error::{SocketFault, ZmqError};
pub use monitor::ZmqMonitor;
pub use publish::{ZmqPublish, ZmqPublisher};
pub use queue::{ConnectedZmqQueue, OutRetry, QueueSubscription, ZmqQueue};
pub use wire::WireLimits;

/// What a routes file imports: the framework's prelude, this crate's service-facing types, and
/// the publish policy under the framework's uniform name.
pub mod prelude {
    pub use ruststream::prelude::*;

    pub use crate::ZmqPublish as Publish;
    pub use crate::{
        Bound, Dialing, OutRetry, QueueSubscription, Side, WireLimits, ZmqEndpoint, ZmqError,
        ZmqMessage, ZmqMonitor, ZmqQueue,
    };
}
