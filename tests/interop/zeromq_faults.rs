//! What the `zeromq` client itself does not survive or notice, pinned so that a change shows
//! (libzmq's counterparts are in `on_libzmq::libzmq_faults`):
//!
//! - a peer that announces a frame it cannot allocate takes the service process down before
//!   `WireLimits` can act (libzmq cuts such a peer at the header);
//! - a peer that connects and says nothing keeps its connection (libzmq cuts it at its
//!   `handshake_timeout`);
//! - a peer that stops keeps its connection (libzmq's heartbeat finds it dead and cuts it);
//! - a worker that stops reading has 100,000 messages queued for it while the others are fed,
//!   and then holds up every send (libzmq passes it over once its `peer_queue` is full).

use std::time::Duration;

use ruststream::{Broker, BytesMut, ConnectedBroker, OutgoingMessage, Publisher, Subscribe};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{
    hostile::{ZEROMQ_PEER_QUEUE, count_messages, raw_pull, raw_push, short_frame},
    prelude::*,
};
use crate::support::{
    ChildTest, PyPeer, STEP, Tap, is_child, json_of, logs, poll::holds, test_name, until,
    until_async,
};

/// How long the pins below wait for the client to cut a peer: past the 3.5 s that libzmq's
/// counterparts allow theirs (a setting of 300 or 500 ms, and a loaded machine's delay).
const KEPT: Duration = Duration::from_secs(5);

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

