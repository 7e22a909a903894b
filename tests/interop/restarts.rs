//! Every socket kind this crate dials comes back after its libzmq peer restarts: the Python
//! process is killed (SIGKILL, as a crash), a new one binds the same port, and messages flow
//! again. The client reconnects only SUB by itself; the others are supervised and re-created.
//!
//! What is lost in the gap, by kind (ZeroMQ delivers at most once):
//! - PUSH publisher: publishes made after the peer died and before the client noticed are
//!   reported sent (queued on the dead connection) and are gone; the test counts them. Once the
//!   socket is renewed nothing else is lost: a publish waits for the new peer up to the
//!   broker's `send_timeout`.
//! - PULL subscription: whatever the dead PUSH process still held in its own queue, and bytes in
//!   flight on the dead connection. The new peer's messages wait in its queue until the
//!   subscription has dialed again, so none of them is lost.
//! - SUB subscription: besides the dead PUB's queue, everything the new PUB publishes before the
//!   subscription has reconnected and its filter has reached the PUB (the slow joiner again).
//! - DEALER requester: a request in flight when the ROUTER died gets no answer (its timeout ends
//!   it); requests made while the peer is down wait for the reconnect within their timeout.
//! - ROUTER responder: an answer to a request from the dead DEALER has nowhere to go (its
//!   identity is gone: the publish fails and the answer is dropped); the new DEALER's requests
//!   wait in its queue until the responder has dialed again.

use std::time::Duration;

use ruststream::{
    Broker, BytesMut, ConnectedBroker, IncomingMessage, OutgoingMessage, Publisher, RequestReply,
    Subscribe,
};
use serde_json::{Value, json};

use super::prelude::*;
use crate::support::{PyPeer, STEP, Tap, json_of, latin1, logs, until_async};

fn body(n: u64) -> BytesMut {
    BytesMut::from(json!({"n": n}).to_string().as_bytes())
}

