//! What a socket reads, as every backend hands it on: one message and the guard that travels
//! with it ([`Received`]), and a socket's reading end handed to the subscription that reads it
//! in its own task ([`ReadingEnd`]).
//!
//! A socket read by a task of its own hands each message to the subscription's task, and that
//! hand-off costs more than the read where the two tasks run on two workers that wake each
//! other (BENCHMARKS.md measures it with the bench's `--raw-hop router`). Where nothing else
//! needs the socket's receiving side (a bound ROUTER whose answers leave through its other half,
//! a bound PULL), the subscription reads it itself, and the socket's task keeps only its peers
//! and its close.

use std::{
    sync::{Mutex, PoisonError},
    task::{Context, Poll},
};

use futures::{StreamExt, stream::BoxStream};

use crate::wire::Frames;

/// One message as a socket read it, and what goes with it.
pub(crate) struct Received {
    pub(crate) frames: Frames,
    pub(crate) release: Release,
}

impl Received {
    /// A message read from a socket, with nothing to release.
    pub(crate) fn new(frames: Frames) -> Self {
        Self {
            frames,
            release: Release::default(),
        }
    }
}

/// Travels with a message read from the transport until the last handle on it goes. In process
/// it tells the test harness the delivery is done with (settled, refused, or dropped); on the
/// sockets it is empty.
#[derive(Debug, Clone, Default)]
pub(crate) struct Release {
    #[cfg(feature = "testing")]
    _guard: Option<std::sync::Arc<dyn std::any::Any + Send + Sync>>,
}

impl Release {
    /// A release that drops `guard` with the last handle on the message.
    #[cfg(feature = "testing")]
    pub(crate) fn guarded(guard: std::sync::Arc<dyn std::any::Any + Send + Sync>) -> Self {
        Self {
            _guard: Some(guard),
        }
    }
}

/// What a socket reads, taken by the subscription in the task that runs its handler.
///
/// The stream sits in a mutex only so that the reading end is `Sync`, as a subscriber must be;
/// it is only ever reached through `&mut`, which takes no lock.
pub(crate) struct ReadingEnd(Mutex<BoxStream<'static, Received>>);

impl ReadingEnd {
    pub(crate) fn new(messages: BoxStream<'static, Received>) -> Self {
        Self(Mutex::new(messages))
    }

    /// The next message the socket read; `None` once it reads no more.
    pub(crate) fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Received>> {
        self.0
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .poll_next_unpin(cx)
    }
}
