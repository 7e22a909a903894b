//! The in-process bus (feature `testing`): what stands in for the sockets when
//! `TestApp::start(app())` runs a service with no network.
//!
//! The bus plays ZeroMQ's part and nothing more: endpoints are addresses in a table scoped to
//! the runtime the brokers connected on, a bound address is taken until its socket closes, a
//! socket reaches only sockets on the other side of an endpoint (a binder reaches dialers and
//! back), PUSH picks one reader in turn and waits for one when none is there, PUB hands each
//! matching SUB a copy and drops what a full one cannot take, ROUTER answers at the identity a request carried. Everything above the
//! sockets (the wire format, the limits, the routing of copies, the refusals) is the production
//! code, so the in-process mode refuses what the sockets refuse.
//!
//! It is a backend like the others ([`Bus`]): its ROUTER and DEALER run the same task
//! (`transport::duplex::run`), its readers the same pump.

mod table;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, OnceLock, PoisonError, atomic::Ordering},
    time::Duration,
};

use ruststream::{Bytes, HeaderMap, OutgoingMessage, RawMessage, testing::Coordinator};
use tokio::{sync::mpsc, time::Instant};

use self::table::{Attachment, BACKLOG, BUS, Delivery, INJECTED, QUEUE, Sender, Table};
use super::{
    backend::{
        Driving, DuplexDriver, DuplexSocket, HandedSend, Opening, ReadSocket, SocketBackend,
        WriteSocket,
    },
    reading_end::{Received, Release},
};
use crate::{
    error::ZmqError,
    monitor::Flush,
    pattern::{PatternFacts, Role},
    settings::Settings,
    wire::{self, Frames},
};

/// The in-process bus as a backend: its options are the connection's door to it.
pub(crate) struct Bus;

impl SocketBackend for Bus {
    const NAME: &'static str = "in-process";
    const NETWORK: bool = false;
    type Config = ();
    type Options = Peer;
    type ReadSocket = BusReadSocket;
    type WriteSocket = BusWriteSocket;
    type DuplexSocket = BusDuplexSocket;

    fn options(_: &Settings, (): ()) -> Peer {
        Peer::new()
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
    pub(crate) fn new() -> Self {
        Self {
            scope: tokio::runtime::Handle::current().id().to_string(),
            coordinator: Arc::default(),
            resolved: Arc::default(),
            log: Arc::default(),
        }
    }

    /// Notes a message the broker published.
    pub(crate) fn record(&self, destination: &str, headers: &HeaderMap, payload: Bytes) {
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
    ) -> Result<(BusReadSocket, String), ZmqError> {
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
            BusReadSocket {
                address: key,
                id,
                rx,
                coordinator: Arc::clone(&self.coordinator),
            },
            address,
        ))
    }

    fn open_writer(
        &self,
        role: Role,
        address: &str,
        binds: bool,
    ) -> Result<(BusWriteSocket, String), ZmqError> {
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
            BusWriteSocket {
                address: key,
                id,
                sender,
            },
            address,
        ))
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
        match Table::deliver(point, &sender, frames.clone()) {
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
pub(crate) struct BusReadSocket {
    address: String,
    id: u64,
    rx: mpsc::Receiver<Frames>,
    coordinator: Arc<OnceLock<Coordinator>>,
}

impl BusReadSocket {
    /// The next message, with the guard that tells the harness when it is done with.
    async fn next(&mut self) -> Received {
        let Some(frames) = self.rx.recv().await else {
            return std::future::pending().await;
        };
        let release = match self.coordinator.get() {
            Some(coordinator) => Release::guarded(Arc::new(Consumed(coordinator.clone()))),
            None => Release::default(),
        };
        Received { frames, release }
    }

    fn detach(&self) {
        BUS.detach(&self.address, self.id);
    }
}

impl ReadSocket for BusReadSocket {
    type Options = Peer;

    async fn bind(at: Opening<Peer>, topics: Vec<String>) -> Result<(Self, String), ZmqError> {
        at.options.open_reader(at.role, &at.address, true, topics)
    }

    async fn dial(at: Opening<Peer>, topics: Vec<String>) -> Result<Self, ZmqError> {
        let (reader, _) = at
            .options
            .open_reader(at.role, &at.address, false, topics)?;
        Ok(reader)
    }

    async fn recv(&mut self) -> Received {
        self.next().await
    }

    async fn close(self) {
        self.detach();
    }
}

/// A sending socket on the bus.
pub(crate) struct BusWriteSocket {
    address: String,
    id: u64,
    sender: Sender,
}

impl WriteSocket for BusWriteSocket {
    type Options = Peer;

    async fn bind(at: Opening<Peer>) -> Result<(Self, String), ZmqError> {
        at.options.open_writer(at.role, &at.address, true)
    }

    async fn dial(at: Opening<Peer>) -> Result<Self, ZmqError> {
        let (writer, _) = at.options.open_writer(at.role, &at.address, false)?;
        Ok(writer)
    }

    async fn send(&mut self, frames: Frames, deadline: Instant) -> Result<(), ZmqError> {
        BUS.send(&self.address, &self.sender, frames, deadline)
            .await
    }

    /// Waits until the bus changes (a socket attaches or leaves), when a peer may be there.
    async fn reach(&mut self) {
        BUS.changed.notified().await;
    }

    /// The bus hands a message on as it is sent: nothing is left to flush.
    async fn close(self, _linger: Duration) -> Flush {
        BUS.detach(&self.address, self.id);
        Flush::Flushed
    }
}

/// A ROUTER or DEALER on the bus: a reader, and the identity it sends as.
pub(crate) struct BusDuplexSocket {
    reader: BusReadSocket,
    sender: Sender,
    /// The address as bound or dialed, as errors name it.
    endpoint: String,
}

impl BusDuplexSocket {
    fn open(at: Opening<Peer>, binds: bool) -> Result<(Self, String), ZmqError> {
        let peer = at.options;
        let (reader, resolved) = peer.open_reader(at.role, &at.address, binds, Vec::new())?;
        let identity = BUS
            .points()
            .get(&reader.address)
            .and_then(|point| point.attached.iter().find(|a| a.id == reader.id))
            .map(|a| a.identity.clone())
            .unwrap_or_default();
        let sender = Sender {
            role: at.role,
            binds,
            identity,
        };
        let duplex = Self {
            reader,
            sender,
            endpoint: resolved.clone(),
        };
        Ok((duplex, resolved))
    }
}

impl DuplexSocket for BusDuplexSocket {
    type Options = Peer;
    type Driver = Self;

    async fn bind(at: Opening<Peer>) -> Result<(Self, String), ZmqError> {
        Self::open(at, true)
    }

    async fn dial(at: Opening<Peer>) -> Result<Self, ZmqError> {
        Self::open(at, false).map(|(duplex, _)| duplex)
    }

    fn drive(self, _reads_itself: bool) -> Driving<Self> {
        Driving {
            endpoint: self.endpoint.clone(),
            driver: self,
            direct: None,
            reader: None,
        }
    }
}

impl DuplexDriver for BusDuplexSocket {
    /// Sends as a socket does: waits for a peer, and for room at a full one, by the deadline.
    async fn take(&mut self, (frames, deadline, done): HandedSend) {
        done.settle(
            BUS.send(&self.reader.address, &self.sender, frames, deadline)
                .await,
        );
    }

    async fn next(&mut self, read: bool) -> Option<Received> {
        if !read {
            return std::future::pending().await;
        }
        Some(self.reader.next().await)
    }

    async fn close(self, _linger: Duration) -> Flush {
        self.reader.detach();
        Flush::Flushed
    }
}
