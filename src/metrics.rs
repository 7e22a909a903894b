//! A broker's [`ZmqMonitor`] figures in a Prometheus registry (feature `metrics`): the registry of
//! the framework's `ruststream::metrics::Metrics`, or any other.
//!
//! The collector reads the monitor's counters when the registry is gathered, so the delivery
//! path counts exactly what it counted before and nothing more.

use std::collections::HashMap;

use prometheus::{
    Registry,
    core::{Collector, Desc},
    proto::{Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType},
};

use crate::monitor::ZmqMonitor;

/// One series family: its name and help, as the registry shows them.
struct Family {
    name: &'static str,
    help: &'static str,
}

const REFUSED: Family = Family {
    name: "ruststream_zmq_messages_refused_total",
    help: "Messages from peers refused on the wire before any handler saw them, by rule.",
};
const SENT: Family = Family {
    name: "ruststream_zmq_messages_sent_total",
    help: "Messages the broker's publishers handed to a socket: publishes, replies, retry copies.",
};
const SEND_FAILURES: Family = Family {
    name: "ruststream_zmq_send_failures_total",
    help: "Publishes, replies and retry copies that failed to leave (no peer, a peer not reading).",
};
const PEERS_LOST: Family = Family {
    name: "ruststream_zmq_peers_lost_total",
    help: "Connections to peers lost: the peer went away or its connection failed.",
};
const PEERS_CONNECTED: Family = Family {
    name: "ruststream_zmq_peers_connected",
    help: "Peer connections open now, across the broker's sockets: above zero once connected.",
};
const RECONNECTS: Family = Family {
    name: "ruststream_zmq_reconnects_total",
    help: "Times a dialing socket connected again after its peer went away.",
};
const PEERS_REFUSED: Family = Family {
    name: "ruststream_zmq_peers_refused_total",
    help: "Connections that failed their handshake: no ZMTP, or credentials refused (libzmq).",
};
const DROPPED_NOT_READING: Family = Family {
    name: "ruststream_zmq_answers_dropped_not_reading_total",
    help: "Answers dropped because their requester was not reading its queue (libzmq).",
};

impl ZmqMonitor {
    /// Exports this broker's figures into `registry`, labelled `broker` (the label you gave the
    /// broker, such as the one of `with_broker_labeled`) and `endpoint` ([`endpoint`](Self::endpoint)):
    ///
    /// | Series | Type | Labels | Figure |
    /// |---|---|---|---|
    /// | `ruststream_zmq_messages_refused_total` | counter | `broker`, `endpoint`, `subscription`, `rule` | [`refused_by`](Self::refused_by) |
    /// | `ruststream_zmq_messages_sent_total` | counter | `broker`, `endpoint` | [`sent`](Self::sent) |
    /// | `ruststream_zmq_send_failures_total` | counter | `broker`, `endpoint` | [`send_failures`](Self::send_failures) |
    /// | `ruststream_zmq_peers_lost_total` | counter | `broker`, `endpoint` | [`peers_lost`](Self::peers_lost) |
    /// | `ruststream_zmq_peers_connected` | gauge | `broker`, `endpoint` | [`peers_connected`](Self::peers_connected) |
    /// | `ruststream_zmq_reconnects_total` | counter | `broker`, `endpoint` | [`reconnects`](Self::reconnects) |
    /// | `ruststream_zmq_peers_refused_total` | counter | `broker`, `endpoint` | [`peers_refused`](Self::peers_refused) |
    /// | `ruststream_zmq_answers_dropped_not_reading_total` | counter | `broker`, `endpoint` | [`dropped_not_reading`](Self::dropped_not_reading) |
    ///
    /// A refusal series appears with the first message its rule refuses (`rule` is
    /// [`Refusal::rule`](crate::wire::Refusal::rule), `subscription` the one that read it, or
    /// `(answers to requests)` for a requester's answers); their sum is
    /// [`refused`](Self::refused). `send_failures` counts the sends that ran out their time
    /// (no peer, a peer not reading) and those failed fast after one did;
    /// `answers_dropped_not_reading` the answers a full requester did not get (libzmq).
    /// The figures are read when the registry is gathered. These count the sockets; the
    /// framework's `ruststream_messages_consumed_total` counts what the handlers settled.
    ///
    /// # Errors
    ///
    /// The registry's, when the same `broker` and `endpoint` are registered twice
    /// (`prometheus::Error::AlreadyReg`) or `broker` cannot be a label value.
    ///
    /// # Examples
    ///
    /// ```
    /// use ruststream::metrics::Metrics;
    /// use ruststream_zmq::{ZmqEndpoint, ZmqQueue};
    ///
    /// # fn main() -> Result<(), prometheus::Error> {
    /// let metrics = Metrics::with_registry(prometheus::Registry::new())?;
    /// let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    /// broker.monitor().register_metrics(metrics.registry(), "payments")?;
    ///
    /// let scrape = metrics.export()?;
    /// assert!(scrape.contains(
    ///     r#"ruststream_zmq_messages_sent_total{broker="payments",endpoint="tcp://127.0.0.1:0"} 0"#
    /// ));
    /// # Ok(())
    /// # }
    /// ```
    pub fn register_metrics(
        &self,
        registry: &Registry,
        broker: &str,
    ) -> Result<(), prometheus::Error> {
        registry.register(Box::new(MonitorCollector::new(self.clone(), broker)?))
    }
}

