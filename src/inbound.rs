//! The inbound half of a connection: opening a subscription's socket, bound or dialing, and
//! starting what reads it; what the subscription then takes is decoded by its [`Intake`].
//!
//! Who reads the socket is decided below, once: a responder's ROUTER by its socket's task or by
//! the subscription itself (`transport::duplex`), a one-way socket by the subscription itself
//! where the backend hands it over, else by a task that pumps it (`transport::reading`).

use std::sync::{Arc, Mutex};

use ruststream::Str;
use tokio::sync::{mpsc, watch};

use crate::{
    error::ZmqError,
    intake::{Inbox, Intake, Reading},
    lane::LaneKey,
    monitor::{SocketFigures, ZmqMonitor},
    outbound::Outbound,
    pattern::PatternFacts,
    routing::Target,
    settings::Settings,
    throttle::Throttle,
    transport::{BoxTask, Handoff, Probe, ReadInto, Transport},
    wire::Refusal,
};

/// What opening a subscription's socket takes from its connection.
pub(crate) struct Subscribing<'a> {
    pub(crate) transport: &'a Transport,
    pub(crate) endpoint: &'a str,
    pub(crate) binds: bool,
    pub(crate) facts: PatternFacts,
    pub(crate) settings: &'a Settings,
    pub(crate) monitor: &'a ZmqMonitor,
    /// A publisher that bound the endpoint lets go of it; a responder answers through its socket.
    pub(crate) outbound: &'a Outbound,
    pub(crate) shutdown: watch::Receiver<bool>,
}

/// A subscription's socket, opened and ready to be read.
pub(crate) struct Opened {
    /// What the subscription reads.
    pub(crate) inbox: Inbox,
    /// What reads the socket, or keeps its peers, and closes it: to spawn.
    pub(crate) task: BoxTask,
    /// Where the socket listens, port resolved, when it binds.
    pub(crate) address: Option<String>,
    /// On a bound fan-out, the check that the broker's own publisher reaches the listener.
    pub(crate) probe: Option<Probe>,
}

impl Subscribing<'_> {
    /// Opens `subscription`'s socket and starts reading it, `read_ahead` messages waiting for
    /// the subscriber before the socket stops being read (and its own queue takes the pressure).
    pub(crate) async fn open(
        &self,
        subscription: &str,
        read_ahead: usize,
        lane: LaneKey,
    ) -> Result<Opened, ZmqError> {
        let facts = self.facts;
        let (tx, rx) = mpsc::channel(read_ahead);
        let figures = self
            .monitor
            .socket(crate::monitor::SocketUse::Subscriber, self.endpoint);
        let role = facts.reads_with;
        let (end, task, address, probe) = if facts.answers_requests {
            let inbound = Handoff::Channel(tx, Arc::clone(&figures));
            let (started, address) = self
                .transport
                .duplex(
                    role,
                    self.endpoint,
                    self.binds,
                    inbound,
                    self.shutdown.clone(),
                    self.settings.linger,
                )
                .await?;
            self.outbound
                .answer_through(started.sender, Arc::clone(&figures));
            (started.reader, started.task, address, None)
        } else {
            if self.binds {
                // The subscription takes the endpoint: a publisher that bound it lets go.
                self.outbound
                    .release(&Target::Bind(self.endpoint.to_owned()))
                    .await;
            }
            // A bound fan-out's own publisher must be heard before the subscription counts as
            // open.
            let probe = (self.binds && facts.filters_by_prefix()).then(|| Probe::new(subscription));
            let into = ReadInto {
                tx,
                figures: Arc::clone(&figures),
                probe: probe.clone(),
                shutdown: self.shutdown.clone(),
            };
            let topics = facts.topics(subscription);
            let (end, task, address) = self
                .transport
                .open_reader(role, self.endpoint, self.binds, topics, into)
                .await?;
            (end, task, address, probe)
        };
        let intake = self.intake(subscription, address.as_deref(), lane, figures);
        Ok(Opened {
            inbox: Inbox::new(rx, end, intake),
            task,
            address,
            probe,
        })
    }

    /// How the subscription's messages are read and refused.
    fn intake(
        &self,
        subscription: &str,
        address: Option<&str>,
        lane: LaneKey,
        figures: Arc<SocketFigures>,
    ) -> Intake {
        let facts = self.facts;
        Intake {
            subscription: Str::from(subscription.to_owned()),
            endpoint: address.unwrap_or(self.endpoint).into(),
            reading: if facts.answers_requests {
                Reading::Requests
            } else {
                Reading::OneWay {
                    lone_frame_is_payload: facts.lone_frame_is_payload,
                }
            },
            limits: self.settings.limits,
            lane,
            monitor: self.monitor.clone(),
            figures,
            refusals: Mutex::new(Throttle::new(Refusal::RULES)),
        }
    }
}
