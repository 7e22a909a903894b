//! Intake: reading a subscription's socket, decoding and refusing what peers send, and
//! stamping each request with the address its answer goes to.
//!
//! Built from what a socket's reader hands on (or its reading end) and the settings; knows
//! nothing of the connection above it.

use std::{
    sync::{Arc, Mutex, PoisonError},
    task::Poll,
};

use futures::Stream;
use ruststream::{Bytes, Str, Subscriber};
use tokio::{sync::mpsc, time::Instant};

use crate::{
    error::ZmqError,
    lane::LaneKey,
    message::ZmqMessage,
    monitor::{SocketFigures, ZmqMonitor},
    throttle::{Say, Throttle},
    transport::{ReadingEnd, Received},
    wire::{Refusal, WireLimits, decode, decode_request},
};

/// What a subscription reads, as the framework reads it: the messages its socket was read for
/// (by a reader task of its own, or by a responder's socket task), or the socket itself where
/// its reading end is handed over (a bound ROUTER or PULL on `zeromq`), decoded as they are
/// taken.
///
/// Decoding here, in the task that runs the handler, leaves the reading task only the socket:
/// one task of each kind on two cores keeps both busy.
pub struct Inbox {
    /// Kept while the socket is read here too: its socket's task ends when it is dropped.
    rx: mpsc::Receiver<Received>,
    socket: Option<ReadingEnd>,
    intake: Intake,
}

impl Subscriber for Inbox {
    type Message = ZmqMessage;
    type Error = ZmqError;

    fn stream(&mut self) -> impl Stream<Item = Result<ZmqMessage, ZmqError>> + Send + '_ {
        futures::stream::poll_fn(|cx| {
            loop {
                // A refused message is passed over; the channel's (or the socket's) budget ends a
                // long run of them.
                // What the socket's own task read was counted as it handed it on; what this
                // subscription reads itself is counted here.
                let next = match &mut self.socket {
                    Some(socket) => socket
                        .poll_recv(cx)
                        .map(|read| read.inspect(|_| self.intake.figures.count_received())),
                    None => self.rx.poll_recv(cx),
                };
                match std::task::ready!(next) {
                    Some(received) => {
                        if let Some(message) = self.intake.admit(received) {
                            return Poll::Ready(Some(Ok(message)));
                        }
                    }
                    None => return Poll::Ready(None),
                }
            }
        })
    }
}

/// How a subscription reads its frames.
pub(crate) enum Reading {
    /// `[name][headers][payload]`; a lone frame is a payload (the queue) or refused (the
    /// fan-out, which filters on the name).
    OneWay { lone_frame_is_payload: bool },
    /// A ROUTER's requests, each stamped with the reply address of its sender.
    Requests,
}

/// What decoding needs to know about a subscription.
pub(crate) struct Intake {
    /// The subscription's name, for logs and for a lone frame's name.
    pub(crate) subscription: Str,
    /// The endpoint it reads from, which each delivery names.
    pub(crate) endpoint: Arc<str>,
    pub(crate) reading: Reading,
    pub(crate) limits: WireLimits,
    /// What its deliveries' partition key is read from.
    pub(crate) lane: LaneKey,
    pub(crate) monitor: ZmqMonitor,
    /// The figures of the socket it reads.
    pub(crate) figures: Arc<SocketFigures>,
    /// One warning a burst of refusals by the same rule.
    pub(crate) refusals: Mutex<Throttle<&'static str>>,
}

impl Intake {
    /// Decodes one message, or warns once and counts why it was refused; a refused message's
    /// release goes with it.
    fn admit(&self, received: Received) -> Option<ZmqMessage> {
        let Received { frames, release } = received;
        let decoded = match &self.reading {
            Reading::OneWay {
                lone_frame_is_payload,
            } => decode(
                &frames,
                &self.limits,
                lone_frame_is_payload.then_some(&self.subscription),
            )
            .map(|inbound| (inbound, None)),
            Reading::Requests => decode_request(&frames, &self.limits, &self.subscription)
                .map(|(requester, inbound)| (inbound, Some(requester.identity))),
        };
        match decoded {
            Ok((inbound, requester)) => Some(ZmqMessage::new(
                inbound,
                Arc::clone(&self.endpoint),
                requester,
                self.lane,
                release,
            )),
            Err(refusal) => {
                self.monitor.count_refusal(&self.subscription, &refusal);
                self.warn(&refusal, &frames);
                None
            }
        }
    }

