//! The one dispatch over the backends this build has: where a connection opens its sockets
//! ([`AnyOpener`]) and the sending socket a writer's task owns ([`AnyWriteSocket`]), each an
//! enum with a variant per backend, matched by [`each!`]. A new backend adds a variant to each.

use std::time::Duration;

use tokio::time::Instant;

use super::backend::{Opening, SocketBackend, WriteSocket};
#[cfg(feature = "testing")]
use super::bus::Bus;
#[cfg(feature = "libzmq")]
use super::libzmq::Libzmq;
#[cfg(feature = "omq")]
use super::omq::Omq;
#[cfg(feature = "zeromq")]
use super::zeromq::Zeromq;
use crate::{
    error::ZmqError,
    monitor::{Flush, ZmqMonitor},
    pattern::Role,
    routing::beyond_loopback,
    wire::Frames,
};

/// Runs `$body` with `$bound` bound to what the `$enum` value `$on` holds, whichever backend
/// that is.
macro_rules! each {
    ($enum:ident, $on:expr, $bound:ident => $body:expr) => {
        match $on {
            #[cfg(feature = "zeromq")]
            $enum::Zeromq($bound) => $body,
            #[cfg(feature = "libzmq")]
            $enum::Libzmq($bound) => $body,
            #[cfg(feature = "omq")]
            $enum::Omq($bound) => $body,
            #[cfg(feature = "testing")]
            $enum::Bus($bound) => $body,
        }
    };
}
pub(crate) use each;

/// Opens backend `B`'s sockets with these options; lost peer connections are counted on the
/// monitor.
pub(crate) struct Opener<B: SocketBackend> {
    pub(crate) monitor: ZmqMonitor,
    pub(crate) options: B::Options,
}

impl<B: SocketBackend> Clone for Opener<B> {
    fn clone(&self) -> Self {
        Self {
            monitor: self.monitor.clone(),
            options: self.options.clone(),
        }
    }
}

impl<B: SocketBackend> Opener<B> {
    /// What a socket on `address` in `role` is opened with.
    pub(crate) fn opening(&self, role: Role, address: String) -> Opening<B::Options> {
        Opening {
            role,
            address,
            monitor: self.monitor.clone(),
            options: self.options.clone(),
        }
    }

    /// Says once, as a socket binds `address`, that it listens beyond the loopback: a warning
    /// in clear, a note under CURVE.
    pub(crate) fn say_bound(&self, address: &str) {
        if !B::NETWORK || !beyond_loopback(address) {
            return;
        }
        let (backend, curve) = (B::NAME, B::curve(&self.options));
        if curve {
            tracing::info!(
                endpoint = %address,
                backend,
                curve,
                "listening beyond the loopback under CURVE: only clients that hold the server's \
                 key (and, with an allow-list, a listed key of their own) get through"
            );
        } else {
            tracing::warn!(
                endpoint = %address,
                backend,
                curve,
                "listening beyond the loopback in clear: any host that reaches this address can \
                 connect, unauthenticated and unencrypted, and send what it likes; bind \
                 127.0.0.1, or turn on CURVE with an allow-list on the libzmq or omq backend (docs.rs: \
                 ruststream_zmq::guide::security)"
            );
        }
    }
}

/// Where a connection opens its sockets: one backend's opener.
pub(crate) enum AnyOpener {
    #[cfg(feature = "zeromq")]
    Zeromq(Opener<Zeromq>),
    #[cfg(feature = "libzmq")]
    Libzmq(Opener<Libzmq>),
    #[cfg(feature = "omq")]
    Omq(Opener<Omq>),
    /// The in-process bus of the `testing` feature.
    #[cfg(feature = "testing")]
    Bus(Opener<Bus>),
}

/// A sending socket of one backend, owned by its writer's task.
pub(crate) enum AnyWriteSocket {
    #[cfg(feature = "zeromq")]
    Zeromq(<Zeromq as SocketBackend>::WriteSocket),
    #[cfg(feature = "libzmq")]
    Libzmq(<Libzmq as SocketBackend>::WriteSocket),
    #[cfg(feature = "omq")]
    Omq(<Omq as SocketBackend>::WriteSocket),
    #[cfg(feature = "testing")]
    Bus(<Bus as SocketBackend>::WriteSocket),
}

#[cfg(feature = "zeromq")]
impl From<<Zeromq as SocketBackend>::WriteSocket> for AnyWriteSocket {
    fn from(socket: <Zeromq as SocketBackend>::WriteSocket) -> Self {
        Self::Zeromq(socket)
    }
}

#[cfg(feature = "libzmq")]
impl From<<Libzmq as SocketBackend>::WriteSocket> for AnyWriteSocket {
    fn from(socket: <Libzmq as SocketBackend>::WriteSocket) -> Self {
        Self::Libzmq(socket)
    }
}

#[cfg(feature = "omq")]
impl From<<Omq as SocketBackend>::WriteSocket> for AnyWriteSocket {
    fn from(socket: <Omq as SocketBackend>::WriteSocket) -> Self {
        Self::Omq(socket)
    }
}

#[cfg(feature = "testing")]
impl From<<Bus as SocketBackend>::WriteSocket> for AnyWriteSocket {
    fn from(socket: <Bus as SocketBackend>::WriteSocket) -> Self {
        Self::Bus(socket)
    }
}

/// Whether `W` learns of lost peers only when asked.
fn looks<W: WriteSocket>(_: &W) -> bool {
    W::LOOKS
}

impl AnyWriteSocket {
    /// Sends one message, waiting until `deadline` for a peer.
    pub(crate) async fn send(&mut self, frames: Frames, deadline: Instant) -> Result<(), ZmqError> {
        each!(Self, self, socket => socket.send(frames, deadline).await)
    }

    /// Waits until the socket has a peer again.
    pub(crate) async fn reach(&mut self) {
        each!(Self, self, socket => socket.reach().await);
    }

    /// Whether the socket learns of lost peers only when asked ([`look`](Self::look)).
    pub(crate) fn looks(&self) -> bool {
        each!(Self, self, socket => looks(socket))
    }

    /// Takes in what the socket's monitor reported since the last look.
    pub(crate) async fn look(&mut self) {
        each!(Self, self, socket => socket.look().await);
    }

    /// Closes the socket once what it queued left, for at most `linger`.
    pub(crate) async fn close(self, linger: Duration) -> Flush {
        each!(Self, self, socket => socket.close(linger).await)
    }
}
