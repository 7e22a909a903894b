//! libzmq's ROUTER and DEALER, run by a task of their own and sent through from the tasks that
//! send: a ROUTER never waits for one requester, a DEALER's request waits for room.
//!
//! Imports: its parent `libzmq`, and `error`, `monitor`, `pattern` and `wire`.

use std::sync::{Arc, Mutex, PoisonError};

use ruststream::Bytes;
use tokio::{
    sync::watch,
    time::{Instant, sleep_until},
};

use super::{Options, READ_BATCH, Socket, driven::Sending, send_failed};
use crate::{
    error::ZmqError,
    monitor::ZmqMonitor,
    pattern::Role,
    transport::{
        Closed, Direct, DirectSend, DuplexSender, Inbound, Received, Release, Started,
        backend::{DuplexSocket, Opening},
        duplex::HandedSend,
        episodes::{Ended, Episodes},
        late_for_its_turn, socket_gone, stopped,
    },
    wire::Frames,
};

/// A socket that both sends and receives (ROUTER, DEALER), run by a task of its own so that a
/// reply can leave while requests wait to be handled.
pub(crate) struct LibzmqDuplex(Socket);

impl DuplexSocket for LibzmqDuplex {
    type Options = Options;

    async fn bind(at: Opening<Options>) -> Result<(Self, String), ZmqError> {
        let (socket, resolved) = Socket::bind(at, &[])?;
        Ok((Self(socket), resolved))
    }

    async fn dial(at: Opening<Options>) -> Result<Self, ZmqError> {
        Socket::dial(at, &[]).map(Self)
    }

    /// A ROUTER never waits for one peer: an answer to a peer whose queue is full fails at
    /// once, so the other requesters keep being answered. A DEALER's request waits for room up
    /// to its deadline, while the socket goes on reading answers.
    fn run(self, inbound: Inbound, mut shutdown: watch::Receiver<bool>) -> Started {
        let (sender, mut outbox) = DuplexSender::channel(&self.0.address);
        let mut this = self.0;
        let sender = sender.direct(Arc::new(DuplexDirect {
            sending: this.driven.sending(),
            role: this.role,
            address: this.address.clone(),
            monitor: this.monitor.clone(),
            peer_queue: this.peer_queue,
            not_reading: Mutex::new(Episodes::new(NOT_READING_MOST)),
        }));
        let task = async move {
            // One received message waits here while the handler side is full.
            let mut pending: Option<Received> = None;
            // One send waits here for room (a DEALER with no responder yet).
            let mut waiting: Option<HandedSend> = None;
            // One wait for shutdown for the whole loop, not one made and dropped per message.
            let stop = stopped(&mut shutdown);
            tokio::pin!(stop);
            'run: loop {
                let mut wanted = zmq::PollEvents::empty();
                if pending.is_none() {
                    wanted |= zmq::POLLIN;
                }
                if waiting.is_some() {
                    wanted |= zmq::POLLOUT;
                }
                let deadline = waiting.as_ref().map(|(_, deadline, _)| *deadline);
                tokio::select! {
                    biased;
                    () = &mut stop => break,
                    () = sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                        if let Some((_, _, done)) = waiting.take() {
                            done.settle(Err(this.not_taken()));
                        }
                    }
                    Some(outbound) = outbox.recv(), if waiting.is_none() => {
                        waiting = this.offer(outbound);
                    }
                    permit = inbound.room(), if pending.is_some() => match (permit, pending.take()) {
                        (Ok(permit), Some(received)) => permit.send(received),
                        _ => break,
                    },
                    events = this.driven.ready(wanted), if !wanted.is_empty() => {
                        if events.contains(zmq::POLLOUT)
                            && let Some(outbound) = waiting.take()
                        {
                            waiting = this.offer(outbound);
                        }
                        if events.contains(zmq::POLLIN) {
                            // What is already queued is read in one go, up to a batch, so that a
                            // busy socket is not asked what it can do before every message.
                            for _ in 0..READ_BATCH {
                                if pending.is_some() {
                                    break;
                                }
                                match this.driven.try_recv() {
                                    Ok(Some(frames)) => match inbound.offer(Received {
                                        frames,
                                        release: Release::default(),
                                    }) {
                                        Ok(waits) => pending = waits,
                                        Err(Closed) => break 'run,
                                    },
                                    Ok(None) => break,
                                    Err(err) => {
                                        tracing::debug!(endpoint = %this.address, socket = this.role.name(), error = %err, "a read failed");
                                        break;
                                    }
                                }
                            }
                        }
                    }
                }
            }
            if let Some((_, _, done)) = waiting {
                done.settle(Err(socket_gone()));
            }
            this.close().await;
        };
        // libzmq's ROUTER and DEALER are read by their task.
        Started {
            sender,
            task: Box::pin(task),
            reader: None,
        }
    }
}

