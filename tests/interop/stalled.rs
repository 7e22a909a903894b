//! A libzmq worker stopped with SIGSTOP: the service's PUSH keeps feeding the other worker while
//! the stopped one's share waits in its queue, and every message reaches one worker once. Past
//! that queue, on libzmq (`peer_queue`), the stopped worker is passed over and the other gets the
//! rest: `stalled_past_the_peer_queue`.

use std::{collections::BTreeSet, time::Duration};

use ruststream::{Broker, BytesMut, ConnectedBroker, OutgoingMessage, Publisher};
use ruststream_zmq::{ZmqEndpoint, ZmqPublisher};
use serde_json::json;
use tokio::time::Instant;

use super::ZmqQueue;
use crate::support::{PyPeer, until_async};

const JOBS: u64 = 200;
const WARM_UP: &str = "jobs.warmup";

/// How long reading a worker's share may take: each large job crosses the peer's pipe as JSON,
/// which a loaded machine takes its time over.
const READING: Duration = Duration::from_secs(60);

/// How long a read may stay quiet once every job is accounted for, before nothing more counts
/// as nothing more: what arrives then is a job read twice.
const QUIET: Duration = Duration::from_millis(300);

pub(super) async fn publish(publisher: &ZmqPublisher, name: &str, id: u64, padding: usize) {
    let body = json!({ "id": id, "padding": "x".repeat(padding) }).to_string();
    publisher
        .publish(
            OutgoingMessage::produced(name, BytesMut::from(body.as_bytes())),
            None,
        )
        .await
        .unwrap_or_else(|err| panic!("publishing {name} {id}: {err}"));
}

/// One job id `worker` reads within `within`, warm-ups skipped; `None` once `within` passes.
async fn next_job(worker: &mut PyPeer, within: Duration) -> Option<u64> {
    let until = Instant::now() + within;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let received = worker.recv(left).await?;
        if received.wire["name"] == "jobs" {
            let payload: serde_json::Value =
                serde_json::from_str(received.wire["payload"].as_str().unwrap()).unwrap();
            return Some(payload["id"].as_u64().unwrap());
        }
    }
}

/// Reads `worker` until `done` holds of what it read, failing the test naming `what` once a
/// deadline passes.
pub(super) async fn read_until(
    worker: &mut PyPeer,
    read: &mut Vec<u64>,
    what: &str,
    done: impl Fn(&[u64]) -> bool,
) {
    until_async(READING, what, async || {
        if !done(read) {
            read.extend(next_job(worker, Duration::from_millis(100)).await);
        }
        if done(read) {
            Ok(())
        } else {
            Err(format!("read {} jobs", read.len()))
        }
    })
    .await;
}

/// A queue bound on loopback, its publisher, and two pyzmq PULL workers both in its rotation:
/// the healthy one, and the one (dialing with `stalled_options`) the test stops.
pub(super) async fn two_workers(
    queue: ZmqQueue,
    stalled_options: serde_json::Value,
) -> (
    ruststream_zmq::ConnectedZmqQueue<ruststream_zmq::Bound>,
    ZmqPublisher,
    PyPeer,
    PyPeer,
) {
    let connected = queue.connect().await.unwrap();
    let address = connected.bind_publisher().await.unwrap();
    let publisher = connected.publisher();
    let mut healthy = PyPeer::connect("PULL", &address, json!({})).await;
    let mut stalled = PyPeer::connect("PULL", &address, stalled_options).await;

    // Warm up until each worker has read one message, so both are in the rotation.
    let (mut healthy_warm, mut stalled_warm) = (false, false);
    let mut n = 0;
    until_async(
        Duration::from_secs(15),
        "both workers in the rotation",
        async || {
            publish(&publisher, WARM_UP, n, 0).await;
            n += 1;
            healthy_warm |= healthy.recv(Duration::from_millis(50)).await.is_some();
            stalled_warm |= stalled.recv(Duration::from_millis(50)).await.is_some();
            if healthy_warm && stalled_warm {
                Ok(())
            } else {
                Err(format!(
                    "{n} warm-ups sent; one read by the healthy worker: {healthy_warm}, by the \
                     one to be stopped: {stalled_warm}"
                ))
            }
        },
    )
    .await;
    // The warm-ups still queued, so that what follows is the jobs alone.
    while healthy.recv(Duration::from_millis(50)).await.is_some() {}
    while stalled.recv(Duration::from_millis(50)).await.is_some() {}
    (connected, publisher, healthy, stalled)
}

