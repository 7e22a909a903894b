//! The `zeromq` backend: the pure-Rust ZeroMQ client behind the backend contract. Only this
//! module and its children name the client's types.
//!
//! The client covers less than a transport needs, and this backend makes up for it: dialing
//! sockets are re-created when their peer goes away (the client reconnects only SUB), a send
//! that finds no peer waits for one up to a deadline instead of failing at once, and closing a
//! socket really closes its connections (a dropped PULL keeps them open).
//!
//! Its children: `client` (the client's socket kinds and how each closes), `supervised` (the
//! reconnect and deadline-send state machine) and `duplex` (the ROUTER and DEALER task, its
//! split halves and direct sends).

mod client;
mod duplex;
mod supervised;

use std::{sync::Arc, time::Duration};

use futures::StreamExt;
use tokio::{
    sync::{mpsc, watch},
    time::Instant,
};
use zeromq::{Socket, SocketRecv, ZmqError as ClientError};

pub(crate) use self::duplex::ZeromqDuplexSocket;
use self::{
    client::{PullOrSub, PushOrPub, close_client_of},
    supervised::Supervised,
};
use super::{
    backend::{HandOver, Opening, ReadSocket, SocketBackend, WriteSocket, refused_send, stopped},
    reading_end::{ReadingEnd, Received},
};
use crate::{error::ZmqError, monitor::Flush, settings::Settings, wire::Frames};

/// The pure-Rust `zeromq` client (feature `zeromq`, on by default): nothing to install, and
/// every peer of the same ZMTP 3 wire. Its limits are the client's own: no heartbeats, no
/// per-peer queue to set, no CURVE.
#[derive(Debug, Clone, Copy, Default)]
pub struct Zeromq;

impl SocketBackend for Zeromq {
    const NAME: &'static str = "zeromq";
    type Config = ();
    // The client fixes its own queues and limits: nothing to pass.
    type Options = ();
    type ReadSocket = ZeromqReadSocket;
    type WriteSocket = ZeromqWriteSocket;
    type DuplexSocket = ZeromqDuplexSocket;

    fn options(_: &Settings, (): ()) {}
}

/// What a send to `endpoint` that the client refused fails with.
pub(super) fn send_error(endpoint: &str, err: ClientError) -> ZmqError {
    // The client names no error kind for a ROUTER's unknown identity: only its message does.
    let unknown_peer = matches!(&err, ClientError::Other(reason) if reason.contains("not found"));
    refused_send(endpoint, err, unknown_peer)
}

/// A socket that receives: bound once, or dialing and re-created whenever its peer goes away.
pub(crate) struct ZeromqReadSocket(Supervised<PullOrSub>);

impl ReadSocket for ZeromqReadSocket {
    type Options = ();

    async fn bind(at: Opening<()>, topics: Vec<String>) -> Result<(Self, String), ZmqError> {
        let (supervised, resolved) = Supervised::bind(at, topics).await?;
        Ok((Self(supervised), resolved))
    }

    async fn dial(at: Opening<()>, topics: Vec<String>) -> Result<Self, ZmqError> {
        Ok(Self(Supervised::dial(at, topics).await))
    }

