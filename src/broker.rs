//! The broker of every pattern: `ZmqBroker<Pattern, Side, Backend>`, its connected form, and
//! the broker contract's impls. `ZmqQueue`, `ZmqFanout` and `ZmqRpc` are its three names.

use std::{marker::PhantomData, sync::Arc, time::Duration};

use ruststream::{
    Broker, ConnectedBroker, CopyPath, DefaultPublish, PairError, PublishPolicy, Subscribe,
    Subscriber,
};

use crate::{
    connection::Connection,
    delivery::{ZmqResponderSubscriber, ZmqSubscriber},
    endpoint::{Bound, Dialing, Mechanism, Side, ZmqEndpoint},
    error::ZmqError,
    intake::Inbox,
    lane::LaneKey,
    message::ZmqMessage,
    monitor::{Flush, SocketSummary, ZmqMonitor},
    pattern::PatternFacts,
    publish::{ZmqPublish, ZmqPublisher},
    routing::LocalHost,
    settings::{Settings, Tuning},
    transport::{Backend, DefaultBackend, Speaks, Transport},
    wire::WireLimits,
};

mod sealed {
    pub trait SealedPattern {}
    impl SealedPattern for super::QueueKind {}
    impl SealedPattern for super::FanoutKind {}
    impl SealedPattern for super::RpcKind {}
}

/// One of the three patterns a [`ZmqBroker`] speaks. Sealed.
pub trait Pattern: sealed::SealedPattern + Send + Sync + 'static {
    /// What a subscription of this pattern yields.
    type Subscriber: Subscriber<Message = ZmqMessage, Error = ZmqError> + Send;
    /// What a by-name subscription of this pattern on side `S` declares about its retry copies.
    type Copies<S: Side>: CopyPath;
    /// What the connection needs to know of the pattern.
    #[doc(hidden)]
    const FACTS: PatternFacts;
    /// Wraps the subscription's inbox into this pattern's subscriber, assembling batches for at
    /// most `batch_wait`.
    #[doc(hidden)]
    fn subscriber(inbox: Inbox, batch_wait: Duration) -> Self::Subscriber;
}

/// The queue pattern: PUSH publishers, PULL subscriptions; each message to one reader.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueKind;

/// The fan-out pattern: PUB publishers, SUB subscriptions filtering on a name prefix.
#[derive(Debug, Clone, Copy, Default)]
pub struct FanoutKind;

/// Request-reply: ROUTER responders, DEALER requesters.
#[derive(Debug, Clone, Copy, Default)]
pub struct RpcKind;

impl Pattern for QueueKind {
    type Subscriber = ZmqSubscriber;
    type Copies<S: Side> = S::Copies;
    const FACTS: PatternFacts = PatternFacts::QUEUE;
    fn subscriber(inbox: Inbox, batch_wait: Duration) -> Self::Subscriber {
        ZmqSubscriber::new(inbox, batch_wait)
    }
}

impl Pattern for FanoutKind {
    type Subscriber = ZmqSubscriber;
    type Copies<S: Side> = S::Copies;
    const FACTS: PatternFacts = PatternFacts::FANOUT;
    fn subscriber(inbox: Inbox, batch_wait: Duration) -> Self::Subscriber {
        ZmqSubscriber::new(inbox, batch_wait)
    }
}

impl Pattern for RpcKind {
    type Subscriber = ZmqResponderSubscriber;
    /// A responder's name is not a destination on either side.
    type Copies<S: Side> = ruststream::NamedCopies;
    const FACTS: PatternFacts = PatternFacts::RPC;
    fn subscriber(inbox: Inbox, _batch_wait: Duration) -> Self::Subscriber {
        ZmqResponderSubscriber::new(inbox)
    }
}

/// The one-way patterns (queue and fan-out), whose subscriptions start in the state their side
/// gives them and whose bound brokers can publish to peers that dial in.
pub trait OneWay: Pattern {}
impl OneWay for QueueKind {}
impl OneWay for FanoutKind {}

