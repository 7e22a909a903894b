//! A destination that cannot be reached fails fast: after the first send runs out its
//! `send_timeout`, every later one fails at once, counted and logged with the first failure's
//! reason, until the destination is reached again.

use std::{
    convert::Infallible,
    time::{Duration, Instant},
};

use ruststream::{Broker, BytesMut, ConnectedBroker, OutgoingMessage, Publisher};

use super::{BACKEND, Feeder, prelude::*};
use crate::backend::Backend;
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

/// Why nothing took the copy sent toward `endpoint`, where nobody listens, by its deadline: the
/// one failure this test sets up, in the words it may come in. The socket says it in its
/// backend's (libzmq: no peer connected; `zeromq`: its connect to the endpoint failed); or the
/// caller's deadline came first, and says nothing left by then. Either may be kept whole
/// (`sending to `endpoint` failed: ...`) or as the reason alone.
fn no_peer_took_it(reason: &str, endpoint: &str) -> bool {
    let reason = reason
        .strip_prefix(&format!("sending to `{endpoint}` failed: "))
        .unwrap_or(reason);
    let connect_failed = reason
        .strip_prefix(&format!("connecting to `{endpoint}` failed: "))
        .is_some_and(|why| !why.trim().is_empty());
    reason == CALLERS_DEADLINE
        || match BACKEND {
            Backend::Libzmq | Backend::Omq => reason == "no peer is connected",
            Backend::Zeromq => connect_failed,
        }
}

/// The reason a send fails with when its caller's deadline came before the socket's answer.
const CALLERS_DEADLINE: &str =
    "it did not leave by its deadline: no peer took it, or the peer is not reading";

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
    let retry_address = format!("tcp://127.0.0.1:{retry_port}");
    // The lines of this test's retry queue, by its whole endpoint: a bare port number may be part
    // of another test's port or of a timestamp.
    let copy_to = format!("@{retry_address} ");
    let writer_of = format!("endpoint={retry_address} ");
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

    // Every copy's loss is logged. The first copy failed because no peer at the retry queue's
    // endpoint (which this test left unreachable) took it; the one warning opens the episode with
    // that reason, and every later copy fails at once naming the same.
    eventually(Duration::from_secs(5), "each lost copy logged", || {
        log_lines(&[LOST, &copy_to]).len() as u64 == COPIES
    })
    .await;
    let lost = log_lines(&[LOST, &copy_to]);
    let (fast, waited): (Vec<&String>, Vec<&String>) =
        lost.iter().partition(|line| line.contains(FAILS_FAST));
    assert_eq!(waited.len(), 1, "only the first copy waits: {waited:#?}");
    assert_eq!(
        waited[0], &lost[0],
        "the copy that waited is the first one lost"
    );
    assert_eq!(fast.len() as u64, COPIES - 1);
    let first_error = error_of(waited[0]);
    assert!(
        no_peer_took_it(first_error, &retry_address),
        "the first copy's failure is not that no peer at {retry_address} took it: {first_error}"
    );
    let announced = log_lines(&[ANNOUNCED, &writer_of]);
    assert_eq!(
        announced.len(),
        1,
        "the unreachable destination is announced once, not once per copy: {announced:#?}"
    );
    assert!(announced[0].contains(" WARN "), "{}", announced[0]);
    let reason = announced[0]
        .split_once(" reason=")
        .map(|(_, reason)| reason)
        .unwrap_or_else(|| panic!("no reason in {}", announced[0]));
    // One send's failure may be reported twice, by the socket and by its caller's deadline: the
    // episode keeps the first report. The caller is told the socket's only where its deadline
    // did not come first, and then that is the episode's reason.
    assert!(
        no_peer_took_it(reason, &retry_address),
        "the episode opened with `{reason}`, not that no peer at {retry_address} took the first \
         copy"
    );
    if !first_error.ends_with(CALLERS_DEADLINE) {
        assert_eq!(
            reason, first_error,
            "the episode's reason is the first copy's failure"
        );
    }
    let opening = format!("sending to `{retry_address}` failed: not reached for ");
    let closing = format!("); {FAILS_FAST}");
    for line in &fast {
        let error = error_of(line);
        let named = error
            .strip_prefix(&opening)
            .and_then(|rest| rest.strip_suffix(&closing))
            .and_then(|rest| rest.split_once(" ("))
            .map(|(_elapsed, named)| named)
            .unwrap_or_else(|| panic!("not a fast failure toward {retry_address}: {error}"));
        assert_eq!(
            named, reason,
            "a fast failure names another reason than the episode's"
        );
    }

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
        || !log_lines(&["the destination is reached again", &writer_of]).is_empty(),
    )
    .await;
    let back = log_lines(&["the destination is reached again", &writer_of]);
    assert_eq!(back.len(), 1, "{back:#?}");
    assert!(
        back[0].contains(&format!("refused={}", COPIES - 1)),
        "the end of the episode counts the copies refused at once: {}",
        back[0]
    );
    // `guide::backpressure`: one warning marks the start of the episode, one info line its end,
    // and the retry queue's writer logs nothing else of it.
    let episode = log_lines(&["ruststream_zmq::transport::writer:", &writer_of]);
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

/// A caller can tell why a send failed by its kind: toward an address nobody listens at, the
/// first publish waits out its deadline and fails as no peer (or late, where the socket cannot
/// tell which), never as the client's own error; the next fails at once as unreached, naming
/// why nothing took the first. (Which of the socket's and the caller's words it keeps is a race:
/// the episode keeps whichever came first.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_failure_says_its_kind_no_peer_first_then_unreached_at_once() {
    let address = format!("tcp://127.0.0.1:{}", free_port());
    let connected = ZmqQueue::new(ZmqEndpoint::dial(address.clone()))
        .send_timeout(SEND_TIMEOUT)
        .connect()
        .await
        .unwrap();
    let publisher = connected.publisher();
    let publish = || {
        publisher.publish(
            OutgoingMessage::produced("jobs", BytesMut::from(&b"{}"[..])),
            None,
        )
    };
    let first = publish().await.expect_err("nobody listens");
    // On `zeromq` the socket's own connect may fail first; that is not a send's failure.
    match &first {
        ZmqError::Send {
            source: SendFailure::NoPeer(reason) | SendFailure::Late(reason),
            ..
        } => assert!(no_peer_took_it(reason, &address), "{reason}"),
        ZmqError::Connect { .. } if BACKEND == Backend::Zeromq => {
            assert!(no_peer_took_it(&first.to_string(), &address), "{first}");
        }
        other => panic!("the first failure is neither no peer nor late: {other:?}"),
    }
    let started = Instant::now();
    let next = publish().await.expect_err("nobody listens");
    assert!(
        started.elapsed() < SEND_TIMEOUT / 2,
        "the next send waited {:?}, not failing at once",
        started.elapsed()
    );
    match &next {
        ZmqError::Send {
            endpoint,
            source: SendFailure::Unreached(reason),
        } => {
            assert_eq!(endpoint, &address);
            let why = reason
                .strip_prefix("not reached for ")
                .and_then(|rest| rest.split_once(" ("))
                .and_then(|(_, rest)| {
                    rest.strip_suffix("); sends fail at once until it is reached again")
                })
                .unwrap_or_else(|| panic!("not a fast failure's words: {reason:?}"));
            assert!(
                no_peer_took_it(why, &address),
                "the fast failure names no reason nothing took the first: {reason:?}"
            );
        }
        other => panic!("the next failure is not unreached: {other:?}"),
    }
    connected.shutdown().await.unwrap();
}
