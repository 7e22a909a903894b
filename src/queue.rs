//! `ZmqQueue`: PUSH publishers and PULL subscriptions, each message to one reader.

use std::{borrow::Cow, marker::PhantomData, sync::Arc, time::Duration};

use ruststream::{
    AddressedCopies, Broker, ConnectedBroker, DefaultPublish, FromName, PairError, PublishPolicy,
    RedeliveryAddress, RedeliveryAddressed, Subscribe, SubscriptionSource,
    runtime::{Declared, SubscriberBuilder, SubscriberSettings},
};

use crate::{
    connection::{Connection, Settings, Sockets},
    delivery::ZmqSubscriber,
    endpoint::{Bound, Dialing, Ready, Side, WantsRetryDestination, ZmqEndpoint},
    error::ZmqError,
    monitor::ZmqMonitor,
    publish::{ZmqPublish, ZmqPublisher},
    routing::Admission,
    socket::Role,
    wire::WireLimits,
};

const SOCKETS: Sockets = Sockets {
    read: Role::Pull,
    write: Role::Push,
    admission: Admission::Exact,
    lone_frame_is_payload: true,
};

/// The queue pattern over one endpoint: each message reaches one reader.
///
/// On a bound endpoint ([`ZmqEndpoint::bind`]) this process listens: one subscription binds
/// it, peers PUSH to it, and a retry copy goes back to that listener. On a dialing endpoint
/// ([`ZmqEndpoint::dial`]) this process connects to a peer: a subscription reads from a peer that
/// only sends, so its registration must say where copies go (`.out_retry(destination)`).
///
/// # Examples
///
/// ```
/// use ruststream_zmq::prelude::*;
///
/// let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
///     .limits(WireLimits::default().max_message_bytes(1 << 20));
/// let monitor = broker.monitor(); // the bound address, once started; refusals
/// # let _ = (broker, monitor);
/// ```
pub struct ZmqQueue<S: Side = Bound> {
    endpoint: ZmqEndpoint<S>,
    settings: Settings,
    monitor: ZmqMonitor,
}

impl<S: Side> ZmqQueue<S> {
    /// A queue broker over `endpoint`. Records the configuration; opens nothing until connect.
    #[must_use]
    pub fn new(endpoint: ZmqEndpoint<S>) -> Self {
        Self {
            endpoint,
            settings: Settings::default(),
            monitor: ZmqMonitor::default(),
        }
    }

    /// What this broker accepts from peers; a message over a limit is refused and counted.
    #[must_use]
    pub fn limits(mut self, limits: WireLimits) -> Self {
        self.settings.limits = limits;
        self
    }

    /// How long a publish waits for a peer when none is connected (default 5 s).
    #[must_use]
    pub fn send_timeout(mut self, timeout: Duration) -> Self {
        self.settings.send_timeout = timeout;
        self
    }

    /// How long a partial batch waits for more messages (default 20 ms).
    #[must_use]
    pub fn batch_wait(mut self, wait: Duration) -> Self {
        self.settings.batch_wait = wait;
        self
    }

    /// A handle on the live figures of this broker: its bound address, its refusals.
    #[must_use]
    pub fn monitor(&self) -> ZmqMonitor {
        self.monitor.clone()
    }
}

/// A connected [`ZmqQueue`]: opens subscriptions and pairs publishers.
pub struct ConnectedZmqQueue<S: Side = Bound> {
    connection: Arc<Connection>,
    side: PhantomData<fn() -> S>,
}

impl<S: Side> ConnectedZmqQueue<S> {
    /// A live publisher of this broker, as the default policy pairs it.
    #[must_use]
    pub fn publisher(&self) -> ZmqPublisher {
        ZmqPublisher {
            connection: Arc::clone(&self.connection),
        }
    }

    /// A handle on the live figures of this broker.
    #[must_use]
    pub fn monitor(&self) -> ZmqMonitor {
        self.connection.monitor.clone()
    }
}

impl<S: Side> Broker for ZmqQueue<S> {
    type Error = ZmqError;
    type Connected = ConnectedZmqQueue<S>;

    async fn connect(self) -> Result<ConnectedZmqQueue<S>, ZmqError> {
        let endpoint = self.endpoint.checked()?.to_owned();
        Ok(ConnectedZmqQueue {
            connection: Connection::new(endpoint, S::BINDS, SOCKETS, self.settings, self.monitor),
            side: PhantomData,
        })
    }
}

impl<S: Side> ConnectedBroker for ConnectedZmqQueue<S> {
    type Error = ZmqError;
    type Closed = ();

    async fn shutdown(self) -> Result<(), ZmqError> {
        self.connection.shutdown().await;
        Ok(())
    }
}

impl<S: Side> Subscribe for ConnectedZmqQueue<S> {
    type Subscriber = ZmqSubscriber;
    /// Bound: a publish under the subscription's name reaches its own listener. Dialing: the
    /// subscription reads from a peer that only sends, so the mount site names a destination.
    type Copies = S::Copies;

    async fn subscribe(&self, name: &str) -> Result<ZmqSubscriber, ZmqError> {
        self.connection.subscribe(name).await
    }
}

impl<S: Side> PublishPolicy<ConnectedZmqQueue<S>> for ZmqPublish {
    type Live = ZmqPublisher;

