//! The in-process bus (feature `testing`): what stands in for the sockets when
//! `TestApp::start(app())` runs a service with no network.
//!
//! The bus plays ZeroMQ's part and nothing more: endpoints are addresses in a table scoped to
//! the runtime the brokers connected on, a bound address is taken until its socket closes, a
//! socket reaches only sockets on the other side of an endpoint (a binder reaches dialers and
//! back), PUSH picks one reader in turn and waits for one when none is there, PUB hands each matching SUB a copy and drops what a full
//! one cannot take, ROUTER answers at the identity a request carried. Everything above the
//! sockets (the wire format, the limits, the routing of copies, the refusals) is the production
//! code, so the in-process mode refuses what the sockets refuse.
//!
//! Imports: its parent `transport`, and `error`, `pattern` and `wire`.

use std::{
    collections::{HashMap, VecDeque},
    sync::{
        Arc, LazyLock, Mutex, MutexGuard, OnceLock, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use ruststream::{Bytes, HeaderMap, OutgoingMessage, RawMessage, testing::Coordinator};
use tokio::{
    sync::{Notify, mpsc, watch},
    time::{Instant, timeout_at},
};

use super::{DuplexSender, Inbound, Received, Release, Started, stopped};
use crate::{
    error::{SendFailure, ZmqError},
    pattern::{PatternFacts, Role},
    wire::{self, Frames},
};

/// How many messages wait for a reader on one socket, as the client's per-peer queue holds.
const QUEUE: usize = 4_096;
/// How many messages an endpoint keeps for a reader that has not attached yet.
const BACKLOG: usize = 1_000;
/// The identities of the peers `inject` stands for; an answer to one is taken and logged.
const INJECTED: &[u8] = b"\0injected-";

static BUS: LazyLock<Bus> = LazyLock::new(Bus::default);

#[derive(Default)]
struct Bus {
    points: Mutex<HashMap<String, Point>>,
    changed: Notify,
    ids: AtomicU64,
}

/// One endpoint: who bound it, who is attached, what waits for a reader.
#[derive(Default)]
struct Point {
    bound: bool,
    attached: Vec<Attachment>,
    /// Messages `inject` sent before a reader attached: (sent by the binding side, frames).
    waiting: VecDeque<(Sender, Frames)>,
    cursor: usize,
}

struct Attachment {
    id: u64,
    role: Role,
    binds: bool,
    topics: Vec<Vec<u8>>,
    identity: Bytes,
    /// Where it reads; `None` for a socket that only sends.
    tx: Option<mpsc::Sender<Frames>>,
    coordinator: Arc<OnceLock<Coordinator>>,
}

/// Who sends: a socket's role, side and identity.
#[derive(Clone)]
struct Sender {
    role: Role,
    binds: bool,
    identity: Bytes,
}

enum Delivery {
    Done,
    NoPeer,
    UnknownPeer,
    Full(mpsc::Sender<Frames>, Frames, Arc<OnceLock<Coordinator>>),
}

/// The socket that reads what `role` sends, if any.
fn read_by(role: Role) -> Option<Role> {
    match role {
        Role::Push => Some(Role::Pull),
        Role::Pub => Some(Role::Sub),
        Role::Dealer => Some(Role::Router),
        Role::Router => Some(Role::Dealer),
        Role::Pull | Role::Sub => None,
    }
}

fn enqueued(coordinator: &OnceLock<Coordinator>) {
    if let Some(coordinator) = coordinator.get() {
        coordinator.enqueued();
    }
}

impl Bus {
    fn points(&self) -> MutexGuard<'_, HashMap<String, Point>> {
        self.points.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Port 0 resolves to a port of the bus's own; other addresses stay as given.
    fn resolve(&self, address: &str) -> String {
        match address.strip_suffix(":0") {
            Some(host) if address.starts_with("tcp://") => {
                format!(
                    "{host}:{}",
                    20_000 + self.ids.fetch_add(1, Ordering::Relaxed) % 40_000
                )
            }
            _ => address.to_owned(),
        }
    }

    fn attach(&self, address: &str, attachment: Attachment) -> Result<(), ZmqError> {
        let mut points = self.points();
        let point = points.entry(address.to_owned()).or_default();
        if attachment.binds {
            if point.bound {
                return Err(ZmqError::Bind {
                    endpoint: plain(address).to_owned(),
                    source: "the address is in use (in process)".into(),
                });
            }
            point.bound = true;
        }
        let role = attachment.role;
        let binds = attachment.binds;
        point.attached.push(attachment);
        // A reader that attaches takes what `inject` left waiting for it.
        if matches!(role, Role::Pull | Role::Router) {
            let waiting: Vec<_> = point.waiting.drain(..).collect();
            for (sender, frames) in waiting {
                let taken = sender.binds != binds
                    && matches!(
                        Self::deliver(point, &sender, frames.clone()),
                        Delivery::Done
                    );
                if !taken {
                    point.waiting.push_back((sender, frames));
                }
            }
        }
        drop(points);
        self.changed.notify_waiters();
        Ok(())
    }

    fn detach(&self, address: &str, id: u64) {
        let mut points = self.points();
        if let Some(point) = points.get_mut(address) {
            if let Some(at) = point.attached.iter().position(|a| a.id == id) {
                let gone = point.attached.remove(at);
                if gone.binds {
                    point.bound = false;
                }
            }
            if point.attached.is_empty() && point.waiting.is_empty() {
                points.remove(address);
            }
        }
        drop(points);
        self.changed.notify_waiters();
    }

    /// Hands `frames` from `sender` to the readers on the other side of `point`.
    fn deliver(point: &mut Point, sender: &Sender, mut frames: Frames) -> Delivery {
        let Some(reader) = read_by(sender.role) else {
            return Delivery::NoPeer;
        };
        let opposite =
            |a: &Attachment| a.role == reader && a.binds != sender.binds && a.tx.is_some();
        match sender.role {
            Role::Pub => {
                let name = frames.first().cloned().unwrap_or_default();
                for attachment in point.attached.iter().filter(|a| opposite(a)) {
                    if attachment
                        .topics
                        .iter()
                        .any(|topic| name.starts_with(topic))
                        && let Some(tx) = &attachment.tx
                        && tx.try_send(frames.clone()).is_ok()
                    {
                        enqueued(&attachment.coordinator);
                    }
                }
                Delivery::Done
            }
            Role::Router => {
                let identity = if frames.is_empty() {
                    Bytes::new()
                } else {
                    frames.remove(0)
                };
                if identity.starts_with(INJECTED) {
                    return Delivery::Done;
                }
                match point
                    .attached
                    .iter()
                    .find(|a| opposite(a) && a.identity == identity)
                {
                    Some(attachment) => Self::hand(attachment, frames),
                    None => Delivery::UnknownPeer,
                }
            }
            _ => {
                let candidates: Vec<usize> = (0..point.attached.len())
                    .filter(|&i| opposite(&point.attached[i]))
                    .collect();
                if candidates.is_empty() {
                    return Delivery::NoPeer;
                }
                let chosen = candidates[point.cursor % candidates.len()];
                point.cursor = point.cursor.wrapping_add(1);
                if sender.role == Role::Dealer {
                    frames.insert(0, sender.identity.clone());
                }
                Self::hand(&point.attached[chosen], frames)
            }
        }
    }

    fn hand(attachment: &Attachment, frames: Frames) -> Delivery {
        let Some(tx) = &attachment.tx else {
            return Delivery::NoPeer;
        };
        match tx.try_send(frames) {
            Ok(()) => {
                enqueued(&attachment.coordinator);
                Delivery::Done
            }
            Err(mpsc::error::TrySendError::Full(frames)) => {
                Delivery::Full(tx.clone(), frames, Arc::clone(&attachment.coordinator))
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Delivery::NoPeer,
        }
    }

    /// Sends as a socket does: waits until `deadline` for a peer, and for room at a full one.
    async fn send(
        &self,
        address: &str,
        sender: &Sender,
        frames: Frames,
        deadline: Instant,
    ) -> Result<(), ZmqError> {
        let patience = deadline.saturating_duration_since(Instant::now());
        loop {
            let changed = self.changed.notified();
            let delivery = {
                let mut points = self.points();
                match points.get_mut(address) {
                    Some(point) => Self::deliver(point, sender, frames.clone()),
                    None if sender.role == Role::Pub => Delivery::Done,
                    None => Delivery::NoPeer,
                }
            };
            match delivery {
                Delivery::Done => return Ok(()),
                Delivery::Full(tx, frames, coordinator) => {
                    return match timeout_at(deadline, tx.send(frames)).await {
                        Ok(Ok(())) => {
                            enqueued(&coordinator);
                            Ok(())
                        }
                        _ => Err(no_peer(address, patience)),
                    };
                }
                Delivery::UnknownPeer => {
                    return Err(ZmqError::UnknownPeer {
                        endpoint: plain(address).to_owned(),
                    });
                }
                Delivery::NoPeer => {
                    if timeout_at(deadline, changed).await.is_err() {
                        return Err(no_peer(address, patience));
                    }
                }
            }
        }
    }
}

/// The address a bus key stands for, for errors and logs.
fn plain(key: &str) -> &str {
    key.split_once('|').map_or(key, |(_, address)| address)
}

fn no_peer(address: &str, patience: Duration) -> ZmqError {
    ZmqError::Send {
        endpoint: plain(address).to_owned(),
        source: SendFailure::NoPeer(format!(
            "no peer took the message within {patience:?} (in process)"
        )),
    }
}

/// A connection's door to the bus: what its sockets report to.
///
/// Endpoints are scoped to the runtime the broker connected on: each test runs its own
/// runtime, so two tests that start the same app (the same fixed addresses) do not meet.
#[derive(Clone)]
pub(crate) struct Peer {
    scope: String,
    coordinator: Arc<OnceLock<Coordinator>>,
    /// The ports this connection's port-0 addresses resolved to, kept so that what `inject`
    /// sends before a subscription binds waits where it will bind.
    resolved: Arc<Mutex<HashMap<String, String>>>,
    /// What the broker published and was injected with, for the harness's `published`.
    log: Arc<Mutex<Vec<RawMessage>>>,
}

/// Tells the harness, once, that a delivery is done with: dropped with the last handle on it.
#[derive(Debug)]
pub(crate) struct Consumed(Coordinator);

impl Drop for Consumed {
    fn drop(&mut self) {
        self.0.consumed();
    }
}

impl Peer {
    /// A peer on the bus scope of the current runtime.
    pub(super) fn new() -> Self {
        Self {
            scope: tokio::runtime::Handle::current().id().to_string(),
            coordinator: Arc::default(),
            resolved: Arc::default(),
            log: Arc::default(),
        }
    }

    /// Notes a message the broker published.
    pub(super) fn record(&self, destination: &str, headers: &HeaderMap, payload: Bytes) {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(RawMessage::new(destination.to_owned(), payload).with_headers(headers.clone()));
    }

    /// What the broker published (and was injected with) under `name`, in order.
    pub(crate) fn published(&self, name: &str) -> Vec<RawMessage> {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|message| message.name() == name)
            .cloned()
            .collect()
    }

    /// The bus's key for `address` in this peer's scope.
    fn key(&self, address: &str) -> String {
        format!("{}|{address}", self.scope)
    }

    /// Where `address` is on the bus for this connection: port 0 resolved once, and kept.
    fn resolve(&self, address: &str) -> String {
        self.resolved
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(address.to_owned())
            .or_insert_with(|| BUS.resolve(address))
            .clone()
    }

    fn attachment(
        &self,
        role: Role,
        binds: bool,
        topics: Vec<String>,
        tx: Option<mpsc::Sender<Frames>>,
    ) -> Attachment {
        let id = BUS.ids.fetch_add(1, Ordering::Relaxed);
        Attachment {
            id,
            role,
            binds,
            topics: topics.into_iter().map(String::into_bytes).collect(),
            identity: Bytes::from(format!("peer-{id}").into_bytes()),
            tx,
            coordinator: Arc::clone(&self.coordinator),
        }
    }

    /// Hands the harness's coordinator to every socket of this peer.
    pub(crate) fn install(&self, coordinator: Coordinator) {
        let _ = self.coordinator.set(coordinator);
    }

    fn open_reader(
        &self,
        role: Role,
        address: &str,
        binds: bool,
        topics: Vec<String>,
    ) -> Result<(BusReader, String), ZmqError> {
        let address = if binds {
            self.resolve(address)
        } else {
            address.to_owned()
        };
        let (tx, rx) = mpsc::channel(QUEUE);
        let attachment = self.attachment(role, binds, topics, Some(tx));
        let id = attachment.id;
        let key = self.key(&address);
        BUS.attach(&key, attachment)?;
        Ok((
            BusReader {
                address: key,
                id,
                rx,
                coordinator: Arc::clone(&self.coordinator),
            },
            address,
        ))
    }

    pub(crate) fn bind_reader(
        &self,
        role: Role,
        address: &str,
        topics: Vec<String>,
    ) -> Result<(BusReader, String), ZmqError> {
        self.open_reader(role, address, true, topics)
    }

    pub(crate) fn dial_reader(&self, role: Role, address: &str, topics: Vec<String>) -> BusReader {
        // A dialing socket never finds its address taken.
        match self.open_reader(role, address, false, topics) {
            Ok((reader, _)) => reader,
            Err(_) => unreachable!("dialing does not take an address"),
        }
    }

    fn open_writer(
        &self,
        role: Role,
        address: &str,
        binds: bool,
    ) -> Result<(BusWriter, String), ZmqError> {
        let address = if binds {
            self.resolve(address)
        } else {
            address.to_owned()
        };
        let attachment = self.attachment(role, binds, Vec::new(), None);
        let sender = Sender {
            role,
            binds,
            identity: attachment.identity.clone(),
        };
        let id = attachment.id;
        let key = self.key(&address);
        BUS.attach(&key, attachment)?;
        Ok((
            BusWriter {
                address: key,
                id,
                sender,
            },
            address,
        ))
    }

    pub(crate) fn bind_writer(
        &self,
        role: Role,
        address: &str,
    ) -> Result<(BusWriter, String), ZmqError> {
        self.open_writer(role, address, true)
    }

    pub(crate) fn dial_writer(&self, role: Role, address: &str) -> BusWriter {
        match self.open_writer(role, address, false) {
            Ok((writer, _)) => writer,
            Err(_) => unreachable!("dialing does not take an address"),
        }
    }

    /// A ROUTER or DEALER on the bus, run by a task like the socket's.
    pub(crate) fn duplex(
        &self,
        role: Role,
        address: &str,
        binds: bool,
        inbound: Inbound,
        mut shutdown: watch::Receiver<bool>,
    ) -> Result<(Started, Option<String>), ZmqError> {
        let (mut reader, resolved) = self.open_reader(role, address, binds, Vec::new())?;
        let sender = {
            let points = BUS.points();
            let identity = points
                .get(&self.key(&resolved))
                .and_then(|point| point.attached.iter().find(|a| a.id == reader.id))
                .map(|a| a.identity.clone())
                .unwrap_or_default();
            Sender {
                role,
                binds,
                identity,
            }
        };
        let (handle, mut outbox) = DuplexSender::channel(&resolved);
        let address = self.key(&resolved);
        let task = async move {
            loop {
                tokio::select! {
                    () = stopped(&mut shutdown) => break,
                    Some((frames, deadline, done)) = outbox.recv() => {
                        done.settle(BUS.send(&address, &sender, frames, deadline).await);
                    }
                    received = reader.recv() => {
                        let delivered = match inbound.offer(received) {
                            Ok(None) => Ok(()),
                            Ok(Some(waits)) => match inbound.room().await {
                                Ok(permit) => {
                                    inbound.hand(permit, waits);
                                    Ok(())
                                }
                                Err(closed) => {
                                    inbound.lost(waits);
                                    Err(closed)
                                }
                            },
                            Err(closed) => Err(closed),
                        };
                        if delivered.is_err() {
                            break;
                        }
                    }
                }
            }
            reader.close();
        };
        let started = Started {
            sender: handle,
            task: Box::pin(task),
            reader: None,
        };
        Ok((started, binds.then_some(resolved)))
    }

    /// A message from the peer at the other end of a broker's endpoint (pattern `facts`,
    /// configured as `endpoint`), as the harness's `inject` sends it.
    pub(crate) fn inject(
        &self,
        message: OutgoingMessage<'_>,
        facts: PatternFacts,
        endpoint: &str,
        broker_binds: bool,
    ) {
        let (name, payload, headers) = message.into_parts();
        let payload = Bytes::copy_from_slice(payload);
        self.record(name, &headers, payload.clone());
        let frames = match wire::encode(name, &headers, payload) {
            Ok(frames) => frames,
            Err(err) => {
                tracing::warn!(name, error = %err, "an injected message cannot be sent");
                return;
            }
        };
        // A bound endpoint is where this process listens, port 0 resolved on the bus.
        let address = if broker_binds {
            self.resolve(endpoint)
        } else {
            endpoint.to_owned()
        };
        let n = BUS.ids.fetch_add(1, Ordering::Relaxed);
        let sender = Sender {
            role: facts.peer_sends_with,
            binds: !broker_binds,
            identity: Bytes::from([INJECTED, n.to_string().as_bytes()].concat()),
        };
        let mut points = BUS.points();
        let point = points.entry(self.key(&address)).or_default();
        match Bus::deliver(point, &sender, frames.clone()) {
            Delivery::Done => {}
            Delivery::Full(..) | Delivery::UnknownPeer => {
                tracing::warn!(
                    endpoint = address,
                    "an injected message was dropped: the subscription's queue is full"
                );
            }
            // What the sockets keep for a reader that is not there yet: a queue's and a
            // responder's peer hold it; a PUB drops it.
            Delivery::NoPeer if facts.peer_keeps_backlog && point.waiting.len() < BACKLOG => {
                point.waiting.push_back((sender, frames));
            }
            Delivery::NoPeer => {}
        }
        drop(points);
        BUS.changed.notify_waiters();
    }
}

/// A reading socket on the bus.
pub(crate) struct BusReader {
    address: String,
    id: u64,
    rx: mpsc::Receiver<Frames>,
    coordinator: Arc<OnceLock<Coordinator>>,
}

impl BusReader {
    pub(crate) async fn recv(&mut self) -> Received {
        let Some(frames) = self.rx.recv().await else {
            return std::future::pending().await;
        };
        let consumed = self
            .coordinator
            .get()
            .map(|coordinator| Arc::new(Consumed(coordinator.clone())));
        Received {
            frames,
            release: Release {
                _consumed: consumed,
            },
        }
    }

    pub(crate) fn close(self) {
        BUS.detach(&self.address, self.id);
    }
}

/// A sending socket on the bus.
pub(crate) struct BusWriter {
    address: String,
    id: u64,
    sender: Sender,
}

impl BusWriter {
    pub(crate) async fn send(&mut self, frames: Frames, deadline: Instant) -> Result<(), ZmqError> {
        BUS.send(&self.address, &self.sender, frames, deadline)
            .await
    }

    /// Waits until the bus changes (a socket attaches or leaves), when a peer may be there.
    pub(crate) async fn reach(&mut self) {
        BUS.changed.notified().await;
    }

    pub(crate) fn close(self) {
        BUS.detach(&self.address, self.id);
    }
}
