//! A message that never ends, as the `zeromq` client and libzmq meet it: held whole, without
//! bound. omq cuts it at the size limit (`omq_faults`), so this file is not among its scenarios.

use ruststream::{Broker, Subscribe};
use serde_json::json;
use tokio::io::AsyncWriteExt;

use super::{hostile::raw_push, prelude::*};
use crate::support::{Memory, PyPeer, STEP, Tap, alone_with_figures, is_child, test_name, until};

/// The test below, by the name libtest gives it on this backend.
fn endless_message() -> String {
    test_name(
        module_path!(),
        "a_message_that_never_ends_is_held_whole_by_the_client_a_limit_the_crate_cannot_set",
    )
}

const ENDLESS_FIGURES: &str = "endless message figures: ";

/// A pin of what no setting bounds on either backend: a peer that sends frames marked "more" and
/// never ends its message makes the client hold every frame (libzmq's `ZMQ_MAXMSGSIZE` is per
/// frame and its queue counts whole messages; the `zeromq` client gathers a message before the
/// crate sees it). Each frame is under every limit. The security guide states it (docs/security.md);
/// this test fails, saying so, once a client bounds it. In a process of its own, which measures
/// itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_never_ends_is_held_whole_by_the_client_a_limit_the_crate_cannot_set() {
    if is_child(&endless_message()) {
        return endless_message_in_a_process_of_its_own().await;
    }
    alone_with_figures(&endless_message(), ENDLESS_FIGURES).await;
}

async fn endless_message_in_a_process_of_its_own() {
    const FRAME: usize = 64 << 10;
    const FRAMES: usize = 1_024;
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let monitor = connected.monitor();
    let mut tap = Tap::new(connected.subscribe("jobs").await.unwrap());
    let address = monitor.bound_address().unwrap();
    let before = Memory::now();
    let mut attacker = raw_push(&address).await;
    let mut frame = vec![0x03];
    frame.extend((FRAME as u64).to_be_bytes());
    frame.resize(9 + FRAME, b'x');
    for _ in 0..FRAMES {
        attacker.write_all(&frame).await.unwrap();
    }
    // 64 MiB sent, none of it a whole message: the client holds what it read.
    let held = (FRAME * FRAMES / 1024) as u64;
    until(STEP * 3, "the frames read and held", || {
        let now = Memory::now();
        if now.rss_kib >= before.rss_kib + held * 3 / 4 {
            Ok(())
        } else {
            Err(format!(
                "the client no longer holds an unended message whole: VmRSS {} KiB before, {} \
                 KiB after {held} KiB of frames marked \"more\"; bound it and update the \
                 security guide (docs/security.md)",
                before.rss_kib, now.rss_kib
            ))
        }
    })
    .await;
    let after = Memory::now();
    drop(attacker);
    let mut next = PyPeer::connect("PUSH", &address, json!({})).await;
    next.send(&[b"jobs", br#"{"n":1}"#]).await;
    tap.expect("the next peer's message").await;
    assert_eq!(monitor.refused(), 0, "nothing the crate saw to refuse");
    println!(
        "{ENDLESS_FIGURES}{held} KiB in frames of {FRAME} bytes, never ended: VmRSS {} KiB \
         before, {} KiB after",
        before.rss_kib, after.rss_kib
    );
}
