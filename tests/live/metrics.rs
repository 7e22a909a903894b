//! The `metrics` feature: a broker's monitor figures in the framework's Prometheus registry,
//! beside the framework's own settlement counters, after a known sequence on real sockets.

use std::{convert::Infallible, time::Duration};

use ruststream::metrics::Metrics;
use ruststream::{Broker, BytesMut, ConnectedBroker, OutgoingMessage, Publisher};
use zeromq::{PushSocket, Socket, SocketSend, ZmqMessage as Frames};

use super::prelude::*;
use crate::support::{AppState, Payment, Plan, free_port, journal, poll::until, work};

/// The value of the series `name{labels}` in a scrape, if the scrape has it.
fn sample(scrape: &str, name: &str, labels: &str) -> Option<f64> {
    let series = format!("{name}{{{labels}}} ");
    scrape
        .lines()
        .find_map(|line| line.strip_prefix(&series))
        .map(|value| value.parse().expect("a sample is a number"))
}

fn payment(id: u64, plan: Plan) -> Vec<u8> {
    serde_json::to_vec(&Payment { id, plan }).unwrap()
}

async fn send(peer: &mut PushSocket, frames: Vec<Vec<u8>>) {
    let frames: Vec<_> = frames.into_iter().map(ruststream::Bytes::from).collect();
    peer.send(Frames::try_from(frames).unwrap()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_registry_counts_each_refusal_by_rule_each_send_each_failed_send_and_each_lost_peer_beside_the_handled_messages()
 {
    let metrics = Metrics::with_registry(prometheus::Registry::new()).unwrap();

    // The service: a bound queue, whose retry copies go back to its own listener.
    let (calls, mut journal) = journal();
    let inbound = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .limits(WireLimits::default().max_header_lines(8));
    let monitor = inbound.monitor();
    monitor
        .register_metrics(metrics.registry(), "payments")
        .unwrap();
    let app = RustStream::new(AppInfo::new("metrics", "0.1.0"))
        .layer(metrics.consume_layer())
        .on_startup(async move |()| Ok::<_, Infallible>(AppState { calls }))
        .with_broker_labeled("payments", inbound, |b| {
            b.include(work.name("metered")).max_attempts(nonzero!(3u32));
        });
    let running = app.start().await.unwrap();

    // A second broker in the same registry: a publisher toward a port nobody listens on.
    let nobody = format!("tcp://127.0.0.1:{}", free_port());
    let outbox =
        ZmqQueue::new(ZmqEndpoint::dial(nobody.clone())).send_timeout(Duration::from_millis(200));
    outbox
        .monitor()
        .register_metrics(metrics.registry(), "outbox")
        .unwrap();
    let outbox = outbox.connect().await.unwrap();
    let body = BytesMut::from(payment(9, Plan::Ack).as_slice());
    let unsent = outbox
        .publisher()
        .publish(OutgoingMessage::produced("receipts", body), None)
        .await;
    assert!(unsent.is_err(), "a publish with no peer to take it failed");

    // A raw peer: two good payments, three malformed messages (two under one rule), and one
    // payment that fails twice. Each figure of a broker differs from its others, so a series that
    // reported another one's figure would show.
    let mut peer = PushSocket::new();
    peer.connect(&monitor.bound_address().unwrap())
        .await
        .unwrap();
    let name = || b"metered".to_vec();
    let nine_lines = || "a: 1\n".repeat(9).into_bytes();
    send(&mut peer, vec![name(), payment(1, Plan::Ack)]).await;
    send(&mut peer, vec![name(), nine_lines(), payment(0, Plan::Ack)]).await;
    send(
        &mut peer,
        vec![name(), b"no colon".to_vec(), payment(0, Plan::Ack)],
    )
    .await;
    send(&mut peer, vec![name(), nine_lines(), payment(0, Plan::Ack)]).await;
    send(
        &mut peer,
        vec![name(), payment(2, Plan::Retry { times: 2 })],
    )
    .await;
    send(&mut peer, vec![name(), payment(3, Plan::Ack)]).await;
    journal
        .until("payments 1 and 3, and payment 2 three times", |seen| {
            seen.len() == 5
        })
        .await;
    peer.close().await;

    // What the sockets did (this crate's series) and what the handlers settled (the framework's)
    // are gathered in one registry; each figure lands when its task counts it.
    let payments = r#"broker="payments",endpoint="tcp://127.0.0.1:0""#;
    let outbox_labels = format!(r#"broker="outbox",endpoint="{nobody}""#);
    let refused = "ruststream_zmq_messages_refused_total";
    let sent = "ruststream_zmq_messages_sent_total";
    let failed = "ruststream_zmq_send_failures_total";
    let lost = "ruststream_zmq_peers_lost_total";
    let consumed = "ruststream_messages_consumed_total";
    let expected: Vec<(&str, String, f64)> = vec![
        (
            refused,
            format!(r#"{payments},rule="max-header-lines",subscription="metered""#),
            2.0,
        ),
        (
            refused,
            format!(r#"{payments},rule="header-colon",subscription="metered""#),
            1.0,
        ),
        // The two copies of payment 2, back to the service's own listener.
        (sent, payments.to_owned(), 2.0),
        (failed, payments.to_owned(), 0.0),
        // The raw peer closed; the service's own copy socket is still connected.
        (lost, payments.to_owned(), 1.0),
        (sent, outbox_labels.clone(), 0.0),
        (failed, outbox_labels.clone(), 1.0),
        (lost, outbox_labels.clone(), 0.0),
        // The own copy socket and the listener's end of it; the raw peer left.
        ("ruststream_zmq_peers_connected", payments.to_owned(), 2.0),
        ("ruststream_zmq_peers_connected", outbox_labels.clone(), 0.0),
        ("ruststream_zmq_reconnects_total", payments.to_owned(), 0.0),
        // Every peer spoke ZMTP, and no requester is involved.
        (
            "ruststream_zmq_peers_refused_total",
            payments.to_owned(),
            0.0,
        ),
        (
            "ruststream_zmq_answers_dropped_not_reading_total",
            payments.to_owned(),
            0.0,
        ),
        (consumed, r#"name="metered",status="ack""#.to_owned(), 3.0),
        (consumed, r#"name="metered",status="nack""#.to_owned(), 2.0),
    ];
    let wrong = |scrape: &str| -> Vec<String> {
        expected
            .iter()
            .filter_map(|(name, labels, value)| {
                let found = sample(scrape, name, labels);
                (found != Some(*value))
                    .then(|| format!("{name}{{{labels}}}: expected {value}, found {found:?}"))
            })
            .collect()
    };
    until(
        Duration::from_secs(15),
        "the series at their values",
        || {
            let scrape = metrics.export().unwrap();
            let off = wrong(&scrape);
            if off.is_empty() {
                Ok(())
            } else {
                Err(format!("\n  {}\n{scrape}", off.join("\n  ")))
            }
        },
    )
    .await;

    // No rule that refused nothing has a series, and the figures are the monitor's own.
    let scrape = metrics.export().unwrap();
    let refusal_series = scrape
        .lines()
        .filter(|line| line.starts_with("ruststream_zmq_messages_refused_total{"))
        .count();
    assert_eq!(refusal_series, 2, "{scrape}");
    assert_eq!(monitor.refused(), 3);
    assert_eq!(monitor.refused_by("max-header-lines"), 2);

    running.shutdown().await.unwrap();
    outbox.shutdown().await.unwrap();
}

#[test]
fn a_broker_label_and_endpoint_register_once_per_registry_and_another_label_beside_them() {
    let metrics = Metrics::with_registry(prometheus::Registry::new()).unwrap();
    let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    broker
        .monitor()
        .register_metrics(metrics.registry(), "payments")
        .unwrap();
    let again = broker
        .monitor()
        .register_metrics(metrics.registry(), "payments");
    assert!(
        matches!(again, Err(prometheus::Error::AlreadyReg)),
        "{again:?}"
    );
    // Another label on the same endpoint is another set of series.
    broker
        .monitor()
        .register_metrics(metrics.registry(), "payments-2")
        .unwrap();
}