/// A ZeroMQ broker of pattern `P` over one endpoint of side `S`, on socket backend `B`. Use it
/// by its names: [`ZmqQueue`], [`ZmqFanout`], [`ZmqRpc`] on the [default
/// backend](DefaultBackend), or the same names in the crate's `zeromq` and `libzmq` modules to
/// pin one.
pub struct ZmqBroker<P: Pattern, S: Side = Bound, B: Backend = DefaultBackend> {
    endpoint: ZmqEndpoint<S>,
    /// What only this backend's brokers set (libzmq: socket options, CURVE).
    pub(crate) config: B::Config,
    pub(crate) settings: Settings,
    monitor: ZmqMonitor,
    pattern: PhantomData<fn() -> P>,
}

/// The queue pattern over one endpoint: each message reaches one reader.
///
/// On a bound endpoint ([`ZmqEndpoint::bind`]) this process listens: one subscription binds
/// it, peers PUSH to it, and a retry copy goes back to that listener. On a dialing endpoint
/// ([`ZmqEndpoint::dial`]) this process connects to a peer that only sends, so a registration
/// must say where its copies go (`out_retry(destination)`).
///
/// ```
/// use ruststream_zmq::prelude::*;
///
/// let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
///     .limits(WireLimits::default().max_message_bytes(1 << 20));
/// let monitor = broker.monitor(); // the bound address once started, the refusals
/// # let _ = (broker, monitor);
/// ```
pub type ZmqQueue<S = Bound> = ZmqBroker<QueueKind, S, DefaultBackend>;

/// The fan-out pattern over one endpoint: every subscriber whose prefix a name starts with gets
/// the message.
///
/// A subscription named `orders` receives `orders` and `orders.eu`. A bound subscription's
/// copies go back to its own listener; a dialing one names where (`out_retry(destination)`).
/// PUB drops what a subscriber cannot take: each subscriber has a queue of 100,000 messages in
/// the client, and a slow one loses messages past that without slowing the others.
pub type ZmqFanout<S = Bound> = ZmqBroker<FanoutKind, S, DefaultBackend>;

/// Request-reply over one endpoint: a responder (ROUTER) answers each request at the identity
/// it carries; a requester (DEALER, the `Request` policy) keeps many requests in flight on one
/// connection.
pub type ZmqRpc<S = Bound> = ZmqBroker<RpcKind, S, DefaultBackend>;

impl<P: Pattern, S: Side, B: Backend> ZmqBroker<P, S, B> {
    /// The connected form over `transport`: checks the endpoint, opens nothing yet.
    pub(crate) fn connect_on(
        self,
        transport: Transport,
        host: LocalHost,
    ) -> Result<ConnectedZmq<P, S>, ZmqError> {
        let endpoint = self.endpoint.checked()?.to_owned();
        let connection = Connection::new(
            transport,
            endpoint,
            S::BINDS,
            P::FACTS,
            self.settings,
            self.monitor,
            host,
        );
        Ok(ConnectedZmq {
            connection,
            marker: PhantomData,
        })
    }

    /// A broker over `endpoint`. Records the configuration; opens nothing until connect. An
    /// endpoint with CURVE takes a backend that speaks it (`ui-tests/backends/curve_on_zeromq.rs`),
    /// and a bound one only once it says who may connect
    /// (`ui-tests/curve/curve_server_without_a_client_decision.rs`).
    ///
    /// ```
    /// use ruststream_zmq::{Dialing, ZmqEndpoint, ZmqQueue};
    ///
    /// let bound = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    /// let dialing: ZmqQueue<Dialing> = ZmqQueue::new(ZmqEndpoint::dial("tcp://127.0.0.1:5555"));
    /// # let _ = (bound, dialing);
    /// ```
    #[must_use]
    pub fn new<M: Mechanism>(endpoint: ZmqEndpoint<S, M>) -> Self
    where
        B: Speaks<M>,
    {
        let (endpoint, mechanism) = endpoint.into_parts();
        Self {
            monitor: ZmqMonitor::for_endpoint(endpoint.address()),
            config: B::secured(B::Config::default(), endpoint.address(), mechanism),
            endpoint,
            settings: Settings::default(),
            pattern: PhantomData,
        }
    }

    /// What this broker accepts from peers; a message over a limit is refused and counted.
    ///
    /// ```
    /// use ruststream_zmq::{WireLimits, ZmqEndpoint, ZmqQueue};
    ///
    /// let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
    ///     .limits(WireLimits::default().max_message_bytes(1 << 20));
    /// # let _ = broker;
    /// ```
    #[must_use]
    pub fn limits(mut self, limits: WireLimits) -> Self {
        self.settings.limits = limits;
        self
    }