/// After `resume`, reads both workers until every job of `0..jobs` is accounted for, then
/// checks that each reached one worker once; answers the stopped worker's share.
pub(super) async fn the_rest_once(
    jobs: u64,
    healthy: &mut PyPeer,
    fed: &mut Vec<u64>,
    stalled: &mut PyPeer,
) -> Vec<u64> {
    let mut stopped_share = Vec::new();
    until_async(
        READING,
        "every job at one worker or the other",
        async || {
            // Each worker read until it has nothing at hand, so an empty one costs one short
            // wait.
            while let Some(id) = next_job(stalled, Duration::from_millis(50)).await {
                stopped_share.push(id);
            }
            while let Some(id) = next_job(healthy, Duration::from_millis(50)).await {
                fed.push(id);
            }
            if fed.len() + stopped_share.len() >= jobs as usize {
                Ok(())
            } else {
                Err(format!(
                    "{} at the healthy one, {} at the resumed one, of {jobs}",
                    fed.len(),
                    stopped_share.len()
                ))
            }
        },
    )
    .await;
    let every: Vec<u64> = fed.iter().chain(&stopped_share).copied().collect();
    let distinct: BTreeSet<u64> = every.iter().copied().collect();
    assert_eq!(distinct.len(), every.len(), "a job reached a worker twice");
    assert_eq!(
        distinct,
        (0..jobs).collect::<BTreeSet<u64>>(),
        "every job reaches one worker"
    );
    for (worker, which) in [(healthy, "healthy"), (stalled, "resumed")] {
        let late = next_job(worker, QUIET).await;
        assert!(late.is_none(), "the {which} worker read job {late:?} again");
    }
    stopped_share
}

/// While the stopped worker's queue has room for its share (libzmq's `peer_queue` by default, the
/// `zeromq` client's fixed queue), the PUSH goes on round-robin: the
/// healthy worker gets every other job while its neighbour is stopped, and the stopped one its
/// half once resumed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_stopped_with_sigstop_leaves_its_neighbour_fed_and_gets_each_of_its_jobs_once_when_resumed()
 {
    let queue = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let (connected, publisher, mut healthy, mut stalled) = two_workers(queue, json!({})).await;

    stalled.pause();
    let started = Instant::now();
    for id in 0..JOBS {
        publish(&publisher, "jobs", id, 0).await;
    }
    let publishing = started.elapsed();
    assert!(
        publishing < Duration::from_secs(5),
        "publishing {JOBS} jobs waited on the stopped worker: {publishing:?}"
    );
    let mut fed = Vec::new();
    read_until(
        &mut healthy,
        &mut fed,
        "the healthy worker's half while its neighbour is stopped",
        |fed| fed.len() >= (JOBS / 2) as usize,
    )
    .await;
    // Its turn every other job, whichever of the two the rotation began with.
    let parity = fed[0] % 2;
    assert!(
        fed.iter().all(|id| id % 2 == parity),
        "the healthy worker missed its turn while its neighbour was stopped: {fed:?}"
    );

    stalled.resume();
    let stopped_share = the_rest_once(JOBS, &mut healthy, &mut fed, &mut stalled).await;
    println!(
        "{JOBS} jobs published in {publishing:?} with one worker stopped: the other read {}, \
         the stopped one {} once resumed",
        fed.len(),
        stopped_share.len()
    );
    assert_eq!(
        stopped_share.len() as u64,
        JOBS / 2,
        "the stopped worker's half waited for it"
    );
    connected.shutdown().await.unwrap();
}
