//! A subscription tunes its own batch wait over its broker's: its partial batches wait that
//! long, while another subscription of the same kind keeps the broker's.

use std::{
    convert::Infallible,
    time::{Duration, Instant},
};

use super::{Feeder, prelude::*};
use crate::support::{Calls, Payment, Plan, journal};

#[derive(FromRef)]
struct AppState {
    calls: Calls,
}

#[subscriber(QueueSubscription::<Bound>)]
async fn store(payments: &[Payment], State(calls): State<Calls>) -> HandlerOutcome {
    for payment in payments {
        calls.record("store", payment.id, u32::try_from(payments.len()).ok());
    }
    HandlerOutcome::ack()
}

/// Starts a bound queue `name` whose batch handler is tuned by `tune`; answers the app, the
/// feeder dialing it and the journal of its calls.
async fn batching(
    name: &'static str,
    wait: Option<Duration>,
) -> (
    ruststream::runtime::RunningApp,
    Feeder,
    crate::support::Journal,
) {
    let (calls, journal) = journal();
    let broker =
        ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0")).batch_wait(Duration::from_millis(20));
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("tuning", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(AppState { calls }))
        .with_broker(broker, move |b| {
            let mounted = store.name(name).batch(nonzero!(100)).read_ahead(4);
            match wait {
                Some(wait) => {
                    b.include(mounted.batch_wait(wait));
                }
                None => {
                    b.include(mounted);
                }
            }
        });
    let running = app.start().await.unwrap();
    let feeder = Feeder::dial(&monitor.bound_address().unwrap()).await;
    (running, feeder, journal)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_s_own_batch_wait_holds_its_partial_batch_and_leaves_the_broker_s_to_others()
{
    let (tuned, tuned_feeder, mut tuned_calls) =
        batching("slow-ledger", Some(Duration::from_secs(2))).await;
    let (plain, plain_feeder, mut plain_calls) = batching("ledger", None).await;

    let started = Instant::now();
    for id in 0..3 {
        tuned_feeder.send("slow-ledger", id, Plan::Ack).await;
        plain_feeder.send("ledger", id, Plan::Ack).await;
    }
    plain_calls
        .until("the plain partial batch", |s| s.len() == 3)
        .await;
    let plain_took = started.elapsed();
    tuned_calls
        .until("the tuned partial batch", |s| s.len() == 3)
        .await;
    let tuned_took = started.elapsed();
    println!("partial batch of 3: broker's 20 ms wait {plain_took:?}, own 2 s wait {tuned_took:?}");
    assert!(
        tuned_took >= Duration::from_millis(1_900),
        "the subscription's own 2 s batch wait was not kept: {tuned_took:?}"
    );
    assert!(
        plain_took < Duration::from_millis(1_500),
        "the broker's 20 ms batch wait was not kept: {plain_took:?}"
    );
    for running in [tuned, plain] {
        running.shutdown().await.unwrap();
    }
    tuned_feeder.close().await;
    plain_feeder.close().await;
}
