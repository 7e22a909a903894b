//! What a child process writes to a pipe (its stderr, most often), read as it comes, for a
//! failure message while it runs and whole once it ends.

#![allow(
    dead_code,
    reason = "each test binary reads its children's output through some of these"
)]

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use tokio::{io::AsyncReadExt, task::JoinHandle};

/// A pipe read to its end by a task of its own, so that a child never stalls on a full pipe.
pub struct Collected {
    text: Arc<Mutex<String>>,
    /// The reading task, until the pipe has closed.
    reader: Option<JoinHandle<()>>,
}

impl Collected {
    /// Starts reading `pipe` (such as `child.stderr.take()`).
    pub fn start(mut pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static) -> Self {
        let text = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&text);
        let reader = tokio::spawn(async move {
            let mut buf = vec![0; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut buf).await {
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Self {
            text,
            reader: Some(reader),
        }
    }

    /// What arrived so far.
    pub fn so_far(&self) -> String {
        self.text
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Waits up to `within` for the pipe to close (its writers, the child and any process it
    /// started, are gone); answers whether it has.
    pub async fn closed(&mut self, within: Duration) -> bool {
        let Some(reader) = &mut self.reader else {
            return true;
        };
        let closed = tokio::time::timeout(within, reader).await.is_ok();
        if closed {
            self.reader = None;
        }
        closed
    }

    /// Everything, once the pipe has closed; what arrived, saying so, if it is still open after
    /// `within`.
    pub async fn whole(mut self, within: Duration) -> String {
        let closed = self.closed(within).await;
        let mut text = self.so_far();
        if !closed {
            text.push_str(&format!("\n(the pipe was still open after {within:?})\n"));
        }
        text
    }
}

impl Drop for Collected {
    fn drop(&mut self) {
        if let Some(reader) = &self.reader {
            reader.abort();
        }
    }
}
