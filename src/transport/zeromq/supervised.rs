//! A client socket kept usable: a bound one listens for good, a dialing one is re-created and
//! reconnected whenever its peer goes away, and a send waits for a peer up to its deadline.

use std::time::Duration;

use futures::{StreamExt, channel::mpsc::Receiver};
use tokio::time::{Instant, sleep, timeout};
use zeromq::{SocketEvent, ZmqError as ClientError, ZmqMessage as ClientMessage};

use super::{
    client::{CONNECT_ATTEMPT, ClientSocket, SendingSocket},
    send_error,
};
use crate::{
    endpoint::bind_form,
    error::ZmqError,
    monitor::{Flush, ZmqMonitor},
    pattern::Role,
    transport::backend::{Opening, fault},
    wire::Frames,
};

/// A client socket and what keeps it usable: a bound one listens for good; a dialing one is
/// re-created and reconnected whenever its peer goes away (the client reconnects only SUB, and
/// only with a backoff of up to 30 s).
pub(super) struct Supervised<S: ClientSocket> {
    pub(super) socket: S,
    /// Where lost peer connections are counted.
    pub(super) monitor: ZmqMonitor,
    pub(super) events: Receiver<SocketEvent>,
    pub(super) role: Role,
    pub(super) topics: Vec<String>,
    pub(super) address: String,
    pub(super) binds: bool,
    pub(super) connected: bool,
    /// On a bound socket: the peers connected, as far as the monitor has told.
    pub(super) peers: usize,
    /// On a dialing socket: whether it was ever connected, so that the next connection is a
    /// reconnect.
    pub(super) was_connected: bool,
}

impl<S: ClientSocket> Supervised<S> {
    /// Binds the address at once; the client takes no options (`()`).
    pub(super) async fn bind(
        at: Opening<()>,
        topics: Vec<String>,
    ) -> Result<(Self, String), ZmqError> {
        let Opening {
            role,
            ref address,
            monitor,
            options: (),
        } = at;
        let mut socket = S::fresh(role, &topics).await;
        let events = socket.monitor();
        // libzmq's `tcp://*:port` is every interface; the client reads `*` as a host name.
        let resolved = socket
            .bind(&bind_form(address))
            .await
            .map_err(|err| ZmqError::Bind {
                endpoint: address.to_owned(),
                source: fault(err),
            })?;
        let supervised = Self {
            socket,
            monitor,
            events,
            role,
            topics,
            address: resolved.clone(),
            binds: true,
            connected: true,
            peers: 0,
            was_connected: false,
        };
        Ok((supervised, resolved))
    }

    /// Dials on the first use, and again whenever the peer goes away.
    pub(super) async fn dial(at: Opening<()>, topics: Vec<String>) -> Self {
        let Opening {
            role,
            ref address,
            monitor,
            options: (),
        } = at;
        let mut socket = S::fresh(role, &topics).await;
        let events = socket.monitor();
        Self {
            socket,
            monitor,
            events,
            role,
            topics,
            address: address.to_owned(),
            binds: false,
            connected: false,
            peers: 0,
            was_connected: false,
        }
    }

    /// Replaces the socket with a fresh one: the old one's connections are closed.
    pub(super) async fn renew(&mut self) {
        let mut fresh = S::fresh(self.role, &self.topics).await;
        let fresh_events = fresh.monitor();
        let old = std::mem::replace(&mut self.socket, fresh);
        // Its peer is gone: nothing queued for it can leave.
        old.close(
            std::mem::replace(&mut self.events, fresh_events),
            Duration::ZERO,
        )
        .await;
        if std::mem::take(&mut self.connected) && !self.binds {
            self.monitor.count_peer_disconnected();
        }
    }

    /// Takes in one event of the monitor: a bound socket counts its peers and the ones that
    /// leave; answers whether a dialing socket lost its peer (the caller renews it).
    pub(super) fn note(&mut self, event: &SocketEvent) -> bool {
        match event {
            // The client reports Accepted once the peer's greeting and READY are through (as
            // `connect` returns only then): a peer counts after its handshake, not at accept.
            SocketEvent::Accepted(..) => {
                self.peers += 1;
                self.monitor.count_peer_connected();
                false
            }
            SocketEvent::Disconnected(_) if self.binds => {
                self.peers = self.peers.saturating_sub(1);
                self.monitor.count_peer_lost();
                self.monitor.count_peer_disconnected();
                tracing::debug!(endpoint = %self.address, socket = self.role.name(), "a peer left");
                false
            }
            SocketEvent::Disconnected(_) => self.connected,
            _ => false,
        }
    }

    /// Reacts to what the monitor reported since the last look: a dialing socket whose peer went
    /// away is renewed.
    pub(super) async fn notice_disconnects(&mut self) {
        if self.take_in_events() {
            self.peer_went_away().await;
        }
    }

    /// Takes in what the monitor reported since the last look, without waiting; answers whether
    /// a dialing socket lost its peer (the caller renews it).
    pub(super) fn take_in_events(&mut self) -> bool {
        let mut lost = false;
        while let Ok(event) = self.events.try_recv() {
            lost |= self.note(&event);
        }
        lost
    }

    /// Takes in one event of the monitor, renewing a dialing socket that lost its peer.
    pub(super) async fn take(&mut self, event: &SocketEvent) {
        if self.note(event) {
            self.peer_went_away().await;
        }
    }

    /// Waits for the next event of the monitor and takes it in.
    pub(super) async fn watch(&mut self) {
        match self.events.next().await {
            Some(event) => self.take(&event).await,
            // The monitor is gone with its socket: nothing more will come.
            None => std::future::pending().await,
        }
    }

