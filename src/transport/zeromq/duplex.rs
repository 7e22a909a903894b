//! The `zeromq` client's ROUTER and DEALER, driven by a task of their own: the driver, the split
//! halves that let answers and requests leave from the tasks that send them, and those sends.

use std::{
    sync::{Arc, Mutex, PoisonError, Weak},
    time::Duration,
};

use futures::{FutureExt, StreamExt};
use tokio::sync::OwnedMutexGuard;
use zeromq::{
    MultiPeerBackend, RouterRecvHalf, RouterSendHalf, Socket, SocketRecv, SocketSend,
    ZmqError as ClientError, ZmqMessage as ClientMessage,
};

use super::{
    client::{DealerSlot, RouterOrDealer, close_client_of},
    reading, send_error,
    supervised::Supervised,
    take_listened,
};
use crate::{
    error::ZmqError,
    monitor::Flush,
    pattern::Role,
    transport::{
        backend::{
            Direct, DirectSend, Driving, DuplexDriver, DuplexSocket, HandedSend, Opening,
            socket_gone,
        },
        reading_end::Received,
        requesters::Requesters,
    },
    wire::Frames,
};

/// A socket that both sends and receives (ROUTER, DEALER), run by a task of its own so that a
/// reply can leave while requests wait to be handled.
pub(crate) struct ZeromqDuplexSocket(Supervised<RouterOrDealer>);

impl DuplexSocket for ZeromqDuplexSocket {
    type Options = ();
    type Driver = ZeromqDuplexDriver;

    async fn bind(at: Opening<()>) -> Result<(Self, String), ZmqError> {
        let (supervised, resolved) = Supervised::bind(at, Vec::new()).await?;
        Ok((Self(supervised), resolved))
    }

    async fn dial(at: Opening<()>) -> Result<Self, ZmqError> {
        Ok(Self(Supervised::dial(at, Vec::new()).await))
    }

    /// A bound ROUTER's answers leave from the tasks that send them, and its subscription reads
    /// it itself where it can; a dialing DEALER's requests leave from the tasks that send them
    /// while it is connected.
    fn drive(self, reads_itself: bool) -> Driving<ZeromqDuplexDriver> {
        let mut this = self.0;
        let mut split = this
            .binds
            .then(|| SplitRouter::split(&mut this.socket))
            .flatten();
        let reader = match &mut split {
            Some(split) if reads_itself => split
                .recv
                .take()
                .map(|recv| reading(recv, this.address.clone(), "ROUTER")),
            _ => None,
        };
        let dealer = (!this.binds && this.role == Role::Dealer).then(DealerSlot::default);
        let endpoint: Arc<str> = this.address.as_str().into();
        let direct: Option<Arc<dyn DirectSend>> = match (&split, &dealer) {
            (Some(split), _) => Some(Arc::new(RouterDirect {
                send: Arc::clone(&split.send),
                requesters: Requesters::new(&endpoint, this.monitor.clone(), PEER_QUEUE.into()),
                endpoint,
            })),
            (None, Some(slot)) => Some(Arc::new(DealerDirect {
                slot: Arc::clone(slot),
                endpoint,
            })),
            (None, None) => None,
        };
        Driving {
            endpoint: this.address.clone(),
            driver: ZeromqDuplexDriver {
                this,
                split,
                dealer,
            },
            direct,
            reader,
        }
    }
}

/// The `zeromq` client's ROUTER or DEALER, as its task drives it.
pub(crate) struct ZeromqDuplexDriver {
    this: Supervised<RouterOrDealer>,
    /// A bound ROUTER, split so that its answers leave from the tasks that send them.
    split: Option<SplitRouter>,
    /// A dialing DEALER's send half, once connected, for the tasks that send.
    dealer: Option<DealerSlot>,
}

impl DuplexDriver for ZeromqDuplexDriver {
    /// A dialing socket connects first; a DEALER, once connected, shares its send half.
    async fn ready(&mut self) {
        let this = &mut self.this;
        if !this.binds && !this.connected {
            let _ = this.ensure_connected(None).await;
        }
        if let Some(slot) = &self.dealer
            && this.connected
            && matches!(this.socket, RouterOrDealer::Dealer(_))
        {
            this.socket.split_dealer(slot).await;
        }
    }

    async fn take(&mut self, (frames, deadline, done): HandedSend) {
        done.settle(self.this.send(frames, deadline).await);
    }

    async fn next(&mut self, read: bool) -> Option<Received> {
        let this = &mut self.this;
        tokio::select! {
            biased;
            received = read_duplex(&mut this.socket, self.split.as_mut()), if read => match received {
                Ok(message) => return Some(Received::new(message.into_vec())),
                Err(err) => {
                    tracing::debug!(endpoint = %this.address, socket = this.role.name(), error = %err, "a peer's connection failed");
                    if !this.binds {
                        this.monitor.count_peer_lost();
                        this.renew().await;
                    }
                }
            },
            Some(event) = this.events.next() => this.take(&event).await,
            // No read wanted, and the monitor is gone with its socket: nothing more will come.
            else => std::future::pending().await,
        }
        None
    }