    /// How long a publish waits for a peer when none is connected (default 5 s).
    ///
    /// ```
    /// use std::time::Duration;
    /// use ruststream_zmq::{ZmqEndpoint, ZmqQueue};
    ///
    /// let broker = ZmqQueue::new(ZmqEndpoint::dial("tcp://127.0.0.1:5555"))
    ///     .send_timeout(Duration::from_secs(1));
    /// # let _ = broker;
    /// ```
    #[must_use]
    pub fn send_timeout(mut self, timeout: Duration) -> Self {
        self.settings.send_timeout = timeout;
        self
    }

    /// How long a graceful shutdown waits for each sending socket (publishers, a responder's
    /// answers) to hand on what it queued, while its peer takes it (default 2 s; zero drops it
    /// at once). A peer that reads nothing holds the shutdown no longer than this; what is
    /// still queued then is reported ([`Flush`](crate::Flush)) and lost. The sockets close
    /// together, so the whole shutdown takes about one linger, not one a socket.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ruststream_zmq::{ZmqEndpoint, ZmqQueue};
    ///
    /// let broker = ZmqQueue::new(ZmqEndpoint::dial("tcp://127.0.0.1:5555"))
    ///     .linger(Duration::from_secs(10));
    /// # let _ = broker;
    /// ```
    #[must_use]
    pub fn linger(mut self, linger: Duration) -> Self {
        self.settings.linger = linger;
        self
    }

    /// How long a partial batch waits for more messages (default 20 ms); a subscription may
    /// set its own ([`Subscription::batch_wait`](crate::Subscription::batch_wait)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use ruststream_zmq::{ZmqEndpoint, ZmqQueue};
    ///
    /// let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
    ///     .batch_wait(Duration::from_millis(5));
    /// # let _ = broker;
    /// ```
    #[must_use]
    pub fn batch_wait(mut self, wait: Duration) -> Self {
        self.settings.batch_wait = wait;
        self
    }

    /// How many messages read from the socket wait for a subscription's handler before its
    /// socket stops being read (default 256, at least 1); past that the peer's own queue takes
    /// the pressure. A subscription may set its own
    /// ([`Subscription::read_ahead`](crate::Subscription::read_ahead)).
    ///
    /// A queue on a bound endpoint (and on the default backend, a responder on one) is read by
    /// its handler's own task, one message at a time as the handler takes them: nothing is read
    /// ahead of it, and the socket's own buffers are the only queue.
    ///
    /// ```
    /// use ruststream_zmq::{ZmqEndpoint, ZmqFanout};
    ///
    /// let broker = ZmqFanout::new(ZmqEndpoint::bind("tcp://127.0.0.1:0")).read_ahead(1_024);
    /// # let _ = broker;
    /// ```
    #[must_use]
    pub fn read_ahead(mut self, messages: usize) -> Self {
        self.settings.read_ahead = messages;
        self
    }

    /// The header its subscriptions' deliveries are keyed by under `workers(n, by_key)`
    /// ([`PARTITION_KEY_HEADER`](crate::PARTITION_KEY_HEADER) unless set); a subscription
    /// may name its own ([`Subscription::partition_header`](crate::Subscription::partition_header)).
    ///
    /// ```
    /// use ruststream_zmq::prelude::*;
    ///
    /// // Each account's payments run in order; different accounts' run side by side.
    /// let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0")).partition_header("account");
    /// # let _ = broker;
    /// ```
    #[must_use]
    pub fn partition_header(mut self, header: &'static str) -> Self {
        self.settings.lane_key = LaneKey::Header(header);
        self
    }

    /// A handle on the live figures of this broker: its bound address, its refusals.
    #[must_use]
    pub fn monitor(&self) -> ZmqMonitor {
        self.monitor.clone()
    }
}

/// A connected [`ZmqBroker`]: opens subscriptions and pairs publishers. A clone is a handle on
/// the same connection: it closes when any handle shuts the broker down.
///
/// Only this form publishes (`ui-tests/publisher_before_connect.rs`), and `shutdown` consumes it
/// (`ui-tests/connected_broker_used_after_shutdown.rs`).
#[derive(Clone)]
pub struct ConnectedZmq<P: Pattern, S: Side = Bound> {
    pub(crate) connection: Arc<Connection>,
    marker: PhantomData<fn() -> (P, S)>,
}

