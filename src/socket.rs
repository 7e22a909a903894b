//! The supervised sockets: the only module that names the `zeromq` client's types.
//!
//! The client covers less than a transport needs (DESIGN.md section 4), and this module makes up
//! for it: dialing sockets are re-created when their peer goes away (the client reconnects only
//! SUB), a send that finds no peer waits for one up to a deadline instead of failing at once, and
//! closing a socket really closes its connections (a dropped PULL keeps them open).

use std::time::Duration;

use futures::{StreamExt, channel::mpsc::Receiver};
use tokio::time::{Instant, sleep, timeout};
use zeromq::{
    PullSocket, PushSocket, Socket, SocketEvent, SocketOptions, SocketRecv, SocketSend,
    ZmqError as ClientError, ZmqMessage as ClientMessage,
};

use crate::{error::ZmqError, wire::Frames};

/// How long one attempt to reach a peer may take before the supervisor tries again.
const CONNECT_ATTEMPT: Duration = Duration::from_millis(500);

/// The socket types this transport uses, one per pattern end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// A queue subscription.
    Pull,
    /// A queue publisher.
    Push,
}

impl Role {
    const fn name(self) -> &'static str {
        match self {
            Self::Pull => "PULL",
            Self::Push => "PUSH",
        }
    }
}

enum ReadSocket {
    Pull(PullSocket),
}

enum WriteSocket {
    Push(PushSocket),
}

fn options() -> SocketOptions {
    let mut options = SocketOptions::default();
    options.connect_timeout(CONNECT_ATTEMPT);
    options
}

impl ReadSocket {
    fn new(role: Role) -> Self {
        match role {
            Role::Pull => Self::Pull(PullSocket::with_options(options())),
            Role::Push => unreachable!("PUSH does not read"),
        }
    }

    async fn bind(&mut self, address: &str) -> Result<String, ClientError> {
        match self {
            Self::Pull(s) => s.bind(address).await.map(|e| e.to_string()),
        }
    }

    async fn connect(&mut self, address: &str) -> Result<(), ClientError> {
        match self {
            Self::Pull(s) => s.connect(address).await,
        }
    }

    fn monitor(&mut self) -> Receiver<SocketEvent> {
        match self {
            Self::Pull(s) => s.monitor(),
        }
    }

    async fn recv(&mut self) -> Result<ClientMessage, ClientError> {
        match self {
            Self::Pull(s) => s.recv().await,
        }
    }

    /// Closes listeners and every connection: the client's own close leaves a PULL's open.
    async fn close(self) {
        match self {
            Self::Pull(s) => {
                s.backend().shutdown();
                let _ = s.close().await;
            }
        }
    }
}

impl WriteSocket {
    fn new(role: Role) -> Self {
        match role {
            Role::Push => Self::Push(PushSocket::with_options(options())),
            Role::Pull => unreachable!("PULL does not write"),
        }
    }

    async fn bind(&mut self, address: &str) -> Result<String, ClientError> {
        match self {
            Self::Push(s) => s.bind(address).await.map(|e| e.to_string()),
        }
    }

    async fn connect(&mut self, address: &str) -> Result<(), ClientError> {
        match self {
            Self::Push(s) => s.connect(address).await,
        }
    }

    fn monitor(&mut self) -> Receiver<SocketEvent> {
        match self {
            Self::Push(s) => s.monitor(),
        }
    }

    async fn send(&mut self, message: ClientMessage) -> Result<(), ClientError> {
        match self {
            Self::Push(s) => s.send(message).await,
        }
    }

    async fn close(self) {
        match self {
            Self::Push(s) => {
                s.backend().shutdown();
                let _ = s.close().await;
            }
        }
    }
}

fn fault(err: ClientError) -> crate::error::SocketFault {
    Box::new(err)
}

/// Turns frames into the client's message; `None` for no frames, which the client cannot send.
fn to_client(frames: Frames) -> Option<ClientMessage> {
    ClientMessage::try_from(frames).ok()
}

