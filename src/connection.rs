//! The live state every connected broker shares: its endpoint, the sockets it opened, and the
//! switch that shuts them all.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use ruststream::{Bytes, HeaderMap, Str};
use tokio::{
    runtime::Handle,
    sync::{Notify, mpsc, watch},
    task::JoinHandle,
    time::{Instant, timeout},
};

use crate::{
    delivery::{FrameSource, Inbox, Intake, PROBE_TOPIC, Reading, inbox, pump},
    error::ZmqError,
    monitor::ZmqMonitor,
    routing::{
        Admission, Destination, Listener, OwnEndpoint, ResponderTarget, Target, route,
        route_responder,
    },
    rpc::ReplyBook,
    socket::{DuplexSender, Role},
    transport::{Transport, Writer},
    wire::{self, Frames, WireLimits},
};

/// How long shutdown waits for one socket to close.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// How many requests wait between a responder's ROUTER and its reader task.
const REQUESTS: usize = 256;

/// What a broker is configured with besides its endpoint.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub limits: WireLimits,
    /// How long a publish (or a request's send) waits for a peer when none is connected.
    pub send_timeout: Duration,
    /// How long a partial batch waits for more messages.
    pub batch_wait: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            limits: WireLimits::default(),
            send_timeout: Duration::from_secs(5),
            batch_wait: Duration::from_millis(20),
        }
    }
}

/// The three patterns, as the connection tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// PUSH / PULL.
    Queue,
    /// PUB / SUB.
    Fanout,
    /// ROUTER responder, DEALER requester.
    Rpc,
}

impl Kind {
    /// The socket a subscription reads with.
    const fn reads_with(self) -> Role {
        match self {
            Self::Queue => Role::Pull,
            Self::Fanout => Role::Sub,
            Self::Rpc => Role::Router,
        }
    }

    /// The socket a publish to the broker's own endpoint leaves through.
    const fn writes_with(self) -> Role {
        match self {
            Self::Queue | Self::Rpc => Role::Push,
            Self::Fanout => Role::Pub,
        }
    }

    const fn admission(self) -> Admission {
        match self {
            Self::Fanout => Admission::Prefix,
            Self::Queue | Self::Rpc => Admission::Exact,
        }
    }

    /// Why one broker of this pattern carries one subscription on a bound endpoint.
    const fn one_subscription(self) -> &'static str {
        match self {
            Self::Queue => {
                "a PULL takes every message, so two subscriptions could not tell theirs apart"
            }
            Self::Fanout => {
                "one SUB listens on a bound endpoint, and the broker's copies are addressed to it"
            }
            Self::Rpc => {
                "answers leave through the responder's own ROUTER, so a broker carries one responder"
            }
        }
    }
}

type SharedWriter = Arc<tokio::sync::Mutex<Writer>>;

/// The subscription this broker binds (or, for a responder, holds): its name and address.
#[derive(Default)]
struct Held {
    subscription: Option<String>,
    /// The first subscription that dials the endpoint: its peer only sends.
    dialing: Option<String>,
    address: Option<String>,
    responder: Option<DuplexSender>,
}

/// A connected broker's state, shared by its subscriptions and publishers.
pub(crate) struct Connection {
    transport: Transport,
    endpoint: String,
    binds: bool,
    kind: Kind,
    pub(crate) settings: Settings,
    pub(crate) monitor: ZmqMonitor,
    closed: AtomicBool,
    shutdown: watch::Sender<bool>,
    runtime: Handle,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    held: Mutex<Held>,
    writers: tokio::sync::Mutex<HashMap<Target, SharedWriter>>,
    pub(crate) replies: Arc<ReplyBook>,
    pub(crate) requester: tokio::sync::OnceCell<crate::rpc::RequestChannel>,
    /// What this broker published and was injected with, for the test harness.
    #[cfg(feature = "testing")]
    log: Mutex<Vec<ruststream::RawMessage>>,
}