fn n_of(value: &Value) -> u64 {
    value["n"].as_u64().expect("a numbered message")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_push_publisher_reaches_a_restarted_python_pull() {
    logs();
    let pull = PyPeer::bind("PULL", "tcp://127.0.0.1:*", json!({})).await;
    let endpoint = pull.endpoint.clone();
    let connected = ZmqQueue::new(ZmqEndpoint::dial(endpoint.clone()))
        .send_timeout(Duration::from_secs(3))
        .connect()
        .await
        .unwrap();
    let publisher = connected.publisher();
    let mut pull = pull;
    publisher
        .publish(OutgoingMessage::produced("jobs", body(1)), None)
        .await
        .unwrap();
    assert_eq!(n_of(&pull.expect("the first job").await.payload()), 1);

    pull.kill().await;
    let mut pull = PyPeer::bind("PULL", &endpoint, json!({})).await;
    let mut n = 1;
    let first = until_async(STEP, "a job at the restarted PULL", async || {
        n += 1;
        // A publish into the dead connection may fail once the client notices; that is the
        // gap, not a fault.
        let _ = publisher
            .publish(OutgoingMessage::produced("jobs", body(n)), None)
            .await;
        let received = pull.recv(Duration::from_millis(100)).await;
        received.map(|received| n_of(&received.payload()))
    })
    .await;
    println!(
        "PUSH publisher: {} publish(es) after the restart were lost in the gap (jobs 2..{first})",
        first - 2
    );
    for more in n + 1..n + 11 {
        publisher
            .publish(OutgoingMessage::produced("jobs", body(more)), None)
            .await
            .unwrap();
    }
    let mut rest = Vec::new();
    for _ in first..n + 10 {
        rest.push(n_of(
            &pull.expect("every job after the reconnect").await.payload(),
        ));
    }
    assert_eq!(
        rest,
        (first + 1..=n + 10).collect::<Vec<_>>(),
        "after the reconnect nothing is lost"
    );
    connected.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_pull_subscription_reads_a_restarted_python_push() {
    logs();
    let mut push = PyPeer::bind("PUSH", "tcp://127.0.0.1:*", json!({})).await;
    let endpoint = push.endpoint.clone();
    let connected = ZmqQueue::new(ZmqEndpoint::dial(endpoint.clone()))
        .connect()
        .await
        .unwrap();
    let mut tap = Tap::new(connected.subscribe("jobs").await.unwrap());
    push.send(&[b"jobs", br#"{"n":1}"#]).await;
    assert_eq!(n_of(&json_of(&tap.expect("the first job").await)), 1);

    push.kill().await;
    let mut push = PyPeer::bind("PUSH", &endpoint, json!({})).await;
    // A libzmq PUSH with no peer holds its messages until one connects: each of these waits in
    // the new process until the subscription has dialed again.
    for n in 2..=11u64 {
        push.send(&[b"jobs", json!({"n": n}).to_string().as_bytes()])
            .await;
    }
    let mut seen = Vec::new();
    for _ in 2..=11 {
        seen.push(n_of(&json_of(
            &tap.expect("every job from the restarted peer").await,
        )));
    }
    assert_eq!(seen, (2..=11).collect::<Vec<_>>());
    connected.shutdown().await.unwrap();
}

/// The name warm-ups travel under: inside the `ticks` prefix, and no tick's name.
const WARM_UP: &str = "ticks.warmup";

/// Publishes warm-ups of `round` through the Python PUB until the tap hears one of them; answers
/// the number of the first heard and of the last sent. Each carries its round, so a warm-up of
/// an earlier round still on its way is told apart by content, never by a pause.
async fn warm_up(publisher: &mut PyPeer, tap: &mut Tap, round: &str, from: u64) -> (u64, u64) {
    let mut n = from;
    until_async(
        STEP,
        "the SUB subscription to hear the Python PUB",
        async || {
            let warm_up = json!({"warm_up": round, "n": n}).to_string();
            publisher
                .send(&[WARM_UP.as_bytes(), warm_up.as_bytes()])
                .await;
            while let Some(message) = tap.next(Duration::from_millis(50)).await {
                assert_eq!(message.name(), WARM_UP, "only warm-ups were sent so far");
                let heard = json_of(&message);
                if heard["warm_up"] == round {
                    return Some((n_of(&heard), n));
                }
            }
            n += 1;
            None
        },
    )
    .await
}

/// The next tick, past any warm-up still on its way.
async fn next_tick(tap: &mut Tap) -> u64 {
    loop {
        let message = tap.expect("every tick once reconnected").await;
        if message.name() != WARM_UP {
            return n_of(&json_of(&message));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_sub_subscription_hears_a_restarted_python_pub() {
    logs();
    let mut publisher = PyPeer::bind("PUB", "tcp://127.0.0.1:*", json!({})).await;
    let endpoint = publisher.endpoint.clone();
    let connected = ZmqFanout::new(ZmqEndpoint::dial(endpoint.clone()))
        .connect()
        .await
        .unwrap();
    let mut tap = Tap::new(connected.subscribe("ticks").await.unwrap());
    warm_up(&mut publisher, &mut tap, "first PUB", 0).await;

    publisher.kill().await;
    let mut publisher = PyPeer::bind("PUB", &endpoint, json!({})).await;
    let (heard, sent) = warm_up(&mut publisher, &mut tap, "restarted PUB", 1000).await;
    println!(
        "SUB subscription: the restarted PUB's first {} message(s) were lost before the \
         subscription reached it",
        heard - 1000
    );
    for n in sent + 1..=sent + 10 {
        publisher
            .send(&[b"ticks", json!({"n": n}).to_string().as_bytes()])
            .await;
    }
    let mut seen = Vec::new();
    for _ in 0..10 {
        seen.push(next_tick(&mut tap).await);
    }
    assert_eq!(seen, (sent + 1..=sent + 10).collect::<Vec<_>>());
    connected.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_dealer_requester_is_answered_by_a_restarted_python_router() {
    logs();
    let router = PyPeer::echo_router("tcp://127.0.0.1:*").await;
    let endpoint = router.endpoint.clone();
    let connected = ZmqRpc::new(ZmqEndpoint::dial(endpoint.clone()))
        .connect()
        .await
        .unwrap();
    let requester = connected.requester();
    let ask = |n: u64| OutgoingMessage::produced("prices", body(n));
    let answer = requester.request(ask(1), STEP).await.unwrap();
    assert_eq!(n_of(&serde_json::from_slice(answer.payload()).unwrap()), 1);

    router.kill().await;
    let _router = PyPeer::echo_router(&endpoint).await;
    let mut unanswered = 0;
    until_async(STEP, "an answer from the restarted ROUTER", async || {
        let n = 2 + unanswered;
        match requester.request(ask(n), Duration::from_millis(500)).await {
            Ok(answer) => {
                assert_eq!(n_of(&serde_json::from_slice(answer.payload()).unwrap()), n);
                true
            }
            Err(err) => {
                assert!(matches!(err, ZmqError::RequestTimeout { .. }), "{err}");
                unanswered += 1;
                false
            }
        }
    })
    .await;
    println!("DEALER requester: {unanswered} request(s) timed out in the gap");
    for n in 100..110 {
        let answer = requester.request(ask(n), STEP).await.unwrap();
        assert_eq!(n_of(&serde_json::from_slice(answer.payload()).unwrap()), n);
    }
    connected.shutdown().await.unwrap();
}

#[derive(Debug, serde::Deserialize)]
struct Ask {
    n: u64,
}

#[derive(Debug, serde::Serialize, Outgoing)]
struct Answer {
    n: u64,
    doubled: u64,
}

#[subscriber(Responder::<Dialing>, reply("reply"))]
async fn double(ask: &Ask) -> Answer {
    Answer {
        n: ask.n,
        doubled: ask.n * 2,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_router_responder_answers_a_restarted_python_dealer() {
    logs();
    let mut dealer = PyPeer::bind("DEALER", "tcp://127.0.0.1:*", json!({})).await;
    let endpoint = dealer.endpoint.clone();
    let app = RustStream::new(AppInfo::new("doubler", "0.1.0")).with_broker(
        ZmqRpc::new(ZmqEndpoint::dial(endpoint.clone())),
        |b| {
            b.include(
                double
                    .name("double")
                    .out_retry("double.retry@tcp://127.0.0.1:1"),
            )
            .out_reply(Publish)
            .transform(ToRequester);
        },
    );
    let running = app.start().await.unwrap();
    let call = async |dealer: &mut PyPeer, n: u64| {
        let headers = format!("correlation-id: call-{n}");
        dealer
            .send(&[
                b"double",
                headers.as_bytes(),
                json!({"n": n}).to_string().as_bytes(),
            ])
            .await;
        let answer = dealer.expect("an answer from the responder").await;
        assert_eq!(
            latin1(answer.headers_frame()),
            format!("correlation-id: call-{n}")
        );
        assert_eq!(answer.payload(), json!({"n": n, "doubled": n * 2}));
    };
    call(&mut dealer, 1).await;

    dealer.kill().await;
    let mut dealer = PyPeer::bind("DEALER", &endpoint, json!({})).await;
    // A libzmq DEALER with no peer holds the request until the responder has dialed again.
    for n in 2..=11 {
        call(&mut dealer, n).await;
    }
    running.shutdown().await.unwrap();
}