/// The hostile-peer table's peer that connects and says nothing: the `zeromq` client has no
/// handshake timeout, so the connection stays open (libzmq cuts it at its `handshake_timeout`:
/// `on_libzmq::libzmq_faults`), and the service goes on serving other peers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_connects_and_says_nothing_keeps_its_connection_and_the_service_serves_on() {
    logs();
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let monitor = connected.monitor();
    let mut tap = Tap::new(connected.subscribe("jobs").await.unwrap());
    let address = monitor.bound_address().unwrap();
    let mut silent = tokio::net::TcpStream::connect(address.trim_start_matches("tcp://"))
        .await
        .unwrap();
    // The service may greet; the connection ends only if it gives up on the rest.
    let mut greeting = Vec::new();
    let read = tokio::time::timeout(KEPT, silent.read_to_end(&mut greeting)).await;
    assert!(
        read.is_err(),
        "the client cut a silent peer within {KEPT:?} ({read:?}): it has a handshake timeout \
         now; update the security guide's hostile-peer table"
    );
    let mut peer = PyPeer::connect("PUSH", &address, json!({})).await;
    peer.send(&[b"jobs", br#"{"n":1}"#]).await;
    assert_eq!(json_of(&tap.expect("the next peer's job").await)["n"], 1);
    drop(silent);
    connected.shutdown().await.unwrap();
}

/// The hostile-peer table's peer that stops, its host gone: the `zeromq` client has no
/// heartbeat, so a peer stopped with SIGSTOP (whose kernel still keeps its connection, as a
/// vanished host's does until TCP notices) stays connected and uncounted as lost (libzmq's
/// heartbeat finds it dead and cuts it: `on_libzmq::libzmq_faults`), and the service goes on
/// serving other peers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_stopped_with_sigstop_stays_connected_with_no_heartbeat_to_find_it_dead() {
    logs();
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let monitor = connected.monitor();
    let mut tap = Tap::new(connected.subscribe("jobs").await.unwrap());
    let address = monitor.bound_address().unwrap();
    let mut stopped = PyPeer::connect("PUSH", &address, json!({})).await;
    stopped.send(&[b"jobs", br#"{"n":1}"#]).await;
    assert_eq!(json_of(&tap.expect("the peer's job").await)["n"], 1);
    stopped.pause();
    holds(KEPT, "the stopped peer kept connected", || {
        let (connected, lost) = (monitor.peers_connected(), monitor.peers_lost());
        if connected == 1 && lost == 0 {
            Ok(())
        } else {
            Err(format!(
                "{connected} connected, {lost} lost: the client finds a stopped peer now; \
                 update the security guide's hostile-peer table"
            ))
        }
    })
    .await;
    let mut next = PyPeer::connect("PUSH", &address, json!({})).await;
    next.send(&[b"jobs", br#"{"n":2}"#]).await;
    assert_eq!(json_of(&tap.expect("the next peer's job").await)["n"], 2);
    stopped.resume();
    stopped.kill().await;
    connected.shutdown().await.unwrap();
}

/// The hostile-peer table's worker that stops reading, on the `zeromq` client: of two workers of
/// a bound queue publisher, one completes its handshake and never reads. The client goes on
/// round-robin, feeding the other, until 100,000 jobs (and what the socket buffers take) wait for
/// the stopped one; then a send waits out `send_timeout` and fails, and the sends after it fail
/// at once, the reading worker's turns too, until the stopped one reads again. On libzmq it is
/// passed over once its `peer_queue` is full instead: `stalled_past_the_peer_queue`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_stops_reading_takes_100_000_jobs_then_holds_up_every_send_until_it_reads() {
    use std::sync::atomic::Ordering;
    logs();
    const SEND_TIMEOUT: Duration = Duration::from_secs(1);
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .send_timeout(SEND_TIMEOUT)
        .connect()
        .await
        .unwrap();
    let monitor = connected.monitor();
    let address = connected.bind_publisher().await.unwrap();
    let publisher = connected.publisher();
    let stopped = raw_pull(&address, 4096).await;
    let fed = count_messages(raw_pull(&address, 1 << 20).await);
    until(STEP, "both workers connected to the publisher", || {
        monitor.peers_connected() == 2
    })
    .await;
    // Of 1 KiB: the socket buffers hold few of them beside the client's queue.
    let job = || OutgoingMessage::produced("jobs", BytesMut::from(&[b'x'; 1_024][..]));
    let mut published = 0;
    let waited = loop {
        let started = tokio::time::Instant::now();
        match publisher.publish(job(), None).await {
            Ok(()) => published += 1,
            Err(_) => break started.elapsed(),
        }
        assert!(
            published <= 4 * ZEROMQ_PEER_QUEUE,
            "{published} jobs left with a worker that never reads"
        );
    };
    let started = tokio::time::Instant::now();
    let next = publisher.publish(job(), None).await;
    let next_failed_after = started.elapsed();
    let fed_by_then = fed.load(Ordering::Relaxed);
    println!(
        "{published} jobs published, then one failed after {waited:?}, the next after \
         {next_failed_after:?} ({next:?}); the reading worker read {fed_by_then}"
    );
    assert!(
        waited >= SEND_TIMEOUT,
        "the send that found the stopped worker's queue full failed after {waited:?}"
    );
    assert!(
        next.is_err() && next_failed_after < SEND_TIMEOUT / 2,
        "the send after it did not fail at once: {next:?} after {next_failed_after:?}"
    );
    // Round-robin: the reading worker had its turn at every other job while the queue filled.
    until(STEP, "the reading worker's half", || {
        let fed = fed.load(Ordering::Relaxed);
        if fed >= ZEROMQ_PEER_QUEUE {
            Ok(())
        } else {
            Err(format!("{fed} read of {published} published"))
        }
    })
    .await;
    let read = count_messages(stopped);
    until(STEP * 3, "every job at one worker or the other", || {
        let (read, fed) = (read.load(Ordering::Relaxed), fed.load(Ordering::Relaxed));
        if read + fed >= published {
            Ok(())
        } else {
            Err(format!(
                "{read} read by the stopped worker, {fed} by the other"
            ))
        }
    })
    .await;
    let queued = read.load(Ordering::Relaxed);
    let fed_after = fed.load(Ordering::Relaxed);
    assert!(
        (ZEROMQ_PEER_QUEUE..=ZEROMQ_PEER_QUEUE * 6 / 5).contains(&queued),
        "{queued} jobs were queued for the stopped worker: the client's queue holds \
         {ZEROMQ_PEER_QUEUE}, and the socket buffers some more"
    );
    // The send that failed by its deadline may leave once the stopped worker reads.
    assert!(
        queued + fed_after <= published + 1,
        "the workers read {queued} and {fed_after} of {published} published"
    );
    // Read again: the sends go out once more, to both.
    until_async(
        STEP,
        "a send that leaves once the stopped worker reads",
        async || publisher.publish(job(), None).await.is_ok(),
    )
    .await;
    connected.shutdown().await.unwrap();
}