impl Connection {
    /// Records a connected broker's state; opens no socket yet.
    pub(crate) fn new(
        transport: Transport,
        endpoint: String,
        binds: bool,
        kind: Kind,
        settings: Settings,
        monitor: ZmqMonitor,
    ) -> Arc<Self> {
        Arc::new(Self {
            transport,
            endpoint,
            binds,
            kind,
            settings,
            monitor,
            closed: AtomicBool::new(false),
            shutdown: watch::Sender::new(false),
            runtime: Handle::current(),
            tasks: Mutex::new(Vec::new()),
            held: Mutex::new(Held::default()),
            writers: tokio::sync::Mutex::new(HashMap::new()),
            replies: Arc::default(),
            requester: tokio::sync::OnceCell::new(),
            #[cfg(feature = "testing")]
            log: Mutex::new(Vec::new()),
        })
    }

    pub(crate) fn transport(&self) -> &Transport {
        &self.transport
    }

    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    pub(crate) fn binds(&self) -> bool {
        self.binds
    }

    /// Fails with [`ZmqError::ShutDown`] naming `what` once the broker has shut down.
    pub(crate) fn ensure_open(&self, what: &'static str) -> Result<(), ZmqError> {
        if self.closed.load(Ordering::Acquire) {
            Err(ZmqError::ShutDown { what })
        } else {
            Ok(())
        }
    }

    pub(crate) fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    fn held(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens a subscription: binds the endpoint (one subscription per bound endpoint, one
    /// responder per broker) or dials it, and starts the task that reads it.
    pub(crate) async fn subscribe(self: &Arc<Self>, subscription: &str) -> Result<Inbox, ZmqError> {
        self.ensure_open("a subscription")?;
        let holds = self.binds || self.kind == Kind::Rpc;
        if holds {
            self.claim(subscription)?;
        }
        let opened = self.open(subscription).await;
        if opened.is_err() && holds {
            *self.held() = Held::default();
        }
        opened
    }

    fn claim(&self, subscription: &str) -> Result<(), ZmqError> {
        let mut held = self.held();
        if let Some(existing) = &held.subscription {
            return Err(ZmqError::SecondSubscription {
                endpoint: self.endpoint.clone(),
                existing: existing.clone(),
                requested: subscription.to_owned(),
                why: self.kind.one_subscription(),
            });
        }
        held.subscription = Some(subscription.to_owned());
        Ok(())
    }

    async fn open(self: &Arc<Self>, subscription: &str) -> Result<Inbox, ZmqError> {
        let role = self.kind.reads_with();
        let bound_fanout = self.kind == Kind::Fanout && self.binds;
        let mut topics = Vec::new();
        if self.kind == Kind::Fanout {
            topics.push(subscription.to_owned());
            if bound_fanout {
                topics.push(PROBE_TOPIC.to_owned());
            }
        }
        let (source, address) = if self.kind == Kind::Rpc {
            let (frames_tx, frames_rx) = mpsc::channel(REQUESTS);
            let (transport, endpoint, binds) =
                (self.transport.clone(), self.endpoint.clone(), self.binds);
            let (shutdown, patience) = (self.shutdown_signal(), self.settings.send_timeout);
            let (sender, task, address) = self
                .on_own_runtime(async move {
                    transport
                        .duplex(role, &endpoint, binds, frames_tx, shutdown, patience)
                        .await
                })
                .await?;
            self.spawn(task);
            self.held().responder = Some(sender);
            (FrameSource::Channel(frames_rx), address)
        } else if self.binds {
            // The subscription takes the endpoint: a publisher that bound it for peers lets go.
            self.release_bound_publisher().await;
            let (transport, endpoint) = (self.transport.clone(), self.endpoint.clone());
            let (reader, address) = self
                .on_own_runtime(async move { transport.bind_reader(role, &endpoint, topics).await })
                .await?;
            (FrameSource::Socket(reader), Some(address))
        } else {
            let (transport, endpoint) = (self.transport.clone(), self.endpoint.clone());
            let reader = self
                .on_own_runtime(
                    async move { Ok(transport.dial_reader(role, &endpoint, topics).await) },
                )
                .await?;
            (FrameSource::Socket(reader), None)
        };
        match &address {
            Some(address) => {
                tracing::info!(subscription, endpoint = %address, "listening");
                self.monitor.set_bound_address(Some(address.clone()));
                self.held().address = Some(address.clone());
            }
            None => {
                tracing::info!(subscription, endpoint = %self.endpoint, "dialing");
                self.held()
                    .dialing
                    .get_or_insert_with(|| subscription.to_owned());
            }
        }
        let probe = bound_fanout.then(|| Arc::new(Notify::new()));
        let reading = match self.kind {
            Kind::Rpc => Reading::Requests {
                book: Arc::clone(&self.replies),
            },
            kind => Reading::OneWay {
                lone_frame_is_payload: kind == Kind::Queue,
            },
        };
        let intake = Intake {
            subscription: Str::from(subscription.to_owned()),
            reading,
            limits: self.settings.limits,
            monitor: self.monitor.clone(),
            probe: probe.clone(),
            #[cfg(feature = "testing")]
            peer: self.in_process().cloned(),
        };
        let (tx, inbox) = inbox();
        self.spawn(pump(source, intake, tx, self.shutdown_signal()));
        if let (Some(probe), Some(address)) = (probe, address) {
            self.reach_own_listener(&address, &probe).await?;
        }
        Ok(inbox)
    }

    /// Connects the broker's own publisher to its bound fan-out listener and waits until the
    /// listener hears it, so that no copy is lost to the slow joiner.
    async fn reach_own_listener(&self, address: &str, probe: &Notify) -> Result<(), ZmqError> {
        let writer = self.writer(Target::Dial(address.to_owned())).await?;
        let deadline = Instant::now() + self.settings.send_timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let writer = Arc::clone(&writer);
            let probe_frames = vec![Bytes::from_static(PROBE_TOPIC.as_bytes())];
            self.on_own_runtime(async move { writer.lock().await.send(probe_frames, left).await })
                .await?;
            if timeout(Duration::from_millis(20), probe.notified())
                .await
                .is_ok()
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(ZmqError::Connect {
                    endpoint: address.to_owned(),
                    source: format!(
                        "the broker's own publisher did not reach its listener within {:?}",
                        self.settings.send_timeout
                    )
                    .into(),
                });
            }
        }
    }