    async fn pair(self, connected: &ConnectedZmqQueue<S>) -> Result<ZmqPublisher, PairError> {
        connected
            .connection
            .ensure_open("a publisher")
            .map_err(PairError::new)?;
        Ok(connected.publisher())
    }
}

impl<S: Side> DefaultPublish for ConnectedZmqQueue<S> {
    type Policy = ZmqPublish;
}

/// A queue subscription: its name, and on a dialing endpoint where its retry copies go.
///
/// On a bound endpoint it starts [`Ready`]. On a dialing endpoint it starts
/// [`WantsRetryDestination`] and is not a subscription until
/// [`out_retry`](QueueSubscription::out_retry) has named where copies go; mounting it before is
/// a compile error.
///
/// ```
/// use ruststream_zmq::{Bound, Dialing, QueueSubscription};
///
/// let bound = QueueSubscription::<Bound>::new("payments");
/// let dialing = QueueSubscription::<Dialing>::new("payments")
///     .out_retry("payments.retry@tcp://127.0.0.1:5556");
/// # let _ = (bound, dialing);
/// ```
pub struct QueueSubscription<S: Side, State = <S as Side>::Fresh> {
    name: Cow<'static, str>,
    retry_to: Option<Cow<'static, str>>,
    marker: PhantomData<fn() -> (S, State)>,
}

impl<S: Side, State> Clone for QueueSubscription<S, State> {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            retry_to: self.retry_to.clone(),
            marker: PhantomData,
        }
    }
}

impl<S: Side, State> std::fmt::Debug for QueueSubscription<S, State> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueSubscription")
            .field("name", &self.name)
            .field("side", &S::NAME)
            .field("retry_to", &self.retry_to)
            .finish()
    }
}

impl<S: Side> QueueSubscription<S> {
    /// A subscription named `name`, in the state its side starts in.
    #[must_use]
    pub fn new(name: impl Into<Cow<'static, str>>) -> Self {
        Self {
            name: name.into(),
            retry_to: None,
            marker: PhantomData,
        }
    }
}

impl QueueSubscription<Dialing, WantsRetryDestination> {
    /// Names where this subscription's retry copies (and dead letters) go: a destination such as
    /// `"payments.retry@tcp://127.0.0.1:5556"`, a queue the service binds for itself.
    #[must_use]
    pub fn out_retry(
        self,
        destination: impl Into<Cow<'static, str>>,
    ) -> QueueSubscription<Dialing, Ready> {
        QueueSubscription {
            name: self.name,
            retry_to: Some(destination.into()),
            marker: PhantomData,
        }
    }
}

impl<S: Side> FromName for QueueSubscription<S> {
    fn from_name(name: impl Into<Cow<'static, str>>) -> Self {
        Self::new(name)
    }
}

impl<S: Side> SubscriptionSource<ConnectedZmqQueue<S>> for QueueSubscription<S, Ready> {
    type Subscriber = ZmqSubscriber;
    type Copies = AddressedCopies;

    fn name(&self) -> &str {
        &self.name
    }

    async fn subscribe(self, connected: &ConnectedZmqQueue<S>) -> Result<ZmqSubscriber, ZmqError> {
        connected.connection.subscribe(&self.name).await
    }
}

impl<S: Side> RedeliveryAddressed<ConnectedZmqQueue<S>> for QueueSubscription<S, Ready> {
    /// A bound subscription's own name (its listener); a dialing one's named destination.
    async fn redelivery_address(
        &self,
        _connected: &ConnectedZmqQueue<S>,
    ) -> Result<RedeliveryAddress, ZmqError> {
        Ok(RedeliveryAddress::new(
            self.retry_to.clone().unwrap_or_else(|| self.name.clone()),
        ))
    }
}

/// The mount-site step that names where a dialing subscription's retry copies go, on a
/// `#[subscriber(QueueSubscription::<Dialing>)]` definition or its builder.
///
/// ```
/// use ruststream_zmq::prelude::*;
///
/// #[subscriber(QueueSubscription::<Dialing>)]
/// async fn charge(payment: &serde_json::Value) -> HandlerOutcome {
///     let _ = payment;
///     HandlerOutcome::ack()
/// }
///
/// fn app() -> RustStream {
///     RustStream::new(AppInfo::new("payments", "0.1.0")).with_broker(
///         ZmqQueue::new(ZmqEndpoint::dial("tcp://127.0.0.1:5555")),
///         |b| {
///             b.include(charge.name("payments").out_retry("payments.retry@tcp://127.0.0.1:5556"));
///         },
///     )
/// }
/// # let _ = app;
/// ```
pub trait OutRetry {
    /// The builder with a destination for its copies.
    type Out;

    /// Names where this subscription's retry copies (and dead letters) go.
    fn out_retry(self, destination: impl Into<Cow<'static, str>>) -> Self::Out;
}

impl<D, Def, State, DC> OutRetry for D
where
    D: Declared<
        Settings = SubscriberBuilder<
            Def,
            QueueSubscription<Dialing, WantsRetryDestination>,
            State,
            DC,
        >,
    >,
{
    type Out = SubscriberBuilder<Def, QueueSubscription<Dialing, Ready>, State, DC>;

    fn out_retry(self, destination: impl Into<Cow<'static, str>>) -> Self::Out {
        let destination = destination.into();
        self.map_source(move |source| source.out_retry(destination))
    }
}
