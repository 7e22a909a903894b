//! A libzmq worker stopped with SIGSTOP once its queue (`peer_queue`) is full: passed over, its
//! neighbour gets the rest. The stop while the queue has room is `stalled`'s, on every backend.

use ruststream::ConnectedBroker;
use ruststream_zmq::ZmqEndpoint;
use serde_json::json;
use tokio::time::Instant;

use super::{
    BACKEND, ZmqQueue,
    stalled::{publish, read_until, the_rest_once, two_workers},
};
use crate::{backend::Backend, support::STEP};

const JOB_BYTES: usize = 64 << 10;
const MANY: u64 = 300;

/// The jobs a worker stopped with SIGSTOP was given out of `MANY`, read once it was resumed,
/// by a queue whose `peer_queue` is `peer_queue`; every job reached one worker once.
async fn stopped_share(peer_queue: usize) -> Vec<u64> {
    let queue = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0")).peer_queue(peer_queue);
    // The stopped worker holds one message itself, and its kernel little more.
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
    // Round-robin alone would give the healthy worker every other job: more than half is the
    // stopped one passed over.
    let mut fed = Vec::new();
    read_until(
        &mut healthy,
        &mut fed,
        "more than half the jobs at the healthy worker while its neighbour is stopped",
        |fed| fed.len() as u64 > MANY / 2,
    )
    .await;

    stalled.resume();
    let share = the_rest_once(MANY, &mut healthy, &mut fed, &mut stalled).await;
    println!(
        "{MANY} jobs of {JOB_BYTES} bytes published in {publishing:?} with one worker stopped \
         (peer_queue {peer_queue}): the other read {}, the stopped one {} once resumed, the \
         last of them job {:?}",
        fed.len(),
        share.len(),
        share.iter().max()
    );
    connected.shutdown().await.unwrap();
    share
}

/// How many messages a queue of `peer_queue` holds: omq's queues hold a power of two.
fn holds(peer_queue: usize) -> usize {
    match BACKEND {
        Backend::Omq => peer_queue.next_power_of_two(),
        Backend::Libzmq | Backend::Zeromq => peer_queue,
    }
}

/// On libzmq a peer whose queue is full is passed over: a stopped worker is given its turns
/// until its `peer_queue` is full (and what the sockets' buffers beside it take, the same
/// whatever the queue), then none. With a queue of 10 and one of 30, the stopped worker's share
/// differs by the 20 the queues differ by; every job it got came while it still had turns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_stopped_with_sigstop_is_passed_over_once_its_queue_is_full_and_its_neighbour_gets_the_rest()
 {
    const SMALL: usize = 10;
    const LARGE: usize = 30;
    /// How far the buffers beside the queue may differ from one run to the next, in jobs.
    const SLACK: usize = 2;
    let small = stopped_share(SMALL).await;
    let large = stopped_share(LARGE).await;
    for (peer_queue, share) in [(SMALL, &small), (LARGE, &large)] {
        assert!(
            share.len() > peer_queue,
            "the stopped worker was given {} jobs: its queue of {peer_queue} never filled",
            share.len()
        );
        // Its turns come every other job until it is full, so all of its jobs are among the
        // first two of each it holds; past those, the healthy worker had every job.
        let last = share.iter().max().copied().unwrap_or(0);
        assert!(
            last < 2 * (share.len() + SLACK) as u64,
            "the stopped worker got job {last}, past its {} turns: it was not passed over for \
             good (peer_queue {peer_queue})",
            share.len()
        );
    }
    // What the buffers beside the queue hold is the same with either queue: the queue is what
    // the `peer_queue` set.
    let beyond_small = small.len() - holds(SMALL);
    let beyond_large = large.len() - holds(LARGE);
    assert!(
        beyond_small.abs_diff(beyond_large) <= SLACK,
        "with peer_queue {SMALL} the stopped worker held {} jobs, with {LARGE} {}: {} more, not \
         the {} its queue holds more",
        small.len(),
        large.len(),
        large.len() as i64 - small.len() as i64,
        holds(LARGE) - holds(SMALL)
    );
}
