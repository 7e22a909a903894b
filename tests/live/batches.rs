//! Batches (`&[T]` handlers) on the queue and the fan-out, assembled from single deliveries with
//! the broker's partial-batch wait.

use std::{convert::Infallible, time::Duration};

use ruststream::{Broker, ConnectedBroker};

use super::{Feeder, prelude::*};
use crate::support::{Calls, Payment, Plan, journal, poll::until_async};

#[derive(FromRef)]
struct AppState {
    calls: Calls,
}

/// Records each batch as one call whose `retry_count` slot carries the batch's size.
#[subscriber]
async fn store(payments: &[Payment], State(calls): State<Calls>) -> HandlerOutcome {
    for payment in payments {
        calls.record("store", payment.id, u32::try_from(payments.len()).ok());
    }
    HandlerOutcome::ack()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_hands_a_batch_handler_batches_no_larger_than_the_mount_names() {
    let (calls, mut journal) = journal();
    let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .batch_wait(Duration::from_millis(200));
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("batches", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(AppState { calls }))
        .with_broker(broker, |b| {
            b.include(store.name("ledger").batch(nonzero!(4)));
        });
    let running = app.start().await.unwrap();
    let feeder = Feeder::dial(&monitor.bound_address().unwrap()).await;
    for id in 0..10 {
        feeder.send("ledger", id, Plan::Ack).await;
    }
    let seen = journal.until("ten payments", |s| s.len() == 10).await;
    assert!(
        seen.iter()
            .all(|s| s.retry_count.is_some_and(|size| (1..=4).contains(&size))),
        "{seen:?}"
    );
    assert!(
        seen.iter().any(|s| s.retry_count > Some(1)),
        "nothing was batched: {seen:?}"
    );
    running.shutdown().await.unwrap();
    feeder.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fanout_hands_a_batch_handler_its_messages_in_batches() {
    let (calls, mut journal) = journal();
    let hub = ZmqFanout::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let hub_address = hub.bind_publisher().await.unwrap();
    let publisher = hub.publisher();
    let app = RustStream::new(AppInfo::new("batches", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(AppState { calls }))
        .with_broker(
            ZmqFanout::new(ZmqEndpoint::dial(hub_address)).batch_wait(Duration::from_millis(200)),
            |b| {
                b.include(store.name("ticks").batch(nonzero!(8)))
                    .out_retry(Publish)
                    .to("ticks.retry@tcp://127.0.0.1:1");
            },
        );
    let running = app.start().await.unwrap();
    // The slow joiner: resend a first tick until one arrives, then the rest.
    let first = Payment {
        id: 0,
        plan: Plan::Ack,
    };
    until_async(Duration::from_secs(15), "a first tick", async || {
        publisher
            .message(&first)
            .to("ticks")
            .publish()
            .await
            .unwrap();
        tokio::time::timeout(
            Duration::from_millis(300),
            journal.until("a first tick", |s| !s.is_empty()),
        )
        .await
        .is_ok()
    })
    .await;
    journal.seen.clear();
    for id in 1..=16 {
        publisher
            .message(&Payment {
                id,
                plan: Plan::Ack,
            })
            .to("ticks")
            .publish()
            .await
            .unwrap();
    }
    let seen = journal
        .until("sixteen ticks", |s| {
            s.iter().filter(|s| s.id >= 1).count() == 16
        })
        .await;
    assert!(
        seen.iter()
            .all(|s| s.retry_count.is_some_and(|size| (1..=8).contains(&size))),
        "{seen:?}"
    );
    // Sixteen ticks sent back to back, with 200 ms to fill a batch: batches of one would be a
    // handler called per message.
    assert!(
        seen.iter()
            .filter(|s| s.id >= 1)
            .any(|s| s.retry_count > Some(1)),
        "nothing was batched: {seen:?}"
    );
    running.shutdown().await.unwrap();
    hub.shutdown().await.unwrap();
}
