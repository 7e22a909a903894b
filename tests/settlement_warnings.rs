//! The framework's runtime logs one WARN `ack / nack failed` (target `ruststream::dispatch`) for
//! every delivery a handler acks or drops, because ZeroMQ settles nothing. These tests count
//! that line on a real service, and pin the crate's layer (`ruststream_zmq::logs`) and the
//! `EnvFilter` the settlement guide gives, each silencing exactly it while the other warnings of
//! that target stay; on each compiled backend (`on_zeromq::...`, `on_libzmq::...`,
//! `on_omq::...`).

use std::{
    sync::{
        Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use ruststream::{Broker, BytesMut, ConnectedBroker, OutgoingMessage, Publisher};
use ruststream_zmq::prelude::*;
use ruststream_zmq::{Backend, QueueKind, ZmqBroker};
use serde::{Deserialize, Serialize};
use tracing_subscriber::{EnvFilter, layer::SubscriberExt};

#[path = "common/logs.rs"]
mod logs;
#[path = "common/poll.rs"]
mod poll;
#[path = "common/ports.rs"]
mod ports;

use logs::Captured;
use ports::free_port;

/// How long a service may take to handle what it was fed, or to log a line.
const WAIT: Duration = Duration::from_secs(15);

#[derive(Debug, Serialize, Deserialize, Outgoing)]
struct Payment {
    id: u64,
    amount: u64,
}

/// A queue on backend `B`.
type Queue<S, B> = ZmqBroker<QueueKind, S, B>;

/// The handler calls so far, over both handlers; the tests run one at a time (`SERIAL`).
static CALLS: AtomicUsize = AtomicUsize::new(0);
static SERIAL: Mutex<()> = Mutex::new(());

#[subscriber]
async fn charge(payment: &Payment) -> HandlerOutcome {
    CALLS.fetch_add(1, Ordering::SeqCst);
    match payment.amount {
        0 => HandlerOutcome::drop(),
        amount if amount > 10_000 => HandlerOutcome::retry(),
        _ => HandlerOutcome::ack(),
    }
}

#[subscriber]
async fn park(_payment: &Payment) -> HandlerOutcome {
    CALLS.fetch_add(1, Ordering::SeqCst);
    HandlerOutcome::ack()
}

/// The README's filter, built the same way (`RUST_LOG` cannot carry it: its directives are
/// split at every comma, and these name two or three fields each).
fn quiet_settlement(base: &str) -> EnvFilter {
    let mut filter = EnvFilter::new(base);
    for directive in [
        "ruststream::dispatch[{subscription,error}]=error",
        "ruststream::dispatch[{subscription,destination,error}]=warn",
        "ruststream::dispatch[{subscription,message_type,error}]=warn",
        "ruststream::dispatch[{subscription,headers_type,error}]=warn",
        "ruststream::dispatch[{subscription,reply,error}]=warn",
    ] {
        filter = filter.add_directive(directive.parse().expect("a valid directive"));
    }
    filter
}

/// Waits until `needle` was logged `times` times; fails with the log at the deadline.
async fn logged_times(captured: &Captured, needle: &str, times: usize) {
    poll::until(
        WAIT,
        format_args!("`{needle}` logged {times} times"),
        || {
            if captured.count(needle) >= times {
                Ok(())
            } else {
                Err(captured.text())
            }
        },
    )
    .await;
}

/// How a test's log is filtered: by an `EnvFilter` alone, or with the crate's layer too.
#[derive(Clone, Copy)]
enum Quiet {
    /// The `EnvFilter` alone.
    Not,
    /// The `EnvFilter`, and `ruststream_zmq::logs::quiet_settlement()` added in one call.
    ByTheCratesLayer,
}

/// Runs `service` on a current-thread runtime (so the thread's subscriber sees every task) with
/// its log under `filter`, and the crate's layer where `quiet` says, the handler calls counted
/// from zero; answers the log and the calls, read before another test may count its own.
fn logged_quietly<F: Future<Output = ()>>(
    filter: EnvFilter,
    quiet: Quiet,
    service: impl FnOnce(Captured) -> F,
) -> (Captured, usize) {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    CALLS.store(0, Ordering::SeqCst);
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .finish();
    let _guard = match quiet {
        Quiet::Not => tracing::subscriber::set_default(subscriber),
        Quiet::ByTheCratesLayer => tracing::subscriber::set_default(
            subscriber.with(ruststream_zmq::logs::quiet_settlement()),
        ),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(service(captured.clone()));
    (captured, CALLS.load(Ordering::SeqCst))
}

/// Waits until the handlers were called `calls` times; fails with the log at the deadline.
async fn handled(calls: usize, captured: &Captured) {
    poll::until(WAIT, format_args!("{calls} handler calls"), || {
        let called = CALLS.load(Ordering::SeqCst);
        if called >= calls {
            Ok(())
        } else {
            Err(format!("{called} calls so far:\n{}", captured.text()))
        }
    })
    .await;
}

/// A PUSH on backend `B` dialing `address`, and the messages it sends there under `payments`.
async fn feed<B: Backend>(
    address: String,
    payments: &[(u64, u64)],
    not_json: bool,
) -> impl ConnectedBroker {
    let peer = Queue::<_, B>::new(ZmqEndpoint::dial(address))
        .connect()
        .await
        .unwrap();
    let publisher = peer.publisher();
    for &(id, amount) in payments {
        publisher
            .message(&Payment { id, amount })
            .to("payments")
            .publish()
            .await
            .unwrap();
    }
    if not_json {
        publisher
            .publish(
                OutgoingMessage::produced("payments", BytesMut::from(&b"not json"[..])),
                None,
            )
            .await
            .unwrap();
    }
    peer
}

/// Runs a payments service on backend `B` under `filter`: feeds it two payments it acks, one it
/// drops, one that exhausts its cap of two attempts into the dead-letter queue (whose handler acks
/// it), and one payload that is not JSON; shuts it down once all of them were handled, and answers
/// the log.
fn run_service<B: Backend>(filter: EnvFilter) -> Captured {
    run_service_quiet::<B>(filter, Quiet::Not)
}

/// [`run_service`], the crate's layer added where `quiet` says.
fn run_service_quiet<B: Backend>(filter: EnvFilter, quiet: Quiet) -> Captured {
    let (captured, calls) = logged_quietly(filter, quiet, async |captured| {
        let dead_port = free_port();
        let payments = Queue::<_, B>::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
        let monitor = payments.monitor();
        let running = RustStream::new(AppInfo::new("payments", "0.1.0"))
            .with_broker(payments, |b| {
                b.include(charge.name("payments"))
                    .max_attempts(nonzero!(2u32))
                    .dead_letter(format!("payments.dead@tcp://127.0.0.1:{dead_port}"));
            })
            .with_broker(
                Queue::<_, B>::new(ZmqEndpoint::bind(format!("tcp://127.0.0.1:{dead_port}"))),
                |b| {
                    b.include(park.name("payments.dead"));
                },
            )
            .start()
            .await
            .unwrap();
        let peer = feed::<B>(
            monitor.bound_address().unwrap(),
            &[(1, 250), (2, 40), (3, 0), (4, 20_000)],
            true,
        )
        .await;
        // Calls: 1, 2, 3, 4 and its copy, then 4 on the dead-letter queue.
        handled(6, &captured).await;
        // The undecodable payload is warned about before it is settled.
        logged_times(&captured, "codec decode failed", 1).await;
        // Shutting down waits for the deliveries being settled, so every line is written now.
        running.shutdown().await.unwrap();
        peer.shutdown().await.unwrap();
    });
    assert_eq!(calls, 6, "{}", captured.text());
    captured
}

/// Runs a payments service on backend `B` under `filter` whose dead-letter queue is down: one
/// payment it acks, one it retries past its cap, whose copy the runtime cannot publish; answers
/// the log.
fn run_service_losing_a_copy<B: Backend>(filter: EnvFilter) -> Captured {
    run_service_losing_a_copy_quiet::<B>(filter, Quiet::Not)
}

/// [`run_service_losing_a_copy`], the crate's layer added where `quiet` says.
fn run_service_losing_a_copy_quiet<B: Backend>(filter: EnvFilter, quiet: Quiet) -> Captured {
    let (captured, calls) = logged_quietly(filter, quiet, async |captured| {
        let payments = Queue::<_, B>::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
            .send_timeout(Duration::from_millis(200));
        let monitor = payments.monitor();
        let running = RustStream::new(AppInfo::new("payments", "0.1.0"))
            .with_broker(payments, |b| {
                // At its cap at once: the retry leaves as a dead letter, to a port nobody
                // listens on, through the same copy path a retry takes.
                b.include(charge.name("payments"))
                    .max_attempts(nonzero!(1u32))
                    .dead_letter(format!("payments.dead@tcp://127.0.0.1:{}", free_port()));
            })
            .start()
            .await
            .unwrap();
        let peer = feed::<B>(
            monitor.bound_address().unwrap(),
            &[(1, 250), (2, 20_000)],
            false,
        )
        .await;
        handled(2, &captured).await;
        poll::until(WAIT, "the copy to fail", || {
            if monitor.send_failures() >= 1 {
                Ok(())
            } else {
                Err(captured.text())
            }
        })
        .await;
        running.shutdown().await.unwrap();
        peer.shutdown().await.unwrap();
    });
    assert_eq!(calls, 2, "{}", captured.text());
    captured
}

/// The crate's layer drops the runtime's warning where the broker settles nothing, and no other
/// event: an ack that failed for another reason, the same words under another target or level.
#[test]
fn the_crates_layer_drops_only_the_warning_that_the_broker_settles_nothing() {
    let (captured, _) = logged_quietly(
        EnvFilter::new("info"),
        Quiet::ByTheCratesLayer,
        async |_| {
            let settles_nothing = ruststream::AckError::Unsupported;
            let timed_out = ruststream::AckError::Timeout;
            tracing::warn!(
                target: "ruststream::dispatch",
                subscription = "hidden",
                error = %settles_nothing,
                "ack / nack failed",
            );
            tracing::warn!(
                target: "ruststream::dispatch",
                subscription = "timed-out",
                error = %timed_out,
                "ack / nack failed",
            );
            tracing::warn!(
                target: "elsewhere",
                subscription = "another-target",
                error = %settles_nothing,
                "ack / nack failed",
            );
            tracing::error!(
                target: "ruststream::dispatch",
                subscription = "another-level",
                error = %settles_nothing,
                "ack / nack failed",
            );
        },
    );
    let text = captured.text();
    assert_eq!(captured.count("\"hidden\""), 0, "{text}");
    for shown in [
        "subscription=\"timed-out\"",
        "subscription=\"another-target\"",
        "subscription=\"another-level\"",
    ] {
        assert_eq!(captured.count(shown), 1, "{shown}: {text}");
    }
}

/// The scenarios on one backend: a module `$module` of tests on the sockets of `$sockets`.
macro_rules! scenarios {
    ($module:ident, $sockets:ty) => {
        mod $module {
            use super::*;

            #[test]
            fn without_a_filter_every_delivery_acked_or_dropped_logs_one_ack_nack_warning() {
                let log = run_service::<$sockets>(EnvFilter::new("info"));
                let text = log.text();
                // Acked: 1, 2, and 4 on the dead-letter queue; dropped: 3 and the payload that is
                // not JSON. The copy and the dead-lettering settle nothing the runtime reports.
                assert_eq!(log.count("ack / nack failed"), 5, "{text}");
                assert!(
                    text.lines()
                        .filter(|l| l.contains("ack / nack failed"))
                        .all(|l| l.contains("WARN") && l.contains("ruststream::dispatch")),
                    "{text}"
                );
                assert_eq!(log.count("retry attempts exhausted"), 1, "{text}");
            }

            #[test]
            fn the_readme_filter_silences_the_ack_nack_warning_and_keeps_the_others_of_its_target()
            {
                let log = run_service::<$sockets>(quiet_settlement("info"));
                let text = log.text();
                assert_eq!(log.count("ack / nack failed"), 0, "{text}");
                assert_eq!(log.count("retry attempts exhausted"), 1, "{text}");
                assert_eq!(log.count("codec decode failed"), 1, "{text}");
            }

            #[test]
            fn the_readme_filter_keeps_the_runtimes_warning_of_a_lost_retry_copy() {
                let log = run_service_losing_a_copy::<$sockets>(quiet_settlement("info"));
                let text = log.text();
                let lost: Vec<&str> = text
                    .lines()
                    .filter(|l| l.contains("publishing the retry copy failed; message lost"))
                    .collect();
                assert_eq!(lost.len(), 1, "{text}");
                assert!(
                    lost[0].contains("WARN") && lost[0].contains("payments.dead@"),
                    "{text}"
                );
                assert_eq!(log.count("ack / nack failed"), 0, "{text}");
            }

            #[test]
            fn the_crates_layer_silences_the_ack_nack_warning_and_keeps_the_others_of_its_target() {
                let log =
                    run_service_quiet::<$sockets>(EnvFilter::new("info"), Quiet::ByTheCratesLayer);
                let text = log.text();
                assert_eq!(log.count("ack / nack failed"), 0, "{text}");
                for kept in ["retry attempts exhausted", "codec decode failed"] {
                    let lines: Vec<&str> = text.lines().filter(|l| l.contains(kept)).collect();
                    assert_eq!(lines.len(), 1, "{kept}: {text}");
                    assert!(
                        lines[0].contains("WARN") && lines[0].contains("ruststream::dispatch"),
                        "{text}"
                    );
                }
            }

            #[test]
            fn the_crates_layer_keeps_the_runtimes_warning_of_a_lost_retry_copy() {
                let log = run_service_losing_a_copy_quiet::<$sockets>(
                    EnvFilter::new("info"),
                    Quiet::ByTheCratesLayer,
                );
                let text = log.text();
                assert_eq!(
                    log.count("publishing the retry copy failed; message lost"),
                    1,
                    "{text}"
                );
                assert_eq!(log.count("ack / nack failed"), 0, "{text}");
            }

            #[test]
            fn without_a_filter_a_lost_retry_copy_warns_beside_the_ack_nack_line() {
                let log = run_service_losing_a_copy::<$sockets>(EnvFilter::new("info"));
                let text = log.text();
                assert_eq!(log.count("message lost"), 1, "{text}");
                assert_eq!(
                    log.count("ack / nack failed"),
                    1,
                    "the acked payment: {text}"
                );
            }
        }
    };
}

#[cfg(feature = "zeromq")]
scenarios!(on_zeromq, ruststream_zmq::zeromq::Zeromq);
#[cfg(feature = "libzmq")]
scenarios!(on_libzmq, ruststream_zmq::libzmq::Libzmq);
#[cfg(feature = "omq")]
scenarios!(on_omq, ruststream_zmq::omq::Omq);
