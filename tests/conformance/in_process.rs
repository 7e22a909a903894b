//! `harness::run_suite`: the routing contract over the in-process transport.

use std::time::Duration;

use ruststream::conformance::harness;
use ruststream_zmq::{ZmqEndpoint, ZmqFanout, ZmqQueue, ZmqRpc};

/// Short enough that a publish nobody can take fails fast, as it does on the sockets.
const PATIENCE: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bound_queue_keeps_the_routing_contract_in_process() {
    harness::run_suite(|| {
        ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0")).send_timeout(PATIENCE)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dialing_queue_keeps_the_routing_contract_in_process() {
    harness::run_suite(|| {
        ZmqQueue::new(ZmqEndpoint::dial("tcp://127.0.0.1:1")).send_timeout(PATIENCE)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bound_fanout_keeps_the_routing_contract_in_process() {
    harness::run_suite(|| {
        ZmqFanout::new(ZmqEndpoint::bind("tcp://127.0.0.1:0")).send_timeout(PATIENCE)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dialing_fanout_keeps_the_routing_contract_in_process() {
    harness::run_suite(|| {
        ZmqFanout::new(ZmqEndpoint::dial("tcp://127.0.0.1:2")).send_timeout(PATIENCE)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bound_responder_keeps_the_routing_contract_in_process() {
    harness::run_suite(|| {
        ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0")).send_timeout(PATIENCE)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dialing_responder_keeps_the_routing_contract_in_process() {
    harness::run_suite(|| {
        ZmqRpc::new(ZmqEndpoint::dial("tcp://127.0.0.1:3")).send_timeout(PATIENCE)
    })
    .await;
}
