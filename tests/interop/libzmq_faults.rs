//! The libzmq backend against the faults the `zeromq` client cannot survive (the counterpart of
//! the frame-length attack in `on_zeromq::zeromq_faults`), and libzmq's own; heartbeats and
//! handshake timeouts are in `liveness`.

use ruststream::{Broker, ConnectedBroker, Subscribe};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{
    hostile::{raw_push, short_frame},
    prelude::*,
};
use crate::support::{
    ChildTest, PyPeer, STEP, Tap, interrupt_until_handled_by, json_of, latin1, logs, until,
};

/// The test below, by the name libtest gives it: its child process runs it again by that name.
fn frame_header() -> String {
    crate::support::test_name(
        module_path!(),
        "a_peer_announcing_a_frame_of_1_tib_or_of_256_mib_is_cut_at_the_header_without_reading_the_frame_and_the_service_serves_on",
    )
}

/// What the child prints in front of its figures.
const FRAME_HEADER_FIGURES: &str = "frame header figures: ";

/// A frame of 1 TiB could never be allocated, so cutting that one alone proves no limit: a
/// libzmq without one fails the allocation and cuts the connection too. The second frame, of
/// 256 MiB, could be, and its bytes follow its header. The memory is the whole process's: the
/// service runs in a child process of its own, which measures itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_announcing_a_frame_of_1_tib_or_of_256_mib_is_cut_at_the_header_without_reading_the_frame_and_the_service_serves_on()
 {
    if crate::support::is_child(&frame_header()) {
        return frame_headers_in_a_process_of_its_own().await;
    }
    crate::support::alone_with_figures(&frame_header(), FRAME_HEADER_FIGURES).await;
}

/// A long frame header (flags 0x02, LONG, no MORE) announcing `length` bytes.
fn long_frame_header(length: u64) -> Vec<u8> {
    let mut header = vec![0x02];
    header.extend(length.to_be_bytes());
    header
}

/// Waits until the service closes `attacker`'s connection, failing the test naming `what`.
async fn cut(attacker: &mut tokio::net::TcpStream, what: &str) {
    let mut rest = Vec::new();
    let read = tokio::time::timeout(STEP, attacker.read_to_end(&mut rest)).await;
    assert!(
        matches!(read, Ok(Ok(_)) | Ok(Err(_))),
        "{what}: the attacker's connection was still open after {STEP:?}"
    );
}

