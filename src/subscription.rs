//! The subscription builders: a name, and where a subscription's retry copies go when its side
//! does not say.

use std::{borrow::Cow, marker::PhantomData, time::Duration};

use ruststream::{
    AddressedCopies, DeclareRetryError, FromName, RedeliveryAddress, RedeliveryAddressed,
    RetryDeclaration, SubscriptionSource,
    runtime::{Declared, SubscriberBuilder, SubscriberSettings},
};

use crate::{
    broker::{ConnectedZmq, FanoutKind, OneWay, Pattern, QueueKind, RpcKind},
    endpoint::{Mountable, Ready, Side, WantsRetryDestination},
    error::ZmqError,
    lane::LaneKey,
    settings::Tuning,
};

/// A queue or fan-out subscription: its name, and on a dialing endpoint where its retry copies
/// go. Use it by its names, [`QueueSubscription`] and [`FanoutSubscription`].
///
/// On a bound endpoint it starts [`Ready`]. On a dialing endpoint it starts
/// [`WantsRetryDestination`] and is not a subscription until `out_retry(destination)` has named
/// where copies go: mounting it before is a compile error.
///
/// The compile errors a user gets, each a case in `ui-tests/`:
/// `dialing_builder_mounted_without_out_retry.rs`,
/// `dialing_fanout_mounted_without_out_retry.rs`, `out_retry_on_a_bound_builder.rs` (a bound
/// builder has no such step), `out_retry_twice.rs`, and
/// `typed_dialing_subscriber_in_a_router_without_out_retry.rs`.
pub struct Subscription<P, S: Side, State = <S as Side>::Fresh> {
    name: Cow<'static, str>,
    retry_to: Option<Cow<'static, str>>,
    tuning: Tuning,
    marker: Marker<P, S, State>,
}

/// The type parameters a builder carries and holds nothing of.
type Marker<P, S, State> = PhantomData<fn() -> (P, S, State)>;

/// A [`ZmqQueue`](crate::ZmqQueue) subscription.
///
/// ```
/// use ruststream_zmq::{Bound, Dialing, QueueSubscription};
///
/// let bound = QueueSubscription::<Bound>::new("payments");
/// let dialing = QueueSubscription::<Dialing>::new("payments")
///     .out_retry("payments.retry@tcp://127.0.0.1:5556");
/// # let _ = (bound, dialing);
/// ```
pub type QueueSubscription<S, State = <S as Side>::Fresh> = Subscription<QueueKind, S, State>;

/// A [`ZmqFanout`](crate::ZmqFanout) subscription; its name is the prefix it filters on.
///
/// ```
/// use ruststream_zmq::{Dialing, FanoutSubscription};
///
/// let orders = FanoutSubscription::<Dialing>::new("orders")
///     .out_retry("orders.retry@tcp://127.0.0.1:5557");
/// # let _ = orders;
/// ```
pub type FanoutSubscription<S, State = <S as Side>::Fresh> = Subscription<FanoutKind, S, State>;

/// A [`ZmqRpc`](crate::ZmqRpc) responder subscription.
///
/// A responder's name is not a destination (its socket answers only the identities requests
/// carry), so on either side it starts [`WantsRetryDestination`] and is mounted only once
/// `out_retry(destination)` has named a queue for its copies; `ui-tests/`
/// `responder_mounted_without_out_retry.rs` shows the error otherwise.
///
/// ```
/// use ruststream_zmq::{Bound, Responder};
///
/// let quotes = Responder::<Bound>::new("quotes").out_retry("quotes.retry@tcp://127.0.0.1:5560");
/// # let _ = quotes;
/// ```
pub type Responder<S, State = WantsRetryDestination> = Subscription<RpcKind, S, State>;

impl<P, S: Side, State> Clone for Subscription<P, S, State> {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            retry_to: self.retry_to.clone(),
            tuning: self.tuning,
            marker: PhantomData,
        }
    }
}

impl<P, S: Side, State> std::fmt::Debug for Subscription<P, S, State> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("name", &self.name)
            .field("side", &S::NAME)
            .field("retry_to", &self.retry_to)
            .field("read_ahead", &self.tuning.read_ahead)
            .field("batch_wait", &self.tuning.batch_wait)
            .finish()
    }
}

fn named<P, S: Side, State>(
    name: Cow<'static, str>,
    retry_to: Option<Cow<'static, str>>,
    tuning: Tuning,
) -> Subscription<P, S, State> {
    Subscription {
        name,
        retry_to,
        tuning,
        marker: PhantomData,
    }
}

impl<P, S: Side, State> Subscription<P, S, State> {
    /// How many messages read from the socket wait for this subscription's handler before its
    /// socket stops being read (at least 1); the broker's `read_ahead` where unset. A bound
    /// queue or responder on the default backend reads nothing ahead
    /// ([`ZmqBroker::read_ahead`](crate::ZmqBroker::read_ahead) says why).
    ///
    /// ```
    /// use std::time::Duration;
    /// use ruststream_zmq::{Bound, QueueSubscription};
    ///
    /// let payments = QueueSubscription::<Bound>::new("payments")
    ///     .read_ahead(1_024)
    ///     .batch_wait(Duration::from_millis(5));
    /// # let _ = payments;
    /// ```
    #[must_use]
    pub fn read_ahead(mut self, messages: usize) -> Self {
        self.tuning.read_ahead = Some(messages);
        self
    }