/// A connected [`ZmqQueue`].
pub type ConnectedZmqQueue<S = Bound> = ConnectedZmq<QueueKind, S>;
/// A connected [`ZmqFanout`].
pub type ConnectedZmqFanout<S = Bound> = ConnectedZmq<FanoutKind, S>;
/// A connected [`ZmqRpc`].
pub type ConnectedZmqRpc<S = Bound> = ConnectedZmq<RpcKind, S>;

impl<P: Pattern, S: Side> ConnectedZmq<P, S> {
    /// A live publisher of this broker, as the default policy pairs it.
    #[must_use]
    pub fn publisher(&self) -> ZmqPublisher {
        ZmqPublisher::new(Arc::clone(&self.connection))
    }

    /// A handle on the live figures of this broker.
    #[must_use]
    pub fn monitor(&self) -> ZmqMonitor {
        self.connection.monitor().clone()
    }
}

impl<S: Side, B: Backend> ZmqBroker<RpcKind, S, B> {
    /// Keys each request by the identity of the requester that sent it, rather than by a
    /// header: under `workers(n, by_key)` one requester's requests run one after another, in
    /// the order it sent them, and different requesters' side by side. A responder may say so
    /// for itself ([`Responder::partition_by_requester`](crate::Subscription::partition_by_requester)).
    #[must_use]
    pub fn partition_by_requester(mut self) -> Self {
        self.settings.lane_key = LaneKey::Requester;
        self
    }
}

impl<P: OneWay> ConnectedZmq<P, Bound> {
    /// Binds the endpoint for this broker's publishers now, if a publisher paired at the app's
    /// start has not already, so peers can dial in before anything is sent; answers the address,
    /// port resolved. For a broker that only publishes (its endpoint then carries no
    /// subscription), used outside an app or before its first publisher is paired.
    ///
    /// # Errors
    ///
    /// [`ZmqError::Bind`] when the address is taken, [`ZmqError::ShutDown`] after shutdown.
    pub async fn bind_publisher(&self) -> Result<String, ZmqError> {
        self.connection.bind_publisher().await
    }
}

impl<P: OneWay> ConnectedZmq<P, Dialing> {
    /// Opens the socket this broker's publishers dial through now rather than at the first
    /// publish, and waits until it is connected, at most the broker's `send_timeout`: a
    /// fan-out's subscriber hears only what is published after it connected. For a broker that
    /// only publishes.
    ///
    /// # Errors
    ///
    /// [`ZmqError::Connect`] when no peer answered in time, [`ZmqError::ShutDown`] after
    /// shutdown.
    pub async fn dial_publisher(&self) -> Result<(), ZmqError> {
        self.connection.dial_publisher().await
    }
}

impl<P: Pattern, S: Side, B: Backend> Broker for ZmqBroker<P, S, B> {
    type Error = ZmqError;
    type Connected = ConnectedZmq<P, S>;

    /// Opens nothing: what a broker listens or dials for is opened by the subscription or the
    /// publisher that needs it. A bound queue or fan-out that a publisher is paired against
    /// during the app's start listens when `start()` returns (see [`ZmqPublish`]).
    async fn connect(self) -> Result<ConnectedZmq<P, S>, ZmqError> {
        let sockets = B::transport(self.monitor.clone(), &self.settings, self.config.clone());
        let config = self.config.clone();
        let serves_curve = S::BINDS && B::speaks_curve(&self.config);
        let connected = self.connect_on(sockets, LocalHost::discover().await)?;
        // Only real sockets plan their dials: the in-process mode has no CURVE listeners to
        // find.
        connected.connection.on_sockets(
            Box::new(move |address| B::dials(&config, address)),
            serves_curve,
        );
        Ok(connected)
    }
}

/// The protocol a ZeroMQ server is described with in the AsyncAPI document.
///
/// The specification lists no protocol for ZeroMQ, so the name is ours to choose: `zeromq`, the
/// project's own name and what `ruststream-zeromq` writes, so that a catalogue of services on
/// either crate groups them under one protocol (`zmq` is the C library's prefix, not a protocol).
pub(crate) const PROTOCOL: &str = "zeromq";

