//! Publishing: the policy a mount site names, and the live publisher it pairs into.

use std::sync::Arc;

use ruststream::{BytesMut, OutgoingMessage, Publisher, Take};

use crate::{connection::Connection, error::ZmqError};

/// The publish policy of the one-way patterns (`Publish` in the prelude): configuration only,
/// paired into a [`ZmqPublisher`] at startup.
///
/// A destination is a name, sent through the broker's own endpoint, or `name@tcp://host:port`
/// (`name@ipc://path`), sent through a socket dialing that endpoint: that is how a dialing
/// subscription's copies reach a queue the service binds elsewhere.
#[derive(Debug, Clone, Copy, Default)]
pub struct ZmqPublish;

/// A live publisher. After its broker shuts down every publish answers
/// [`ZmqError::ShutDown`], never a silent success.
#[derive(Clone)]
pub struct ZmqPublisher {
    connection: Arc<Connection>,
}

impl ZmqPublisher {
    pub(crate) fn new(connection: Arc<Connection>) -> Self {
        Self { connection }
    }
}

impl std::fmt::Debug for ZmqPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZmqPublisher")
            .field("endpoint", &self.connection.endpoint())
            .finish()
    }
}

impl Publisher for ZmqPublisher {
    /// The client queues the frames past the call, so it takes the framework's buffer.
    type Payload = Take;
    type Error = ZmqError;
    type Options = ();

    async fn publish(
        &self,
        msg: OutgoingMessage<'_, BytesMut>,
        _options: Option<&()>,
    ) -> Result<(), ZmqError> {
        let (name, payload, headers) = msg.into_parts();
        self.connection
            .publish(name, &headers, payload.freeze())
            .await
    }
}
