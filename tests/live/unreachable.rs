//! A destination that cannot be reached fails fast: after the first send runs out its
//! `send_timeout`, every later one fails at once, counted and logged, until the destination is
//! reached again.

use std::{
    convert::Infallible,
    time::{Duration, Instant},
};

use ruststream_zmq::prelude::*;

use crate::support::{
    AppState, Feeder, Plan, capture_logs, eventually, free_port, journal, logs, work,
};

const COPIES: u64 = 1_000;
const SEND_TIMEOUT: Duration = Duration::from_millis(500);

/// How many log lines hold every one of `parts`.
fn lines_with(parts: &[&str]) -> usize {
    String::from_utf8_lossy(&logs().lock().unwrap())
        .lines()
        .filter(|line| parts.iter().all(|part| line.contains(part)))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_copies_toward_a_retry_queue_that_is_down_fail_within_a_few_send_timeouts_until_it_is_back()
 {
    capture_logs();
    let (feeder, upstream) = Feeder::bind("tcp://127.0.0.1:0").await;
    let retry_port = free_port();
    let retry_address = format!("tcp://127.0.0.1:{retry_port}");
    let (calls, mut payments) = journal();
    let broker = ZmqQueue::new(ZmqEndpoint::dial(upstream)).send_timeout(SEND_TIMEOUT);
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("unreachable", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(AppState { calls }))
        .with_broker(broker, |b| {
            b.include(work.name("unreachable"))
                .out_retry(Publish)
                .to(format!("unreachable.retry@{retry_address}"));
        });
    let running = app.start().await.unwrap();

    // Phase 1: the retry queue is down. Each payment fails once; its copy cannot leave.
    let started = Instant::now();
    for id in 0..COPIES {
        feeder
            .send("unreachable", id, Plan::RetryAfter { ms: 10, times: 1 })
            .await;
    }
    payments
        .until("every payment handled once", |seen| {
            seen.len() as u64 >= COPIES
        })
        .await;
    let handled = started.elapsed();
    eventually(
        handled + 30 * SEND_TIMEOUT,
        "every copy's failure counted",
        || monitor.send_failures() >= COPIES,
    )
    .await;
    let failed = started.elapsed();
    println!(
        "{COPIES} copies toward a retry queue that is down: handled in {handled:?}, every copy \
         failed after {failed:?} (send_timeout {SEND_TIMEOUT:?})"
    );
    // One full send_timeout for the first copy, the rest at once: far from COPIES of them.
    assert!(
        failed <= handled + 3 * SEND_TIMEOUT,
        "the copies took {failed:?} to fail, {handled:?} of it handling the payments"
    );
    assert_eq!(monitor.send_failures(), COPIES);
    assert_eq!(monitor.sent(), 0, "nothing could leave");
    assert!(
        payments.seen.iter().all(|seen| seen.retry_count.is_none()),
        "no copy was delivered"
    );
    let port = retry_port.to_string();
    eventually(Duration::from_secs(5), "each lost copy logged", || {
        lines_with(&["publishing the retry copy failed", &port]) as u64 == COPIES
    })
    .await;
    assert_eq!(
        lines_with(&["fail at once until it is reached again", &port]),
        1,
        "the unreachable destination is announced once, not once per copy"
    );

    // Phase 2: the retry queue comes up; the next copies reach it.
    let (retry_calls, mut retries) = journal();
    let retry_queue = RustStream::new(AppInfo::new("retry-queue", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(AppState { calls: retry_calls }))
        .with_broker(
            ZmqQueue::new(ZmqEndpoint::bind(format!("tcp://127.0.0.1:{retry_port}"))),
            |b| {
                b.include(work.name("unreachable.retry"));
            },
        )
        .start()
        .await
        .unwrap();
    eventually(
        Duration::from_secs(10),
        "the destination reached again",
        || lines_with(&["the destination is reached again", &port]) == 1,
    )
    .await;
    feeder
        .send("unreachable", COPIES, Plan::RetryAfter { ms: 10, times: 1 })
        .await;
    retries
        .until("the copy at the retry queue", |seen| {
            seen.iter().any(|seen| seen.id == COPIES)
        })
        .await;
    assert_eq!(
        monitor.send_failures(),
        COPIES,
        "no failure after it came back"
    );

    feeder.close().await;
    running.shutdown().await.unwrap();
    retry_queue.shutdown().await.unwrap();
}
