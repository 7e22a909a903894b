//! Driving a libzmq socket from the one task that waits on it, without blocking a runtime thread,
//! while other tasks may send through it.
//!
//! A socket is registered with tokio through its notification descriptor (`ZMQ_FD`), which only
//! signals that something changed: what the socket can do is asked of libzmq (`ZMQ_EVENTS`)
//! before every wait, since a send or a receive can change it without a signal.
//!
//! A send from another task ([`Sending`]) can take in the very signal the driving task waits
//! for, so the sender nudges the driving task, which asks the socket once for every send made
//! before it asks. libzmq allows a socket to move between threads behind a
//! full memory barrier: a mutex around it is one.

use std::{
    os::fd::{AsRawFd, RawFd},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicI16, Ordering},
    },
    task::{Context, Poll},
};

use ruststream::Bytes;
use tokio::{
    io::{Interest, unix::AsyncFd},
    sync::Notify,
};

use crate::{error::SocketFault, transport::backend::fault, wire::Frames};

/// What the driving task and the senders share: the socket, taken out when the driving task
/// lets go of it, what that task waits for, and its nudge.
struct DrivenState {
    socket: Mutex<Option<zmq::Socket>>,
    /// The events the driving task is waiting for, as `PollEvents` bits; none while it is not.
    waits_for: AtomicI16,
    /// Whether a sender nudged the driving task, which has not yet asked the socket since.
    nudged: AtomicBool,
    nudge: Notify,
    /// The most frames of one message that are copied out of libzmq; the rest are read and
    /// dropped.
    kept: usize,
}

impl DrivenState {
    /// Runs `use_it` on the socket, unless it is closed.
    fn with<R>(
        &self,
        use_it: impl FnOnce(&zmq::Socket) -> Result<R, zmq::Error>,
    ) -> Result<R, zmq::Error> {
        match &*self.socket.lock().unwrap_or_else(PoisonError::into_inner) {
            Some(socket) => use_it(socket),
            None => Err(zmq::Error::ETERM),
        }
    }
}

/// The registration's part: the notification descriptor, open exactly as long as the socket.
struct Owned {
    shared: Arc<DrivenState>,
    signal: RawFd,
}

impl AsRawFd for Owned {
    fn as_raw_fd(&self) -> RawFd {
        self.signal
    }
}

impl Drop for Owned {
    /// Closes the socket, after the registration let go of its descriptor (tokio deregisters a
    /// descriptor before it drops what holds it), so no sender finds the socket after this.
    fn drop(&mut self) {
        drop(
            self.shared
                .socket
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
    }
}

/// A libzmq socket registered with the runtime, driven by the task that waits on it.
pub(super) struct Driven(AsyncFd<Owned>);

impl Driven {
    /// Registers `socket`, whose messages may have at most `most_frames` frames, with the
    /// runtime; fails with what libzmq or the runtime answered (the runtime's own error, such as
    /// `EEXIST` or `ENOMEM` from `epoll_ctl`, unchanged).
    pub(super) fn new(socket: zmq::Socket, most_frames: usize) -> Result<Self, SocketFault> {
        let signal = socket.get_fd().map_err(fault)?;
        let shared = Arc::new(DrivenState {
            socket: Mutex::new(Some(socket)),
            waits_for: AtomicI16::new(0),
            nudged: AtomicBool::new(false),
            nudge: Notify::new(),
            // One frame past the most, so that the message is still refused by its frame count.
            kept: most_frames.saturating_add(1),
        });
        register(Owned { shared, signal }).map(Self).map_err(fault)
    }

    /// How long the socket keeps what it queued once closed, for its peers to take.
    pub(super) fn set_linger(&self, linger: std::time::Duration) {
        let millis = i32::try_from(linger.as_millis()).unwrap_or(i32::MAX);
        let _ = self.shared().with(|socket| socket.set_linger(millis));
    }

    fn shared(&self) -> &DrivenState {
        &self.0.get_ref().shared
    }

    /// A handle that sends through this socket from any task.
    pub(super) fn sending(&self) -> Sending {
        Sending(Arc::clone(&self.0.get_ref().shared))
    }

