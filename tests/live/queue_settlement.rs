//! The README's settlement table on real sockets: what each handler outcome becomes on a
//! `ZmqQueue`, a test for each row.

use std::{convert::Infallible, time::Duration};

use super::{BACKEND, Feeder, prelude::*};
use crate::support::{
    AppState, Attempt, Calls, Payment, Plan, capture_logs, free_port, journal, log_lines, logged,
    poll::until, sent_reaches, work,
};

/// `work` as a dialing queue subscription, which must name where its copies go.
#[subscriber(QueueSubscription::<Dialing>)]
async fn dialing_work(
    payment: &Payment,
    Headers(attempt): Headers<Attempt>,
    State(calls): State<Calls>,
) -> HandlerOutcome {
    calls.settle("work", payment, attempt.retry_count)
}

#[subscriber]
async fn again(
    payment: &Payment,
    Headers(attempt): Headers<Attempt>,
    State(calls): State<Calls>,
) -> HandlerOutcome {
    calls.settle("again", payment, attempt.retry_count)
}

#[subscriber]
async fn park(
    payment: &Payment,
    Headers(attempt): Headers<Attempt>,
    State(calls): State<Calls>,
) -> HandlerOutcome {
    calls.record("park", payment.id, attempt.retry_count);
    HandlerOutcome::ack()
}

/// A service whose state carries `calls`; `$mount` fills its one broker scope.
macro_rules! service {
    ($calls:expr, $broker:expr, |$b:ident| $mount:block) => {{
        let calls = $calls;
        RustStream::new(AppInfo::new("payments", "0.1.0"))
            .on_startup(async move |()| Ok::<_, Infallible>(AppState { calls }))
            .with_broker($broker, |$b| $mount)
    }};
}

/// Starts a bound queue with `work` as `name` under `declare`, and a feeder dialing it.
macro_rules! start_bound {
    ($name:expr, |$g:ident| $declare:expr) => {{
        let (calls, journal) = journal();
        let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
        let monitor = broker.monitor();
        let app = service!(calls, broker, |b| {
            let $g = b.include(work.name($name));
            let _ = $declare;
        });
        let running = app.start().await.expect("the service starts");
        let address = monitor
            .bound_address()
            .expect("the subscription is bound once started");
        let feeder = Feeder::dial(&address).await;
        (running, monitor, feeder, journal)
    }};
}

/// Waits until the runtime has warned `count` times that a settlement of the subscription `name`
/// answered `AckError::Unsupported`, and fails if it warned more often.
async fn answered_unsupported(name: &str, count: usize) {
    let subscription = format!("subscription={name} ");
    let parts = [
        "ack / nack failed",
        subscription.as_str(),
        "acknowledgement is not supported by this broker",
    ];
    until(
        Duration::from_secs(15),
        format_args!("{name}: {count} settlements answered Unsupported"),
        || match log_lines(&parts) {
            answers if answers.len() >= count => Ok(()),
            answers => Err(format!("{answers:#?}")),
        },
    )
    .await;
    let answers = log_lines(&parts);
    assert_eq!(answers.len(), count, "{name}: {answers:#?}");
}