    /// The next message; on a dialing reader this also keeps the connection.
    async fn recv(&mut self) -> Received {
        let this = &mut self.0;
        loop {
            // Without a deadline this only returns once connected. The monitor's events are
            // taken in below, so a connected socket goes straight to reading.
            if !this.binds && !this.connected {
                let _ = this.ensure_connected(None).await;
            }
            tokio::select! {
                received = this.socket.recv() => match received {
                    Ok(message) => return Received::new(message.into_vec()),
                    // A broken frame or a reset connection: the client drops that peer (on a
                    // bound socket, the monitor's report of it is counted).
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
    }

    async fn close(self) {
        // A reading socket queues nothing to send.
        self.0.close(Duration::ZERO).await;
    }

    /// Hands a bound PULL over to the subscription, which reads it in its own task
    /// ([`ReadingEnd`]): answers its reading end, and the task that keeps its peers and closes
    /// it, ending at shutdown or once `subscriber` is gone. Any other socket comes back.
    fn hand_over(
        self,
        subscriber: mpsc::Sender<Received>,
        mut shutdown: watch::Receiver<bool>,
    ) -> HandOver<Self> {
        let mut this = self.0;
        let PullOrSub::Pull(socket) = &mut this.socket else {
            return HandOver::Kept(Self(this));
        };
        if !this.binds {
            return HandOver::Kept(Self(this));
        }
        let pull = take_listened(socket);
        let state = Arc::downgrade(&pull.backend());
        let reading = reading(pull, this.address.clone(), "PULL");
        let task = async move {
            let stop = stopped(&mut shutdown);
            let gone = subscriber.closed();
            tokio::pin!(stop, gone);
            loop {
                tokio::select! {
                    () = &mut stop => break,
                    () = &mut gone => break,
                    () = this.watch() => {}
                }
            }
            let Supervised { socket, events, .. } = this;
            if let PullOrSub::Pull(listeners) = socket {
                close_client_of(listeners, events, state, Duration::ZERO).await;
            }
        };
        HandOver::Handed(reading, Box::pin(task))
    }
}

/// Takes the socket out of `socket`, leaving in its place one that holds only its listeners, so
/// that closing that one stops them, as closing the socket would.
pub(super) fn take_listened<S: Socket>(socket: &mut S) -> S {
    let mut taken = std::mem::replace(socket, S::new());
    std::mem::swap(socket.binds(), taken.binds());
    taken
}

/// A socket that sends: bound, or dialing and re-created when its peer goes away.
pub(crate) struct ZeromqWriteSocket(Supervised<PushOrPub>);

impl WriteSocket for ZeromqWriteSocket {
    type Options = ();
    // The client reports a lost peer only through the monitor, read when asked.
    const LOOKS: bool = true;

    async fn bind(at: Opening<()>) -> Result<(Self, String), ZmqError> {
        let (supervised, resolved) = Supervised::bind(at, Vec::new()).await?;
        Ok((Self(supervised), resolved))
    }

    async fn dial(at: Opening<()>) -> Result<Self, ZmqError> {
        Ok(Self(Supervised::dial(at, Vec::new()).await))
    }

    /// A dialing writer reconnects first when its peer went away.
    async fn send(&mut self, frames: Frames, deadline: Instant) -> Result<(), ZmqError> {
        self.0.send(frames, deadline).await
    }

    async fn reach(&mut self) {
        self.0.reach().await;
    }

    async fn look(&mut self) {
        self.0.notice_disconnects().await;
    }

    async fn close(self, linger: Duration) -> Flush {
        self.0.close(linger).await
    }
}

/// What a socket's receiving side reads (a bound ROUTER's receiving half, a bound PULL), for a
/// subscription to take in its own task. A failed read was one peer's, whose connection the
/// client dropped, and the socket reads on; the messages end once the socket reads no more.
/// The client's PULL does nothing when dropped: its peers are cut by the socket's task, on the
/// blocking pool ([`close_client_of`]).
pub(super) fn reading<S>(socket: S, address: String, kind: &'static str) -> ReadingEnd
where
    S: SocketRecv + Send + 'static,
{
    // The endpoint, for the log lines, rides along with the socket: nothing is copied a
    // message.
    let state = (socket, address);
    let messages = futures::stream::unfold(state, move |(mut socket, address)| async move {
        loop {
            match socket.recv().await {
                Ok(message) => {
                    let received = Received::new(message.into_vec());
                    return Some((received, (socket, address)));
                }
                Err(ClientError::NoMessage) => {
                    tracing::debug!(endpoint = %address, socket = kind, "the socket reads no more");
                    return None;
                }
                Err(err) => {
                    tracing::debug!(endpoint = %address, socket = kind, error = %err, "a peer's connection failed");
                }
            }
        }
    });
    ReadingEnd::new(Box::pin(messages))
}
