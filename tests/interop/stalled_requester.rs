//! A requester that never reads its answers, beside one that does: on every backend the
//! responder drops the stalled requester's answers at once when its queue is full, counts them,
//! and goes on answering the other on time.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{BACKEND, ZmqRpc, prelude::*};
use crate::{
    backend::Backend,
    support::{PyPeer, STEP, logs, until},
};

#[derive(Debug, Serialize, Deserialize, Outgoing)]
struct Padded {
    id: u64,
    pad: String,
}

#[subscriber(Responder::<Bound>, reply("reply"))]
async fn echo(ask: &Padded) -> Padded {
    Padded {
        id: ask.id,
        pad: ask.pad.clone(),
    }
}

/// A responder on `broker` that answers each request with the request itself, started: answers
/// it running, the address it listens on, and its broker's monitor.
pub async fn echo_responder(
    broker: ZmqRpc,
) -> (ruststream::runtime::RunningApp, String, ZmqMonitor) {
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("echo", "0.1.0")).with_broker(broker, |b| {
        b.include(echo.name("echo").out_retry("echo.retry@tcp://127.0.0.1:1"))
            .out_reply(Publish)
            .transform(ToRequester);
    });
    let running = app.start().await.unwrap();
    let address = monitor.bound_address().unwrap();
    (running, address, monitor)
}

/// How many requests the stalled requester sends, and the padding of each, to fill its queue:
/// libzmq's `peer_queue` (64 under the test's 1 MiB limit) of 64 KiB answers, past the
/// connection's buffers; the
/// `zeromq` client's fixed 100,000 answers of 512 bytes, past the same buffers.
fn stalled_requests() -> (usize, usize) {
    match BACKEND {
        Backend::Libzmq | Backend::Omq => (1_000, 64 << 10),
        Backend::Zeromq => (200_000, 512),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requester_that_never_reads_costs_the_others_nothing_and_its_dropped_answers_are_counted()
{
    logs();
    // An answer held up behind the stalled requester would wait out this deadline.
    const SEND_TIMEOUT: Duration = Duration::from_secs(5);
    let (requests, pad) = stalled_requests();
    let broker = ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .limits(WireLimits::default().max_message_bytes(1 << 20))
        .send_timeout(SEND_TIMEOUT);
    let (running, address, monitor) = echo_responder(broker).await;

    // The healthy requester is connected first: a responder serves many at once.
    let mut healthy = PyPeer::connect("DEALER", &address, json!({})).await;
    let mut ask = async |id: u64| {
        let asked = Instant::now();
        let request = json!({"id": id, "pad": "y"}).to_string();
        healthy.send(&[b"echo", b"", request.as_bytes()]).await;
        let answer = healthy.expect("the healthy requester's answer").await;
        assert_eq!(answer.payload()["id"], id);
        asked.elapsed()
    };
    ask(0).await;

    // A requester that reads nothing, with the smallest queue of its own.
    let mut stalled = PyPeer::connect("DEALER", &address, json!({"RCVHWM": 1})).await;
    let request = json!({"id": 0, "pad": "x".repeat(pad)}).to_string();
    let sent = stalled
        .call(json!({
            "op": "send",
            "frames": ["echo", "", request],
            "times": requests,
            "timeout_ms": 60_000,
        }))
        .await;
    assert!(sent["sent"].is_u64(), "{sent}");
    // Every request handled: each answer left or was dropped, and some were dropped.
    until(
        STEP * 9,
        "every answer to the stalled requester tried",
        || {
            let (left, dropped) = (monitor.sent(), monitor.dropped_not_reading());
            if left + dropped > requests as u64 {
                Ok(())
            } else {
                Err(format!(
                    "{left} left and {dropped} dropped, of {}",
                    requests + 1
                ))
            }
        },
    )
    .await;
    assert!(
        monitor.dropped_not_reading() > 0,
        "the stalled requester's queue never filled"
    );

    // While it still reads nothing, and asks for more, the other requester is answered, each
    // answer within a second.
    let more = stalled
        .call(json!({"op": "send", "frames": ["echo", "", request], "times": 50}))
        .await;
    assert!(more["sent"].is_u64(), "{more}");
    let mut slowest = Duration::ZERO;
    for id in 1..=50u64 {
        let answered = ask(id).await;
        slowest = slowest.max(answered);
        assert!(
            answered < Duration::from_secs(1),
            "answer {id} took {answered:?}, where one held up behind the stalled requester \
             would take {SEND_TIMEOUT:?}"
        );
    }
    let dropped = monitor.dropped_not_reading();
    println!(
        "{requests} requests of {pad} bytes from a requester that never reads: {dropped} answers \
         dropped, {} sent; 50 answers to another requester, the slowest in {slowest:?}",
        monitor.sent()
    );
    assert!(
        monitor.send_failures() >= dropped,
        "every dropped answer is a send failure too"
    );
    let _: Value = stalled.call(json!({"op": "events"})).await;
    running.shutdown().await.unwrap();
}