/// The service's publisher sent nothing: no copy of any delivery left it.
fn no_copies(monitor: &ZmqMonitor) {
    assert_eq!(monitor.sent(), 0, "a copy was published");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ack_is_answered_unsupported_and_the_message_is_done() {
    capture_logs();
    // The name is this backend's: the same test on the other one logs beside it.
    let name = BACKEND.own("ack-payments");
    let (running, monitor, feeder, mut journal) = start_bound!(name.clone(), |g| g);
    feeder.send(&name, 1, Plan::Ack).await;
    feeder.send(&name, 2, Plan::Ack).await;
    journal
        .until("both payments", |s| s.iter().any(|s| s.id == 2))
        .await;
    assert_eq!(journal.of("work", 1).len(), 1);
    assert_eq!(
        journal.of("work", 1)[0].retry_count,
        None,
        "a first delivery carries no retry count"
    );
    no_copies(&monitor);
    // Both acks answered Unsupported, and the runtime said so for each, naming the subscription.
    answered_unsupported(&name, 2).await;
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_is_answered_unsupported_and_the_message_is_gone() {
    capture_logs();
    // The name is this backend's: the same test on the other one logs beside it.
    let name = BACKEND.own("drop-payments");
    let (running, monitor, feeder, mut journal) = start_bound!(name.clone(), |g| g);
    feeder.send(&name, 1, Plan::Drop).await;
    feeder.send(&name, 2, Plan::Ack).await;
    journal
        .until("the sentinel", |s| s.iter().any(|s| s.id == 2))
        .await;
    assert_eq!(journal.of("work", 1).len(), 1);
    no_copies(&monitor);
    // The drop's nack(false) and the sentinel's ack: two settlements, each answered Unsupported.
    answered_unsupported(&name, 2).await;
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_retry_is_not_delivered_again() {
    let (running, monitor, feeder, mut journal) = start_bound!("retry-payments", |g| g);
    feeder
        .send("retry-payments", 1, Plan::Retry { times: 5 })
        .await;
    feeder.send("retry-payments", 2, Plan::Ack).await;
    journal
        .until("the sentinel", |s| s.iter().any(|s| s.id == 2))
        .await;
    assert_eq!(
        journal.of("work", 1).len(),
        1,
        "the handler was called again"
    );
    no_copies(&monitor);
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_under_max_attempts_is_a_copy_to_the_own_listener() {
    let (running, monitor, feeder, mut journal) =
        start_bound!("capped-payments", |g| g.max_attempts(nonzero!(5u32)));
    feeder
        .send("capped-payments", 1, Plan::Retry { times: 2 })
        .await;
    let seen = journal.until("two copies", |s| s.len() == 3).await;
    let counts: Vec<_> = seen.iter().map(|s| s.retry_count).collect();
    assert_eq!(
        counts,
        [None, Some(1), Some(2)],
        "each copy carries one more retry"
    );
    sent_reaches(&monitor, 2).await;
    running.shutdown().await.unwrap();
    assert_eq!(monitor.sent(), 2, "two copies, and no third");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_or_retry_after_under_a_dead_letter_without_a_cap_goes_to_the_dead_letter_at_once()
{
    let dead_port = free_port();
    let (calls, mut journal) = journal();
    let service = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = service.monitor();
    let dead_letters = ZmqQueue::new(ZmqEndpoint::bind(format!("tcp://127.0.0.1:{dead_port}")));
    // With a dead letter and no cap, every retry leaves for the dead-letter destination at once:
    // no copy comes back to this subscription, and a delay asked for does not apply.
    let app = service!(calls, service, |b| {
        b.include(work.name("dl-only"))
            .dead_letter(format!("dl-only.dead@tcp://127.0.0.1:{dead_port}"));
    })
    .with_broker(dead_letters, |b| {
        b.include(park.name("dl-only.dead"));
    });
    let running = app.start().await.unwrap();
    let feeder = Feeder::dial(&monitor.bound_address().unwrap()).await;
    feeder.send("dl-only", 1, Plan::Retry { times: 1 }).await;
    let delay = Duration::from_secs(10);
    feeder
        .send(
            "dl-only",
            2,
            Plan::RetryAfter {
                ms: 10_000,
                times: 1,
            },
        )
        .await;
    journal
        .until("both at the dead-letter queue", |s| {
            s.iter().filter(|s| s.handler == "park").count() == 2
        })
        .await;
    for id in [1, 2] {
        assert_eq!(journal.of("work", id).len(), 1, "payment {id} came back");
        assert_eq!(journal.of("park", id)[0].retry_count, Some(1));
    }
    let waited = journal.of("park", 2)[0].at - journal.of("work", 2)[0].at;
    assert!(
        waited < delay,
        "the dead letter of a retry_after waited {waited:?}, the {delay:?} delay"
    );
    sent_reaches(&monitor, 2).await;
    running.shutdown().await.unwrap();
    assert_eq!(monitor.sent(), 2, "one dead letter each, and nothing else");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_is_a_copy_that_arrives_after_the_delay_and_not_before() {
    let (running, _monitor, feeder, mut journal) = start_bound!("delayed-payments", |g| g);
    let delay = Duration::from_millis(400);
    feeder
        .send(
            "delayed-payments",
            1,
            Plan::RetryAfter { ms: 400, times: 1 },
        )
        .await;
    let seen = journal.until("the copy", |s| s.len() == 2).await;
    let waited = seen[1].at - seen[0].at;
    assert!(
        waited >= delay,
        "the copy came after {waited:?}, before the {delay:?} delay"
    );
    assert_eq!(seen[1].retry_count, Some(1));
    println!("retry_after(400ms): the copy arrived {waited:?} after the first delivery");
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_the_delivery_goes_to_the_dead_letter_queue() {
    let dead_port = free_port();
    let (calls, mut journal) = journal();
    let service = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = service.monitor();
    let dead_letters = ZmqQueue::new(ZmqEndpoint::bind(format!("tcp://127.0.0.1:{dead_port}")));
    let app = service!(calls, service, |b| {
        b.include(work.name("cap-payments"))
            .max_attempts(nonzero!(3u32))
            .dead_letter(format!("cap-payments.dead@tcp://127.0.0.1:{dead_port}"));
    })
    .with_broker(dead_letters, |b| {
        b.include(park.name("cap-payments.dead"));
    });
    let running = app.start().await.unwrap();
    let feeder = Feeder::dial(&monitor.bound_address().unwrap()).await;
    feeder
        .send("cap-payments", 7, Plan::Retry { times: 10 })
        .await;
    journal
        .until("the dead letter", |s| s.iter().any(|s| s.handler == "park"))
        .await;
    let attempts: Vec<_> = journal
        .of("work", 7)
        .iter()
        .map(|s| s.retry_count)
        .collect();
    assert_eq!(
        attempts,
        [None, Some(1), Some(2)],
        "three attempts, then the cap"
    );
    assert_eq!(journal.of("park", 7)[0].retry_count, Some(3));
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_without_a_dead_letter_the_delivery_is_dropped_with_a_warning() {
    capture_logs();
    // The name is this backend's: the same test on the other one logs beside it.
    let name = BACKEND.own("nodl-payments");
    let (running, monitor, feeder, mut journal) =
        start_bound!(name.clone(), |g| g.max_attempts(nonzero!(2u32)));
    feeder.send(&name, 1, Plan::Retry { times: 10 }).await;
    logged(&[
        &name,
        "retry attempts exhausted and no dead-letter destination is declared",
    ])
    .await;
    feeder.send(&name, 2, Plan::Ack).await;
    journal
        .until("the sentinel", |s| s.iter().any(|s| s.id == 2))
        .await;
    assert_eq!(journal.of("work", 1).len(), 2);
    sent_reaches(&monitor, 1).await;
    running.shutdown().await.unwrap();
    assert_eq!(monitor.sent(), 1, "one copy, then nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_into_the_own_endpoint_is_refused_and_nothing_loops() {
    capture_logs();
    // The name is this backend's: the same test on the other one logs beside it.
    let name = BACKEND.own("loop-payments");
    let (running, monitor, feeder, mut journal) = start_bound!(name.clone(), |g| g
        .max_attempts(nonzero!(2u32))
        .dead_letter(format!("{name}.dead")));
    feeder.send(&name, 1, Plan::Retry { times: 10 }).await;
    let line = logged(&[&name, "publishing the retry copy failed"]).await;
    assert!(
        line.contains(&format!("is the listener of subscription `{name}`")),
        "{line}"
    );
    feeder.send(&name, 2, Plan::Ack).await;
    journal
        .until("the sentinel", |s| s.iter().any(|s| s.id == 2))
        .await;
    assert_eq!(
        journal.of("work", 1).len(),
        2,
        "the refused dead letter came back"
    );
    sent_reaches(&monitor, 1).await;
    running.shutdown().await.unwrap();
    assert_eq!(monitor.sent(), 1, "only the one copy left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_queue_copies_go_where_out_retry_names() {
    let retry_port = free_port();
    // The peer that only sends: a PUSH bound by a queue with no subscription.
    let (upstream, upstream_address) = Feeder::bind("tcp://127.0.0.1:0").await;

    let (calls, mut journal) = journal();
    let app = service!(
        calls,
        ZmqQueue::new(ZmqEndpoint::dial(upstream_address)),
        |b| {
            b.include(
                dialing_work
                    .name("dial-payments")
                    .out_retry(format!("dial-payments.retry@tcp://127.0.0.1:{retry_port}")),
            )
            .max_attempts(nonzero!(3u32));
        }
    )
    .with_broker(
        ZmqQueue::new(ZmqEndpoint::bind(format!("tcp://127.0.0.1:{retry_port}"))),
        |b| {
            b.include(again.name("dial-payments.retry"))
                .max_attempts(nonzero!(3u32));
        },
    );
    let running = app.start().await.unwrap();
    upstream
        .send("dial-payments", 3, Plan::Retry { times: 1 })
        .await;
    journal
        .until("the copy at the named place", |s| {
            s.iter().any(|s| s.handler == "again")
        })
        .await;
    assert_eq!(journal.of("work", 3)[0].retry_count, None);
    assert_eq!(journal.of("again", 3)[0].retry_count, Some(1));
    running.shutdown().await.unwrap();
    upstream.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_queue_takes_the_frameworks_out_retry_to_form() {
    let retry_port = free_port();
    // The peer that only sends: a PUSH bound by a queue with no subscription.
    let (upstream, upstream_address) = Feeder::bind("tcp://127.0.0.1:0").await;

    let (calls, mut journal) = journal();
    let app = service!(
        calls,
        ZmqQueue::new(ZmqEndpoint::dial(upstream_address)),
        |b| {
            b.include(work.name("fw-payments"))
                .max_attempts(nonzero!(3u32))
                .out_retry(Publish)
                .to(format!("fw-payments.retry@tcp://127.0.0.1:{retry_port}"));
        }
    )
    .with_broker(
        ZmqQueue::new(ZmqEndpoint::bind(format!("tcp://127.0.0.1:{retry_port}"))),
        |b| {
            b.include(again.name("fw-payments.retry"));
        },
    );
    let running = app.start().await.unwrap();
    upstream
        .send("fw-payments", 4, Plan::Retry { times: 1 })
        .await;
    journal
        .until("the copy at the named place", |s| {
            s.iter().any(|s| s.handler == "again")
        })
        .await;
    assert_eq!(journal.of("again", 4)[0].retry_count, Some(1));
    running.shutdown().await.unwrap();
    upstream.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_registration_that_names_no_destination_is_refused_at_startup() {
    let (calls, _journal) = journal();
    let app = service!(
        calls,
        ZmqQueue::new(ZmqEndpoint::dial("tcp://127.0.0.1:1")),
        |b| {
            b.include(work.name("nowhere-payments"));
        }
    );
    let err = app
        .start()
        .await
        .expect_err("a dialing registration with no destination starts");
    let text = err.to_string();
    assert!(text.contains("nowhere-payments"), "{text}");
    assert!(text.contains("NamedCopies"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_queue_whose_dead_letter_bears_its_own_name_is_refused_at_startup() {
    // Published under the subscription's own name, a dead letter would be one more retry copy
    // to its listener: the publisher could not tell, so startup refuses the registration.
    let (calls, _journal) = journal();
    let app = service!(
        calls,
        ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0")),
        |b| {
            b.include(work.name("self-payments"))
                .max_attempts(nonzero!(2u32))
                .dead_letter("self-payments");
        }
    );
    let err = app
        .start()
        .await
        .expect_err("a dead letter into the own listener started")
        .to_string();
    assert!(
        err.contains("self-payments") && err.contains("another endpoint"),
        "{err}"
    );
}