    /// Warns of a refused message once a burst of refusals by its rule, and reminds of the
    /// burst once a minute while it lasts; the counters have every one.
    fn warn(&self, refusal: &Refusal, frames: &[Bytes]) {
        let note = self
            .refusals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .note(refusal.rule(), Instant::now());
        match note.say {
            Say::First { untold } => {
                let bytes: usize = frames.iter().map(Bytes::len).sum();
                tracing::warn!(
                    subscription = %self.subscription,
                    endpoint = %self.endpoint,
                    rule = refusal.rule(),
                    frames = frames.len(),
                    bytes,
                    untold_before = untold,
                    "refused a message from a peer: {refusal}; more refused by this rule are \
                     counted, and told once a minute while they go on"
                );
            }
            Say::Again { untold, since } => tracing::warn!(
                subscription = %self.subscription,
                endpoint = %self.endpoint,
                rule = refusal.rule(),
                refused = untold,
                since = ?since.elapsed(),
                "still refusing messages from peers by this rule: {refusal}"
            ),
            Say::Nothing => {}
        }
    }
}

/// What waited for the subscription when it closed was read and will reach no handler: counted,
/// from the queue itself.
impl Drop for Inbox {
    fn drop(&mut self) {
        self.rx.close();
        let mut left = 0;
        while self.rx.try_recv().is_ok() {
            left += 1;
        }
        if left > 0 {
            self.intake.figures.count_unhandled(left);
        }
    }
}

impl Inbox {
    /// The subscriber of what a reading task hands to `rx`, or of what `socket` reads.
    pub(crate) fn new(
        rx: mpsc::Receiver<Received>,
        socket: Option<ReadingEnd>,
        intake: Intake,
    ) -> Self {
        Self { rx, socket, intake }
    }
}

#[cfg(test)]
mod tests {
    use std::{
        collections::BTreeMap,
        sync::{Arc, Mutex},
        time::Duration,
    };

    use ruststream::{Bytes, Str};
    use tracing::{
        Event, Level, Subscriber,
        field::{Field, Visit},
    };
    use tracing_subscriber::{
        layer::{Context, Layer, SubscriberExt},
        registry::Registry,
    };

    use super::{Intake, Reading};
    use crate::{
        lane::LaneKey,
        monitor::{SocketUse, ZmqMonitor},
        pattern::PatternFacts,
        throttle::{QUIET_AFTER, REMIND_EVERY, Throttle},
        transport::{Probe, Received, Release},
        wire::{Refusal, WireLimits},
    };

    /// A bound fan-out's listener keeps one filter, its subscription's name, and the probe of
    /// its own publisher passes it: a second filter would make the SUB send two subscription
    /// messages at once, which the `zeromq` client's PUB does not always survive.
    #[test]
    fn a_bound_fanout_listens_with_one_filter_that_its_probe_passes() {
        let topics = PatternFacts::FANOUT.topics("payments");
        assert_eq!(topics, ["payments"]);
        let probe = Probe::new("payments");
        assert!(probe.frame.starts_with(topics[0].as_bytes()));
        assert_ne!(
            &probe.frame[..],
            b"payments",
            "a probe is not a message's name"
        );
    }

    /// One log line as the test saw it: its level, its message and its other fields.
    #[derive(Debug, Clone)]
    struct Line {
        level: Level,
        message: String,
        fields: BTreeMap<&'static str, String>,
    }

    impl Line {
        fn field(&self, name: &str) -> &str {
            self.fields
                .get(name)
                .unwrap_or_else(|| panic!("no field `{name}` in {self:?}"))
        }
    }