    async fn close(self, linger: Duration) -> Flush {
        match self.split {
            Some(split) => split.close(self.this, linger).await,
            None => self.this.close(linger).await,
        }
    }
}

/// Reads a duplex socket: through its receiving half, once split.
async fn read_duplex(
    socket: &mut RouterOrDealer,
    split: Option<&mut SplitRouter>,
) -> Result<ClientMessage, ClientError> {
    match split.and_then(|split| split.recv.as_mut()) {
        Some(recv) => recv.recv().await,
        None => socket.recv().await,
    }
}

/// A bound ROUTER in two halves: its task reads with one, and each answer leaves through the
/// other from the task that sends it ([`RouterDirect`]).
pub(super) struct SplitRouter {
    /// Taken out when a subscription reads the socket itself.
    recv: Option<RouterRecvHalf>,
    /// Taken out at close, so that no send finds the socket after it.
    send: Arc<Mutex<Option<RouterSendHalf>>>,
    /// The peers' state the halves share, shut down at close even while a send still holds it.
    state: Weak<dyn MultiPeerBackend>,
}

impl SplitRouter {
    /// Splits the ROUTER in `socket`, leaving in its place a socket that holds only its
    /// listeners, so that closing that one stops them, as closing the ROUTER would.
    fn split(socket: &mut RouterOrDealer) -> Option<Self> {
        let RouterOrDealer::Router(listened) = socket else {
            return None;
        };
        let router = take_listened(listened);
        let state = Arc::downgrade(&router.backend());
        let (send, recv) = router.split();
        Some(Self {
            recv: Some(recv),
            send: Arc::new(Mutex::new(Some(send))),
            state,
        })
    }

    /// Closes the ROUTER: no send starts after this, its listeners stop, and its peers are cut.
    async fn close(self, supervised: Supervised<RouterOrDealer>, linger: Duration) -> Flush {
        let Self { recv, send, state } = self;
        drop(send.lock().unwrap_or_else(PoisonError::into_inner).take());
        drop(recv);
        let Supervised { socket, events, .. } = supervised;
        match socket {
            RouterOrDealer::Router(listeners) => {
                close_client_of(listeners, events, state, linger).await
            }
            _ => Flush::StillOpen,
        }
    }
}

/// Sends a dialing DEALER's messages from the tasks that send them, through the send half of
/// the socket it is connected with. While it is not connected, or another send holds that half,
/// a message goes through the socket's task, which connects first.
struct DealerDirect {
    slot: DealerSlot,
    endpoint: Arc<str>,
}

impl DirectSend for DealerDirect {
    fn send(&self, frames: Frames) -> Direct {
        // The send half, held for this send; none while another send holds it or the socket
        // is not connected.
        let half = Arc::clone(&self.slot)
            .try_lock_owned()
            .ok()
            .and_then(|slot| OwnedMutexGuard::try_map(slot, Option::as_mut).ok());
        let Some(mut half) = half else {
            return Direct::ToTask(frames);
        };
        let Ok(message) = ClientMessage::try_from(frames) else {
            return Direct::Now(Ok(()));
        };
        let endpoint = Arc::clone(&self.endpoint);
        Direct::Later(Box::pin(async move {
            match half.send(message).await {
                Ok(()) => Direct::Now(Ok(())),
                // The peer went away: the socket's task reconnects, and sends it then.
                Err(ClientError::ReturnToSender { message, .. }) => {
                    Direct::ToTask(message.into_vec())
                }
                Err(err) => Direct::Now(Err(send_error(&endpoint, err))),
            }
        }))
    }
}

/// What the client queues for one peer before a send to it waits: a constant of the client's.
const PEER_QUEUE: &str = "100,000 answers (the client's own)";

/// How many times an answer is tried at once before its requester counts as not reading: a try
/// that finds the client's table of peers busy with another send waits too, and that is no
/// verdict on the requester.
const TRIES: usize = 3;

/// Sends a bound ROUTER's answers from the task that sends them. An answer never waits for one
/// requester: the client queues a whole message for its peer or nothing, so a send that cannot
/// finish at once has queued nothing, and is dropped as an answer to a requester not reading.
struct RouterDirect {
    send: Arc<Mutex<Option<RouterSendHalf>>>,
    endpoint: Arc<str>,
    requesters: Requesters,
}

impl DirectSend for RouterDirect {
    fn send(&self, frames: Frames) -> Direct {
        let half = self
            .send
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some(mut half) = half else {
            return Direct::Now(Err(socket_gone()));
        };
        let identity = frames.first().cloned().unwrap_or_default();
        let Ok(message) = ClientMessage::try_from(frames) else {
            return Direct::Now(Ok(()));
        };
        for _ in 0..TRIES {
            // Polled once, then dropped unfinished: the client queues the message whole or not
            // at all.
            match half.send(message.clone()).now_or_never() {
                Some(Ok(())) => {
                    self.requesters.answered(&identity);
                    return Direct::Now(Ok(()));
                }
                Some(Err(err)) => return Direct::Now(Err(send_error(&self.endpoint, err))),
                None => {}
            }
        }
        Direct::Now(Err(self.requesters.not_reading(identity)))
    }
}
