//! The transport under a connection: real ZeroMQ sockets, or (under the `testing` feature) the
//! in-process bus that stands in for them. Everything above this module is the same for both,
//! so the in-process mode decides, refuses and routes exactly as the sockets do.

use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::{
    error::ZmqError,
    monitor::ZmqMonitor,
    socket::{self, DuplexSender, Role},
    wire::Frames,
};

/// Which transport a connection opens its sockets on.
#[derive(Clone)]
pub(crate) enum Transport {
    /// ZeroMQ sockets, through the `zeromq` client; lost peer connections are counted on the
    /// monitor.
    Sockets(ZmqMonitor),
    /// The in-process bus of the `testing` feature.
    #[cfg(feature = "testing")]
    InProcess(crate::testing::Peer),
}

/// A receiving socket.
pub(crate) enum Reader {
    Sockets(socket::Reader),
    #[cfg(feature = "testing")]
    InProcess(crate::testing::BusReader),
}

/// A sending socket.
pub(crate) enum Writer {
    Sockets(socket::Writer),
    #[cfg(feature = "testing")]
    InProcess(crate::testing::BusWriter),
}

impl Transport {
    pub(crate) async fn bind_reader(
        &self,
        role: Role,
        address: &str,
        topics: Vec<String>,
    ) -> Result<(Reader, String), ZmqError> {
        match self {
            Self::Sockets(monitor) => socket::Reader::bind(role, address, topics, monitor.clone())
                .await
                .map(|(reader, at)| (Reader::Sockets(reader), at)),
            #[cfg(feature = "testing")]
            Self::InProcess(peer) => peer
                .bind_reader(role, address, topics)
                .map(|(reader, at)| (Reader::InProcess(reader), at)),
        }
    }

    pub(crate) async fn dial_reader(
        &self,
        role: Role,
        address: &str,
        topics: Vec<String>,
    ) -> Reader {
        match self {
            Self::Sockets(monitor) => {
                Reader::Sockets(socket::Reader::dial(role, address, topics, monitor.clone()).await)
            }
            #[cfg(feature = "testing")]
            Self::InProcess(peer) => Reader::InProcess(peer.dial_reader(role, address, topics)),
        }
    }

    pub(crate) async fn bind_writer(
        &self,
        role: Role,
        address: &str,
    ) -> Result<(Writer, String), ZmqError> {
        match self {
            Self::Sockets(monitor) => socket::Writer::bind(role, address, monitor.clone())
                .await
                .map(|(writer, at)| (Writer::Sockets(writer), at)),
            #[cfg(feature = "testing")]
            Self::InProcess(peer) => peer
                .bind_writer(role, address)
                .map(|(writer, at)| (Writer::InProcess(writer), at)),
        }
    }

    pub(crate) async fn dial_writer(&self, role: Role, address: &str) -> Writer {
        match self {
            Self::Sockets(monitor) => {
                Writer::Sockets(socket::Writer::dial(role, address, monitor.clone()).await)
            }
            #[cfg(feature = "testing")]
            Self::InProcess(peer) => Writer::InProcess(peer.dial_writer(role, address)),
        }
    }

    /// Opens a duplex socket (ROUTER, DEALER), bound or dialing, and starts it: answers the handle
    /// that sends through it, the task to spawn, and the bound address.
    pub(crate) async fn duplex(
        &self,
        role: Role,
        address: &str,
        binds: bool,
        inbound: mpsc::Sender<Frames>,
        shutdown: watch::Receiver<bool>,
        patience: Duration,
    ) -> Result<(DuplexSender, crate::BoxTask, Option<String>), ZmqError> {
        match self {
            Self::Sockets(monitor) => {
                let (duplex, bound) = if binds {
                    let (duplex, at) = socket::Duplex::bind(role, address, monitor.clone()).await?;
                    (duplex, Some(at))
                } else {
                    (
                        socket::Duplex::dial(role, address, monitor.clone()).await,
                        None,
                    )
                };
                let (sender, task) = duplex.run(inbound, shutdown, patience);
                Ok((sender, Box::pin(task), bound))
            }
            #[cfg(feature = "testing")]
            Self::InProcess(peer) => peer.duplex(role, address, binds, inbound, shutdown, patience),
        }
    }
}

impl Reader {
    pub(crate) async fn recv(&mut self) -> Frames {
        match self {
            Self::Sockets(reader) => reader.recv().await,
            #[cfg(feature = "testing")]
            Self::InProcess(reader) => reader.recv().await,
        }
    }

    pub(crate) async fn close(self) {
        match self {
            Self::Sockets(reader) => reader.close().await,
            #[cfg(feature = "testing")]
            Self::InProcess(reader) => reader.close(),
        }
    }
}

impl Writer {
    pub(crate) async fn send(
        &mut self,
        frames: Frames,
        patience: Duration,
    ) -> Result<(), ZmqError> {
        match self {
            Self::Sockets(writer) => writer.send(frames, patience).await,
            #[cfg(feature = "testing")]
            Self::InProcess(writer) => writer.send(frames, patience).await,
        }
    }

    pub(crate) async fn close(self) {
        match self {
            Self::Sockets(writer) => writer.close().await,
            #[cfg(feature = "testing")]
            Self::InProcess(writer) => writer.close(),
        }
    }
}