/// The ZMTP version every peer of this crate speaks: the `zeromq` client greets with 3.0, and a
/// libzmq 4 peer (ZMTP 3.1) falls back to it.
pub(crate) const ZMTP_VERSION: &str = "3.0";

/// Describes the endpoint for the AsyncAPI document: its host and port (the path of an `ipc://`
/// endpoint), never more, over the protocol `zeromq` at ZMTP `3.0`. ZeroMQ's NULL mechanism has no
/// credentials to leak. Under the `asyncapi` feature the server carries an `x-zeromq` binding:
/// the transport, the side this service takes (`bind` or `connect`) and the socket pair.
impl<P: Pattern, S: Side, B: Backend> ruststream::DescribeServer for ZmqBroker<P, S, B> {
    fn describe_server(&self) -> ruststream::ServerSpec {
        let address = self.endpoint.address();
        let mut spec = match address.strip_prefix("ipc://") {
            Some(path) => ruststream::ServerSpec::new(path, PROTOCOL),
            None => ruststream::ServerSpec::from_url(address, PROTOCOL),
        };
        spec.protocol_version = Some(ZMTP_VERSION.to_owned());
        #[cfg(feature = "asyncapi")]
        {
            let host = spec.host.clone().unwrap_or_default();
            spec = spec.bindings(crate::bindings::server(address, &host, S::BINDS, P::FACTS));
        }
        spec
    }
}

impl<P: Pattern, S: Side> ConnectedBroker for ConnectedZmq<P, S> {
    type Error = ZmqError;
    type Closed = ClosedZmqBroker;

    /// Closes every socket (a bound port is free again when this returns) and ends every task;
    /// publishers made before answer [`ZmqError::ShutDown`] afterwards. Answers what the
    /// sockets did, and logs it (the runtime keeps no closed broker).
    async fn shutdown(self) -> Result<ClosedZmqBroker, ZmqError> {
        self.connection.shutdown().await;
        let monitor = self.connection.monitor();
        let closed = ClosedZmqBroker {
            endpoint: monitor.endpoint().to_owned(),
            sockets: monitor.sockets(),
            peers_seen: monitor.peers_seen(),
        };
        tracing::info!(
            endpoint = %closed.endpoint,
            sent = closed.messages_sent(),
            received = closed.messages_received(),
            unhandled = closed.unhandled(),
            peers_seen = closed.peers_seen,
            linger_ran_out = closed
                .sockets
                .iter()
                .filter(|socket| socket.flush() == Flush::LingerRanOut)
                .count(),
            "closed"
        );
        Ok(closed)
    }
}

/// What a [`ConnectedZmq`] did, as its [`shutdown`](ConnectedBroker::shutdown) answers it: the
/// terminal witness, with no publish or subscribe surface, as `ruststream-nats`'s
/// `ClosedNatsBroker` and `ruststream-fred`'s `ClosedRedisBroker` are. It counts what each socket
/// sent and received, the peers the sockets saw, and what was read and never handed to a
/// handler: at most once, what a subscription had read ahead of its handler when it closed is
/// lost, and [`unhandled`](Self::unhandled) says how much.
///
/// A subscription closes when the framework ends its dispatch loop, which the runtime does
/// before it shuts its brokers down; a subscriber still held elsewhere at shutdown keeps what it
/// read, and counts it only when it is dropped (on the [`ZmqMonitor`]'s sockets, not here).
///
/// ```
/// use ruststream::{Broker, ConnectedBroker};
/// use ruststream_zmq::{ZmqEndpoint, ZmqQueue};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), ruststream_zmq::ZmqError> {
/// let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0")).connect().await?;
/// let closed = connected.shutdown().await?;
/// assert_eq!((closed.messages_sent(), closed.unhandled()), (0, 0));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClosedZmqBroker {
    endpoint: String,
    sockets: Vec<SocketSummary>,
    peers_seen: u64,
}

impl ClosedZmqBroker {
    /// The endpoint the broker was configured with, without user information.
    #[must_use]
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Each socket the broker opened, in the order it opened them.
    #[must_use]
    pub fn sockets(&self) -> &[SocketSummary] {
        &self.sockets
    }

