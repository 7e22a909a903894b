//! The in-process mode (feature `testing`): the framework's `InProcess` and `TestableBroker` on
//! the production brokers, over the transport's in-process bus, so `TestApp::start(app())` runs
//! a service with no network.
//!
//! Nothing in the crate imports this module.

use ruststream::{
    OutgoingMessage, RawMessage,
    testing::{Backlog, Coordinator, InProcess, TestableBroker},
};

use crate::{
    broker::{ConnectedZmq, FanoutKind, Pattern, QueueKind, RpcKind, ZmqBroker},
    endpoint::{Bound, Dialing, Side},
    error::ZmqError,
    routing::{Destination, LocalHost, Target},
    transport::{Backend, Transport},
};

impl<P: Pattern, S: Side, B: Backend> InProcess for ZmqBroker<P, S, B> {
    /// The production broker over the in-process bus: the same refusals, no sockets.
    async fn connect_in_process(self) -> Result<ConnectedZmq<P, S>, ZmqError> {
        // In process, only the loopback and wildcard forms of an address are this host's.
        let transport = Transport::in_process(self.monitor());
        self.connect_on(transport, LocalHost::default())
    }
}

impl<P: Pattern, S: Side> TestableBroker for ConnectedZmq<P, S> {
    fn install_coordinator(&self, coordinator: Coordinator) {
        if let Some(peer) = self.connection.transport().peer() {
            peer.install(coordinator);
        }
    }

    fn inject(&self, message: OutgoingMessage<'_>) {
        let connection = &self.connection;
        if let Some(peer) = connection.transport().peer() {
            peer.inject(message, P::FACTS, connection.endpoint(), connection.binds());
        }
    }

    fn published(&self, name: &str) -> Vec<RawMessage> {
        self.connection
            .transport()
            .peer()
            .map(|peer| peer.published(name))
            .unwrap_or_default()
    }

    /// A publish reaches one of this broker's subscriptions only where it lands on the listener
    /// the subscription binds; a responder's publisher reaches none of them.
    fn routes(&self, destination: &str, subscriptions: &[&str]) -> Vec<usize> {
        if P::FACTS.answers_requests {
            return Vec::new();
        }
        let Ok(parsed) = Destination::parse(destination) else {
            return Vec::new();
        };
        let Some((listener, _)) = self.connection.listener() else {
            return Vec::new();
        };
        if !matches!(self.connection.route(&parsed), Ok(Target::Dial(_))) {
            return Vec::new();
        }
        subscriptions
            .iter()
            .position(|name| *name == listener)
            .into_iter()
            .collect()
    }

    /// A queue's or a responder's peer holds what it sent before the subscription opened; a PUB
    /// drops it.
    fn backlog(&self) -> Backlog {
        if P::FACTS.peer_keeps_backlog {
            Backlog::Delivered
        } else {
            Backlog::Missed
        }
    }
}

ruststream::register_testable_broker!(ZmqBroker<QueueKind, Bound>);
ruststream::register_testable_broker!(ZmqBroker<QueueKind, Dialing>);
ruststream::register_testable_broker!(ZmqBroker<FanoutKind, Bound>);
ruststream::register_testable_broker!(ZmqBroker<FanoutKind, Dialing>);
ruststream::register_testable_broker!(ZmqBroker<RpcKind, Bound>);
ruststream::register_testable_broker!(ZmqBroker<RpcKind, Dialing>);
