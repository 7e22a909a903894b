//! Driving a libzmq socket from the one task that owns it, without blocking a runtime thread.
//!
//! A socket is registered with tokio through its notification descriptor (`ZMQ_FD`), which only
//! signals that something changed: what the socket can do is asked of libzmq (`ZMQ_EVENTS`)
//! before every wait, since a send or a receive can change it without a signal.

use std::os::fd::{AsRawFd, RawFd};

use ruststream::Bytes;
use tokio::io::{Interest, unix::AsyncFd};

use crate::wire::Frames;

/// A libzmq socket with its notification descriptor, which lives exactly as long as the socket.
struct Owned {
    socket: zmq::Socket,
    signal: RawFd,
}

impl AsRawFd for Owned {
    fn as_raw_fd(&self) -> RawFd {
        self.signal
    }
}

/// A libzmq socket registered with the runtime, driven by the task that owns it.
pub(super) struct Driven(AsyncFd<Owned>);

impl Driven {
    pub(super) fn new(socket: zmq::Socket) -> Result<Self, zmq::Error> {
        let signal = socket.get_fd()?;
        // Registering a raw descriptor is sound only while it stays open: the registration
        // owns the socket, and libzmq closes the descriptor only when the socket closes.
        #[allow(deprecated)]
        let registered = AsyncFd::with_interest(Owned { socket, signal }, Interest::READABLE)
            .map_err(|_| zmq::Error::EMFILE)?;
        Ok(Self(registered))
    }

    pub(super) fn socket(&self) -> &zmq::Socket {
        &self.0.get_ref().socket
    }

    /// Waits until the socket can do something in `wanted`; answers what it can do.
    pub(super) async fn ready(&mut self, wanted: zmq::PollEvents) -> zmq::PollEvents {
        loop {
            // Asking also takes in what libzmq signalled, so a signal that comes after this
            // wakes the wait below.
            if let Ok(events) = self.socket().get_events()
                && events.intersects(wanted)
            {
                return events;
            }
            match self.0.readable_mut().await {
                Ok(mut guard) => guard.clear_ready(),
                // The runtime is shutting down: nothing more will be read or sent.
                Err(_) => std::future::pending::<()>().await,
            }
        }
    }

    /// One whole message, if one is waiting.
    pub(super) fn try_recv(&self) -> Result<Option<Frames>, zmq::Error> {
        let first = match self.socket().recv_bytes(zmq::DONTWAIT) {
            Ok(first) => first,
            Err(zmq::Error::EAGAIN) => return Ok(None),
            Err(err) => return Err(err),
        };
        let mut frames = vec![Bytes::from(first)];
        // libzmq hands over a message whole: once its first frame is read, the rest are there.
        while self.socket().get_rcvmore()? {
            frames.push(Bytes::from(self.socket().recv_bytes(0)?));
        }
        Ok(Some(frames))
    }

    /// Sends one message if the socket takes it now; `false` when it has no room (no peer, or
    /// the peer's queue is full).
    pub(super) fn try_send(&self, frames: &Frames) -> Result<bool, zmq::Error> {
        // libzmq takes a message whole or not at all: only its first frame can be refused.
        match self
            .socket()
            .send_multipart(frames.iter().map(|frame| &frame[..]), zmq::DONTWAIT)
        {
            Ok(()) => Ok(true),
            Err(zmq::Error::EAGAIN) => Ok(false),
            Err(err) => Err(err),
        }
    }
}