    /// How long a partial batch of this subscription waits for more messages; the broker's
    /// `batch_wait` where unset.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ruststream_zmq::{Bound, FanoutSubscription};
    ///
    /// let prices = FanoutSubscription::<Bound>::new("prices").batch_wait(Duration::from_millis(50));
    /// # let _ = prices;
    /// ```
    #[must_use]
    pub fn batch_wait(mut self, wait: Duration) -> Self {
        self.tuning.batch_wait = Some(wait);
        self
    }

    /// The header this subscription's deliveries are keyed by under `workers(n, by_key)`, over
    /// its broker's ([`ZmqBroker::partition_header`](crate::ZmqBroker::partition_header);
    /// [`PARTITION_KEY_HEADER`](crate::PARTITION_KEY_HEADER) where neither says).
    ///
    /// ```
    /// use ruststream_zmq::{Bound, QueueSubscription};
    ///
    /// let payments = QueueSubscription::<Bound>::new("payments").partition_header("account");
    /// # let _ = payments;
    /// ```
    #[must_use]
    pub fn partition_header(mut self, header: &'static str) -> Self {
        self.tuning.lane_key = Some(LaneKey::Header(header));
        self
    }
}

impl<S: Side, State> Subscription<RpcKind, S, State> {
    /// Keys this responder's requests by the identity of the requester that sent each: under
    /// `workers(n, by_key)` one requester's requests run in the order it sent them, and
    /// different requesters' side by side.
    ///
    /// ```
    /// use ruststream_zmq::{Bound, Responder};
    ///
    /// let quotes = Responder::<Bound>::new("quotes")
    ///     .partition_by_requester()
    ///     .out_retry("quotes.retry@tcp://127.0.0.1:5560");
    /// # let _ = quotes;
    /// ```
    #[must_use]
    pub fn partition_by_requester(mut self) -> Self {
        self.tuning.lane_key = Some(LaneKey::Requester);
        self
    }
}

impl<P: OneWay, S: Side> Subscription<P, S> {
    /// A subscription named `name`, in the state its side starts in.
    ///
    /// ```
    /// use ruststream_zmq::{Bound, QueueSubscription};
    ///
    /// let payments = QueueSubscription::<Bound>::new("payments");
    /// # let _ = payments;
    /// ```
    #[must_use]
    pub fn new(name: impl Into<Cow<'static, str>>) -> Self {
        named(name.into(), None, Tuning::default())
    }
}

impl<S: Side> Subscription<RpcKind, S, WantsRetryDestination> {
    /// A responder named `name`; on either side it still wants a destination for its copies.
    ///
    /// ```
    /// use ruststream_zmq::{Bound, Responder};
    ///
    /// let quotes = Responder::<Bound>::new("quotes").out_retry("quotes.retry@tcp://127.0.0.1:5560");
    /// # let _ = quotes;
    /// ```
    #[must_use]
    pub fn new(name: impl Into<Cow<'static, str>>) -> Self {
        named(name.into(), None, Tuning::default())
    }
}

impl<P, S: Side> Subscription<P, S, WantsRetryDestination> {
    /// Names where this subscription's retry copies (and dead letters) go: a destination such as
    /// `"payments.retry@tcp://127.0.0.1:5556"`, usually a queue the service binds for itself.
    ///
    /// ```
    /// use ruststream_zmq::{Dialing, QueueSubscription};
    ///
    /// let jobs = QueueSubscription::<Dialing>::new("jobs").out_retry("jobs.retry@tcp://127.0.0.1:5556");
    /// # let _ = jobs;
    /// ```
    #[must_use]
    pub fn out_retry(self, destination: impl Into<Cow<'static, str>>) -> Subscription<P, S, Ready> {
        named(self.name, Some(destination.into()), self.tuning)
    }
}

impl<P: OneWay, S: Side> FromName for Subscription<P, S> {
    fn from_name(name: impl Into<Cow<'static, str>>) -> Self {
        Self::new(name)
    }
}

impl<S: Side> FromName for Subscription<RpcKind, S, WantsRetryDestination> {
    fn from_name(name: impl Into<Cow<'static, str>>) -> Self {
        Self::new(name)
    }
}

impl<P: Pattern, S: Side, State: Mountable> SubscriptionSource<ConnectedZmq<P, S>>
    for Subscription<P, S, State>
{
    type Subscriber = P::Subscriber;
    type Copies = AddressedCopies;

    fn name(&self) -> &str {
        &self.name
    }

    async fn subscribe(self, connected: &ConnectedZmq<P, S>) -> Result<P::Subscriber, ZmqError> {
        connected.subscribe_tuned(&self.name, self.tuning).await
    }

    fn declare_retry_on(
        &self,
        connected: &ConnectedZmq<P, S>,
        declaration: &RetryDeclaration,
    ) -> Result<(), DeclareRetryError> {
        connected.connection.subscription_declared();
        P::FACTS.check_dead_letter(&self.name, declaration, &connected.connection.listening())?;
        connected.connection.check_declared_copies(
            &self.name,
            declaration,
            self.retry_to.as_deref(),
        )
    }

    /// The socket the subscription reads with, its side, the frames and what frame 0 holds (a
    /// fan-out's prefix match).
    #[cfg(feature = "asyncapi")]
    fn channel_bindings(&self) -> ruststream::asyncapi::Bindings {
        crate::bindings::receiving(P::FACTS, S::BINDS, &self.name)
    }
}

