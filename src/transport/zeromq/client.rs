//! The `zeromq` client's socket kinds, what the supervisor asks of each, and how each closes.

use std::{
    sync::{Arc, Weak},
    time::Duration,
};

use futures::{StreamExt, channel::mpsc::Receiver};
use zeromq::{
    DealerRecvHalf, DealerSendHalf, DealerSocket, MultiPeerBackend, PubSocket, PullSocket,
    PushSocket, RouterSocket, Socket, SocketEvent, SocketOptions, SocketRecv, SocketSend,
    SubSocket, ZmqError as ClientError, ZmqMessage as ClientMessage,
};

use crate::{monitor::Flush, pattern::Role};

/// How long one attempt to reach a peer may take before the supervisor tries again.
pub(super) const CONNECT_ATTEMPT: Duration = Duration::from_millis(500);

pub(super) enum PullOrSub {
    Pull(PullSocket),
    Sub(SubSocket),
}

pub(super) enum PushOrPub {
    Push(PushSocket),
    Pub(PubSocket),
}

pub(super) enum RouterOrDealer {
    Router(RouterSocket),
    Dealer(DealerSocket),
    /// A dialing DEALER once connected: its task reads with this half, and the send half is
    /// in the slot it shares with the senders ([`DealerDirect`]).
    SplitDealer(DealerRecvHalf, DealerSlot),
}

/// A connected DEALER's send half, shared by its task and the tasks that send; empty while it
/// is not connected. An async lock: a send may wait in it for room in the peer's queue.
pub(super) type DealerSlot = Arc<tokio::sync::Mutex<Option<DealerSendHalf>>>;

pub(super) fn options() -> SocketOptions {
    let mut options = SocketOptions::default();
    options.connect_timeout(CONNECT_ATTEMPT);
    options
}

/// Runs `$body` with `$s` bound to whichever client socket `$socket` holds.
macro_rules! each {
    ($socket:expr, $s:ident => $body:expr, $($variant:path),+) => {
        match $socket {
            $($variant($s) => $body,)+
        }
    };
}

/// Closes a client socket: its listeners first, then every connection (the client's own close
/// leaves a PULL's connections open).
///
/// A peer whose handshake began before the listener stopped joins the socket afterwards, and the
/// client would hold that connection open for good, so each late arrival the monitor reports
/// is shut out in turn, until the socket is gone.
pub(super) async fn close_client<S: Socket + 'static>(
    socket: S,
    events: Receiver<SocketEvent>,
    linger: Duration,
) -> Flush {
    let state = Arc::downgrade(&socket.backend());
    close_client_of(socket, events, state, linger).await
}

/// [`close_client`], where the peers' state is not (or no longer) `socket`'s own: a split
/// ROUTER's, whose listeners were moved into `socket`.
pub(super) async fn close_client_of<S: Socket + 'static>(
    socket: S,
    events: Receiver<SocketEvent>,
    state: Weak<dyn MultiPeerBackend>,
    linger: Duration,
) -> Flush {
    // The client's shutdown takes locks that block the thread (`scc`'s `_sync` calls) while its
    // own tasks may hold them across an await: on runtime workers, two such waits stalled every
    // worker for good (seen under load). Closing on the blocking pool leaves the workers free.
    let runtime = tokio::runtime::Handle::current();
    let closing = tokio::task::spawn_blocking(move || {
        runtime.block_on(close_here(socket, events, state, linger))
    });
    closing.await.unwrap_or(Flush::LingerRanOut)
}

/// Closes a split dialing DEALER: no send starts after this, and its peer is cut once both
/// halves are gone, on the blocking pool for the reason [`close_client_of`] gives.
pub(super) async fn close_split_dealer(recv: DealerRecvHalf, slot: &DealerSlot) {
    let send = slot.lock().await.take();
    let _ = tokio::task::spawn_blocking(move || drop((send, recv))).await;
}

