//! The outbound half of a connection: the writers a broker opens on first use (one per target),
//! each send bounded by `send_timeout`, the probe that tells a bound fan-out its own publisher
//! is heard, and a responder's answers through its own socket.
//!
//! Imports: the leaves, `routing` (the target a send goes to), `pattern`, `settings` and
//! `transport`. It decides nothing about where a message goes: the connection routes, this
//! half sends.

use std::{
    collections::HashMap,
    sync::{Arc, OnceLock},
    time::Duration,
};

use ruststream::Bytes;
use tokio::{
    sync::{Mutex, Notify},
    time::{Instant, timeout},
};

use crate::{
    error::ZmqError,
    monitor::ZmqMonitor,
    pattern::Role,
    routing::Target,
    settings::Settings,
    transport::{DuplexSender, Transport, Writer},
    wire::Frames,
};

/// How long closing waits for the writers' sockets.
pub(crate) const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// How long a bound fan-out waits for its probe to come back before it sends another.
const PROBE_EVERY: Duration = Duration::from_millis(20);

type SharedWriter = Arc<Mutex<Writer>>;

/// The writers open so far; none opens once they are closed.
#[derive(Default)]
struct Writers {
    open: HashMap<Target, SharedWriter>,
    closed: bool,
}

/// A connection's sending sockets.
pub(crate) struct Outbound {
    transport: Transport,
    /// The socket a publish to the broker's own endpoint leaves through.
    writes_with: Role,
    send_timeout: Duration,
    monitor: ZmqMonitor,
    writers: Mutex<Writers>,
    /// The responder's ROUTER, once it opened: answers leave through it.
    responder: OnceLock<DuplexSender>,
}

impl Outbound {
    pub(crate) fn new(
        transport: Transport,
        writes_with: Role,
        settings: &Settings,
        monitor: ZmqMonitor,
    ) -> Self {
        Self {
            transport,
            writes_with,
            send_timeout: settings.send_timeout,
            monitor,
            writers: Mutex::default(),
            responder: OnceLock::new(),
        }
    }

    /// The writer for `target`, opened on first use and kept until the connection closes.
    async fn writer(&self, target: &Target) -> Result<SharedWriter, ZmqError> {
        let mut writers = self.writers.lock().await;
        if writers.closed {
            return Err(ZmqError::ShutDown {
                what: "a publisher",
            });
        }
        if let Some(writer) = writers.open.get(target) {
            return Ok(Arc::clone(writer));
        }
        let writer = match target {
            Target::Dial(address) => {
                self.transport
                    .dial_writer(self.writes_with, address)
                    .await?
            }
            Target::Queue(address) => self.transport.dial_writer(Role::Push, address).await?,
            Target::Bind(address) => {
                let (writer, resolved) = self
                    .transport
                    .bind_writer(self.writes_with, address)
                    .await?;
                tracing::info!(endpoint = %resolved, "publishing to peers that dial in");
                self.monitor.set_bound_address(Some(resolved));
                writer
            }
        };
        let writer = Arc::new(Mutex::new(writer));
        writers.open.insert(target.clone(), Arc::clone(&writer));
        Ok(writer)
    }

    /// Opens the writer for `target` now, so that peers can reach it before anything is sent.
    pub(crate) async fn open(&self, target: &Target) -> Result<(), ZmqError> {
        self.writer(target).await.map(drop)
    }

    /// Sends one message through the writer for `target`, waiting up to `send_timeout` for a
    /// peer; counted as sent once the socket took it.
    pub(crate) async fn send(&self, target: &Target, frames: Frames) -> Result<(), ZmqError> {
        let writer = self.writer(target).await?;
        self.write(writer, frames, self.send_timeout).await?;
        self.monitor.count_sent();
        Ok(())
    }

    async fn write(
        &self,
        writer: SharedWriter,
        frames: Frames,
        patience: Duration,
    ) -> Result<(), ZmqError> {
        self.transport
            .run(async move { writer.lock().await.send(frames, patience).await })
            .await
    }

    /// Connects a writer to a bound fan-out's own listener at `address` and waits until the
    /// listener hears it (`heard` is told), so that no copy is lost to the slow joiner.
    pub(crate) async fn reach(
        &self,
        address: &str,
        heard: &Notify,
        probe: &str,
    ) -> Result<(), ZmqError> {
        let writer = self.writer(&Target::Dial(address.to_owned())).await?;
        let deadline = Instant::now() + self.send_timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let frames = vec![Bytes::copy_from_slice(probe.as_bytes())];
            self.write(Arc::clone(&writer), frames, left).await?;
            if timeout(PROBE_EVERY, heard.notified()).await.is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(ZmqError::Connect {
                    endpoint: address.to_owned(),
                    source: format!(
                        "the broker's own publisher did not reach its listener within {:?}",
                        self.send_timeout
                    )
                    .into(),
                });
            }
        }
    }

    /// Closes the writer for `target`, if one is open: a subscription is about to take the
    /// address it listened on.
    pub(crate) async fn release(&self, target: &Target) {
        let writer = self.writers.lock().await.open.remove(target);
        if let Some(writer) = writer {
            match Arc::try_unwrap(writer) {
                Ok(writer) => writer.into_inner().close().await,
                Err(shared) => drop(shared),
            }
        }
    }

    /// Keeps the responder's socket: answers leave through it.
    pub(crate) fn answer_through(&self, responder: DuplexSender) {
        let _ = self.responder.set(responder);
    }

    /// Sends an answer (already framed for its requester) through the responder's socket;
    /// `address` names the requester in errors.
    pub(crate) async fn answer(&self, frames: Frames, address: &str) -> Result<(), ZmqError> {
        let responder = self.responder.get().ok_or_else(|| ZmqError::ReplyAddress {
            address: address.to_owned(),
            why: "this broker has no responder to answer through",
        })?;
        match responder.send(frames).await {
            Err(ZmqError::UnknownPeer { .. }) => Err(ZmqError::ReplyAddress {
                address: address.to_owned(),
                why: "no peer with that identity is connected: it went away before its answer",
            }),
            sent => sent,
        }?;
        self.monitor.count_sent();
        Ok(())
    }

    /// Closes every writer at once, each within [`CLOSE_WAIT`]; none opens afterwards.
    pub(crate) async fn close(&self) {
        let open = {
            let mut writers = self.writers.lock().await;
            writers.closed = true;
            std::mem::take(&mut writers.open)
        };
        close_all(open).await;
    }
}

/// Closes the writers nobody else holds any more, in parallel.
async fn close_all(open: HashMap<Target, SharedWriter>) {
    let closing = open
        .into_values()
        .filter_map(|writer| Arc::try_unwrap(writer).ok())
        .map(|writer| timeout(CLOSE_WAIT, writer.into_inner().close()));
    futures::future::join_all(closing).await;
}

/// A broker dropped without `shutdown` still closes its writers' sockets.
impl Drop for Outbound {
    fn drop(&mut self) {
        let open = std::mem::take(&mut self.writers.get_mut().open);
        if !open.is_empty() {
            drop(self.transport.spawn(close_all(open)));
        }
    }
}
