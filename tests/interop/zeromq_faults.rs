//! What the `zeromq` client itself does not survive, pinned so that a change shows: a peer that
//! announces a frame it cannot allocate takes the service process down before `WireLimits` can
//! act (libzmq cuts such a peer at the header: see `on_libzmq::libzmq_faults`).

use ruststream::{Broker, Subscribe};
use tokio::io::AsyncWriteExt;

use super::{
    hostile::{raw_push, short_frame},
    prelude::*,
};
use crate::support::{ChildTest, STEP, Tap, is_child, json_of, logs, test_name};

/// The test below, by the name libtest gives it.
fn frame_length_attack() -> String {
    test_name(
        module_path!(),
        "a_peer_announcing_a_frame_of_1_tib_aborts_the_service_process_until_the_client_caps_frame_lengths",
    )
}

/// What the service under attack prints in front of its address, and of each job it handled.
const SERVING: &str = "frame-length attack: serving ";
const HANDLED: &str = "frame-length attack: handled ";

/// What the failure says when today's behaviour is gone.
const CHANGED: &str = "the `zeromq` client no longer aborts on a frame header announcing 1 TiB: it \
                       now caps frame lengths (or reads them another way). Update the backends \
                       guide (\"A peer can crash the process\") and this test: it should \
                       then assert that the service survives the attack and serves the next peer";

/// Pins what the backends guide says of the default backend (libzmq caps frame lengths:
/// see `libzmq_faults`): the `zeromq` 0.7 client reserves the length a frame
/// header announces before reading the frame, so an 11-byte header announcing 1 TiB, sent after
/// a real handshake, aborts the whole service process (`memory allocation of ... bytes failed`)
/// before `WireLimits` can act. The service runs in a child process (this test again, marked);
/// this process is the hostile peer, speaking ZMTP by hand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_announcing_a_frame_of_1_tib_aborts_the_service_process_until_the_client_caps_frame_lengths()
 {
    use std::os::unix::process::ExitStatusExt as _;
    if is_child(&frame_length_attack()) {
        return serve_a_bound_queue_until_taken_down().await;
    }
    let mut service = ChildTest::spawn(&frame_length_attack());
    let Some(address) = service.after(SERVING, STEP).await else {
        panic!(
            "the service process did not start: {}",
            service.end(STEP).await.describe()
        );
    };
    let mut attacker = raw_push(&address).await;
    // The handshake is real: a good message is handled first.
    let mut good = short_frame(b"jobs", true);
    good.extend(short_frame(br#"{"n":1}"#, false));
    attacker.write_all(&good).await.unwrap();
    let handled = service.after(HANDLED, STEP).await;
    if handled.as_deref() != Some("1") {
        panic!(
            "the service did not handle the raw peer's good message ({handled:?}): {}",
            service.end(STEP).await.describe()
        );
    }
    // A long frame header: flags 0x02 (LONG), then a length of 1 TiB; no body follows.
    let mut header = vec![0x02];
    header.extend((1u64 << 40).to_be_bytes());
    // Should the service be gone already, how it ended is what the test reports.
    let _ = attacker.write_all(&header).await;

    let end = service.end(STEP).await;
    let Some(status) = end.status else {
        panic!(
            "the service process survived the frame-length attack for {STEP:?}: {CHANGED}.\n{}",
            end.describe()
        );
    };
    assert!(
        status.signal() == Some(SIGABRT) && end.stderr.contains("memory allocation of"),
        "the service process ended, but not by the allocation failure this test pins (SIGABRT \
         after `memory allocation of ... bytes failed`): {CHANGED}.\n{}",
        end.describe()
    );
}

/// SIGABRT's number on Linux, the signal `std::process::abort` raises.
const SIGABRT: i32 = 6;

/// The child's half: a bound queue that prints each job it handles. It never ends well: either
/// the attack takes the process down, or it fails once the parent's time for it has passed.
async fn serve_a_bound_queue_until_taken_down() {
    logs();
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let mut tap = Tap::new(connected.subscribe("jobs").await.unwrap());
    println!("{SERVING}{}", connected.monitor().bound_address().unwrap());
    let until = tokio::time::Instant::now() + 3 * STEP;
    while let Some(message) = tap
        .next(until.saturating_duration_since(tokio::time::Instant::now()))
        .await
    {
        println!("{HANDLED}{}", json_of(&message)["n"]);
    }
    panic!(
        "the service is still up {:?} after it started serving",
        3 * STEP
    );
}
