//! The bus's one table: every endpoint in process, who is attached to it, and how a message
//! reaches the sockets on its other side, as ZeroMQ's patterns say.

use std::{
    collections::{HashMap, VecDeque},
    sync::{
        Arc, LazyLock, Mutex, MutexGuard, OnceLock, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use ruststream::{Bytes, testing::Coordinator};
use tokio::{
    sync::{Notify, mpsc},
    time::{Instant, timeout_at},
};

use crate::{
    error::{SendFailure, ZmqError},
    pattern::Role,
    wire::Frames,
};

/// How many messages wait for a reader on one socket, as the client's per-peer queue holds.
pub(super) const QUEUE: usize = 4_096;
/// How many messages an endpoint keeps for a reader that has not attached yet.
pub(super) const BACKLOG: usize = 1_000;
/// The identities of the peers `inject` stands for; an answer to one is taken and logged.
pub(super) const INJECTED: &[u8] = b"\0injected-";

pub(super) static BUS: LazyLock<Table> = LazyLock::new(Table::default);

/// Every endpoint of the bus, and a wake-up whenever one changes.
#[derive(Default)]
pub(super) struct Table {
    points: Mutex<HashMap<String, Point>>,
    pub(super) changed: Notify,
    pub(super) ids: AtomicU64,
}

/// One endpoint: who bound it, who is attached, what waits for a reader.
#[derive(Default)]
pub(super) struct Point {
    bound: bool,
    pub(super) attached: Vec<Attachment>,
    /// Messages `inject` sent before a reader attached: (sent by the binding side, frames).
    pub(super) waiting: VecDeque<(Sender, Frames)>,
    cursor: usize,
}

pub(super) struct Attachment {
    pub(super) id: u64,
    pub(super) role: Role,
    pub(super) binds: bool,
    pub(super) topics: Vec<Vec<u8>>,
    pub(super) identity: Bytes,
    /// Where it reads; `None` for a socket that only sends.
    pub(super) tx: Option<mpsc::Sender<Frames>>,
    pub(super) coordinator: Arc<OnceLock<Coordinator>>,
}

/// Who sends: a socket's role, side and identity.
#[derive(Clone)]
pub(super) struct Sender {
    pub(super) role: Role,
    pub(super) binds: bool,
    pub(super) identity: Bytes,
}

pub(super) enum Delivery {
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

impl Table {
    pub(super) fn points(&self) -> MutexGuard<'_, HashMap<String, Point>> {
        self.points.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Port 0 resolves to a port of the bus's own; other addresses stay as given.
    pub(super) fn resolve(&self, address: &str) -> String {
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

    pub(super) fn attach(&self, address: &str, attachment: Attachment) -> Result<(), ZmqError> {
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

    pub(super) fn detach(&self, address: &str, id: u64) {
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
    pub(super) fn deliver(point: &mut Point, sender: &Sender, mut frames: Frames) -> Delivery {
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
    pub(super) async fn send(
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
pub(super) fn plain(key: &str) -> &str {
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
