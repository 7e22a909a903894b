//! A CURVE broker sends nothing in clear, so a dead letter or retry destination it has no CURVE
//! keys for could never leave: the service is refused at startup, naming both endpoints and the
//! fix, rather than lose the message at the cap. CURVE is libzmq's and omq's (the `zeromq`
//! client's brokers take no CURVE endpoint), so only their copies of the topics include this
//! file.

use std::error::Error;

use ruststream::runtime::{RunningApp, RustStreamError};
use ruststream_zmq::{Curve, CurveKeyPair};

use super::{ZmqQueue, prelude::*};
use crate::support::free_port;

#[subscriber]
async fn charge(payment: &serde_json::Value) -> HandlerOutcome {
    let _ = payment;
    HandlerOutcome::retry()
}

#[subscriber]
async fn park(payment: &serde_json::Value) -> HandlerOutcome {
    let _ = payment;
    HandlerOutcome::ack()
}

#[subscriber(QueueSubscription::<Dialing>)]
async fn work(job: &serde_json::Value) -> HandlerOutcome {
    let _ = job;
    HandlerOutcome::retry()
}

/// The error and every source under it, as one text.
fn said(err: &RustStreamError) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(inner) = source {
        text.push_str(" / ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// A free loopback address.
fn loopback() -> String {
    format!("tcp://127.0.0.1:{}", free_port())
}

/// A bound CURVE endpoint admitting this process's own sockets alone, under a new server key.
fn under_curve(address: &str) -> ZmqEndpoint<Bound, Curve> {
    ZmqEndpoint::bind(address.to_owned())
        .curve(CurveKeyPair::generate().unwrap())
        .allow_clients([])
}

/// Starts a CURVE payments queue at `payments` whose dead letters go to the queue `dead`, which
/// the same app binds at `dead_address`.
async fn payments_dead_lettering_to(
    payments: &str,
    dead: ZmqQueue,
    dead_address: &str,
) -> Result<RunningApp, RustStreamError> {
    RustStream::new(AppInfo::new("payments", "0.1.0"))
        .with_broker(ZmqQueue::new(under_curve(payments)), |b| {
            b.include(charge.name("payments"))
                .max_attempts(nonzero!(2u32))
                .dead_letter(format!("payments.dead@{dead_address}"));
        })
        .with_broker(dead, |b| {
            b.include(park.name("payments.dead"));
        })
        .start()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_curve_queue_dead_lettering_to_a_plain_queue_of_the_process_is_refused_at_start() {
    let (payments, dead) = (loopback(), loopback());
    let refused = payments_dead_lettering_to(
        &payments,
        ZmqQueue::new(ZmqEndpoint::bind(dead.clone())),
        &dead,
    )
    .await
    .expect_err("refused at startup");
    let text = said(&refused);
    for part in [
        "dead letters of subscription `payments`",
        &format!("on `{payments}`"),
        &format!("no keys for `{dead}`"),
        "bind it under CURVE",
        &format!("ZmqEndpoint::bind(\"{dead}\").curve(server)"),
        &format!(".destination(ZmqEndpoint::dial(\"{dead}\")"),
    ] {
        assert!(text.contains(part), "`{part}` not in: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_curve_queue_dead_lettering_to_a_curve_queue_of_the_process_starts() {
    let (payments, dead) = (loopback(), loopback());
    let running = payments_dead_lettering_to(&payments, ZmqQueue::new(under_curve(&dead)), &dead)
        .await
        .expect("the process's own sockets reach its CURVE listener");
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_curve_dialing_queue_whose_retry_copies_go_to_a_plain_queue_of_the_process_is_refused_at_start()
 {
    let (upstream, retries) = (loopback(), loopback());
    let server = CurveKeyPair::generate().unwrap().public();
    let refused = RustStream::new(AppInfo::new("jobs", "0.1.0"))
        .with_broker(
            ZmqQueue::new(
                ZmqEndpoint::dial(upstream.clone())
                    .curve(CurveKeyPair::generate().unwrap(), server),
            ),
            |b| {
                b.include(work.name("jobs").out_retry(format!("jobs.retry@{retries}")));
            },
        )
        .with_broker(ZmqQueue::new(ZmqEndpoint::bind(retries.clone())), |b| {
            b.include(park.name("jobs.retry"));
        })
        .start()
        .await
        .expect_err("refused at startup");
    let text = said(&refused);
    for part in [
        "retry copies of subscription `jobs`",
        &format!("on `{upstream}`"),
        &format!("no keys for `{retries}`"),
    ] {
        assert!(text.contains(part), "`{part}` not in: {text}");
    }
}
