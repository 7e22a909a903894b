//! The `zeromq` client's ROUTER and DEALER, run by a task of their own: the loop, the split
//! halves that let answers and requests leave from the tasks that send them, and those sends.
//!
//! Imports: its parent `zeromq`, and `error`, `pattern` and `wire`.

use std::sync::{Arc, Mutex, PoisonError, Weak};

use futures::StreamExt;
use tokio::{
    sync::{OwnedMutexGuard, watch},
    time::Instant,
};
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
    pattern::Role,
    transport::{
        Closed, Direct, DirectSend, DuplexSender, Inbound, Received, Release, Started,
        backend::{DuplexSocket, Opening},
        late_for_its_turn, socket_gone, stopped,
    },
    wire::Frames,
};

/// A socket that both sends and receives (ROUTER, DEALER), run by a task of its own so that a
/// reply can leave while requests wait to be handled.
pub(crate) struct ZeromqDuplex(Supervised<RouterOrDealer>);

impl DuplexSocket for ZeromqDuplex {
    type Options = ();

    async fn bind(at: Opening<()>) -> Result<(Self, String), ZmqError> {
        let (supervised, resolved) = Supervised::bind(at, Vec::new()).await?;
        Ok((Self(supervised), resolved))
    }

    async fn dial(at: Opening<()>) -> Result<Self, ZmqError> {
        Ok(Self(Supervised::dial(at, Vec::new()).await))
    }

    /// A bound ROUTER's reading end goes to the subscription where it reads through a channel.
    fn run(self, inbound: Inbound, mut shutdown: watch::Receiver<bool>) -> Started {
        let (sender, mut outbox) = DuplexSender::channel(&self.0.address);
        let mut this = self.0;
        // A bound ROUTER's answers leave from the tasks that send them, never through this
        // task's outbox.
        let mut split = this
            .binds
            .then(|| SplitRouter::split(&mut this.socket))
            .flatten();
        // So a subscription reads it itself; this task then only watches its peers, and ends
        // when the subscription is gone.
        let reader = match (&mut split, &inbound) {
            (Some(split), Inbound::Channel(_)) => split
                .recv
                .take()
                .map(|recv| reading(recv, this.address.clone(), "ROUTER")),
            _ => None,
        };
        let handed_over = reader.is_some();
        // A dialing DEALER's sends leave from the tasks that send them while it is connected.
        let dealer = (!this.binds && this.role == Role::Dealer).then(DealerSlot::default);
        let sender = match (&split, &dealer) {
            (Some(split), _) => sender.direct(Arc::new(RouterDirect {
                send: Arc::clone(&split.send),
                endpoint: this.address.as_str().into(),
            })),
            (None, Some(slot)) => sender.direct(Arc::new(DealerDirect {
                slot: Arc::clone(slot),
                endpoint: this.address.as_str().into(),
            })),
            (None, None) => sender,
        };
        let task = async move {
            // One received message waits here while the handler side is full; the socket keeps
            // sending meanwhile, so a reply is never stuck behind the requests it answers.
            let mut pending: Option<Received> = None;
            // One wait for shutdown for the whole loop: a new one for every message (registered,
            // then dropped) cost about a twentieth of a round trip.
            let stop = stopped(&mut shutdown);
            tokio::pin!(stop);
            loop {
                if !this.binds && !this.connected {
                    tokio::select! {
                        _ = this.ensure_connected(None) => {}
                        () = &mut stop => break,
                    }
                }
                if let Some(slot) = &dealer
                    && this.connected
                    && matches!(this.socket, RouterOrDealer::Dealer(_))
                {
                    this.socket.split_dealer(slot).await;
                }
                tokio::select! {
                    biased;
                    () = &mut stop => break,
                    Some((frames, deadline, done)) = outbox.recv() => {
                        let sent = if Instant::now() >= deadline {
                            Err(late_for_its_turn(&this.address))
                        } else {
                            this.send(frames, deadline).await
                        };
                        done.settle(sent);
                    }
                    permit = inbound.room(), if pending.is_some() => match (permit, pending.take()) {
                        (Ok(permit), Some(received)) => permit.send(received),
                        _ => break,
                    },
                    () = inbound.closed(), if handed_over => break,
                    received = read_duplex(&mut this.socket, split.as_mut()), if pending.is_none() && !handed_over => match received {
                        Ok(message) => match inbound.offer(Received {
                            frames: message.into_vec(),
                            release: Release::default(),
                        }) {
                            Ok(waits) => pending = waits,
                            Err(Closed) => break,
                        },
                        Err(err) => {
                            tracing::debug!(endpoint = %this.address, socket = this.role.name(), error = %err, "a peer's connection failed");
                            if !this.binds {
                                this.monitor.count_peer_lost();
                                this.renew().await;
                            }
                        }
                    },
                    Some(event) = this.events.next() => this.take(&event).await,
                }
            }
            match split {
                Some(split) => split.close(this).await,
                None => this.close().await,
            }
        };
        Started {
            sender,
            task: Box::pin(task),
            reader,
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
    async fn close(self, supervised: Supervised<RouterOrDealer>) {
        let Self { recv, send, state } = self;
        drop(send.lock().unwrap_or_else(PoisonError::into_inner).take());
        drop(recv);
        let Supervised { socket, events, .. } = supervised;
        if let RouterOrDealer::Router(listeners) = socket {
            close_client_of(listeners, events, state).await;
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

/// Sends a bound ROUTER's answers from the task that sends them.
struct RouterDirect {
    send: Arc<Mutex<Option<RouterSendHalf>>>,
    endpoint: Arc<str>,
}

impl DirectSend for RouterDirect {
    fn send(&self, frames: Frames) -> Direct {
        let half = self
            .send
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let endpoint = Arc::clone(&self.endpoint);
        let Some(mut half) = half else {
            return Direct::Now(Err(socket_gone()));
        };
        let Ok(message) = ClientMessage::try_from(frames) else {
            return Direct::Now(Ok(()));
        };
        Direct::Later(Box::pin(async move {
            Direct::Now(
                half.send(message)
                    .await
                    .map_err(|err| send_error(&endpoint, err)),
            )
        }))
    }
}
