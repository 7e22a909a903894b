//! libzmq's ROUTER and DEALER, driven by a task of their own and sent through from the tasks
//! that send: a ROUTER never waits for one requester, a DEALER's request waits for room.

use std::sync::Arc;

use ruststream::Bytes;
use std::time::Duration;

use tokio::time::{Instant, sleep_until};

use super::{MonitoredSocket, Options, driven::Sending, send_failed};
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
pub(crate) struct LibzmqDuplexSocket(MonitoredSocket);

impl DuplexSocket for LibzmqDuplexSocket {
    type Options = Options;
    type Driver = LibzmqDuplexDriver;

    async fn bind(at: Opening<Options>) -> Result<(Self, String), ZmqError> {
        let (socket, resolved) = MonitoredSocket::bind(at, &[])?;
        Ok((Self(socket), resolved))
    }

    async fn dial(at: Opening<Options>) -> Result<Self, ZmqError> {
        MonitoredSocket::dial(at, &[]).map(Self)
    }

    /// Every send leaves from the task that sends it where it can. A ROUTER never waits for one
    /// peer: an answer to a peer whose queue is full fails at once, so the other requesters keep
    /// being answered. A DEALER's request that finds no room waits for it in the task, up to
    /// its deadline, while the socket goes on reading answers. The task reads the socket.
    fn drive(self, _reads_itself: bool) -> Driving<LibzmqDuplexDriver> {
        let Self(socket) = self;
        let requesters = (socket.role == Role::Router).then(|| {
            let queue = format!("{} answers", socket.peer_queue);
            Requesters::new(&socket.address, socket.monitor.clone(), queue)
        });
        let direct = DuplexDirect {
            sending: socket.driven.sending(),
            address: socket.address.clone(),
            requesters,
        };
        Driving {
            endpoint: socket.address.clone(),
            direct: Some(Arc::new(direct)),
            reader: None,
            driver: LibzmqDuplexDriver {
                socket,
                waiting: None,
            },
        }
    }
}

/// libzmq's ROUTER or DEALER, as its task drives it.
pub(crate) struct LibzmqDuplexDriver {
    socket: MonitoredSocket,
    /// A send waiting for room (a DEALER with no responder yet).
    waiting: Option<HandedSend>,
}

impl DuplexDriver for LibzmqDuplexDriver {
    fn takes_sends(&self) -> bool {
        self.waiting.is_none()
    }

    async fn take(&mut self, send: HandedSend) {
        self.waiting = self.socket.offer(send);
    }

    async fn next(&mut self, read: bool) -> Option<Received> {
        let mut wanted = zmq::PollEvents::empty();
        if read {
            wanted |= zmq::POLLIN;
        }
        let Some((_, deadline, _)) = &self.waiting else {
            if wanted.is_empty() {
                return std::future::pending().await;
            }
            let events = self.socket.driven.ready(wanted).await;
            return events
                .contains(zmq::POLLIN)
                .then(|| self.read_queued())
                .flatten();
        };
        let deadline = *deadline;
        tokio::select! {
            biased;
            () = sleep_until(deadline) => {
                if let Some((_, _, done)) = self.waiting.take() {
                    done.settle(Err(self.socket.not_taken()));
                }
                None
            }
            events = self.socket.driven.ready(wanted | zmq::POLLOUT) => {
                if events.contains(zmq::POLLOUT)
                    && let Some(send) = self.waiting.take()
                {
                    self.waiting = self.socket.offer(send);
                }
                (read && events.contains(zmq::POLLIN)).then(|| self.read_queued()).flatten()
            }
        }
    }

    fn read_queued(&mut self) -> Option<Received> {
        match self.socket.driven.try_recv() {
            Ok(frames) => frames.map(Received::new),
            Err(err) => {
                let socket = &self.socket;
                tracing::debug!(endpoint = %socket.address, socket = socket.role.name(), error = %err, "a read failed");
                None
            }
        }
    }

    async fn close(self, linger: Duration) -> Flush {
        if let Some((_, _, done)) = self.waiting {
            done.settle(Err(socket_gone()));
        }
        self.socket.close(linger).await
    }
}

impl MonitoredSocket {
    /// Tries a send handed to the socket's task once: answers it back while there is no room
    /// (only a DEALER's sends come here: a ROUTER's all leave through [`DuplexDirect`]).
    fn offer(&mut self, (frames, deadline, done): HandedSend) -> Option<HandedSend> {
        let outcome = if Instant::now() >= deadline {
            Err(late_for_its_turn(&self.address))
        } else {
            match self.driven.try_send(&frames) {
                Ok(true) => Ok(()),
                Ok(false) => return Some((frames, deadline, done)),
                Err(err) => Err(send_failed(&self.address, err)),
            }
        };
        done.settle(outcome);
        None
    }
}

/// Sends a duplex socket's messages from the tasks that send them, through the socket its task
/// drives. A ROUTER never waits for one peer: an answer to a requester whose queue is full fails
/// at once. A DEALER's send that finds no room goes to the socket's task, which waits for room.
struct DuplexDirect {
    sending: Sending,
    address: String,
    /// A ROUTER's requesters; none on a DEALER.
    requesters: Option<Requesters>,
}

impl DirectSend for DuplexDirect {
    fn send(&self, frames: Frames) -> Direct {
        Direct::Now(match (self.sending.try_send(&frames), &self.requesters) {
            (Ok(true), Some(requesters)) => {
                requesters.answered(identity(&frames));
                Ok(())
            }
            (Ok(true), None) => Ok(()),
            (Ok(false), None) => return Direct::ToTask(frames),
            (Ok(false), Some(requesters)) => Err(requesters.not_reading(identity(&frames).clone())),
            // The socket's task closed it.
            (Err(zmq::Error::ETERM), _) => Err(socket_gone()),
            (Err(err), _) => Err(send_failed(&self.address, err)),
        })
    }
}

/// The requester an answer goes to: its first frame.
fn identity(frames: &Frames) -> &Bytes {
    static NONE: Bytes = Bytes::new();
    frames.first().unwrap_or(&NONE)
}