/// Reads one monitor at every gather.
struct MonitorCollector {
    monitor: ZmqMonitor,
    /// `broker` and `endpoint`, sorted by name as the registry writes labels.
    labels: [(&'static str, String); 2],
    /// In the order of [`Self::FAMILIES`].
    descs: Vec<Desc>,
}

impl MonitorCollector {
    const FAMILIES: [&'static Family; 8] = [
        &REFUSED,
        &SENT,
        &SEND_FAILURES,
        &PEERS_LOST,
        &PEERS_CONNECTED,
        &RECONNECTS,
        &PEERS_REFUSED,
        &DROPPED_NOT_READING,
    ];

    fn new(monitor: ZmqMonitor, broker: &str) -> Result<Self, prometheus::Error> {
        let labels = [
            ("broker", broker.to_owned()),
            ("endpoint", monitor.endpoint().to_owned()),
        ];
        let constant: HashMap<String, String> = labels
            .iter()
            .map(|(name, value)| ((*name).to_owned(), value.clone()))
            .collect();
        let descs = Self::FAMILIES
            .iter()
            .map(|family| {
                let variable = if family.name == REFUSED.name {
                    vec!["subscription".to_owned(), "rule".to_owned()]
                } else {
                    Vec::new()
                };
                Desc::new(
                    family.name.to_owned(),
                    family.help.to_owned(),
                    variable,
                    constant.clone(),
                )
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            monitor,
            labels,
            descs,
        })
    }

    /// One counter series: this broker's labels, then `extra`, sorted by name as the registry
    /// writes them.
    fn counter(&self, value: u64, extra: &[(&str, &str)]) -> Metric {
        let mut counter = Counter::default();
        counter.set_value(as_f64(value));
        let mut metric = self.series(extra);
        metric.set_counter(counter);
        metric
    }

    /// One gauge series, with this broker's labels.
    fn gauge(&self, value: u64) -> Metric {
        let mut gauge = Gauge::default();
        gauge.set_value(as_f64(value));
        let mut metric = self.series(&[]);
        metric.set_gauge(gauge);
        metric
    }

    fn series(&self, extra: &[(&str, &str)]) -> Metric {
        let mut labels: Vec<LabelPair> = self
            .labels
            .iter()
            .map(|(name, value)| label(name, value))
            .chain(extra.iter().map(|(name, value)| label(name, value)))
            .collect();
        labels.sort_by(|a, b| a.name().cmp(b.name()));
        let mut metric = Metric::default();
        metric.set_label(labels);
        metric
    }
}

/// Counts stay far below 2^53, where an `f64` holds them exactly.
#[allow(clippy::cast_precision_loss)]
fn as_f64(value: u64) -> f64 {
    value as f64
}

impl Collector for MonitorCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let refused = self
            .monitor
            .refusals()
            .into_iter()
            .map(|(subscription, rule, count)| {
                self.counter(count, &[("subscription", &subscription), ("rule", rule)])
            })
            .collect();
        let m = &self.monitor;
        vec![
            family(&REFUSED, MetricType::COUNTER, refused),
            self.counter_family(&SENT, m.sent()),
            self.counter_family(&SEND_FAILURES, m.send_failures()),
            self.counter_family(&PEERS_LOST, m.peers_lost()),
            family(
                &PEERS_CONNECTED,
                MetricType::GAUGE,
                vec![self.gauge(m.peers_connected())],
            ),
            self.counter_family(&RECONNECTS, m.reconnects()),
            self.counter_family(&PEERS_REFUSED, m.peers_refused()),
            self.counter_family(&DROPPED_NOT_READING, m.dropped_not_reading()),
        ]
    }
}

fn label(name: &str, value: &str) -> LabelPair {
    let mut pair = LabelPair::default();
    pair.set_name(name.to_owned());
    pair.set_value(value.to_owned());
    pair
}

impl MonitorCollector {
    fn counter_family(&self, of: &Family, value: u64) -> MetricFamily {
        family(of, MetricType::COUNTER, vec![self.counter(value, &[])])
    }
}

fn family(family: &Family, kind: MetricType, metrics: Vec<Metric>) -> MetricFamily {
    let mut out = MetricFamily::default();
    out.set_name(family.name.to_owned());
    out.set_help(family.help.to_owned());
    out.set_field_type(kind);
    out.set_metric(metrics);
    out
}
