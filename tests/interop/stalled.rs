//! A libzmq worker stopped with SIGSTOP: the service's PUSH keeps feeding the other worker while
//! the stopped one's share waits in its queue, and every message reaches one worker once.

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

use ruststream::{Broker, BytesMut, ConnectedBroker, OutgoingMessage, Publisher};
use ruststream_zmq::{ZmqEndpoint, ZmqPublisher, ZmqQueue};
use serde_json::json;

use crate::support::{PyPeer, STEP};

const JOBS: u64 = 200;
const WARM_UP: &str = "jobs.warmup";

async fn publish(publisher: &ZmqPublisher, name: &str, id: u64) {
    let body = BytesMut::from(json!({ "id": id }).to_string().as_bytes());
    publisher
        .publish(OutgoingMessage::produced(name, body), None)
        .await
        .unwrap_or_else(|err| panic!("publishing {name} {id}: {err}"));
}

/// The job ids `worker` reads until nothing more comes within `quiet`; warm-ups are skipped.
async fn jobs_read(worker: &mut PyPeer, quiet: Duration) -> Vec<u64> {
    let mut ids = Vec::new();
    while let Some(received) = worker.recv(quiet).await {
        if received.wire["name"] == "jobs" {
            let payload: serde_json::Value =
                serde_json::from_str(received.wire["payload"].as_str().unwrap()).unwrap();
            ids.push(payload["id"].as_u64().unwrap());
        }
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_stopped_with_sigstop_leaves_its_neighbour_fed_and_gets_each_of_its_jobs_once_when_resumed()
 {
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let address = connected.bind_publisher().await.unwrap();
    let publisher = connected.publisher();
    let mut healthy = PyPeer::connect("PULL", &address, json!({})).await;
    let mut stalled = PyPeer::connect("PULL", &address, json!({})).await;

    // Warm up until each worker has read one message, so both are in the rotation.
    let deadline = Instant::now() + Duration::from_secs(15);
    let (mut healthy_warm, mut stalled_warm) = (false, false);
    let mut n = 0;
    while !(healthy_warm && stalled_warm) {
        assert!(
            Instant::now() < deadline,
            "both workers never joined the rotation"
        );
        publish(&publisher, WARM_UP, n).await;
        n += 1;
        healthy_warm |= healthy.recv(Duration::from_millis(50)).await.is_some();
        stalled_warm |= stalled.recv(Duration::from_millis(50)).await.is_some();
    }

    stalled.pause();
    let started = Instant::now();
    for id in 0..JOBS {
        publish(&publisher, "jobs", id).await;
    }
    let publishing = started.elapsed();
    assert!(
        publishing < Duration::from_secs(5),
        "publishing {JOBS} jobs waited on the stopped worker: {publishing:?}"
    );
    let fed = jobs_read(&mut healthy, Duration::from_millis(500)).await;
    assert!(
        !fed.is_empty(),
        "the healthy worker got nothing while its neighbour was stopped"
    );

    stalled.resume();
    let mut stopped_share = Vec::new();
    let deadline = Instant::now() + STEP * 3;
    while fed.len() + stopped_share.len() < JOBS as usize && Instant::now() < deadline {
        stopped_share.extend(jobs_read(&mut stalled, Duration::from_millis(500)).await);
    }
    let every: Vec<u64> = fed.iter().chain(&stopped_share).copied().collect();
    let distinct: BTreeSet<u64> = every.iter().copied().collect();
    println!(
        "{JOBS} jobs published in {publishing:?} with one worker stopped: the other read {}, \
         the stopped one {} once resumed",
        fed.len(),
        stopped_share.len()
    );
    assert_eq!(distinct.len(), every.len(), "a job reached a worker twice");
    assert_eq!(
        distinct,
        (0..JOBS).collect::<BTreeSet<u64>>(),
        "every job reaches one worker"
    );
    assert!(
        !stopped_share.is_empty(),
        "the stopped worker's share waited for it"
    );
    connected.shutdown().await.unwrap();
}