    /// How many messages left through its sockets: publishes, retry copies, dead letters,
    /// answers and requests.
    #[must_use]
    pub fn messages_sent(&self) -> u64 {
        self.sockets.iter().map(SocketSummary::sent).sum()
    }

    /// How many messages its sockets read, refused and unhandled ones included.
    #[must_use]
    pub fn messages_received(&self) -> u64 {
        self.sockets.iter().map(SocketSummary::received).sum()
    }

    /// How many messages were read and never handed to a handler: they waited for a
    /// subscription when it closed.
    #[must_use]
    pub fn unhandled(&self) -> u64 {
        self.sockets.iter().map(SocketSummary::unhandled).sum()
    }

    /// How many peer connections its sockets made, reconnections counted.
    #[must_use]
    pub const fn peers_seen(&self) -> u64 {
        self.peers_seen
    }
}

impl<P: Pattern, S: Side> ConnectedZmq<P, S> {
    /// Opens the subscription `name`, reading ahead and batching as `tuning` says (the broker's
    /// settings where it says nothing).
    pub(crate) async fn subscribe_tuned(
        &self,
        name: &str,
        tuning: Tuning,
    ) -> Result<P::Subscriber, ZmqError> {
        let settings = self.connection.settings();
        let (read_ahead, batch_wait) = settings.tuned(tuning);
        self.connection
            .subscribe(name, read_ahead, settings.lane_key(tuning))
            .await
            .map(|inbox| P::subscriber(inbox, batch_wait))
    }
}

impl<P: Pattern, S: Side> Subscribe for ConnectedZmq<P, S> {
    type Subscriber = P::Subscriber;
    /// Bound queue and fan-out: a publish under the subscription's name reaches its own
    /// listener. Dialing, and every responder: the mount site names a destination.
    type Copies = P::Copies<S>;

    /// A by-name subscription reads ahead and batches as its broker says.
    async fn subscribe(&self, name: &str) -> Result<P::Subscriber, ZmqError> {
        self.subscribe_tuned(name, Tuning::default()).await
    }

    fn declare_retry(
        &self,
        name: &str,
        declaration: &ruststream::RetryDeclaration,
    ) -> Result<(), ruststream::DeclareRetryError> {
        self.connection.subscription_declared();
        P::FACTS.check_dead_letter(name, declaration, &self.connection.listening())?;
        self.connection
            .check_declared_copies(name, declaration, None)
    }
}

impl<P: Pattern, S: Side> PublishPolicy<ConnectedZmq<P, S>> for ZmqPublish {
    type Live = ZmqPublisher;

    /// Pairs the broker's publisher. On a bound queue or fan-out that carries no subscription
    /// (none open, none declared yet), this binds the endpoint for the publisher's peers now and
    /// logs where: pairing is the framework's one word, at startup, that the app will publish
    /// through the broker, so a peer started first (`zmqs tail`) finds the port before anything
    /// is published (`tests/live/listening_at_start.rs`). A dialing broker connects at its first
    /// publish, in the background.
    async fn pair(self, connected: &ConnectedZmq<P, S>) -> Result<ZmqPublisher, PairError> {
        connected
            .connection
            .ensure_open("a publisher")
            .map_err(PairError::new)?;
        connected
            .connection
            .listen_for_publishers()
            .await
            .map_err(PairError::new)?;
        Ok(connected.publisher())
    }

    /// The socket the publish leaves through and what frame 0 holds: the broker's own socket, a
    /// PUSH dialing the endpoint a `name@endpoint` destination names, or on a responder the
    /// ROUTER answering a requester.
    #[cfg(feature = "asyncapi")]
    fn channel_bindings(&self, channel: &str) -> ruststream::asyncapi::Bindings {
        crate::bindings::sending(P::FACTS, S::BINDS, channel)
    }

    /// A responder's answer goes to the `reply-to` its request was stamped with, when
    /// [`ToRequester`](crate::ToRequester) routes it.
    #[cfg(feature = "asyncapi")]
    fn reply_address_location(&self) -> Option<&'static str> {
        P::FACTS
            .answers_requests
            .then_some(crate::bindings::REPLY_ADDRESS_LOCATION)
    }
}

impl<P: Pattern, S: Side> DefaultPublish for ConnectedZmq<P, S> {
    type Policy = ZmqPublish;
}