    /// Spawns a task of this broker on the runtime it connected on, kept for shutdown.
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let handle = self.runtime.spawn(task);
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        tasks.retain(|task| !task.is_finished());
        tasks.push(handle);
    }

    /// Publishes one message to `destination` (see [`Destination`]).
    pub(crate) async fn publish(
        &self,
        destination: &str,
        headers: &HeaderMap,
        payload: Bytes,
    ) -> Result<(), ZmqError> {
        self.ensure_open("a publisher")?;
        // Only in process does the harness read a publish log; on sockets nothing is kept.
        #[cfg(feature = "testing")]
        let logged = self.in_process().is_some().then(|| {
            ruststream::RawMessage::new(destination.to_owned(), payload.clone())
                .with_headers(headers.clone())
        });
        if self.kind == Kind::Rpc {
            self.publish_from_responder(destination, headers, payload)
                .await?;
        } else {
            let parsed = Destination::parse(destination)?;
            let frames = wire::encode(parsed.name, headers, payload)?;
            let target = self.target(&parsed)?;
            self.send_to(target, frames).await?;
        }
        #[cfg(feature = "testing")]
        if let Some(logged) = logged {
            self.record(logged);
        }
        Ok(())
    }

    async fn publish_from_responder(
        &self,
        destination: &str,
        headers: &HeaderMap,
        payload: Bytes,
    ) -> Result<(), ZmqError> {
        match route_responder(destination)? {
            ResponderTarget::Dial { name, endpoint } => {
                let frames = wire::encode(name, headers, payload)?;
                self.send_to(Target::Dial(endpoint.to_owned()), frames)
                    .await
            }
            ResponderTarget::Reply(identity) => {
                let requester = self.replies.requester(identity.into());
                let frames = wire::encode_reply(&requester, headers, payload)?;
                let responder =
                    self.held()
                        .responder
                        .clone()
                        .ok_or_else(|| ZmqError::ReplyAddress {
                            address: destination.to_owned(),
                            why: "this broker has no responder to answer through",
                        })?;
                match responder.send(frames).await {
                    Err(ZmqError::UnknownPeer { .. }) => Err(ZmqError::ReplyAddress {
                        address: destination.to_owned(),
                        why: "no peer with that identity is connected: it went away before its answer",
                    }),
                    sent => sent,
                }?;
                self.monitor.count_sent();
                Ok(())
            }
        }
    }

    async fn send_to(&self, target: Target, frames: Frames) -> Result<(), ZmqError> {
        let writer = self.writer(target).await?;
        self.ensure_open("a publisher")?;
        let patience = self.settings.send_timeout;
        self.on_own_runtime(async move { writer.lock().await.send(frames, patience).await })
            .await?;
        self.monitor.count_sent();
        Ok(())
    }

    /// Runs socket work on the runtime this broker connected on. The client spawns a socket's
    /// tasks on the runtime that connects it, and a publish may come from a runtime that stops
    /// (a handler's dedicated thread, a caller's own): the socket must outlive it.
    pub(crate) async fn on_own_runtime<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, ZmqError>> + Send + 'static,
    ) -> Result<T, ZmqError> {
        // Already on it (a handler of the service, the usual case): no task to spawn.
        if Handle::try_current().is_ok_and(|current| current.id() == self.runtime.id()) {
            return work.await;
        }
        self.runtime
            .spawn(work)
            .await
            .unwrap_or(Err(ZmqError::ShutDown { what: "a socket" }))
    }

    /// Closes the socket a bound broker's publishers listen on, when a subscription is about
    /// to take the endpoint.
    async fn release_bound_publisher(&self) {
        let writer = self
            .writers
            .lock()
            .await
            .remove(&Target::Bind(self.endpoint.clone()));
        if let Some(writer) = writer {
            tracing::info!(endpoint = %self.endpoint, "a subscription takes the endpoint the publishers listened on");
            match Arc::try_unwrap(writer) {
                Ok(writer) => writer.into_inner().close().await,
                Err(shared) => drop(shared),
            }
        }
    }

    /// The address of the subscription this process binds on the endpoint, if one does.
    pub(crate) fn own_listener(&self) -> Option<String> {
        let held = self.held();
        held.subscription.as_ref().and(held.address.clone())
    }

    /// Binds the endpoint for publishers now (a bound broker with no subscription).
    pub(crate) async fn bind_publisher(&self) -> Result<String, ZmqError> {
        self.ensure_open("a publisher")?;
        self.writer(Target::Bind(self.endpoint.clone())).await?;
        Ok(self
            .monitor
            .bound_address()
            .unwrap_or_else(|| self.endpoint.clone()))
    }

    /// Where a publish to `destination` leaves: the routing decision, over this broker's state.
    fn target(&self, destination: &Destination<'_>) -> Result<Target, ZmqError> {
        let held = self.held();
        let listener = match (&held.subscription, &held.address) {
            (Some(subscription), Some(address)) => Some(Listener {
                subscription,
                address,
            }),
            _ => None,
        };
        let own = OwnEndpoint {
            address: &self.endpoint,
            binds: self.binds,
            listener,
            admission: self.kind.admission(),
            reader: held.dialing.as_deref(),
        };
        route(&own, destination)
    }

    /// The writer for `target`, opened on first use and kept until shutdown.
    async fn writer(&self, target: Target) -> Result<SharedWriter, ZmqError> {
        let mut writers = self.writers.lock().await;
        if let Some(writer) = writers.get(&target) {
            return Ok(Arc::clone(writer));
        }
        let role = self.kind.writes_with();
        let transport = self.transport.clone();
        // Made on the broker's runtime: a PUB starts a task of its own when it is created.
        let writer = match target.clone() {
            Target::Dial(address) => {
                self.on_own_runtime(async move { Ok(transport.dial_writer(role, &address).await) })
                    .await?
            }
            Target::Queue(address) => {
                self.on_own_runtime(
                    async move { Ok(transport.dial_writer(Role::Push, &address).await) },
                )
                .await?
            }
            Target::Bind(address) => {
                let (writer, resolved) = self
                    .on_own_runtime(async move { transport.bind_writer(role, &address).await })
                    .await?;
                tracing::info!(endpoint = %resolved, "publishing to peers that dial in");
                self.monitor.set_bound_address(Some(resolved));
                writer
            }
        };
        let writer = Arc::new(tokio::sync::Mutex::new(writer));
        writers.insert(target, Arc::clone(&writer));
        Ok(writer)
    }

    /// The in-process peer this connection's sockets report to, when it runs in process.
    #[cfg(feature = "testing")]
    pub(crate) fn in_process(&self) -> Option<&crate::testing::Peer> {
        match &self.transport {
            Transport::InProcess(peer) => Some(peer),
            Transport::Sockets(_) => None,
        }
    }

    #[cfg(feature = "testing")]
    fn record(&self, message: ruststream::RawMessage) {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(message);
    }

    /// What this broker published (and was injected with) under `name`, in order.
    #[cfg(feature = "testing")]
    pub(crate) fn published(&self, name: &str) -> Vec<ruststream::RawMessage> {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|message| message.name() == name)
            .cloned()
            .collect()
    }

    /// A message from the peer at the other end of this broker's endpoint.
    #[cfg(feature = "testing")]
    pub(crate) fn inject(&self, message: ruststream::OutgoingMessage<'_>) {
        let Some(peer) = self.in_process() else {
            return;
        };
        let (name, payload, headers) = message.into_parts();
        let payload = Bytes::copy_from_slice(payload);
        self.record(
            ruststream::RawMessage::new(name.to_owned(), payload.clone())
                .with_headers(headers.clone()),
        );
        let frames = match wire::encode(name, &headers, payload) {
            Ok(frames) => frames,
            Err(err) => {
                tracing::warn!(name, error = %err, "an injected message cannot be sent");
                return;
            }
        };
        // A bound endpoint is where this process listens, port 0 resolved on the bus.
        let address = if self.binds {
            peer.resolve(&self.endpoint)
        } else {
            self.endpoint.clone()
        };
        peer.inject(self.kind, &address, self.binds, frames);
    }

    /// Which of `subscriptions` (this broker's, by name) a publish to `destination` through this
    /// broker reaches: the routing decision, asked instead of acted on.
    #[cfg(feature = "testing")]
    pub(crate) fn routes(&self, destination: &str, subscriptions: &[&str]) -> Vec<usize> {
        if self.kind == Kind::Rpc {
            return Vec::new();
        }
        let Ok(parsed) = Destination::parse(destination) else {
            return Vec::new();
        };
        let held = self.held();
        let (Some(listener), Ok(Target::Dial(_))) = (held.subscription.clone(), {
            drop(held);
            self.target(&parsed)
        }) else {
            return Vec::new();
        };
        subscriptions
            .iter()
            .position(|name| *name == listener)
            .into_iter()
            .collect()
    }

    /// Closes every socket and ends every task; never blocks past a bounded wait, never panics.
    pub(crate) async fn shutdown(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.shutdown.send_replace(true);
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
        for task in tasks {
            let abort = task.abort_handle();
            if timeout(CLOSE_WAIT, task).await.is_err() {
                abort.abort();
            }
        }
        let writers = std::mem::take(&mut *self.writers.lock().await);
        for (_, writer) in writers {
            if let Ok(writer) = Arc::try_unwrap(writer) {
                let _ = timeout(CLOSE_WAIT, writer.into_inner().close()).await;
            }
        }
        let endpoint = self
            .monitor
            .bound_address()
            .unwrap_or_else(|| self.endpoint.clone());
        tracing::info!(%endpoint, "shut down");
    }
}