    /// Waits until the socket can do something in `wanted`; answers what it can do.
    pub(super) async fn ready(&mut self, wanted: zmq::PollEvents) -> zmq::PollEvents {
        // Said before the first look, so that a sender that takes in a signal after that look
        // sees it and nudges.
        self.shared()
            .waits_for
            .store(wanted.bits(), Ordering::SeqCst);
        let events = loop {
            // Asking also takes in what libzmq signalled, so a signal that comes after this
            // wakes the wait below; it covers every send made before it.
            self.shared().nudged.store(false, Ordering::SeqCst);
            if let Ok(events) = self.shared().with(zmq::Socket::get_events)
                && events.intersects(wanted)
            {
                break events;
            }
            let Self(registered) = &*self;
            tokio::select! {
                readable = registered.readable() => match readable {
                    Ok(mut guard) => guard.clear_ready(),
                    // The runtime is shutting down: nothing more will be read or sent.
                    Err(_) => std::future::pending::<()>().await,
                },
                () = registered.get_ref().shared.nudge.notified() => {}
            }
        };
        self.shared().waits_for.store(0, Ordering::SeqCst);
        events
    }

    /// One whole message, if one is waiting: its frames up to one past the most a message may
    /// have, and the rest read and dropped.
    pub(super) fn try_recv(&self) -> Result<Option<Frames>, zmq::Error> {
        let kept = self.shared().kept;
        self.shared().with(|socket| {
            // One libzmq message read into frame after frame; whether more follow is a field of
            // the frame, not a socket option to ask for.
            let mut frame = zmq::Message::new();
            match socket.recv(&mut frame, zmq::DONTWAIT) {
                Ok(()) => {}
                Err(zmq::Error::EAGAIN) => return Ok(None),
                Err(err) => return Err(err),
            }
            let mut frames = vec![Bytes::copy_from_slice(&frame)];
            // libzmq hands over a message whole: once its first frame is read, the rest are
            // there. Its size limit is per frame, so a message of millions of small frames gets
            // this far: past the frames kept, each is read into the same `frame` and dropped,
            // and the message is refused by its count without a copy of the rest.
            while frame.get_more() {
                socket.recv(&mut frame, 0)?;
                if frames.len() < kept {
                    frames.push(Bytes::copy_from_slice(&frame));
                }
            }
            Ok(Some(frames))
        })
    }