impl Socket {
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

/// How many requesters not reading their answers are tracked at once, for one warning each.
const NOT_READING_MOST: usize = 1_024;

/// Sends a duplex socket's messages from the tasks that send them, through the socket its task
/// drives. A ROUTER never waits for one peer: an answer to a requester whose queue is full fails
/// at once. A DEALER's send that finds no room goes to the socket's task, which waits for room.
struct DuplexDirect {
    sending: Sending,
    role: Role,
    address: String,
    monitor: ZmqMonitor,
    peer_queue: usize,
    /// A ROUTER's requesters whose answers are being dropped, for one warning an episode.
    not_reading: Mutex<Episodes<Bytes>>,
}

impl DirectSend for DuplexDirect {
    fn send(&self, frames: Frames) -> Direct {
        Direct::Now(match self.sending.try_send(&frames) {
            Ok(true) => {
                self.answered(&frames);
                Ok(())
            }
            Ok(false) if self.role == Role::Dealer => return Direct::ToTask(frames),
            // Waiting for one requester would hold up every other answer.
            Ok(false) => Err(self.not_reading(&frames)),
            // The socket's task closed it.
            Err(zmq::Error::ETERM) => Err(socket_gone()),
            Err(err) => Err(send_failed(&self.address, err)),
        })
    }
}

impl DuplexDirect {
    fn episodes(&self) -> std::sync::MutexGuard<'_, Episodes<Bytes>> {
        self.not_reading
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A ROUTER's answer to a requester that is not reading is dropped: counted, and warned
    /// about once until that requester reads again.
    fn not_reading(&self, frames: &Frames) -> ZmqError {
        self.monitor.count_dropped_not_reading();
        let identity = frames.first().cloned().unwrap_or_default();
        let mut episodes = self.episodes();
        // A drop within an episode is counted in it; the first begins one, and warns.
        let began =
            episodes.refuse(&identity).is_none() && episodes.failed(identity, Instant::now(), ());
        drop(episodes);
        if began {
            tracing::warn!(
                endpoint = %self.address,
                rule = "peer-not-reading",
                queue = self.peer_queue,
                "a requester is not reading its answers: they are dropped until it reads again"
            );
        }
        ZmqError::Send {
            endpoint: self.address.clone(),
            source: format!(
                "the requester is not reading: its queue of {} answers is full",
                self.peer_queue
            )
            .into(),
        }
    }

    /// An answer left: a requester that was not reading reads again.
    fn answered(&self, frames: &Frames) {
        if self.role != Role::Router {
            return;
        }
        let mut episodes = self.episodes();
        let ended = frames
            .first()
            .and_then(|id| episodes.reached(id, Instant::now));
        if let Some(Ended { refused, .. }) = ended {
            drop(episodes);
            // The drop that began the episode, and each since.
            let dropped = refused + 1;
            tracing::info!(endpoint = %self.address, dropped, "a requester reads its answers again");
        }
    }
}