/// [`close_client`]'s work, on the thread that runs it.
///
/// The client writes to each peer from a task of its own, which goes on writing what it queued
/// after the socket is gone, and holds the socket's state until it is done; the monitor's
/// channel ends with that state. So the wait for the channel's end, bounded by `linger`, is the
/// wait for what was queued to leave.
pub(super) async fn close_here<S: Socket>(
    socket: S,
    mut events: Receiver<SocketEvent>,
    backend: Weak<dyn MultiPeerBackend>,
    linger: Duration,
) -> Flush {
    // Room in the monitor channel, so that no late arrival goes unreported.
    while events.try_recv().is_ok() {}
    let _ = socket.close().await;
    let Some(still_held) = backend.upgrade() else {
        return Flush::Flushed;
    };
    still_held.shutdown();
    drop(still_held);
    let drained = tokio::time::timeout(linger, shut_out_late(&mut events, &backend))
        .await
        .is_ok();
    if drained {
        return Flush::Flushed;
    }
    // Left to the client's tasks while the runtime lives; late arrivals are still shut out.
    tokio::spawn(async move { shut_out_late(&mut events, &backend).await });
    Flush::LingerRanOut
}

/// Shuts out each peer whose handshake began before the listener stopped, until the last holder
/// of the socket's state lets go, and the monitor with it.
async fn shut_out_late(events: &mut Receiver<SocketEvent>, backend: &Weak<dyn MultiPeerBackend>) {
    while let Some(event) = events.next().await {
        if matches!(event, SocketEvent::Accepted(..)) {
            let Some(late) = backend.upgrade() else {
                return;
            };
            let _ = tokio::task::spawn_blocking(move || late.shutdown()).await;
        }
    }
}

impl PullOrSub {
    /// A fresh socket; a SUB subscribes to `topics` at once, so a reconnect keeps its filter.
    pub(super) async fn new(role: Role, topics: &[String]) -> Self {
        match role {
            Role::Pull => Self::Pull(PullSocket::with_options(options())),
            Role::Sub => {
                let mut socket = SubSocket::with_options(options());
                for topic in topics {
                    // Only fails on a closed socket, and this one is new.
                    let _ = socket.subscribe(topic).await;
                }
                Self::Sub(socket)
            }
            _ => unreachable!("{} does not read alone", role.name()),
        }
    }

    pub(super) async fn recv(&mut self) -> Result<ClientMessage, ClientError> {
        each!(self, s => s.recv().await, Self::Pull, Self::Sub)
    }
}

impl PushOrPub {
    pub(super) async fn new(role: Role, _topics: &[String]) -> Self {
        match role {
            Role::Push => Self::Push(PushSocket::with_options(options())),
            Role::Pub => Self::Pub(PubSocket::with_options(options())),
            _ => unreachable!("{} does not write alone", role.name()),
        }
    }

    pub(super) async fn send(&mut self, message: ClientMessage) -> Result<(), ClientError> {
        each!(self, s => s.send(message).await, Self::Push, Self::Pub)
    }
}

impl RouterOrDealer {
    pub(super) async fn new(role: Role, _topics: &[String]) -> Self {
        match role {
            Role::Router => Self::Router(RouterSocket::with_options(options())),
            Role::Dealer => Self::Dealer(DealerSocket::with_options(options())),
            _ => unreachable!("{} is not a duplex socket", role.name()),
        }
    }

    pub(super) async fn recv(&mut self) -> Result<ClientMessage, ClientError> {
        match self {
            Self::Router(s) => s.recv().await,
            Self::Dealer(s) => s.recv().await,
            Self::SplitDealer(s, _) => s.recv().await,
        }
    }

    pub(super) async fn send(&mut self, message: ClientMessage) -> Result<(), ClientError> {
        match self {
            Self::Router(s) => s.send(message).await,
            Self::Dealer(s) => s.send(message).await,
            Self::SplitDealer(_, slot) => match slot.lock().await.as_mut() {
                Some(half) => half.send(message).await,
                None => Err(ClientError::ReturnToSender {
                    reason: "the socket is being closed",
                    message,
                }),
            },
        }
    }