/// A socket that receives: bound once, or dialing and re-created whenever its peer goes away.
pub(crate) struct Reader {
    socket: ReadSocket,
    events: Receiver<SocketEvent>,
    role: Role,
    address: String,
    binds: bool,
    /// A dialing reader with no live connection: the next `recv` connects first.
    connecting: bool,
}

impl Reader {
    /// Binds `address`; answers the reader and the address it really listens on (port 0
    /// resolved).
    pub(crate) async fn bind(role: Role, address: &str) -> Result<(Self, String), ZmqError> {
        let mut socket = ReadSocket::new(role);
        let events = socket.monitor();
        let resolved = socket.bind(address).await.map_err(|err| ZmqError::Bind {
            endpoint: address.to_owned(),
            source: fault(err),
        })?;
        let reader = Self {
            socket,
            events,
            role,
            address: resolved.clone(),
            binds: true,
            connecting: false,
        };
        Ok((reader, resolved))
    }

    /// A reader that dials `address`. It connects on the first [`recv`](Self::recv), and again
    /// whenever the peer goes away, so a peer that is not up yet does not hold up startup.
    pub(crate) fn dial(role: Role, address: &str) -> Self {
        let mut socket = ReadSocket::new(role);
        let events = socket.monitor();
        Self {
            socket,
            events,
            role,
            address: address.to_owned(),
            binds: false,
            connecting: true,
        }
    }

    /// The next message. On a dialing reader this also keeps the connection: it connects when
    /// there is none, and re-creates the socket when the peer goes away.
    pub(crate) async fn recv(&mut self) -> Frames {
        loop {
            if !self.binds && !self.is_connected() {
                self.reconnect().await;
            }
            tokio::select! {
                received = self.socket.recv() => match received {
                    Ok(message) => return message.into_vec(),
                    // A broken frame or a reset connection: the client drops that peer.
                    Err(err) => {
                        tracing::debug!(endpoint = %self.address, socket = self.role.name(), error = %err, "a peer's connection failed");
                        if !self.binds {
                            self.drop_connection().await;
                        }
                    }
                },
                Some(event) = self.events.next(), if !self.binds => {
                    if let SocketEvent::Disconnected(_) = event {
                        tracing::info!(endpoint = %self.address, socket = self.role.name(), "the peer went away; reconnecting");
                        self.drop_connection().await;
                    }
                }
            }
        }
    }

    fn is_connected(&self) -> bool {
        !self.connecting
    }

    async fn drop_connection(&mut self) {
        let fresh = ReadSocket::new(self.role);
        let old = std::mem::replace(&mut self.socket, fresh);
        old.close().await;
        self.events = self.socket.monitor();
        self.connecting = true;
    }

    async fn reconnect(&mut self) {
        let mut pause = Duration::from_millis(20);
        loop {
            match self.socket.connect(&self.address).await {
                Ok(()) => {
                    self.connecting = false;
                    return;
                }
                Err(err) => {
                    tracing::debug!(endpoint = %self.address, socket = self.role.name(), error = %err, "peer not reachable yet");
                    // A failed connect can leave the socket half set up: start from a fresh one.
                    let fresh = ReadSocket::new(self.role);
                    std::mem::replace(&mut self.socket, fresh).close().await;
                    self.events = self.socket.monitor();
                    sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
            }
        }
    }

    /// Closes the socket and all its connections.
    pub(crate) async fn close(self) {
        self.socket.close().await;
    }
}

/// A socket that sends: bound, or dialing and re-created when its peer goes away.
pub(crate) struct Writer {
    socket: WriteSocket,
    events: Receiver<SocketEvent>,
    role: Role,
    address: String,
    binds: bool,
    connected: bool,
}

impl Writer {
    /// Binds `address`; answers the writer and the address it really listens on.
    pub(crate) async fn bind(role: Role, address: &str) -> Result<(Self, String), ZmqError> {
        let mut socket = WriteSocket::new(role);
        let events = socket.monitor();
        let resolved = socket.bind(address).await.map_err(|err| ZmqError::Bind {
            endpoint: address.to_owned(),
            source: fault(err),
        })?;
        let writer = Self {
            socket,
            events,
            role,
            address: resolved.clone(),
            binds: true,
            connected: true,
        };
        Ok((writer, resolved))
    }

