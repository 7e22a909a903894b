//! The live state every connected broker shares: its endpoint, the sockets it opened, and the
//! switch that shuts them all.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use ruststream::{Bytes, HeaderMap, Str};
use tokio::{runtime::Handle, sync::watch, task::JoinHandle, time::timeout};

use crate::{
    delivery::{Intake, ZmqSubscriber, inbox, pump},
    error::ZmqError,
    monitor::ZmqMonitor,
    routing::{Admission, Destination, Listener, OwnEndpoint, Target, route},
    socket::{Reader, Role, Writer},
    wire::{self, WireLimits},
};

/// How long shutdown waits for one reader to close its socket.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// What a broker is configured with besides its endpoint.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    pub limits: WireLimits,
    /// How long a publish waits for a peer when none is connected.
    pub send_timeout: Duration,
    /// How long a partial batch waits for more messages.
    pub batch_wait: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            limits: WireLimits::default(),
            send_timeout: Duration::from_secs(5),
            batch_wait: Duration::from_millis(20),
        }
    }
}

/// The sockets of one pattern: which reads, which writes, how its listener picks messages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sockets {
    pub read: Role,
    pub write: Role,
    pub admission: Admission,
    pub lone_frame_is_payload: bool,
}

type SharedWriter = Arc<tokio::sync::Mutex<Writer>>;

/// A connected broker's state, shared by its subscriptions and publishers.
pub(crate) struct Connection {
    endpoint: String,
    binds: bool,
    sockets: Sockets,
    pub(crate) settings: Settings,
    pub(crate) monitor: ZmqMonitor,
    closed: AtomicBool,
    shutdown: watch::Sender<bool>,
    runtime: Handle,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// The subscription this process binds on the endpoint: its name and resolved address.
    listener: Mutex<Option<(String, Option<String>)>>,
    writers: tokio::sync::Mutex<HashMap<Target, SharedWriter>>,
}

impl Connection {
    /// Records a connected broker's state; opens no socket yet.
    pub(crate) fn new(
        endpoint: String,
        binds: bool,
        sockets: Sockets,
        settings: Settings,
        monitor: ZmqMonitor,
    ) -> Arc<Self> {
        Arc::new(Self {
            endpoint,
            binds,
            sockets,
            settings,
            monitor,
            closed: AtomicBool::new(false),
            shutdown: watch::Sender::new(false),
            runtime: Handle::current(),
            tasks: Mutex::new(Vec::new()),
            listener: Mutex::new(None),
            writers: tokio::sync::Mutex::new(HashMap::new()),
        })
    }

    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn closed_error(what: &'static str) -> ZmqError {
        ZmqError::ShutDown { what }
    }

    pub(crate) fn ensure_open(&self, what: &'static str) -> Result<(), ZmqError> {
        if self.closed.load(Ordering::Acquire) {
            Err(Self::closed_error(what))
        } else {
            Ok(())
        }
    }

    /// Opens a subscription: binds the endpoint (one subscription per bound endpoint) or dials
    /// it, and starts the task that reads it.
    pub(crate) async fn subscribe(
        self: &Arc<Self>,
        subscription: &str,
    ) -> Result<ZmqSubscriber, ZmqError> {
        self.ensure_open("a subscription")?;
        let reader = if self.binds {
            self.claim_listener(subscription)?;
            match Reader::bind(self.sockets.read, &self.endpoint, Vec::new()).await {
                Ok((reader, address)) => {
                    tracing::info!(subscription, endpoint = %address, "listening");
                    self.monitor.set_bound_address(Some(address.clone()));
                    self.lock_listener()
                        .as_mut()
                        .map(|(_, at)| *at = Some(address));
                    reader
                }
                Err(err) => {
                    self.lock_listener().take();
                    return Err(err);
                }
            }
        } else {
            tracing::info!(subscription, endpoint = %self.endpoint, "dialing");
            Reader::dial(self.sockets.read, &self.endpoint, Vec::new()).await
        };
        let (tx, subscriber) = inbox(self.settings.batch_wait);
        let intake = Intake {
            subscription: Str::from(subscription.to_owned()),
            lone_frame_is_payload: self.sockets.lone_frame_is_payload,
            limits: self.settings.limits,
            monitor: self.monitor.clone(),
        };
        self.spawn(pump(reader, intake, tx, self.shutdown.subscribe()));
        Ok(subscriber)
    }