    /// Splits a connected dialing DEALER, its send half going into `slot`.
    pub(super) async fn split_dealer(&mut self, slot: &DealerSlot) {
        let placeholder = Self::Router(RouterSocket::new());
        let Self::Dealer(dealer) = std::mem::replace(self, placeholder) else {
            return;
        };
        let (send, recv) = dealer.split();
        *slot.lock().await = Some(send);
        *self = Self::SplitDealer(recv, Arc::clone(slot));
    }
}

/// What every client socket kind offers the supervisor.
pub(super) trait ClientSocket: Sized + Send {
    async fn fresh(role: Role, topics: &[String]) -> Self;
    async fn bind(&mut self, address: &str) -> Result<String, ClientError>;
    async fn connect(&mut self, address: &str) -> Result<(), ClientError>;
    fn monitor(&mut self) -> Receiver<SocketEvent>;
    /// Closes the socket; `events` is its monitor, watched for peers that join late.
    async fn close(self, events: Receiver<SocketEvent>, linger: Duration) -> Flush;
}

/// The supervisor's view of a socket kind, forwarded to whichever client socket it holds.
macro_rules! client_socket {
    ($kind:ident: $($variant:ident),+) => {
        impl ClientSocket for $kind {
            async fn fresh(role: Role, topics: &[String]) -> Self {
                Self::new(role, topics).await
            }

            async fn bind(&mut self, address: &str) -> Result<String, ClientError> {
                each!(self, s => s.bind(address).await.map(|e| e.to_string()), $(Self::$variant),+)
            }

            async fn connect(&mut self, address: &str) -> Result<(), ClientError> {
                each!(self, s => s.connect(address).await, $(Self::$variant),+)
            }

            fn monitor(&mut self) -> Receiver<SocketEvent> {
                each!(self, s => s.monitor(), $(Self::$variant),+)
            }

            async fn close(self, events: Receiver<SocketEvent>, linger: Duration) -> Flush {
                each!(self, s => close_client(s, events, linger).await, $(Self::$variant),+)
            }
        }
    };
}

client_socket!(PullOrSub: Pull, Sub);
client_socket!(PushOrPub: Push, Pub);

impl ClientSocket for RouterOrDealer {
    async fn fresh(role: Role, topics: &[String]) -> Self {
        Self::new(role, topics).await
    }

    async fn bind(&mut self, address: &str) -> Result<String, ClientError> {
        match self {
            Self::Router(s) => s.bind(address).await.map(|e| e.to_string()),
            Self::Dealer(s) => s.bind(address).await.map(|e| e.to_string()),
            Self::SplitDealer(..) => Err(ClientError::Socket("a dialing DEALER does not bind")),
        }
    }

    async fn connect(&mut self, address: &str) -> Result<(), ClientError> {
        match self {
            Self::Router(s) => s.connect(address).await,
            Self::Dealer(s) => s.connect(address).await,
            // Split only once connected; renewed, not reconnected, when its peer goes away.
            Self::SplitDealer(..) => Ok(()),
        }
    }

    fn monitor(&mut self) -> Receiver<SocketEvent> {
        match self {
            Self::Router(s) => s.monitor(),
            Self::Dealer(s) => s.monitor(),
            // Its monitor was taken before the split, and stays with its supervisor.
            Self::SplitDealer(..) => futures::channel::mpsc::channel(0).1,
        }
    }

    async fn close(self, events: Receiver<SocketEvent>, linger: Duration) -> Flush {
        match self {
            Self::Router(s) => close_client(s, events, linger).await,
            Self::Dealer(s) => close_client(s, events, linger).await,
            // A requester's DEALER: what it still holds are requests, failed at shutdown.
            Self::SplitDealer(recv, slot) => {
                close_split_dealer(recv, &slot).await;
                Flush::StillOpen
            }
        }
    }
}

/// A socket kind that sends.
pub(super) trait SendingSocket: ClientSocket {
    async fn send(&mut self, message: ClientMessage) -> Result<(), ClientError>;
}

impl SendingSocket for PushOrPub {
    async fn send(&mut self, message: ClientMessage) -> Result<(), ClientError> {
        Self::send(self, message).await
    }
}

impl SendingSocket for RouterOrDealer {
    async fn send(&mut self, message: ClientMessage) -> Result<(), ClientError> {
        Self::send(self, message).await
    }
}
