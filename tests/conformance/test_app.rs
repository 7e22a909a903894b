//! The in-process mode refuses what the sockets refuse, with the same errors: `TestApp` runs the
//! production app and meets the same refusals as the live service.

use ruststream::{
    runtime::{Router, RouterDef},
    testing::TestApp,
};
use ruststream_zmq::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, PartialEq, Serialize, Deserialize, Outgoing)]
struct Job {
    id: u64,
}

#[subscriber]
async fn work(job: &Job) -> HandlerOutcome {
    let _ = job.id;
    HandlerOutcome::retry()
}

fn two_on_one_bound_queue() -> impl App {
    RustStream::new(AppInfo::new("jobs", "0.1.0")).with_broker(
        ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0")),
        |b| {
            b.include(work.name("first"));
            b.include(work.name("second"));
        },
    )
}

fn dialing_without_destination() -> impl App {
    RustStream::new(AppInfo::new("jobs", "0.1.0")).with_broker(
        ZmqQueue::new(ZmqEndpoint::dial("tcp://127.0.0.1:1")),
        |b| {
            b.include(work.name("nowhere"));
        },
    )
}

#[subscriber("routed")]
async fn routed(job: &Job) -> HandlerOutcome {
    let _ = job.id;
    HandlerOutcome::retry()
}

/// A by-name registration in a `Router` chain that names no destination for its copies, on a
/// broker whose subscriptions cannot address their own copies: a dialing queue, a responder (on
/// either side). It compiles (a name says nothing about where copies go), and the service refuses
/// it when it starts.
fn queue_routes() -> impl RouterDef<ZmqQueue<Dialing>> {
    Router::<ZmqQueue<Dialing>>::new().include(routed)
}

fn responder_routes() -> impl RouterDef<ZmqRpc<Bound>> {
    Router::<ZmqRpc<Bound>>::new().include(routed)
}

fn dialing_queue_router_without_destination() -> impl App {
    RustStream::new(AppInfo::new("jobs", "0.1.0")).with_broker(
        ZmqQueue::new(ZmqEndpoint::dial("tcp://127.0.0.1:1")),
        |b| {
            b.include_router(queue_routes());
        },
    )
}

fn responder_router_without_destination() -> impl App {
    RustStream::new(AppInfo::new("jobs", "0.1.0")).with_broker(
        ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0")),
        |b| {
            b.include_router(responder_routes());
        },
    )
}

/// The errors `app` fails to start with, in process and then on the sockets.
async fn refusals<A: App>(app: impl Fn() -> A) -> [String; 2] {
    let in_process = TestApp::start(app())
        .await
        .expect_err("started in process")
        .to_string();
    let live = app().start().await.expect_err("started live").to_string();
    [in_process, live]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_bound_subscription_is_refused_in_process_as_on_the_sockets() {
    for err in refusals(two_on_one_bound_queue).await {
        assert!(
            err.contains("`second`") && err.contains("`first` already holds it"),
            "{err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_registration_with_no_destination_is_refused_in_process_as_on_the_sockets() {
    for err in refusals(dialing_without_destination).await {
        assert!(
            err.contains("nowhere") && err.contains("NamedCopies"),
            "{err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_by_name_registration_in_a_router_chain_naming_no_destination_compiles_and_is_refused_at_startup()
 {
    let queue = refusals(dialing_queue_router_without_destination).await;
    let responder = refusals(responder_router_without_destination).await;
    for err in queue.into_iter().chain(responder) {
        assert!(
            err.contains("routed") && err.contains("NamedCopies"),
            "{err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_into_the_own_endpoint_is_refused_in_process_and_nothing_loops() {
    let app = RustStream::new(AppInfo::new("jobs", "0.1.0")).with_broker(
        ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:5600")),
        |b| {
            b.include(work.name("jobs"))
                .max_attempts(nonzero!(2u32))
                .dead_letter("jobs.dead");
        },
    );
    let tb = TestApp::start(app).await.unwrap();
    let jobs = tb.broker::<ZmqQueue>();
    jobs.message(&Job { id: 1 })
        .to("jobs")
        .publish()
        .await
        .unwrap();
    tb.settle().await.unwrap();
    // Two attempts, then the dead letter, which the publisher refuses: it is not logged as
    // published and reaches no one.
    jobs.subscriber("jobs").assert_called(2);
    jobs.published::<Job>("jobs.dead").assert_called(0);
}
