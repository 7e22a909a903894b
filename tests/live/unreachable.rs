//! A destination that cannot be reached fails fast: after the first send runs out its
//! `send_timeout`, every later one fails at once, counted and logged with the first failure's
//! reason, until the destination is reached again.

use std::{
    convert::Infallible,
    time::{Duration, Instant},
};

use ruststream::{Broker, ConnectedBroker};

use super::{Feeder, prelude::*};
use crate::support::{
    AppState, Plan, capture_logs, eventually, free_port, journal, log_lines, work,
};

const COPIES: u64 = 1_000;
const SEND_TIMEOUT: Duration = Duration::from_secs(1);
/// What a copy failing fast may take at most, between one handler call and the next on a
/// loaded machine: far below the `SEND_TIMEOUT` a copy that waited would take.
const AT_ONCE: Duration = Duration::from_millis(400);

/// The per-copy failure the runtime logs; fast failures name the episode's reason.
const LOST: &str = "publishing the retry copy failed";
const FAILS_FAST: &str = "sends fail at once until it is reached again";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_copies_toward_a_retry_queue_that_is_down_fail_in_one_send_timeout_until_it_is_back()
 {
    capture_logs();
    let (feeder, upstream) = Feeder::bind("tcp://127.0.0.1:0").await;
    let retry_port = free_port();
    let port = retry_port.to_string();
    let retry_address = format!("tcp://127.0.0.1:{retry_port}");
    let (calls, mut payments) = journal();
    let broker = ZmqQueue::new(ZmqEndpoint::dial(upstream)).send_timeout(SEND_TIMEOUT);
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("unreachable", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(AppState { calls }))
        .with_broker(broker, |b| {
            // A plain `retry()` publishes a copy only under a cap.
            b.include(work.name("unreachable"))
                .max_attempts(nonzero!(2u32))
                .out_retry(Publish)
                .to(format!("unreachable.retry@{retry_address}"));
        });
    let running = app.start().await.unwrap();

    // Phase 1: the retry queue is down. A plain `retry()` publishes its copy on the handler's
    // own path, so each payment is handled only once the copy before it has failed: without
    // failing fast, every copy would wait its own `SEND_TIMEOUT`.
    for id in 0..COPIES {
        feeder
            .send("unreachable", id, Plan::Retry { times: 1 })
            .await;
    }
    payments
        .until("every payment handled once", |seen| {
            seen.len() as u64 >= COPIES
        })
        .await;
    eventually(SEND_TIMEOUT * 10, "every copy's failure counted", || {
        monitor.send_failures() >= COPIES
    })
    .await;
    let calls: Vec<Instant> = payments.seen.iter().map(|seen| seen.at).collect();
    let first_wait = calls[1] - calls[0];
    let slowest_after = calls[1..]
        .windows(2)
        .map(|pair| pair[1] - pair[0])
        .max()
        .unwrap();
    let total = calls[calls.len() - 1] - calls[0];
    println!(
        "{COPIES} copies toward a retry queue that is down: the first failed after \
         {first_wait:?}, each later one within {slowest_after:?}, all within {total:?} \
         (send_timeout {SEND_TIMEOUT:?})"
    );
    assert!(
        first_wait >= SEND_TIMEOUT - Duration::from_millis(50),
        "the first copy gave up after {first_wait:?}, before its send_timeout"
    );
    assert!(
        slowest_after < AT_ONCE,
        "a copy after the first failure took {slowest_after:?}: it did not fail at once"
    );
    assert!(
        total < SEND_TIMEOUT * 2,
        "{COPIES} copies took {total:?} to fail, not about one send_timeout"
    );
    assert_eq!(monitor.send_failures(), COPIES);
    assert_eq!(monitor.sent(), 0, "nothing could leave");
    assert!(
        payments.seen.iter().all(|seen| seen.retry_count.is_none()),
        "no copy was delivered"
    );

    // Every copy's loss is logged; all but the first fail fast, naming the reason the one
    // warning that opened the episode gave.
    eventually(Duration::from_secs(5), "each lost copy logged", || {
        log_lines(&[LOST, &port]).len() as u64 == COPIES
    })
    .await;
    let (fast, waited): (Vec<String>, Vec<String>) = log_lines(&[LOST, &port])
        .into_iter()
        .partition(|line| line.contains(FAILS_FAST));
    assert_eq!(waited.len(), 1, "only the first copy waits: {waited:#?}");
    assert_eq!(fast.len() as u64, COPIES - 1);
    let announced = log_lines(&["sends to this destination fail at once", &port]);
    assert_eq!(
        announced.len(),
        1,
        "the unreachable destination is announced once, not once per copy: {announced:#?}"
    );
    let reason = fast[0]
        .split_once(" (")
        .and_then(|(_, rest)| rest.split_once("); "))
        .map(|(reason, _)| reason)
        .unwrap_or_else(|| panic!("no reason in {}", fast[0]));
    assert!(
        announced[0].contains(&format!("reason={reason}")),
        "the fast failures name the episode's reason `{reason}`: {}",
        announced[0]
    );
    assert!(fast.iter().all(|line| line.contains(reason)));

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
        || !log_lines(&["the destination is reached again", &port]).is_empty(),
    )
    .await;
    let back = log_lines(&["the destination is reached again", &port]);
    assert_eq!(back.len(), 1, "{back:#?}");
    assert!(
        back[0].contains(&format!("refused={}", COPIES - 1)),
        "the end of the episode counts the copies refused at once: {}",
        back[0]
    );
    feeder
        .send("unreachable", COPIES, Plan::Retry { times: 1 })
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

/// A `dial_publisher` that found no peer by its deadline lets go of the socket: the broker
/// still shuts down at once, where a wait left running held the socket's close for the whole
/// close wait (2 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dial_publisher_that_found_no_peer_lets_go_of_its_socket() {
    let address = format!("tcp://127.0.0.1:{}", free_port());
    let connected = ZmqQueue::new(ZmqEndpoint::dial(address))
        .send_timeout(Duration::from_millis(200))
        .connect()
        .await
        .unwrap();
    let err = connected
        .dial_publisher()
        .await
        .expect_err("no peer listens");
    assert!(matches!(err, ZmqError::Connect { .. }), "{err}");
    let started = Instant::now();
    connected.shutdown().await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "shutdown took {:?}",
        started.elapsed()
    );
}