    fn lock_listener(&self) -> std::sync::MutexGuard<'_, Option<(String, Option<String>)>> {
        self.listener.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn claim_listener(&self, subscription: &str) -> Result<(), ZmqError> {
        let mut listener = self.lock_listener();
        if let Some((existing, _)) = listener.as_ref() {
            return Err(ZmqError::SecondSubscription {
                endpoint: self.endpoint.clone(),
                existing: existing.clone(),
                requested: subscription.to_owned(),
            });
        }
        *listener = Some((subscription.to_owned(), None));
        Ok(())
    }

    /// Spawns a task of this broker on the runtime it connected on, kept for shutdown.
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let handle = self.runtime.spawn(task);
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        tasks.retain(|task| !task.is_finished());
        tasks.push(handle);
    }

    /// Publishes one message to `destination` (see [`Destination`]).
    pub(crate) async fn publish(
        &self,
        destination: &str,
        headers: &HeaderMap,
        payload: Bytes,
    ) -> Result<(), ZmqError> {
        self.ensure_open("a publisher")?;
        let destination = Destination::parse(destination)?;
        let frames = wire::encode(destination.name, headers, payload)?;
        let target = self.target(&destination)?;
        let writer = self.writer(target).await?;
        let mut writer = writer.lock().await;
        self.ensure_open("a publisher")?;
        writer.send(frames, self.settings.send_timeout).await?;
        self.monitor.count_sent();
        Ok(())
    }

    /// Where a publish to `destination` leaves: the routing decision, over this broker's state.
    fn target(&self, destination: &Destination<'_>) -> Result<Target, ZmqError> {
        let listener = self.lock_listener();
        let listener = listener.as_ref().and_then(|(subscription, address)| {
            address.as_deref().map(|address| Listener {
                subscription,
                address,
            })
        });
        let own = OwnEndpoint {
            address: &self.endpoint,
            binds: self.binds,
            listener,
            admission: self.sockets.admission,
        };
        route(&own, destination)
    }

    /// The writer for `target`, opened on first use and kept until shutdown.
    pub(crate) async fn writer(&self, target: Target) -> Result<SharedWriter, ZmqError> {
        let mut writers = self.writers.lock().await;
        if let Some(writer) = writers.get(&target) {
            return Ok(Arc::clone(writer));
        }
        let writer = match &target {
            Target::Dial(address) => Writer::dial(self.sockets.write, address).await,
            Target::Bind(address) => {
                let (writer, resolved) = Writer::bind(self.sockets.write, address).await?;
                tracing::info!(endpoint = %resolved, "publishing to peers that dial in");
                self.monitor.set_bound_address(Some(resolved));
                writer
            }
        };
        let writer = Arc::new(tokio::sync::Mutex::new(writer));
        writers.insert(target, Arc::clone(&writer));
        Ok(writer)
    }

    /// Closes every socket and ends every task; never blocks past a bounded wait, never panics.
    pub(crate) async fn shutdown(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.shutdown.send_replace(true);
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
        for task in tasks {
            let abort = task.abort_handle();
            if timeout(CLOSE_WAIT, task).await.is_err() {
                abort.abort();
            }
        }
        let writers = std::mem::take(&mut *self.writers.lock().await);
        for (_, writer) in writers {
            if let Ok(writer) = Arc::try_unwrap(writer) {
                let _ = timeout(CLOSE_WAIT, writer.into_inner().close()).await;
            }
        }
        let endpoint = self.monitor.bound_address().unwrap_or_else(|| self.endpoint.clone());
        tracing::info!(%endpoint, "shut down");
    }
}
