//! omq's ROUTER and DEALER, driven by a task of their own and sent through from the tasks that
//! send: a ROUTER never waits for one requester, a DEALER's request waits for a responder and
//! for room.

use std::{sync::Arc, time::Duration};

use omq_tokio::{Message, Socket, TrySendError};
use ruststream::Bytes;
use tokio::time::{Instant, sleep_until};

use super::{OmqSocket, Options, frames_of, send_failed, watcher::Watched};
use crate::{
    error::ZmqError,
    monitor::Flush,
    pattern::Role,
    transport::{
        backend::{
            Direct, DirectSend, Driving, DuplexDriver, DuplexSocket, HandedSend, Opening,
            late_for_its_turn, socket_gone,
        },
        reading_end::Received,
        requesters::Requesters,
    },
    wire::Frames,
};

/// A socket that both sends and receives (ROUTER, DEALER), run by a task of its own so that a
/// reply can leave while requests wait to be handled.
pub(crate) struct OmqDuplexSocket(OmqSocket);

impl DuplexSocket for OmqDuplexSocket {
    type Options = Options;
    type Driver = OmqDuplexDriver;

    async fn bind(at: Opening<Options>) -> Result<(Self, String), ZmqError> {
        let (socket, resolved) = OmqSocket::open(at, &[], true).await?;
        Ok((Self(socket), resolved))
    }

    async fn dial(at: Opening<Options>) -> Result<Self, ZmqError> {
        let (socket, _) = OmqSocket::open(at, &[], false).await?;
        Ok(Self(socket))
    }

    /// Every send leaves from the task that sends it where it can. A ROUTER never waits for one
    /// peer: an answer to a peer whose queue is full fails at once, so the other requesters keep
    /// being answered. A DEALER's request that finds no responder or no room waits for it in
    /// the task, up to its deadline, while the socket goes on reading answers.
    fn drive(self, _reads_itself: bool) -> Driving<OmqDuplexDriver> {
        let Self(socket) = self;
        let requesters = (socket.role == Role::Router).then(|| {
            let queue = format!("{} answers", socket.peer_queue);
            Requesters::new(&socket.address, socket.monitor.clone(), queue)
        });
        let direct = DuplexDirect {
            socket: socket.socket.clone(),
            peers: Arc::clone(&socket.peers),
            address: socket.address.clone(),
            requesters,
        };
        Driving {
            endpoint: socket.address.clone(),
            direct: Some(Arc::new(direct)),
            reader: None,
            driver: OmqDuplexDriver {
                socket,
                waiting: None,
            },
        }
    }
}

/// omq's ROUTER or DEALER, as its task drives it.
pub(crate) struct OmqDuplexDriver {
    socket: OmqSocket,
    /// A send waiting for a responder or for room (a DEALER's).
    waiting: Option<HandedSend>,
}

impl OmqDuplexDriver {
    /// Tries a send handed to the socket's task once: keeps it while it must wait.
    fn offer(&mut self, (frames, deadline, done): HandedSend) {
        let outcome = if Instant::now() >= deadline {
            Err(late_for_its_turn(&self.socket.address))
        } else {
            match self.socket.try_send(Message::multipart(frames)) {
                Ok(None) => Ok(()),
                Ok(Some(back)) => {
                    self.waiting = Some((frames_of(back), deadline, done));
                    return;
                }
                Err(err) => Err(err),
            }
        };
        done.settle(outcome);
    }
}

impl DuplexDriver for OmqDuplexDriver {
    fn takes_sends(&self) -> bool {
        self.waiting.is_none()
    }

    async fn take(&mut self, send: HandedSend) {
        self.offer(send);
    }

    async fn next(&mut self, read: bool) -> Option<Received> {
        let waiting = self.waiting.as_ref().map(|(_, deadline, _)| *deadline);
        let event = {
            let socket = &self.socket;
            // Enabled before the look at the peers, so that a handshake in between is not missed.
            let changed = socket.peers.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let reached = socket.reached();
            let far = Instant::now() + Duration::from_secs(3_600);
            tokio::select! {
                biased;
                () = sleep_until(waiting.unwrap_or(far)), if waiting.is_some() => Event::Late,
                () = socket.socket.wait_send_ready(), if waiting.is_some() && reached => Event::Room,
                () = &mut changed, if waiting.is_some() => Event::Room,
                message = socket.socket.recv(), if read => match message {
                    Ok(message) => return Some(Received::new(frames_of(message))),
                    Err(err) => {
                        tracing::debug!(endpoint = %socket.address, socket = socket.role.name(), error = %err, "a read failed");
                        return None;
                    }
                },
                else => std::future::pending().await,
            }
        };
        match event {
            Event::Late => {
                if let Some((_, _, done)) = self.waiting.take() {
                    done.settle(Err(self.socket.not_taken()));
                }
            }
            Event::Room => {
                if let Some(send) = self.waiting.take() {
                    self.offer(send);
                }
            }
        }
        None
    }

    async fn close(self, linger: Duration) -> Flush {
        if let Some((_, _, done)) = self.waiting {
            done.settle(Err(socket_gone()));
        }
        self.socket.close(linger).await
    }
}

/// What the send a DEALER's task holds met.
enum Event {
    /// Its deadline.
    Late,
    /// Room, or a peer: it is offered again.
    Room,
}

/// Sends a duplex socket's messages from the tasks that send them. A ROUTER never waits for one
/// peer: an answer to a requester whose queue is full fails at once. A DEALER's send that finds
/// no responder or no room goes to the socket's task, which waits.
struct DuplexDirect {
    socket: Socket,
    peers: Arc<Watched>,
    address: String,
    /// A ROUTER's requesters; none on a DEALER.
    requesters: Option<Requesters>,
}

impl DirectSend for DuplexDirect {
    fn send(&self, frames: Frames) -> Direct {
        let Some(requesters) = &self.requesters else {
            // A DEALER: its requests wait for a responder through its handshake.
            if self.peers.ready() == 0 {
                return Direct::ToTask(frames);
            }
            return Direct::Now(match self.socket.try_send(Message::multipart(frames)) {
                Ok(()) => Ok(()),
                Err(TrySendError::Full(back)) => return Direct::ToTask(frames_of(back)),
                Err(TrySendError::Closed) => Err(socket_gone()),
                Err(TrySendError::Error(err)) => Err(send_failed(&self.address, err)),
            });
        };
        let identity = frames.first().cloned().unwrap_or_else(Bytes::new);
        Direct::Now(match self.socket.try_send(Message::multipart(frames)) {
            Ok(()) => {
                requesters.answered(&identity);
                Ok(())
            }
            Err(TrySendError::Full(_)) => Err(requesters.not_reading(identity)),
            Err(TrySendError::Closed) => Err(socket_gone()),
            Err(TrySendError::Error(err)) => Err(send_failed(&self.address, err)),
        })
    }
}