    /// One whole message, or a wait for one registered with `cx`: what a socket read by its
    /// subscription's task polls, where its own task awaits [`ready`](Self::ready).
    pub(super) fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Result<Frames, zmq::Error>> {
        loop {
            if let Some(frames) = self.try_recv()? {
                return Poll::Ready(Ok(frames));
            }
            // Asking takes in what libzmq signalled, so a signal after it wakes the wait below.
            if self
                .shared()
                .with(zmq::Socket::get_events)?
                .contains(zmq::POLLIN)
            {
                continue;
            }
            match self.0.poll_read_ready(cx) {
                Poll::Ready(Ok(mut guard)) => guard.clear_ready(),
                // The runtime is shutting down: nothing more will be read.
                Poll::Ready(Err(_)) | Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Sends one message if the socket takes it now; `false` when it has no room (no peer, or
    /// the peer's queue is full).
    pub(super) fn try_send(&self, frames: &Frames) -> Result<bool, zmq::Error> {
        self.shared().with(|socket| send_now(socket, frames))
    }
}

/// Registers the socket's notification descriptor for readability; the runtime's error, on
/// failure, is returned as it came (the socket closes with `owned`).
fn register(owned: Owned) -> std::io::Result<AsyncFd<Owned>> {
    #[expect(
        unsafe_code,
        reason = "tokio registers a descriptor it does not own only through an unsafe call"
    )]
    // SAFETY: `register_with_interest` asks that the descriptor `owned.as_raw_fd()` answers be
    // open, refer to the same file description for as long as the `AsyncFd` lives, and be
    // answered the same by every call. It is the socket's `ZMQ_FD`, which libzmq keeps open
    // until the socket closes; the socket lives in `owned.shared` and is closed only by
    // `Owned`'s drop (`take` under the lock; every other use borrows it), and the `AsyncFd`
    // deregisters the descriptor before it drops `owned`. `signal` is a plain field, set once
    // and never written, so every call answers the same descriptor.
    let registered = unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) };
    registered.map_err(|failed| failed.into_parts().1)
}

/// Sends through a [`Driven`] socket from another task; cheap to clone.
#[derive(Clone)]
pub(super) struct Sending(Arc<DrivenState>);

impl Sending {
    /// Sends one message if the socket takes it now; `false` when it has no room. Fails with
    /// `ETERM` once the driving task closed the socket.
    pub(super) fn try_send(&self, frames: &Frames) -> Result<bool, zmq::Error> {
        let Self(shared) = self;
        let sent = shared.with(|socket| Ok(send_now(socket, frames)))?;
        // The send, refused or not, may have taken in the signal the driving task waits on, so
        // that task is nudged to ask the socket: once for all the sends made before it asks,
        // where asking here would cost two system calls a send. Not while it is not waiting,
        // since it asks before it waits.
        if shared.waits_for.load(Ordering::SeqCst) != 0
            && !shared.nudged.swap(true, Ordering::SeqCst)
        {
            shared.nudge.notify_one();
        }
        sent
    }
}

fn send_now(socket: &zmq::Socket, frames: &Frames) -> Result<bool, zmq::Error> {
    // libzmq takes a message whole or not at all: only its first frame can be refused.
    // Frames go as `&[u8]`, which the binding copies: never as `Vec<u8>` or `Box<[u8]>`, whose
    // zero-copy conversions into a message are unsound in `zmq` 0.9.2.
    match socket.send_multipart(frames.iter().map(|frame| &frame[..]), zmq::DONTWAIT) {
        Ok(()) => Ok(true),
        Err(zmq::Error::EAGAIN) => Ok(false),
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A registration the runtime refuses fails with the runtime's own error: the same
    /// descriptor registered twice is `EEXIST` from `epoll_ctl`, not a made-up `EMFILE`.
    #[tokio::test]
    async fn a_refused_registration_reports_the_runtimes_error() {
        let context = zmq::Context::new();
        let socket = context.socket(zmq::PULL).unwrap();
        let signal = socket.get_fd().unwrap();
        let first = Driven::new(socket, 8).unwrap();
        // The second registration borrows the descriptor `first` keeps open; it holds no socket.
        let again = Owned {
            shared: Arc::new(DrivenState {
                socket: Mutex::new(None),
                waits_for: AtomicI16::new(0),
                nudged: AtomicBool::new(false),
                nudge: Notify::new(),
                kept: 1,
            }),
            signal,
        };
        let err = register(again)
            .err()
            .expect("a second registration succeeded");
        assert_eq!(err.raw_os_error(), Some(libc::EEXIST), "{err}");
        drop(first);
    }

    /// A message past the most frames comes out with one frame past the most, its first ones
    /// as sent, so that it is refused by its count; the rest are read, so the next message comes
    /// out whole.
    #[tokio::test]
    async fn a_message_past_the_most_frames_keeps_one_more_and_the_next_comes_whole() {
        let context = zmq::Context::new();
        let reading = context.socket(zmq::PULL).unwrap();
        reading.bind("inproc://frames").unwrap();
        let sending = context.socket(zmq::PUSH).unwrap();
        sending.connect("inproc://frames").unwrap();
        let many: Vec<Vec<u8>> = (0..10_000u32).map(|i| i.to_be_bytes().to_vec()).collect();
        sending.send_multipart(&many, 0).unwrap();
        sending.send_multipart([&b"jobs"[..], b"{}"], 0).unwrap();
        let driven = Driven::new(reading, 8).unwrap();
        let first = driven
            .try_recv()
            .unwrap()
            .expect("the message of 10,000 frames");
        let kept: Vec<&[u8]> = first.iter().map(|frame| &frame[..]).collect();
        let sent: Vec<&[u8]> = many[..9].iter().map(Vec::as_slice).collect();
        assert_eq!(kept, sent, "the first nine frames, as sent");
        let next = driven.try_recv().unwrap().expect("the next message");
        assert_eq!(
            next,
            vec![Bytes::from_static(b"jobs"), Bytes::from_static(b"{}")]
        );
        assert_eq!(driven.try_recv().unwrap(), None, "nothing else");
    }
}
