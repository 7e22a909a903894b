//! An answer whose requester left before it was sent, on the backends whose ROUTER says so
//! (libzmq, omq: `router_mandatory`). The `zeromq` client's bound ROUTER did not report the
//! requester's departure within 10 s when this was tried, so it is not among its scenarios.

use serde_json::json;

use super::{
    prelude::*,
    rpc::{Ask, Quote},
};
use crate::support::{PyPeer, STEP, logs, until};

/// A handler that reports each request, then holds its answer until its gate opens.
#[derive(Clone)]
struct Held {
    gate: std::sync::Arc<tokio::sync::Semaphore>,
    taken: tokio::sync::mpsc::UnboundedSender<u64>,
}

#[derive(FromRef)]
struct HeldState {
    held: Held,
}

#[subscriber(Responder::<Bound>, reply("reply"))]
async fn held_quote(ask: &Ask, State(held): State<Held>) -> Quote {
    let _ = held.taken.send(ask.id);
    let _ = held.gate.acquire().await;
    Quote {
        id: ask.id,
        price: ask.id * 10,
    }
}

/// An answer whose requester left before it was sent fails, and is counted: never taken for
/// sent, on any backend (a ROUTER that dropped it without a word would count it sent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_to_a_requester_that_left_fails_and_is_counted() {
    logs();
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let (taken, mut taken_rx) = tokio::sync::mpsc::unbounded_channel();
    let held = Held {
        gate: std::sync::Arc::clone(&gate),
        taken,
    };
    let broker = ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("quotes", "0.1.0"))
        .on_startup(async move |()| Ok::<_, std::convert::Infallible>(HeldState { held }))
        .with_broker(broker, |b| {
            b.include(
                held_quote
                    .name("quotes")
                    .out_retry("quotes.retry@tcp://127.0.0.1:1"),
            )
            .out_reply(Publish)
            .transform(ToRequester);
        });
    let running = app.start().await.unwrap();
    let mut dealer = PyPeer::connect("DEALER", &monitor.bound_address().unwrap(), json!({})).await;
    dealer.send(&[b"quotes", b"", br#"{"id":1}"#]).await;
    assert_eq!(
        taken_rx.recv().await,
        Some(1),
        "the request reached the handler"
    );
    dealer.kill().await;
    until(STEP, "the requester gone", || monitor.peers_lost() == 1).await;
    gate.add_permits(1);
    until(STEP, "the answer's failure counted", || {
        monitor.send_failures() == 1
    })
    .await;
    assert_eq!(
        monitor.sent(),
        0,
        "an answer that found no requester counted sent"
    );
    running.shutdown().await.unwrap();
}
