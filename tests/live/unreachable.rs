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
/// Long enough that a copy which waited it stands apart from a copy that failed at once, even on
/// a loaded machine where formatting a warning in a debug build can stall for a while.
const SEND_TIMEOUT: Duration = Duration::from_secs(2);

/// The per-copy failure the runtime logs; fast failures name the episode's reason.
const LOST: &str = "publishing the retry copy failed";
const FAILS_FAST: &str = "sends fail at once until it is reached again";
/// The warning that opens the episode, once.
const ANNOUNCED: &str = "sends to this destination fail at once";

/// A send to `endpoint` that failed, as the error of a lost copy reads: the prefix (`sending to`,
/// or `connecting to` where the client failed to connect) naming the endpoint, cut off. `None`
/// where the error names another endpoint or no reason at all.
fn reason_toward<'a>(error: &'a str, endpoint: &str) -> Option<&'a str> {
    ["sending to", "connecting to"]
        .iter()
        .find_map(|verb| error.strip_prefix(&format!("{verb} `{endpoint}` failed: ")))
        .filter(|reason| !reason.trim().is_empty())
}

/// What a lost copy's log line says failed: its `error=` field.
fn error_of(line: &str) -> &str {
    line.split_once(" error=")
        .map(|(_, error)| error)
        .unwrap_or_else(|| panic!("no error in {line}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_toward_a_retry_queue_that_is_down_wait_one_send_timeout_then_fail_at_once_until_it_is_back()
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
    println!(
        "{COPIES} copies toward a retry queue that is down: the first failed after \
         {first_wait:?}, each later one within {slowest_after:?}, all within {:?} \
         (send_timeout {SEND_TIMEOUT:?})",
        calls[calls.len() - 1] - calls[0]
    );
    // The next payment is handled once the copy before it failed: the first copy waited its
    // send timeout; one that waited again would hold its successor a whole send timeout, where
    // failing at once leaves only the machine's own pauses (bounded here by half of it).
    assert!(
        first_wait >= SEND_TIMEOUT - Duration::from_millis(50),
        "the first copy gave up after {first_wait:?}, before its send_timeout"
    );
    assert!(
        slowest_after < SEND_TIMEOUT / 2,
        "a copy after the first failure took {slowest_after:?} of a {SEND_TIMEOUT:?} \
         send_timeout: it waited rather than failing at once"
    );
    assert_eq!(monitor.send_failures(), COPIES);
    assert_eq!(monitor.sent(), 0, "nothing could leave");
    assert!(
        payments.seen.iter().all(|seen| seen.retry_count.is_none()),
        "no copy was delivered"
    );

    // Every copy's loss is logged. The first copy's own failure is the episode's reason: it
    // names the retry queue's endpoint (what this test left unreachable) and why nothing took
    // the copy there, and every later copy fails at once naming that same reason.
    eventually(Duration::from_secs(5), "each lost copy logged", || {
        log_lines(&[LOST, &port]).len() as u64 == COPIES
    })
    .await;
    let lost = log_lines(&[LOST, &port]);
    let (fast, waited): (Vec<&String>, Vec<&String>) =
        lost.iter().partition(|line| line.contains(FAILS_FAST));
    assert_eq!(waited.len(), 1, "only the first copy waits: {waited:#?}");
    assert_eq!(
        waited[0], &lost[0],
        "the copy that waited is the first one lost"
    );
    assert_eq!(fast.len() as u64, COPIES - 1);
    let first_error = error_of(waited[0]);
    let first_reason = reason_toward(first_error, &retry_address).unwrap_or_else(|| {
        panic!("the first copy's failure names no reason toward {retry_address}: {first_error}")
    });
    assert!(
        !first_reason.contains(FAILS_FAST),
        "the first copy failed on its own, not at once: {first_error}"
    );
    // The episode keeps the first failure as it was reported: the error whole, or only its
    // reason where the caller's deadline came before the socket's.
    let is_first_failure = |reason: &str| {
        !reason.is_empty()
            && (reason == first_error
                || reason_toward(reason, &retry_address).unwrap_or(reason) == first_reason)
    };
    let opening = format!("sending to `{retry_address}` failed: not reached for ");
    let closing = format!("); {FAILS_FAST}");
    for line in &fast {
        let error = error_of(line);
        let reason = error
            .strip_prefix(&opening)
            .and_then(|rest| rest.strip_suffix(&closing))
            .and_then(|rest| rest.split_once(" ("))
            .map(|(_elapsed, reason)| reason)
            .unwrap_or_else(|| panic!("not a fast failure toward {retry_address}: {error}"));
        assert!(
            is_first_failure(reason),
            "a fast failure names `{reason}`, not the first copy's failure `{first_error}`"
        );
    }
    let announced = log_lines(&[ANNOUNCED, &port]);
    assert_eq!(
        announced.len(),
        1,
        "the unreachable destination is announced once, not once per copy: {announced:#?}"
    );
    assert!(announced[0].contains(" WARN "), "{}", announced[0]);
    let announced_reason = announced[0]
        .split_once(" reason=")
        .map(|(_, reason)| reason)
        .unwrap_or_else(|| panic!("no reason in {}", announced[0]));
    assert!(
        is_first_failure(announced_reason),
        "the episode opened with `{announced_reason}`, not the first copy's failure \
         `{first_error}`"
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
    // `guide::backpressure`: one warning marks the start of the episode, one info line its end,
    // and the retry queue's writer logs nothing else of it.
    let episode = log_lines(&["ruststream_zmq::transport::writer:", &port]);
    let levels: Vec<&str> = episode
        .iter()
        .filter_map(|line| line.split_whitespace().nth(1))
        .collect();
    assert_eq!(
        levels,
        ["WARN", "INFO"],
        "one warning opens the episode, one info line ends it: {episode:#?}"
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
