//! The live state every connected broker shares: its endpoint, the subscription that holds it,
//! the tasks it started, where each publish goes, and the switch that shuts it all.
//!
//! Nothing it starts holds it back: its tasks watch the shutdown switch, which also flips when
//! the last handle on the connection is dropped. Opening a subscription's socket is
//! [`inbound`](crate::inbound)'s.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ruststream::{Bytes, HeaderMap};
use tokio::{
    sync::{OnceCell, watch},
    task::JoinHandle,
    time::timeout,
};

use crate::{
    error::ZmqError,
    inbound::Subscribing,
    intake::Inbox,
    lane::LaneKey,
    monitor::ZmqMonitor,
    outbound::Outbound,
    pattern::{Listening, PatternFacts},
    requests::RequestChannel,
    routing::{
        Destination, Listener, LocalHost, OwnEndpoint, ResponderTarget, Target, route,
        route_responder,
    },
    settings::Settings,
    transport::{CLOSE_WAIT, Transport},
    wire::{self, Frames},
};

/// How often a subscription tries again to bind an endpoint its broker's publishers let go of.
const REBIND_EVERY: std::time::Duration = std::time::Duration::from_millis(10);

/// Who holds the endpoint in this process.
#[derive(Default)]
struct Held {
    /// The subscription that binds the endpoint (or, for a responder, owns its socket).
    subscription: Option<String>,
    /// The first subscription that dials the endpoint: its peer only sends.
    dialing: Option<String>,
    /// Where the holding subscription listens, port resolved.
    address: Option<String>,
}

/// A connected broker's state, shared by its subscriptions and publishers.
pub(crate) struct Connection {
    transport: Transport,
    endpoint: String,
    binds: bool,
    facts: PatternFacts,
    settings: Settings,
    monitor: ZmqMonitor,
    shutdown: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    held: Mutex<Held>,
    outbound: Outbound,
    requests: OnceCell<RequestChannel>,
    /// This host, for the loop-back rule.
    host: LocalHost,
    /// What only real sockets have: how a dial is planned, and this broker's place among the
    /// process's CURVE listeners to be. Unset in the in-process mode.
    sockets: std::sync::OnceLock<OnSockets>,
    /// A registration declared its retries on this broker: its subscription opens next.
    declared: std::sync::atomic::AtomicBool,
}

/// Whether a broker's sockets may dial an address.
pub(crate) type Dials = Box<dyn Fn(&str) -> Result<(), ZmqError> + Send + Sync>;

/// What a broker on real sockets knows that the in-process mode does not.
struct OnSockets {
    dials: Dials,
    /// Held while the broker lives, where its endpoint is bound under CURVE.
    _serving: Option<CurveBroker>,
}

/// The bound CURVE endpoints of this process's connected brokers, as configured: the listeners
/// their sockets will reach with the process's own key pair once bound, which a registration
/// checked at startup may name before they are.
static CURVE_BROKERS: Mutex<Vec<(u64, String)>> = Mutex::new(Vec::new());

/// Numbers the entries of [`CURVE_BROKERS`].
static NEXT_CURVE_BROKER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A connected broker's entry in [`CURVE_BROKERS`], removed as it drops.
struct CurveBroker(u64);

impl CurveBroker {
    fn enter(address: &str) -> Self {
        let id = NEXT_CURVE_BROKER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        curve_brokers().push((id, address.to_owned()));
        Self(id)
    }
}

impl Drop for CurveBroker {
    fn drop(&mut self) {
        curve_brokers().retain(|(id, _)| *id != self.0);
    }
}

