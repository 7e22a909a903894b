//! The suites that connect through `Broker::connect`, live over loopback sockets and again in
//! process (wrapped in `InProcessBroker`): the lifecycle ladder, a shared handle, the redelivery
//! address, settlement, backlog and refusals, batches, and request-reply. The suites that do not
//! apply are listed, with the reason, in the crate docs (`Conformance`).

use std::time::Duration;

use ruststream::conformance::{
    capabilities,
    harness::{self, InProcessBroker},
    in_process::{self, Refusal},
    lifecycle, message_shape, retry,
    settlement::{self, Answer, Answers},
};
use ruststream::{Bytes, Name};
use ruststream_zmq::{
    Bound, Dialing, FanoutSubscription, QueueSubscription, Responder, ZmqEndpoint,
};

use super::{ZmqFanout, ZmqQueue, ZmqRpc};

/// How long a publish waits for its peer. A suite's first publish on a connection dials the
/// subscription's listener and completes the ZMTP handshake inside this wait, so it must hold on
/// a loaded 2-core machine. Only the queue's backlog and refusal suites expect a publish to run
/// out of its wait, and they take the shorter one below.
const PATIENCE: Duration = Duration::from_secs(10);

/// The wait for the backlog and refusal suites on a queue, where a publish goes to a name nothing
/// listens on and must run out (a fan-out's PUB drops it at once): still six times the half
/// second the suites once had for connecting and the handshake, which the publishes after a
/// subscription opens need, and short enough that the four expiries, live and in process, cost
/// 12 s, not 40.
const EXPIRING_PATIENCE: Duration = Duration::from_secs(3);

fn bound_queue() -> ZmqQueue<Bound> {
    ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0")).send_timeout(PATIENCE)
}

fn bound_fanout() -> ZmqFanout<Bound> {
    ZmqFanout::new(ZmqEndpoint::bind("tcp://127.0.0.1:0")).send_timeout(PATIENCE)
}

fn bound_rpc() -> ZmqRpc<Bound> {
    ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0")).send_timeout(PATIENCE)
}

fn queue_source(name: &str) -> QueueSubscription<Bound> {
    QueueSubscription::new(name.to_owned())
}

fn fanout_source(name: &str) -> FanoutSubscription<Bound> {
    FanoutSubscription::new(name.to_owned())
}