impl<P: Pattern, S: Side, State: Mountable> RedeliveryAddressed<ConnectedZmq<P, S>>
    for Subscription<P, S, State>
{
    /// A bound queue's or fan-out's own name (its listener); otherwise the named destination.
    async fn redelivery_address(
        &self,
        _connected: &ConnectedZmq<P, S>,
    ) -> Result<RedeliveryAddress, ZmqError> {
        Ok(RedeliveryAddress::new(
            self.retry_to.clone().unwrap_or_else(|| self.name.clone()),
        ))
    }
}

/// A subscription builder that still has to be told where its retry copies go.
pub trait WantsDestination {
    /// The builder once told.
    type Told;
    /// Names where the copies go.
    fn told(self, destination: Cow<'static, str>) -> Self::Told;
}

impl<P, S: Side> WantsDestination for Subscription<P, S, WantsRetryDestination> {
    type Told = Subscription<P, S, Ready>;
    fn told(self, destination: Cow<'static, str>) -> Self::Told {
        self.out_retry(destination)
    }
}

/// The mount-site steps that tune one subscription: how far it reads ahead of its handler, and
/// how long a partial batch waits, over the broker's settings. For a subscription declared with
/// one of this crate's builders (`#[subscriber(QueueSubscription::<Bound>)]` and the like); a
/// by-name `#[subscriber("name")]` takes its broker's settings.
///
/// ```
/// use std::time::Duration;
/// use ruststream_zmq::prelude::*;
///
/// #[subscriber(QueueSubscription::<Bound>)]
/// async fn store(payments: &[serde_json::Value]) -> HandlerOutcome {
///     let _ = payments;
///     HandlerOutcome::ack()
/// }
///
/// fn app() -> RustStream {
///     RustStream::new(AppInfo::new("ledger", "0.1.0")).with_broker(
///         ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:5555")),
///         |b| {
///             b.include(
///                 store
///                     .name("ledger")
///                     .batch(nonzero!(64))
///                     .read_ahead(1_024)
///                     .batch_wait(Duration::from_millis(5)),
///             );
///         },
///     )
/// }
/// # let _ = app;
/// ```
pub trait Tune: Declared {
    /// How many messages read from the socket wait for the handler before the socket stops
    /// being read.
    fn read_ahead(self, messages: usize) -> Self::Settings
    where
        Self::Settings: TuneStep,
    {
        self.declare()
            .tune(|subscription| subscription.read_ahead(messages))
    }

    /// How long a partial batch waits for more messages.
    fn batch_wait(self, wait: Duration) -> Self::Settings
    where
        Self::Settings: TuneStep,
    {
        self.declare()
            .tune(|subscription| subscription.batch_wait(wait))
    }
}

impl<D: Declared> Tune for D {}

/// A registration whose subscription is one of this crate's builders, which [`Tune`] adjusts.
pub trait TuneStep: Sized {
    /// The registration with its subscription adjusted by `f`.
    #[doc(hidden)]
    fn tune(self, f: impl FnOnce(Tuned) -> Tuned) -> Self;
}

/// What [`TuneStep::tune`] adjusts: the builder's tuning alone.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct Tuned(Tuning);

impl Tuned {
    fn read_ahead(self, messages: usize) -> Self {
        Self(Tuning {
            read_ahead: Some(messages),
            ..self.0
        })
    }

    fn batch_wait(self, wait: Duration) -> Self {
        Self(Tuning {
            batch_wait: Some(wait),
            ..self.0
        })
    }
}

impl<Def: Declared, P, S: Side, St, State, DC> TuneStep
    for SubscriberBuilder<Def, Subscription<P, S, St>, State, DC>
{
    fn tune(self, f: impl FnOnce(Tuned) -> Tuned) -> Self {
        self.map_source(|mut subscription: Subscription<P, S, St>| {
            subscription.tuning = f(Tuned(subscription.tuning)).0;
            subscription
        })
    }
}

/// The mount-site step that names where a subscription's retry copies go, on a
/// `#[subscriber(QueueSubscription::<Dialing>)]` definition (likewise a dialing
/// `FanoutSubscription` or a `Responder`) or its builder.
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

impl<D, Def, Src, State, DC> OutRetry for D
where
    D: Declared<Settings = SubscriberBuilder<Def, Src, State, DC>>,
    Src: WantsDestination,
{
    type Out = SubscriberBuilder<Def, Src::Told, State, DC>;

    fn out_retry(self, destination: impl Into<Cow<'static, str>>) -> Self::Out {
        let destination = destination.into();
        self.map_source(move |source| source.told(destination))
    }
}