    /// A writer that dials `address`; it connects on the first send.
    pub(crate) fn dial(role: Role, address: &str) -> Self {
        let mut socket = WriteSocket::new(role);
        let events = socket.monitor();
        Self {
            socket,
            events,
            role,
            address: address.to_owned(),
            binds: false,
            connected: false,
        }
    }

    /// Connects a dialing writer now, waiting up to `patience` for the peer.
    pub(crate) async fn ensure_connected(&mut self, patience: Duration) -> Result<(), ZmqError> {
        if self.binds {
            return Ok(());
        }
        self.notice_disconnects().await;
        if self.connected {
            return Ok(());
        }
        let deadline = Instant::now() + patience;
        let mut pause = Duration::from_millis(20);
        loop {
            let attempt = timeout(CONNECT_ATTEMPT * 2, self.socket.connect(&self.address)).await;
            match attempt {
                Ok(Ok(())) => {
                    self.connected = true;
                    return Ok(());
                }
                Ok(Err(err)) if Instant::now() + pause >= deadline => {
                    return Err(ZmqError::Connect {
                        endpoint: self.address.clone(),
                        source: fault(err),
                    });
                }
                Err(_) if Instant::now() + pause >= deadline => {
                    return Err(ZmqError::Connect {
                        endpoint: self.address.clone(),
                        source: format!("no peer answered within {patience:?}").into(),
                    });
                }
                _ => {
                    self.renew().await;
                    sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
            }
        }
    }

    /// Sends one message. A dialing writer reconnects first when its peer went away; a writer
    /// with no peer waits for one up to `patience`, and then fails, naming the endpoint.
    pub(crate) async fn send(
        &mut self,
        frames: Frames,
        patience: Duration,
    ) -> Result<(), ZmqError> {
        let Some(mut message) = to_client(frames) else {
            return Ok(());
        };
        let deadline = Instant::now() + patience;
        loop {
            self.ensure_connected(deadline.saturating_duration_since(Instant::now()))
                .await?;
            match self.socket.send(message).await {
                Ok(()) => return Ok(()),
                Err(ClientError::ReturnToSender { message: back, .. })
                    if Instant::now() < deadline =>
                {
                    // No peer: a dialing writer lost it, a bound one has none yet.
                    message = back;
                    if self.binds {
                        self.wait_for_peer(deadline).await;
                    } else {
                        self.renew().await;
                    }
                }
                Err(err) => {
                    if !self.binds {
                        self.renew().await;
                    }
                    return Err(ZmqError::Send {
                        endpoint: self.address.clone(),
                        source: fault(err),
                    });
                }
            }
        }
    }

    /// Drops a dialing writer's connection when the monitor says the peer went away.
    async fn notice_disconnects(&mut self) {
        let mut lost = false;
        while let Ok(event) = self.events.try_recv() {
            lost |= matches!(event, SocketEvent::Disconnected(_));
        }
        if lost && self.connected {
            tracing::info!(endpoint = %self.address, socket = self.role.name(), "the peer went away; reconnecting");
            self.renew().await;
        }
    }

    async fn renew(&mut self) {
        let fresh = WriteSocket::new(self.role);
        std::mem::replace(&mut self.socket, fresh).close().await;
        self.events = self.socket.monitor();
        self.connected = false;
    }

    async fn wait_for_peer(&mut self, deadline: Instant) {
        let _ = tokio::time::timeout_at(deadline, async {
            while let Some(event) = self.events.next().await {
                if matches!(event, SocketEvent::Accepted(..)) {
                    return;
                }
            }
        })
        .await;
    }

    /// Closes the socket and all its connections.
    pub(crate) async fn close(self) {
        self.socket.close().await;
    }
}