    /// Waits until the socket has a peer: a dialing one connects, a bound one waits for a peer
    /// to dial in.
    pub(super) async fn reach(&mut self) {
        if !self.binds {
            let _ = self.ensure_connected(None).await;
            return;
        }
        self.notice_disconnects().await;
        while self.peers == 0 {
            self.watch().await;
        }
    }

    pub(super) async fn peer_went_away(&mut self) {
        self.monitor.count_peer_lost();
        tracing::info!(endpoint = %self.address, socket = self.role.name(), "the peer went away; reconnecting");
        self.renew().await;
    }

    /// Connects a dialing socket, trying again until `deadline` (forever with none).
    pub(super) async fn ensure_connected(
        &mut self,
        deadline: Option<Instant>,
    ) -> Result<(), ZmqError> {
        self.notice_disconnects().await;
        if self.binds || self.connected {
            return Ok(());
        }
        let mut pause = Duration::from_millis(20);
        loop {
            // An attempt ends by the deadline; a cut-short one leaves a socket that is renewed.
            let attempt = deadline.map_or(CONNECT_ATTEMPT * 2, |deadline| {
                deadline
                    .saturating_duration_since(Instant::now())
                    .min(CONNECT_ATTEMPT * 2)
            });
            let failure = match timeout(attempt, self.socket.connect(&self.address)).await {
                Ok(Ok(())) => {
                    self.connected = true;
                    self.monitor.count_peer_connected();
                    if std::mem::replace(&mut self.was_connected, true) {
                        self.monitor.count_reconnect();
                    }
                    return Ok(());
                }
                Ok(Err(err)) => fault(err),
                Err(_) => "the peer did not complete the handshake".into(),
            };
            if deadline.is_some_and(|deadline| Instant::now() + pause >= deadline) {
                return Err(ZmqError::Connect {
                    endpoint: self.address.clone(),
                    source: failure,
                });
            }
            tracing::debug!(endpoint = %self.address, socket = self.role.name(), error = %failure, "peer not reachable yet");
            // A failed connect can leave the socket half set up: start from a fresh one.
            self.renew().await;
            sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }

    /// Waits until a peer dials in, or `deadline`.
    pub(super) async fn wait_for_peer(&mut self, deadline: Instant) {
        let _ = tokio::time::timeout_at(deadline, async {
            while let Some(event) = self.events.next().await {
                self.note(&event);
                if matches!(event, SocketEvent::Accepted(..)) {
                    return;
                }
            }
        })
        .await;
    }

    /// After a send found no peer: a dialing socket lost it, a bound one has none yet.
    pub(super) async fn no_peer(&mut self, deadline: Instant) {
        if self.binds {
            self.wait_for_peer(deadline).await;
        } else {
            self.renew().await;
        }
    }

    /// Closes the socket once what it queued left, for at most `linger`.
    pub(super) async fn close(self, linger: Duration) -> Flush {
        self.socket.close(self.events, linger).await
    }
}

impl<S: SendingSocket> Supervised<S> {
    /// Sends one message. A dialing socket reconnects first when its peer went away; a socket
    /// with no peer waits for one until `deadline`, and then fails, naming the endpoint.
    pub(super) async fn send(&mut self, frames: Frames, deadline: Instant) -> Result<(), ZmqError> {
        let Ok(message) = ClientMessage::try_from(frames) else {
            return Ok(());
        };
        // The usual send, on a connected socket the monitor reported nothing about, waits only
        // for the client; every other path is boxed, so that this future (which each publish
        // allocates) stays small.
        let lost = self.take_in_events();
        if !lost && (self.binds || self.connected) {
            return match self.socket.send(message).await {
                Ok(()) => Ok(()),
                Err(err) => Box::pin(self.send_again(err, deadline)).await,
            };
        }
        Box::pin(async move {
            if lost {
                self.peer_went_away().await;
            }
            self.send_until(message, deadline).await
        })
        .await
    }

    /// Sends `message` by `deadline`: connects first, and waits for a peer while the client
    /// hands the message back.
    pub(super) async fn send_until(
        &mut self,
        mut message: ClientMessage,
        deadline: Instant,
    ) -> Result<(), ZmqError> {
        loop {
            self.ensure_connected(Some(deadline)).await?;
            match self.socket.send(message).await {
                Ok(()) => return Ok(()),
                Err(err) => message = self.refused(err, deadline).await?,
            }
        }
    }

    /// After the client refused a send: the message to send again, once there may be a peer,
    /// or the error the send fails with.
    pub(super) async fn send_again(
        &mut self,
        err: ClientError,
        deadline: Instant,
    ) -> Result<(), ZmqError> {
        let message = self.refused(err, deadline).await?;
        self.send_until(message, deadline).await
    }

    /// What follows a send the client refused with `err`: the message back while `deadline`
    /// leaves time to wait for a peer, or the error the send fails with.
    pub(super) async fn refused(
        &mut self,
        err: ClientError,
        deadline: Instant,
    ) -> Result<ClientMessage, ZmqError> {
        match err {
            ClientError::ReturnToSender { message, .. } if Instant::now() < deadline => {
                self.no_peer(deadline).await;
                Ok(message)
            }
            err => {
                let failed = send_error(&self.address, err);
                // A ROUTER asked to answer an identity that is gone keeps its socket.
                if !self.binds && !matches!(failed, ZmqError::UnknownPeer { .. }) {
                    self.renew().await;
                }
                Err(failed)
            }
        }
    }
}
