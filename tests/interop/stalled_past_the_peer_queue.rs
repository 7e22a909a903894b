//! A libzmq worker stopped with SIGSTOP once its queue (`peer_queue`) is full: passed over, its
//! neighbour gets the rest. The stop while the queue has room is `stalled`'s, on every backend.

use ruststream::ConnectedBroker;
use ruststream_zmq::ZmqEndpoint;
use serde_json::json;
use tokio::time::Instant;

use super::{
    ZmqQueue,
    stalled::{publish, read_until, the_rest_once, two_workers},
};
use crate::support::STEP;

/// On libzmq a peer whose queue is full is passed over: with a short `peer_queue`, a stopped
/// worker that holds one message, and jobs large enough that the kernel's socket buffers hold
/// few of them, the stopped worker's share stops well short of half and every later job goes to
/// the healthy one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_stopped_with_sigstop_is_passed_over_once_its_queue_is_full_and_its_neighbour_gets_the_rest()
 {
    const PEER_QUEUE: usize = 10;
    const JOB_BYTES: usize = 64 << 10;
    const MANY: u64 = 300;
    let queue = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0")).peer_queue(PEER_QUEUE);
    let (connected, publisher, mut healthy, mut stalled) =
        two_workers(queue, json!({"RCVHWM": 1, "RCVBUF": 4096})).await;

    stalled.pause();
    let started = Instant::now();
    for id in 0..MANY {
        publish(&publisher, "jobs", id, JOB_BYTES).await;
    }
    let publishing = started.elapsed();
    assert!(
        publishing < STEP * 3,
        "publishing {MANY} jobs waited on the stopped worker: {publishing:?}"
    );
    // What the healthy worker reads while its neighbour is stopped: the stopped one's queue and
    // socket buffers hold a small part of the jobs, so the healthy one reads most without it.
    let mut fed = Vec::new();
    read_until(
        &mut healthy,
        &mut fed,
        "three quarters of the jobs at the healthy worker while its neighbour is stopped",
        |fed| fed.len() as u64 >= MANY * 3 / 4,
    )
    .await;

    stalled.resume();
    let stopped_share = the_rest_once(MANY, &mut healthy, &mut fed, &mut stalled).await;
    let last_held = stopped_share.iter().max().copied().unwrap_or(0);
    println!(
        "{MANY} jobs of {JOB_BYTES} bytes published in {publishing:?} with one worker stopped \
         (peer_queue {PEER_QUEUE}): the other read {}, the stopped one {} once resumed, the last \
         of them job {last_held}",
        fed.len(),
        stopped_share.len()
    );
    assert!(
        !stopped_share.is_empty(),
        "the stopped worker's queue held nothing"
    );
    // Once its queue is full it is passed over for good: every job past its last went to the
    // healthy worker, and those are most of them.
    assert!(
        last_held < MANY / 2,
        "the stopped worker still got job {last_held} of {MANY}: it was never passed over"
    );
    connected.shutdown().await.unwrap();
}