fn curve_brokers() -> MutexGuard<'static, Vec<(u64, String)>> {
    CURVE_BROKERS.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Connection {
    /// Records a connected broker's state; opens no socket yet.
    pub(crate) fn new(
        transport: Transport,
        endpoint: String,
        binds: bool,
        facts: PatternFacts,
        settings: Settings,
        monitor: ZmqMonitor,
        host: LocalHost,
    ) -> Arc<Self> {
        let outbound = Outbound::new(
            transport.clone(),
            facts.writes_with,
            &settings,
            monitor.clone(),
        );
        Arc::new(Self {
            transport,
            endpoint,
            binds,
            facts,
            settings,
            monitor,
            shutdown: watch::Sender::new(false),
            tasks: Mutex::new(Vec::new()),
            held: Mutex::new(Held::default()),
            outbound,
            requests: OnceCell::new(),
            host,
            sockets: std::sync::OnceLock::new(),
            declared: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Says the broker runs on real sockets: how they decide whether they may dial an address,
    /// and whether its endpoint is bound under CURVE.
    pub(crate) fn on_sockets(&self, dials: Dials, serves_curve: bool) {
        let serving = serves_curve.then(|| CurveBroker::enter(&self.endpoint));
        let _ = self.sockets.set(OnSockets {
            dials,
            _serving: serving,
        });
    }

    /// A registration on this broker declared its retries: its subscription opens next.
    pub(crate) fn subscription_declared(&self) {
        self.declared
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Binds the endpoint for publishers as one is paired, on a bound queue or fan-out with no
    /// subscription open or declared, on real sockets; answers at once elsewhere, or once bound.
    pub(crate) async fn listen_for_publishers(&self) -> Result<(), ZmqError> {
        let publishes_alone = self.binds
            && !self.facts.answers_requests
            && self.sockets.get().is_some()
            && !self.declared.load(std::sync::atomic::Ordering::Relaxed)
            && self.held().subscription.is_none();
        if publishes_alone {
            self.bind_publisher().await?;
        }
        Ok(())
    }

    /// Refuses at startup a registration of `subscription` whose dead letter (as `declaration`
    /// says) or retry copies (to `retry_to`) this broker's sockets could not send.
    pub(crate) fn check_declared_copies(
        &self,
        subscription: &str,
        declaration: &ruststream::RetryDeclaration,
        retry_to: Option<&str>,
    ) -> Result<(), ruststream::DeclareRetryError> {
        let copies = [
            ("retry copies", retry_to),
            ("dead letters", declaration.dead_letter()),
        ];
        for (what, destination) in copies {
            if let Some(destination) = destination {
                self.check_copies_reach(what, subscription, destination)
                    .map_err(|err| ruststream::DeclareRetryError::Broker(Box::new(err)))?;
            }
        }
        Ok(())
    }

    /// Refuses at startup the `what` (dead letters, retry copies) of `subscription` going to
    /// `destination` where this broker's sockets may not dial the endpoint it names: a CURVE
    /// broker with no keys for it would refuse each one as it is sent.
    pub(crate) fn check_copies_reach(
        &self,
        what: &'static str,
        subscription: &str,
        destination: &str,
    ) -> Result<(), ZmqError> {
        let Some(OnSockets { dials, .. }) = self.sockets.get() else {
            return Ok(());
        };
        let Some(target) = Destination::parse(destination)
            .ok()
            .and_then(|parsed| parsed.endpoint)
        else {
            // A bare name leaves through the broker's own endpoint, which it has keys for.
            return Ok(());
        };
        // The own listener, under any form, is the loop-back rule's.
        if self.binds && crate::routing::reaches(&self.endpoint, target, &self.host) {
            return Ok(());
        }
        // A CURVE listener of this process's brokers binds at its subscription, maybe after
        // this one's: it is found by its configured address.
        let curve_broker_there = || {
            curve_brokers()
                .iter()
                .any(|(_, address)| crate::routing::reaches(address, target, &self.host))
        };
        match dials(target) {
            Err(ZmqError::CurveDestination { .. }) if !curve_broker_there() => {
                Err(ZmqError::CurveCopiesUnreachable {
                    what,
                    subscription: subscription.to_owned(),
                    endpoint: self.endpoint.clone(),
                    destination: destination.to_owned(),
                    target: target.to_owned(),
                })
            }
            _ => Ok(()),
        }
    }

    #[cfg_attr(
        not(feature = "testing"),
        expect(dead_code, reason = "the in-process mode reads it")
    )]
    pub(crate) fn transport(&self) -> &Transport {
        &self.transport
    }

    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    #[cfg_attr(
        not(feature = "testing"),
        expect(dead_code, reason = "the in-process mode reads it")
    )]
    pub(crate) fn binds(&self) -> bool {
        self.binds
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    pub(crate) fn monitor(&self) -> &ZmqMonitor {
        &self.monitor
    }

    /// Where this broker listens, as a registration's dead letters are checked against it.
    pub(crate) fn listening(&self) -> Listening<'_> {
        Listening {
            address: &self.endpoint,
            binds: self.binds,
            host: &self.host,
        }
    }

    /// Fails with [`ZmqError::ShutDown`] naming `what` once the broker has shut down.
    pub(crate) fn ensure_open(&self, what: &'static str) -> Result<(), ZmqError> {
        if *self.shutdown.borrow() {
            Err(ZmqError::ShutDown { what })
        } else {
            Ok(())
        }
    }

    fn held(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Spawns a task of this broker on the runtime it connected on, kept for shutdown.
    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let handle = self.transport.spawn(task);
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        tasks.retain(|task| !task.is_finished());
        tasks.push(handle);
    }

    /// Opens a subscription: binds the endpoint (one subscription per bound endpoint, one
    /// responder per broker) or dials it, and starts the task that reads it.
    pub(crate) async fn subscribe(
        &self,
        subscription: &str,
        read_ahead: usize,
        lane: LaneKey,
    ) -> Result<Inbox, ZmqError> {
        self.ensure_open("a subscription")?;
        let holds = self.facts.holds_the_endpoint(self.binds);
        if holds {
            self.claim(subscription)?;
        }
        let opened = self.open(subscription, read_ahead, lane).await;
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
                why: self.facts.one_subscription,
            });
        }
        held.subscription = Some(subscription.to_owned());
        Ok(())
    }

    async fn open(
        &self,
        subscription: &str,
        read_ahead: usize,
        lane: LaneKey,
    ) -> Result<Inbox, ZmqError> {
        // A bound one-way broker's publishers listened there since connect: the subscription
        // takes the endpoint, and a fixed port may stay taken a moment after their socket closed.
        let released = self.binds
            && !self.facts.answers_requests
            && self
                .outbound
                .release(&Target::Bind(self.endpoint.clone()))
                .await;
        let until = tokio::time::Instant::now() + CLOSE_WAIT;
        loop {
            match self.open_once(subscription, read_ahead, lane).await {
                Err(ZmqError::Bind { .. }) if released && tokio::time::Instant::now() < until => {
                    tokio::time::sleep(REBIND_EVERY).await;
                }
                opened => return opened,
            }
        }
    }

    async fn open_once(
        &self,
        subscription: &str,
        read_ahead: usize,
        lane: LaneKey,
    ) -> Result<Inbox, ZmqError> {
        let opened = Subscribing {
            transport: &self.transport,
            endpoint: &self.endpoint,
            binds: self.binds,
            facts: self.facts,
            settings: &self.settings,
            monitor: &self.monitor,
            outbound: &self.outbound,
            shutdown: self.shutdown.subscribe(),
        }
        .open(subscription, read_ahead, lane)
        .await?;
        // A shutdown that came while the socket opened: its task sees the switch at once and
        // closes it before anyone can dial in.
        if let Err(shut) = self.ensure_open("a subscription") {
            opened.task.await;
            return Err(shut);
        }
        self.spawn(opened.task);
        self.note_opened(subscription, opened.address.as_deref());
        if let (Some(probe), Some(address)) = (opened.probe, opened.address) {
            self.outbound
                .reach(&address, &probe.heard, &probe.frame)
                .await?;
        }
        Ok(opened.inbox)
    }

    /// Logs and records an opened subscription: listening at its bound `address`, or dialing.
    fn note_opened(&self, subscription: &str, address: Option<&str>) {
        match address {
            Some(address) => {
                tracing::info!(subscription, endpoint = %address, "listening");
                self.monitor.set_bound_address(Some(address.to_owned()));
                self.held().address = Some(address.to_owned());
            }
            None => {
                tracing::info!(subscription, endpoint = %self.endpoint, "dialing");
                self.held()
                    .dialing
                    .get_or_insert_with(|| subscription.to_owned());
            }
        }
    }

    /// Publishes one message to `destination` (see [`Destination`]).
    pub(crate) async fn publish(
        &self,
        destination: &str,
        headers: &HeaderMap,
        payload: Bytes,
    ) -> Result<(), ZmqError> {
        let deadline = self.outbound.deadline();
        self.ensure_open("a publisher")?;
        // A send that leaves at once waits for nothing, so a loop of publishes would hold its
        // worker until a queue fills: each takes a unit of the task's budget, as tokio's own
        // resources do, and the task yields when it is spent.
        tokio::task::consume_budget().await;
        #[cfg(feature = "testing")]
        let kept = payload.clone();
        // Decided before the one wait, so that a publish's future (a retry copy's waits out its
        // delay in memory) holds the frames and one send, nothing more.
        let leaving = self
            .leaving(destination, headers, payload)
            .inspect_err(|err| {
                if matches!(err, ZmqError::ReplyAddress { .. }) {
                    self.monitor.count_send_failed();
                }
            })?;
        let sent = match leaving {
            Leaving::Send(target, frames) => self.outbound.send(&target, frames, deadline).await,
            Leaving::Answer(frames) => self.outbound.answer(frames, destination, deadline).await,
        };
        #[cfg(feature = "testing")]
        if sent.is_ok() {
            self.transport.published(destination, headers, &kept);
        }
        sent
    }

    /// The frames of a publish to `destination`, and the way they leave.
    fn leaving(
        &self,
        destination: &str,
        headers: &HeaderMap,
        payload: Bytes,
    ) -> Result<Leaving, ZmqError> {
        if !self.facts.answers_requests {
            if destination.starts_with(wire::REPLY_PREFIX) {
                // Reserved for answers: said apart from any other name, so that an answer never
                // leaves through a queue or a fan-out.
                return Err(wire::parse_requester(destination).err().unwrap_or_else(|| {
                    ZmqError::ReplyAddress {
                        address: destination.to_owned(),
                        why: "this broker answers no requests: a `zmq-reply:` address is \
                              answered only through a responder (`ZmqRpc`)",
                    }
                }));
            }
            let parsed = Destination::parse(destination)?;
            let frames = wire::encode(parsed.name, headers, payload)?;
            return Ok(Leaving::Send(self.route(&parsed)?, frames));
        }
        Ok(match route_responder(destination)? {
            ResponderTarget::Dial { name, endpoint } => Leaving::Send(
                Target::Queue(endpoint.to_owned()),
                wire::encode(name, headers, payload)?,
            ),
            ResponderTarget::Reply(requester) => {
                Leaving::Answer(wire::reply_frames(requester, headers, payload)?)
            }
        })
    }

    /// Where a publish to `destination` leaves: the routing decision, over who holds the
    /// endpoint now.
    pub(crate) fn route(&self, destination: &Destination<'_>) -> Result<Target, ZmqError> {
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
            admission: self.facts.admission,
            reader: held.dialing.as_deref(),
            host: &self.host,
        };
        route(&own, destination)
    }

    /// The subscription that listens on the endpoint in this process, and where.
    pub(crate) fn listener(&self) -> Option<(String, String)> {
        let held = self.held();
        held.subscription.clone().zip(held.address.clone())
    }

    /// Binds the endpoint for publishers now (a bound one-way broker connecting, which has no
    /// subscription yet); answers the address, port resolved.
    pub(crate) async fn bind_publisher(&self) -> Result<String, ZmqError> {
        self.ensure_open("a publisher")?;
        self.outbound
            .open(&Target::Bind(self.endpoint.clone()))
            .await?;
        Ok(self
            .monitor
            .bound_address()
            .unwrap_or_else(|| self.endpoint.clone()))
    }

    /// Opens the dialing socket of a publish to the broker's own endpoint now and waits until
    /// it is connected, by the send deadline (a dialing broker with no subscription).
    pub(crate) async fn dial_publisher(&self) -> Result<(), ZmqError> {
        self.ensure_open("a publisher")?;
        self.outbound
            .open_reached(&Target::Dial(self.endpoint.clone()))
            .await
    }

    /// The broker's one DEALER, opened on first use. Beside a responder this process binds, it
    /// dials that responder's listener.
    pub(crate) async fn requests(&self) -> Result<&RequestChannel, ZmqError> {
        self.ensure_open("a requester")?;
        if let Some(requests) = self.requests.get() {
            return Ok(requests);
        }
        // Opening is boxed, so that the future of every request stays small.
        Box::pin(self.open_requests()).await
    }

    async fn open_requests(&self) -> Result<&RequestChannel, ZmqError> {
        self.requests
            .get_or_try_init(|| async {
                let (endpoint, binds) = match self.listener() {
                    Some((_, address)) => (address, false),
                    None => (self.endpoint.clone(), self.binds),
                };
                let (channel, task) = RequestChannel::open(
                    &self.transport,
                    &endpoint,
                    binds,
                    &self.settings,
                    &self.monitor,
                    self.shutdown.subscribe(),
                )
                .await?;
                self.spawn(task);
                Ok(channel)
            })
            .await
    }

    /// The DEALER, if a request opened it.
    pub(crate) fn requests_opened(&self) -> Option<&RequestChannel> {
        self.requests.get()
    }

    /// Closes every socket and ends every task, all at once, within one bounded wait (the
    /// linger, for what the sending sockets queued, and the close wait); never panics.
    pub(crate) async fn shutdown(&self) {
        if self.shutdown.send_replace(true) {
            return;
        }
        if let Some(requests) = self.requests.get() {
            requests.fail_all();
        }
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
        let aborts: Vec<_> = tasks.iter().map(JoinHandle::abort_handle).collect();
        let joined = futures::future::join(
            // A responder's socket lingers for its answers within this wait.
            timeout(
                self.settings.linger + CLOSE_WAIT,
                futures::future::join_all(tasks),
            ),
            self.outbound.close(),
        )
        .await;
        if joined.0.is_err() {
            aborts.iter().for_each(tokio::task::AbortHandle::abort);
        }
        let endpoint = self
            .monitor
            .bound_address()
            .unwrap_or_else(|| self.endpoint.clone());
        tracing::info!(%endpoint, "shut down");
    }
}

/// How a publish leaves: through the writer for a target, or as an answer through the
/// responder's ROUTER.
enum Leaving {
    Send(Target, Frames),
    Answer(Frames),
}