    impl Visit for Line {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            let value = format!("{value:?}");
            if field.name() == "message" {
                self.message = value;
            } else {
                self.fields.insert(field.name(), value);
            }
        }
    }

    /// Keeps every event of the subscriber it is set on, with its level.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<Line>>>);

    impl<S: Subscriber> Layer<S> for Lines {
        fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
            let mut line = Line {
                level: *event.metadata().level(),
                message: String::new(),
                fields: BTreeMap::new(),
            };
            event.record(&mut line);
            self.0.lock().unwrap().push(line);
        }
    }

    impl Lines {
        fn taken(&self) -> Vec<Line> {
            std::mem::take(&mut *self.0.lock().unwrap())
        }
    }

    const ENDPOINT: &str = "tcp://127.0.0.1:5556";

    /// What a fan-out subscription on `ENDPOINT` decodes with, as its connection builds it.
    fn fanout(monitor: &ZmqMonitor) -> Intake {
        Intake {
            subscription: Str::from("prices"),
            endpoint: ENDPOINT.into(),
            reading: Reading::OneWay {
                lone_frame_is_payload: false,
            },
            limits: WireLimits::default(),
            lane: LaneKey::default(),
            monitor: monitor.clone(),
            figures: monitor.socket(SocketUse::Subscriber, ENDPOINT),
            refusals: Mutex::new(Throttle::new(Refusal::RULES)),
        }
    }

    /// A lone frame, which a fan-out refuses (it filters on the name frame).
    fn lone_frame() -> Received {
        Received {
            frames: vec![Bytes::from_static(b"no name")],
            release: Release::default(),
        }
    }

    /// Nine frames, over the default limit of eight.
    fn too_many_frames() -> Received {
        Received {
            frames: vec![Bytes::from_static(b"x"); 9],
            release: Release::default(),
        }
    }

    /// A subscription's refusals, as an operator reads them: one warning when a burst by a rule
    /// begins, nothing more while it goes on but one warning a minute with what it refused
    /// since, and a new burst's warning after a quiet spell, saying what went untold; every
    /// refusal is counted. Run on tokio's paused clock, so a minute takes no time.
    #[tokio::test(start_paused = true)]
    async fn a_burst_of_refusals_is_warned_of_once_then_reminded_once_a_minute_with_its_count() {
        let lines = Lines::default();
        let _logging = tracing::subscriber::set_default(Registry::default().with(lines.clone()));
        let monitor = ZmqMonitor::for_endpoint(ENDPOINT);
        let intake = fanout(&monitor);
        let refused = std::cell::Cell::new(0u64);
        let refuse = |received: Received| {
            assert!(intake.admit(received).is_none());
            refused.set(refused.get() + 1);
        };
        let step = Duration::from_millis(10);

        // The burst begins: told in full, at once.
        refuse(lone_frame());
        let first = lines.taken();
        assert_eq!(first.len(), 1, "{first:#?}");
        assert_eq!(first[0].level, Level::WARN, "{first:#?}");
        assert!(
            first[0]
                .message
                .starts_with("refused a message from a peer: a lone frame"),
            "{first:#?}"
        );
        assert_eq!(first[0].field("rule"), "\"lone-frame\"");
        assert_eq!(first[0].field("untold_before"), "0");

        // 99 more in the first second: counted, not told. Another rule has a burst of its own.
        for _ in 0..99 {
            tokio::time::advance(step).await;
            refuse(lone_frame());
        }
        assert!(lines.taken().is_empty(), "a burst under way is told once");
        refuse(too_many_frames());
        let other = lines.taken();
        assert_eq!(other.len(), 1, "{other:#?}");
        assert_eq!(other[0].level, Level::WARN);
        assert_eq!(other[0].field("rule"), "\"max-frames\"");

        // One every 5 s keeps the burst going, untold, until its minute is up.
        let mut since_first = step * 99;
        let mut untold = 99;
        while since_first + Duration::from_secs(5) < REMIND_EVERY {
            tokio::time::advance(Duration::from_secs(5)).await;
            since_first += Duration::from_secs(5);
            refuse(lone_frame());
            untold += 1;
        }
        assert!(lines.taken().is_empty(), "no reminder before a minute");
        tokio::time::advance(REMIND_EVERY - since_first).await;
        refuse(lone_frame());
        untold += 1;
        let reminder = lines.taken();
        assert_eq!(reminder.len(), 1, "{reminder:#?}");
        assert_eq!(reminder[0].level, Level::WARN, "{reminder:#?}");
        assert!(
            reminder[0]
                .message
                .starts_with("still refusing messages from peers by this rule: a lone frame"),
            "{reminder:#?}"
        );
        assert_eq!(reminder[0].field("refused"), untold.to_string());
        assert_eq!(reminder[0].field("since"), format!("{REMIND_EVERY:?}"));

        // The next minute's refusals wait for the next reminder, which counts them alone.
        let mut again = 0;
        for _ in 0..11 {
            tokio::time::advance(Duration::from_secs(5)).await;
            refuse(lone_frame());
            again += 1;
        }
        assert!(lines.taken().is_empty(), "one reminder a minute");
        tokio::time::advance(Duration::from_secs(5)).await;
        refuse(lone_frame());
        again += 1;
        let second = lines.taken();
        assert_eq!(second.len(), 1, "{second:#?}");
        assert_eq!(second[0].level, Level::WARN);
        assert_eq!(second[0].field("refused"), again.to_string());

        // A quiet spell ends the burst: the next refusal begins one, told in full again.
        tokio::time::advance(Duration::from_secs(1)).await;
        refuse(lone_frame());
        tokio::time::advance(QUIET_AFTER).await;
        refuse(lone_frame());
        let anew = lines.taken();
        assert_eq!(anew.len(), 1, "{anew:#?}");
        assert_eq!(anew[0].level, Level::WARN);
        assert!(
            anew[0].message.starts_with("refused a message from a peer"),
            "{anew:#?}"
        );
        assert_eq!(anew[0].field("untold_before"), "1");

        // The counters have every refusal, told or not.
        assert_eq!(monitor.refused(), refused.get());
        assert_eq!(monitor.refused_by("max-frames"), 1);
        assert_eq!(monitor.refused_by("lone-frame"), refused.get() - 1);
    }
}