async fn frame_headers_in_a_process_of_its_own() {
    use crate::support::Memory;
    logs();
    const HUGE: usize = 256 << 20;
    const CHUNK: usize = 1 << 20;
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let monitor = connected.monitor();
    let mut tap = Tap::new(connected.subscribe("jobs").await.unwrap());
    let address = monitor.bound_address().unwrap();
    let good = |n: u8| {
        let mut frames = short_frame(b"jobs", true);
        frames.extend(short_frame(format!(r#"{{"n":{n}}}"#).as_bytes(), false));
        frames
    };
    let mut attacker = raw_push(&address).await;
    attacker.write_all(&good(1)).await.unwrap();
    assert_eq!(
        json_of(&tap.expect("the raw peer's good message").await)["n"],
        1
    );
    // 1 TiB announced, nothing behind it.
    attacker
        .write_all(&long_frame_header(1 << 40))
        .await
        .unwrap();
    cut(&mut attacker, "a frame of 1 TiB announced").await;
    until(STEP, "the first attacker counted as a peer lost", || {
        monitor.peers_lost() == 1
    })
    .await;

    // 256 MiB announced over the 64 KiB default limit, and sent: each write fails once the
    // service has cut the connection.
    let mut attacker = raw_push(&address).await;
    attacker.write_all(&good(2)).await.unwrap();
    assert_eq!(
        json_of(&tap.expect("the second raw peer's good message").await)["n"],
        2
    );
    let before = Memory::now();
    attacker
        .write_all(&long_frame_header(HUGE as u64))
        .await
        .unwrap();
    let chunk = vec![b'x'; CHUNK];
    let mut written = 0;
    while written < HUGE {
        match tokio::time::timeout(STEP, attacker.write_all(&chunk)).await {
            Ok(Ok(())) => written += CHUNK,
            Ok(Err(_)) => break,
            Err(_) => panic!("a write of the frame's bytes waited {STEP:?}: nothing read it"),
        }
    }
    let after = Memory::now();
    println!(
        "{FRAME_HEADER_FIGURES}a frame of {HUGE} bytes announced over the default limit: {written} \
         of its bytes written before the connection failed; VmHWM {} KiB before, {} KiB \
         after (VmRSS {} KiB)",
        before.peak_kib, after.peak_kib, after.rss_kib
    );
    // Reading the frame would add 262,144 KiB; a few read buffers are all the cut may cost.
    assert!(
        after.peak_kib <= before.peak_kib + 16 * 1024,
        "the peak resident set grew from {} to {} KiB: the frame was read",
        before.peak_kib,
        after.peak_kib
    );
    // What the socket buffers took before the cut, never the frame.
    assert!(
        written < HUGE / 4,
        "{written} bytes of the frame were written: the connection was not cut at its header"
    );
    cut(&mut attacker, "a frame of 256 MiB announced").await;
    until(STEP, "both attackers counted as peers lost", || {
        monitor.peers_lost() == 2
    })
    .await;

    let mut next = raw_push(&address).await;
    next.write_all(&good(3)).await.unwrap();
    assert_eq!(
        json_of(&tap.expect("the next peer's message").await)["n"],
        3
    );
    assert_eq!(
        monitor.refused(),
        0,
        "libzmq cut both before the service saw a message"
    );
    assert_eq!(monitor.peers_lost(), 2, "only the attackers were cut");
    connected.shutdown().await.unwrap();
}

/// The test below, by the name libtest gives it: its child process runs it again by that name.
fn huge_frame() -> String {
    crate::support::test_name(
        module_path!(),
        "a_frame_of_200_mb_over_a_1_mib_limit_is_refused_without_being_read_into_memory",
    )
}

/// What the child prints in front of its figures.
const HUGE_FRAME_FIGURES: &str = "huge frame figures: ";

/// The memory is the whole process's, and other tests run beside this one: the service runs in
/// a child process of its own, which measures itself; the parent requires its verdict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_of_200_mb_over_a_1_mib_limit_is_refused_without_being_read_into_memory() {
    if crate::support::is_child(&huge_frame()) {
        return huge_frame_in_a_process_of_its_own().await;
    }
    crate::support::alone_with_figures(&huge_frame(), HUGE_FRAME_FIGURES).await;
}

async fn huge_frame_in_a_process_of_its_own() {
    use crate::support::Memory;
    logs();
    const LIMIT: usize = 1 << 20;
    const HUGE: usize = 200_000_000;
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .limits(WireLimits::default().max_message_bytes(LIMIT))
        .connect()
        .await
        .unwrap();
    let monitor = connected.monitor();
    let mut tap = Tap::new(connected.subscribe("jobs").await.unwrap());
    let address = monitor.bound_address().unwrap();
    let mut attacker = PyPeer::connect("PUSH", &address, json!({})).await;
    // A message at the limit first: what reading one costs is in the peak before the attack.
    attacker
        .send_frames(vec![
            json!("jobs"),
            json!({"repeat": "x", "times": LIMIT - 8}),
        ])
        .await;
    tap.expect("the message at the limit").await;
    let before = Memory::now();
    // Building and queueing 200 MB in Python takes seconds on a loaded machine.
    let sent = attacker
        .call(json!({
            "op": "send",
            "frames": ["jobs", {"repeat": "x", "times": HUGE}],
            "timeout_ms": (STEP * 2).as_millis() as u64,
        }))
        .await;
    assert!(sent["sent"].is_u64(), "the attacker could not send: {sent}");
    until(STEP * 3, "the attacker's connection cut", || {
        monitor.peers_lost() == 1
    })
    .await;
    let mut next = PyPeer::connect("PUSH", &address, json!({})).await;
    next.send(&[b"jobs", br#"{"n":2}"#]).await;
    assert_eq!(
        json_of(&tap.expect("the next peer's message").await)["n"],
        2
    );
    let after = Memory::now();
    println!(
        "{HUGE_FRAME_FIGURES}a {HUGE}-byte frame against a {LIMIT}-byte limit: VmHWM {} KiB \
         before, {} KiB after (VmRSS {} KiB)",
        before.peak_kib, after.peak_kib, after.rss_kib
    );
    // Reading the frame whole would add 195,000 KiB; a few read buffers are all it may cost.
    assert!(
        after.peak_kib <= before.peak_kib + 16 * 1024,
        "the peak resident set grew from {} to {} KiB",
        before.peak_kib,
        after.peak_kib
    );
    assert_eq!(
        monitor.refused(),
        0,
        "libzmq refused it before the service saw it"
    );
    assert_eq!(monitor.peers_lost(), 1, "only the attacker was cut");
    connected.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_to_the_monitor_threads_leaves_every_socket_watched() {
    // Each socket's monitor is read by a thread of its own, and a signal the process handles
    // interrupts its wait. A watcher that stopped there would leave its socket's peers
    // uncounted, and its unread monitor would in the end stall libzmq's I/O thread.
    logs();
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let mut tap = Tap::new(connected.subscribe("jobs").await.unwrap());
    let monitor = connected.monitor();
    let address = monitor.bound_address().unwrap();
    // The socket's watcher among the threads signalled.
    interrupt_until_handled_by("zmq-monitor").await;
    let mut peer = PyPeer::connect("PUSH", &address, json!({})).await;
    until(STEP, "the peer counted after the signals", || {
        monitor.peers_connected() == 1
    })
    .await;
    peer.send(&[b"jobs", br#"{"n":1}"#]).await;
    assert_eq!(json_of(&tap.expect("the job").await)["n"], 1);
    peer.kill().await;
    until(STEP, "the peer's leaving counted", || {
        monitor.peers_lost() == 1
    })
    .await;
    assert_eq!(monitor.peers_connected(), 0, "the one peer, gone");
    connected.shutdown().await.unwrap();
}

#[derive(Debug, serde::Serialize, serde::Deserialize, Outgoing)]
struct Echoed {
    id: u64,
}

#[subscriber(Responder::<Bound>, reply("reply"))]
async fn echo_id(ask: &Echoed) -> Echoed {
    Echoed { id: ask.id }
}

/// The test below, by the name libtest gives it: its child process runs it again by that name.
fn claimed_id() -> String {
    crate::support::test_name(
        module_path!(),
        "a_peer_claiming_the_routing_id_the_next_anonymous_peer_would_get_aborts_nothing",
    )
}

const CLAIMED_ID_FIGURES: &str = "claimed routing id figures: ";

/// The blind claim: libzmq gives an anonymous peer of a ROUTER `0x00` and a counter started
/// from C's `rand()`; unseeded, the first ROUTER of every process starts at `006b8b4567`, and a
/// peer that claims it first made the next anonymous peer's arrival abort the process. The
/// crate calls `srand` first, so that claim misses. It shows nothing about a peer that knows where the
/// counter is (the informed claim below aborts the process). In a process of its own, so that
/// its responder is the process's first ROUTER, as a service's would be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_claiming_the_routing_id_the_next_anonymous_peer_would_get_aborts_nothing() {
    if crate::support::is_child(&claimed_id()) {
        return claimed_id_in_a_process_of_its_own().await;
    }
    crate::support::alone_with_figures(&claimed_id(), CLAIMED_ID_FIGURES).await;
}

async fn claimed_id_in_a_process_of_its_own() {
    logs();
    let broker = ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("echo", "0.1.0")).with_broker(broker, |b| {
        b.include(
            echo_id
                .name("echo")
                .out_retry("echo.retry@tcp://127.0.0.1:1"),
        )
        .out_reply(Publish)
        .transform(ToRequester);
    });
    let running = app.start().await.unwrap();
    let address = monitor.bound_address().unwrap();
    // What an unseeded libzmq gives the first anonymous peer of the process's first ROUTER.
    let foreseen = "\u{0}\u{6b}\u{8b}\u{45}\u{67}";
    let mut claimant = PyPeer::connect("DEALER", &address, json!({"ROUTING_ID": foreseen})).await;
    claimant.send(&[b"echo", b"", br#"{"id":1}"#]).await;
    assert_eq!(
        claimant.expect("the claimant's answer").await.payload()["id"],
        1
    );
    let mut anonymous = PyPeer::connect("DEALER", &address, json!({})).await;
    anonymous.send(&[b"echo", b"", br#"{"id":2}"#]).await;
    assert_eq!(
        anonymous
            .expect("the anonymous peer's answer")
            .await
            .payload()["id"],
        2
    );
    claimant.send(&[b"echo", b"", br#"{"id":3}"#]).await;
    assert_eq!(
        claimant
            .expect("the claimant's second answer")
            .await
            .payload()["id"],
        3
    );
    println!("{CLAIMED_ID_FIGURES}both requesters answered; the process lives");
    running.shutdown().await.unwrap();
}

/// The request's `reply-to`, as the responder stamped it.
#[derive(Debug, serde::Deserialize)]
struct ReplyTo {
    #[serde(rename = "reply-to")]
    reply_to: String,
}

/// An answer that tells the requester its own reply address.
#[derive(Debug, serde::Serialize, serde::Deserialize, Outgoing)]
struct Told {
    id: u64,
    reply_to: String,
}

/// Shows each requester its `reply-to`, as any handler, log line or copy that shows the header
/// would.
#[subscriber(Responder::<Bound>, reply("reply"))]
async fn tell_reply_to(ask: &Echoed, Headers(from): Headers<ReplyTo>) -> Told {
    Told {
        id: ask.id,
        reply_to: from.reply_to,
    }
}

/// The test below, by the name libtest gives it: its child process runs it again by that name.
fn informed_claim() -> String {
    crate::support::test_name(
        module_path!(),
        "a_requester_that_reads_its_routing_id_and_claims_the_next_aborts_the_process_at_the_next_anonymous_requester",
    )
}

/// What the child prints in front of the address it listens on.
const LISTENING: &str = "responder listening on ";

/// The routing id in a reply address (`zmq-reply:<hex>`).
fn routing_id_of(reply_to: &str) -> Vec<u8> {
    let hex = reply_to
        .strip_prefix("zmq-reply:")
        .unwrap_or_else(|| panic!("not a DEALER's reply address: {reply_to}"));
    (0..hex.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&hex[at..at + 2], 16).expect("hex"))
        .collect()
}

/// The informed claim: libzmq 4.3 gives each anonymous peer of a ROUTER `0x00` and the next
/// value of one counter (big-endian), and never checks that a peer claimed it. A requester that
/// reads its own reply address claims the next id on a second connection; the next anonymous
/// requester's handshake then fails libzmq's assertion (`Assertion failed: ok`), and the whole
/// process aborts. Seeding `rand()` only hides where the counter starts. The responder, in
/// clear, runs in a child process; the peers are this process's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requester_that_reads_its_routing_id_and_claims_the_next_aborts_the_process_at_the_next_anonymous_requester()
 {
    use std::os::unix::process::ExitStatusExt;
    if crate::support::is_child(&informed_claim()) {
        return informed_claim_in_a_process_of_its_own().await;
    }
    let mut responder = ChildTest::spawn(&informed_claim());
    let Some(address) = responder.after(LISTENING, STEP * 3).await else {
        let end = responder.end(STEP).await;
        panic!("the responder never listened: {}", end.describe());
    };
    let mut first = PyPeer::connect("DEALER", &address, json!({})).await;
    first.send(&[b"echo", b"", br#"{"id":1}"#]).await;
    let told = first.expect("the first requester's answer").await.payload();
    let own = routing_id_of(told["reply_to"].as_str().expect("a reply address"));
    let [0, a, b, c, d] = own[..] else {
        panic!("an anonymous requester's id is 0x00 and four bytes: {own:02x?}");
    };
    let next = u32::from_be_bytes([a, b, c, d]).wrapping_add(1);
    let mut claimed = vec![0];
    claimed.extend(next.to_be_bytes());
    let mut claimant =
        PyPeer::connect("DEALER", &address, json!({"ROUTING_ID": latin1(&claimed)})).await;
    claimant.send(&[b"echo", b"", br#"{"id":2}"#]).await;
    let told = claimant.expect("the claimant's answer").await.payload();
    assert_eq!(
        routing_id_of(told["reply_to"].as_str().expect("a reply address")),
        claimed,
        "the claim taken as the claimant's routing id"
    );
    // Its handshake alone names it; the request is what a requester would send.
    let mut anonymous = PyPeer::connect("DEALER", &address, json!({})).await;
    anonymous.send(&[b"echo", b"", br#"{"id":3}"#]).await;
    let end = responder.end(STEP * 2).await;
    let shown = end.describe();
    assert_eq!(
        end.status.and_then(|status| status.signal()),
        Some(libc::SIGABRT),
        "the responder's process was not aborted: {shown}"
    );
    assert!(
        end.stderr.contains("Assertion failed"),
        "aborted by something other than libzmq's assertion: {shown}"
    );
    println!(
        "the requester's id {own:02x?}, the claim {claimed:02x?}: the responder's process ended \
         with {:?}; {}",
        end.status,
        end.stderr
            .lines()
            .find(|line| line.contains("Assertion failed"))
            .unwrap_or_default()
    );
    drop((first, claimant, anonymous));
}

async fn informed_claim_in_a_process_of_its_own() {
    logs();
    let broker = ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("echo", "0.1.0")).with_broker(broker, |b| {
        b.include(
            tell_reply_to
                .name("echo")
                .out_retry("echo.retry@tcp://127.0.0.1:1"),
        )
        .out_reply(Publish)
        .transform(ToRequester);
    });
    let running = app.start().await.unwrap();
    println!("{LISTENING}{}", monitor.bound_address().unwrap());
    // The parent's requesters abort this process: outliving its wait for them is the failure.
    tokio::time::sleep(STEP * 6).await;
    running.shutdown().await.unwrap();
}

// -------------------------------------------------------------------------------------------
// A message of millions of small frames

/// The test below, by the name libtest gives it: its child process runs it again by that name.
fn many_frames() -> String {
    crate::support::test_name(
        module_path!(),
        "a_message_of_4_million_empty_frames_is_held_by_libzmq_at_64_bytes_a_frame_then_refused_by_rule_uncopied",
    )
}

const MANY_FRAMES_FIGURES: &str = "many frames figures: ";

/// The frames of the attack: `jobs` and empty frames, 2 bytes each on the wire.
const MANY_FRAMES: usize = 4_000_000;

/// What libzmq holds for each frame of a message until the message is whole: one `zmq_msg_t`,
/// 64 bytes, in its pipe.
const LIBZMQ_BYTES_A_FRAME: u64 = 64;

/// Beyond what libzmq holds: read buffers and the allocator's slack. A copy of the frames
/// (32 bytes each as `Bytes`, 122 MiB for 4 million) is far over it.
const MANY_FRAMES_MARGIN_KIB: u64 = 32 * 1024;

/// libzmq's size limit is per frame and its queue counts whole messages, so a message of
/// millions of empty frames passes both, and libzmq holds it whole in its pipe, 64 bytes a
/// frame, before the reader sees its first frame. The subscription then copies nine frames
/// (`max_frames` and one), reads the rest without a copy, refuses it by rule, and the job after
/// it is handled. The memory is the whole process's: the service runs in a child process of its
/// own, which measures itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_of_4_million_empty_frames_is_held_by_libzmq_at_64_bytes_a_frame_then_refused_by_rule_uncopied()
 {
    if crate::support::is_child(&many_frames()) {
        return many_frames_in_a_process_of_its_own().await;
    }
    crate::support::alone_with_figures(&many_frames(), MANY_FRAMES_FIGURES).await;
}

async fn many_frames_in_a_process_of_its_own() {
    use crate::support::Memory;
    logs();
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let monitor = connected.monitor();
    let mut tap = Tap::new(connected.subscribe("jobs").await.unwrap());
    let address = monitor.bound_address().unwrap();
    let good = |n: u64| {
        let mut frames = short_frame(b"jobs", true);
        frames.extend(short_frame(format!(r#"{{"n":{n}}}"#).as_bytes(), false));
        frames
    };
    let mut attacker = raw_push(&address).await;
    attacker.write_all(&good(1)).await.unwrap();
    assert_eq!(
        json_of(&tap.expect("the attacker's good job").await)["n"],
        1
    );
    // Made before the measure: 8 MB of the test's own.
    let mut message = short_frame(b"jobs", true);
    message.extend(short_frame(b"", true).repeat(MANY_FRAMES - 2));
    message.extend(short_frame(b"", false));
    let before = Memory::now();
    tokio::time::timeout(STEP, attacker.write_all(&message))
        .await
        .expect("libzmq read the message")
        .unwrap();
    attacker.write_all(&good(2)).await.unwrap();
    assert_eq!(
        json_of(&tap.expect("the job after the message of many frames").await)["n"],
        2
    );
    let after = Memory::now();
    let grew = after.peak_kib.saturating_sub(before.peak_kib);
    let held_kib = MANY_FRAMES as u64 * LIBZMQ_BYTES_A_FRAME / 1024;
    println!(
        "{MANY_FRAMES_FIGURES}a message of {MANY_FRAMES} frames ({} bytes on the wire): VmHWM \
         {} KiB before, {} KiB after, grew {grew} KiB ({} bytes a frame); VmRSS {} KiB after",
        message.len(),
        before.peak_kib,
        after.peak_kib,
        grew * 1024 / MANY_FRAMES as u64,
        after.rss_kib
    );
    assert_eq!(
        monitor.refused_by("max-frames"),
        1,
        "the message of many frames, refused by its count"
    );
    assert_eq!(monitor.refused(), 1, "that message alone was refused");
    assert_eq!(
        monitor.peers_lost(),
        0,
        "libzmq has no limit on a message's frames: the attacker stays"
    );
    assert!(
        grew <= held_kib + MANY_FRAMES_MARGIN_KIB,
        "the peak resident set grew by {grew} KiB, over the {held_kib} KiB libzmq holds and \
         {MANY_FRAMES_MARGIN_KIB} KiB: the frames were copied"
    );
    connected.shutdown().await.unwrap();
}