/// Keys ride the `zmq-partition-key` header; the publishers have no per-message options.
fn keyed(key: &[u8], headers: &mut ruststream::HeaderMap) -> Option<()> {
    headers.insert(
        ruststream_zmq::PARTITION_KEY_HEADER,
        Bytes::copy_from_slice(key),
    );
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_messages_arrive_in_order_with_their_key() {
    message_shape::keyed_order(
        bound_queue,
        "conformance.keyed",
        queue_source,
        |connected| connected.publisher(),
        keyed,
    )
    .await;
    message_shape::keyed_order(
        || InProcessBroker::new(bound_queue()),
        "conformance.keyed",
        queue_source,
        |connected| connected.publisher(),
        keyed,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lifecycle_ladder_holds_for_a_bound_queue() {
    harness::lifecycle(bound_queue, queue_source, |connected| connected.publisher()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lifecycle_ladder_holds_for_a_bound_queue_in_process() {
    harness::lifecycle(
        || InProcessBroker::new(bound_queue()),
        queue_source,
        |connected| connected.publisher(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lifecycle_ladder_holds_for_a_bound_fanout() {
    harness::lifecycle(bound_fanout, fanout_source, |connected| {
        connected.publisher()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lifecycle_ladder_holds_for_a_bound_fanout_in_process() {
    harness::lifecycle(
        || InProcessBroker::new(bound_fanout()),
        fanout_source,
        |connected| connected.publisher(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clone_of_a_connected_broker_closes_with_it() {
    lifecycle::shared_handle_closes(bound_queue, queue_source, |connected| connected.publisher())
        .await;
    lifecycle::shared_handle_closes(bound_fanout, fanout_source, |connected| {
        connected.publisher()
    })
    .await;
    lifecycle::shared_handle_closes(
        || ZmqQueue::new(ZmqEndpoint::dial("tcp://127.0.0.1:1")).send_timeout(PATIENCE),
        |name| {
            QueueSubscription::<Dialing>::new(name.to_owned()).out_retry("copies@tcp://127.0.0.1:1")
        },
        |connected| connected.publisher(),
    )
    .await;
    lifecycle::shared_handle_closes(
        bound_rpc,
        |name| Responder::<Bound>::new(name.to_owned()).out_retry("copies@tcp://127.0.0.1:1"),
        |connected| connected.publisher(),
    )
    .await;
    lifecycle::shared_handle_closes(
        || InProcessBroker::new(bound_queue()),
        queue_source,
        |connected| connected.publisher(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_to_the_redelivery_address_reaches_the_subscription() {
    retry::redelivery_address(bound_queue, queue_source, |connected| connected.publisher()).await;
    retry::redelivery_address(bound_fanout, fanout_source, |connected| {
        connected.publisher()
    })
    .await;
    retry::redelivery_address(
        || InProcessBroker::new(bound_queue()),
        queue_source,
        |connected| connected.publisher(),
    )
    .await;
    retry::redelivery_address(
        || InProcessBroker::new(bound_fanout()),
        fanout_source,
        |connected| connected.publisher(),
    )
    .await;
    // The bare name of a by-name subscription is its address on a bound endpoint too.
    retry::redelivery_address(
        bound_queue,
        |name| Name::new(name.to_owned()),
        |connected| connected.publisher(),
    )
    .await;
    retry::redelivery_address(
        bound_fanout,
        |name| Name::new(name.to_owned()),
        |connected| connected.publisher(),
    )
    .await;
}

/// What a ZeroMQ delivery answers: ZMTP has no frame that settles anything, so `ack`, `nack(false)`
/// and `nack(true)` all answer `AckError::Unsupported`, and no delivery offers a delayed nack.
fn assert_settles_nothing(answers: Answers, run: &str) {
    assert_eq!(answers.ack, Answer::Unsupported, "{run}: ack");
    assert_eq!(answers.reject, Answer::Unsupported, "{run}: nack(false)");
    assert_eq!(answers.requeue, Answer::Unsupported, "{run}: nack(true)");
    assert!(!answers.delay, "{run}: a delivery offered nack_after");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settlement_answers_unsupported_live_and_in_process_alike() {
    // Each run is pinned on its own: comparing live with in process alone would pass a change
    // that broke both the same way.
    for (run, answers) in [
        (
            "bound queue, live",
            settlement::suite(
                bound_queue,
                queue_source,
                |connected| connected.publisher(),
                Duration::ZERO,
            )
            .await,
        ),
        (
            "bound queue, in process",
            settlement::suite(
                || InProcessBroker::new(bound_queue()),
                queue_source,
                |connected| connected.publisher(),
                Duration::ZERO,
            )
            .await,
        ),
        (
            "bound fan-out, live",
            settlement::suite(
                bound_fanout,
                fanout_source,
                |connected| connected.publisher(),
                Duration::ZERO,
            )
            .await,
        ),
        (
            "bound fan-out, in process",
            settlement::suite(
                || InProcessBroker::new(bound_fanout()),
                fanout_source,
                |connected| connected.publisher(),
                Duration::ZERO,
            )
            .await,
        ),
    ] {
        assert_settles_nothing(answers, run);
    }
    settlement::matches_in_process(
        bound_queue,
        queue_source,
        |connected| connected.publisher(),
        Duration::ZERO,
    )
    .await;
    settlement::matches_in_process(
        bound_fanout,
        fanout_source,
        |connected| connected.publisher(),
        Duration::ZERO,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_process_backlog_and_refusals_match_the_sockets() {
    in_process::backlog_matches_server(
        || bound_queue().send_timeout(EXPIRING_PATIENCE),
        |connected| connected.publisher(),
    )
    .await;
    in_process::backlog_matches_server(
        || bound_fanout().send_timeout(EXPIRING_PATIENCE),
        |connected| connected.publisher(),
    )
    .await;
    in_process::refuses_like_the_server(
        || bound_queue().send_timeout(EXPIRING_PATIENCE),
        |connected| connected.publisher(),
        [
            Refusal::Conflicting {
                open: queue_source("first"),
                refused: queue_source("second"),
            },
            Refusal::Publish {
                name: "payments@udp://127.0.0.1:1".to_owned(),
            },
        ],
    )
    .await;
    in_process::refuses_like_the_server(
        bound_fanout,
        |connected| connected.publisher(),
        [Refusal::Conflicting {
            open: fanout_source("orders"),
            refused: fanout_source("invoices"),
        }],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_are_assembled_to_the_size_asked_for() {
    capabilities::batches(bound_queue, queue_source, |connected| connected.publisher()).await;
    capabilities::batches(bound_fanout, fanout_source, |connected| {
        connected.publisher()
    })
    .await;
    capabilities::batches(
        || InProcessBroker::new(bound_queue()),
        queue_source,
        |connected| connected.publisher(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_answered_through_the_reply_address() {
    let responder =
        |name: &str| Responder::<Bound>::new(name.to_owned()).out_retry("copies@tcp://127.0.0.1:1");
    capabilities::request_reply(
        bound_rpc,
        responder,
        |connected| connected.requester(),
        |connected| connected.publisher(),
    )
    .await;
    capabilities::request_reply(
        || InProcessBroker::new(bound_rpc()),
        responder,
        |connected| connected.requester(),
        |connected| connected.publisher(),
    )
    .await;
}
