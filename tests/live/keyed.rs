//! Keyed worker lanes on real sockets: `workers(n, by_key)` reads each delivery's
//! `partition_key`, the `zmq-partition-key` header unless the broker names another, so one
//! key's messages run one after another while other keys' run beside them.

use std::{
    collections::BTreeMap,
    convert::Infallible,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use ruststream::{BytesMut, HeaderMap, OutgoingMessage, Publisher};
use serde::{Deserialize, Serialize};

use super::{Feeder, prelude::*};
use crate::support::eventually;

#[derive(Debug, Serialize, Deserialize)]
struct Job {
    key: String,
    seq: u32,
}

/// What the handler saw: each key's jobs in the order they finished, and how many ran at once.
#[derive(Clone, Default)]
struct Lanes {
    finished: Arc<Mutex<BTreeMap<String, Vec<u32>>>>,
    running: Arc<AtomicUsize>,
    most_at_once: Arc<AtomicUsize>,
}

#[derive(Clone, FromRef)]
struct KeyedState {
    lanes: Lanes,
}

const KEYS: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];
const JOBS_PER_KEY: u32 = 5;

/// An earlier job of a key takes longer than a later one: two jobs of one key run at once would
/// finish in the wrong order.
#[subscriber("keyed", workers(4, by_key))]
async fn run_job(job: &Job, State(lanes): State<Lanes>) -> HandlerOutcome {
    let now = lanes.running.fetch_add(1, Ordering::SeqCst) + 1;
    lanes.most_at_once.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(
        u64::from(JOBS_PER_KEY - job.seq) * 15,
    ))
    .await;
    lanes.running.fetch_sub(1, Ordering::SeqCst);
    lanes
        .finished
        .lock()
        .unwrap()
        .entry(job.key.clone())
        .or_default()
        .push(job.seq);
    HandlerOutcome::ack()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_workers_keep_each_keys_order_and_run_keys_side_by_side() {
    let lanes = Lanes::default();
    let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = broker.monitor();
    let state = KeyedState {
        lanes: lanes.clone(),
    };
    let running = RustStream::new(AppInfo::new("keyed", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(state))
        .with_broker(broker, |b| {
            b.include(run_job);
        })
        .start()
        .await
        .unwrap();
    let feeder = Feeder::dial(&monitor.bound_address().unwrap()).await;
    // Interleaved, seven keys over four lanes: a delivery without a key would rotate over the
    // lanes and put one key's consecutive jobs on different lanes.
    for seq in 0..JOBS_PER_KEY {
        for key in KEYS {
            let mut headers = HeaderMap::new();
            headers.insert(ruststream_zmq::PARTITION_KEY_HEADER, key);
            let body = serde_json::to_vec(&Job {
                key: key.to_owned(),
                seq,
            })
            .unwrap();
            feeder
                .publisher
                .publish(
                    OutgoingMessage::produced("keyed", BytesMut::from(body.as_slice()))
                        .with_headers(headers),
                    None,
                )
                .await
                .unwrap();
        }
    }
    let total = KEYS.len() * JOBS_PER_KEY as usize;
    eventually(Duration::from_secs(20), "every job handled", || {
        lanes
            .finished
            .lock()
            .unwrap()
            .values()
            .map(Vec::len)
            .sum::<usize>()
            == total
    })
    .await;
    let finished = lanes.finished.lock().unwrap().clone();
    let in_order: Vec<u32> = (0..JOBS_PER_KEY).collect();
    for key in KEYS {
        assert_eq!(
            finished[key], in_order,
            "key {key}'s jobs out of order: {finished:?}"
        );
    }
    let most = lanes.most_at_once.load(Ordering::SeqCst);
    assert!(
        most >= 2,
        "the keys ran one at a time (at most {most} at once)"
    );
    feeder.close().await;
    running.shutdown().await.unwrap();
}
