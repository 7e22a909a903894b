//! The omq backend against hostile peers, speaking ZMTP by hand (the counterparts of
//! `on_zeromq::zeromq_faults` and `on_libzmq::libzmq_faults`): what omq's size limit cuts as the
//! frames arrive, how many frames a message may have, and what omq's ROUTER does with routing ids
//! claimed by a peer. Each test is a cell of the security guide's hostile-peer table.
//!
//! The broker sets omq's limit to `max_message_bytes` and 64 bytes a frame for `max_frames` + 2
//! frames (`message_size` in `src/transport/omq/mod.rs`): 66,176 at the defaults.

use std::{convert::Infallible, sync::Arc, time::Duration};

use ruststream::{Broker, ConnectedBroker, Subscribe};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    sync::{Semaphore, mpsc},
};

use super::{
    hostile::{raw_push, short_frame},
    prelude::*,
    stalled_requester::echo_responder,
};
use crate::support::{
    Memory, PyPeer, STEP, Tap, alone_with_figures, is_child, json_of, logs, test_name, until,
};

/// omq's limit at the default `max_message_bytes` (64 KiB) and `max_frames` (8).
const DEFAULT_OMQ_LIMIT: usize = 65_536 + 64 * (8 + 2);

/// What omq charges each frame beyond its bytes.
const FRAME_COST: usize = 64;

/// How much the peak resident set may grow while a service cuts a peer that sends past its limit:
/// a few read buffers and the allocator's slack, far below what holding the attack would cost
/// (64 MiB and more in every test here).
const CUT_MARGIN_KIB: u64 = 16 * 1024;

/// A good job on the wire: `jobs`, then `{"n":n}`.
fn good(n: u64) -> Vec<u8> {
    let mut frames = short_frame(b"jobs", true);
    frames.extend(short_frame(json!({ "n": n }).to_string().as_bytes(), false));
    frames
}

/// A long frame header (flags 0x02 LONG, and MORE when `more`) announcing `length` bytes.
fn long_frame_header(length: u64, more: bool) -> Vec<u8> {
    let mut header = vec![0x02 | u8::from(more)];
    header.extend(length.to_be_bytes());
    header
}

/// Waits until the service closes `attacker`'s connection, failing the test naming `what`.
async fn cut(attacker: &mut TcpStream, what: &str) {
    let mut rest = Vec::new();
    let read = tokio::time::timeout(STEP, attacker.read_to_end(&mut rest)).await;
    assert!(
        matches!(read, Ok(Ok(_)) | Ok(Err(_))),
        "{what}: the attacker's connection was still open after {STEP:?}"
    );
}

/// Writes `chunk` up to `times` times, until a write fails: answers the bytes written. A write
/// that waits a whole step means that nothing reads the connection, nor cuts it.
async fn write_until_cut(attacker: &mut TcpStream, chunk: &[u8], times: usize) -> usize {
    let mut written = 0;
    for _ in 0..times {
        match tokio::time::timeout(STEP, attacker.write_all(chunk)).await {
            Ok(Ok(())) => written += chunk.len(),
            Ok(Err(_)) => break,
            Err(_) => panic!("a write waited {STEP:?}: nothing read the connection, nor cut it"),
        }
    }
    written
}

/// A bound queue at `limits` subscribed to `jobs`, connected: what the attacks below hit.
async fn bound_queue(limits: WireLimits) -> (impl ConnectedBroker, Tap, ZmqMonitor, String) {
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .limits(limits)
        .connect()
        .await
        .unwrap();
    let monitor = connected.monitor();
    let tap = Tap::new(connected.subscribe("jobs").await.unwrap());
    let address = monitor.bound_address().unwrap();
    (connected, tap, monitor, address)
}

/// A raw peer through its handshake whose job `n` is handled: the attack that follows comes
/// from a peer the service served.
async fn served_raw_peer(address: &str, tap: &mut Tap, n: u64) -> TcpStream {
    let mut raw = raw_push(address).await;
    raw.write_all(&good(n)).await.unwrap();
    assert_eq!(
        json_of(&tap.expect("the raw peer's good job").await)["n"],
        n
    );
    raw
}

// -------------------------------------------------------------------------------------------
// A frame header announcing 1 TiB

/// The test below, by the name libtest gives it: its child process runs it again by that name.
fn frame_header() -> String {
    test_name(
        module_path!(),
        "a_peer_announcing_a_frame_of_1_tib_or_of_256_mib_is_cut_at_the_header_and_the_service_serves_on",
    )
}

const FRAME_HEADER_FIGURES: &str = "frame header figures: ";

/// A frame of 1 TiB could never be allocated, so cutting that one alone proves no limit; the
/// second, of 256 MiB, could be, and its bytes follow its header. At the default limits. The
/// memory is the whole process's: the service runs in a child process of its own, which measures
/// itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_announcing_a_frame_of_1_tib_or_of_256_mib_is_cut_at_the_header_and_the_service_serves_on()
 {
    if is_child(&frame_header()) {
        return frame_headers_in_a_process_of_its_own().await;
    }
    alone_with_figures(&frame_header(), FRAME_HEADER_FIGURES).await;
}

async fn frame_headers_in_a_process_of_its_own() {
    logs();
    const HUGE: usize = 256 << 20;
    const CHUNK: usize = 1 << 20;
    let (connected, mut tap, monitor, address) = bound_queue(WireLimits::default()).await;
    let before = Memory::now();
    let mut attacker = served_raw_peer(&address, &mut tap, 1).await;
    attacker
        .write_all(&long_frame_header(1 << 40, false))
        .await
        .unwrap();
    cut(&mut attacker, "a frame of 1 TiB announced").await;
    until(STEP, "the first attacker counted as a peer lost", || {
        monitor.peers_lost() == 1
    })
    .await;

    let mut attacker = served_raw_peer(&address, &mut tap, 2).await;
    attacker
        .write_all(&long_frame_header(HUGE as u64, false))
        .await
        .unwrap();
    let written = write_until_cut(&mut attacker, &vec![b'x'; CHUNK], HUGE / CHUNK).await;
    cut(&mut attacker, "a frame of 256 MiB announced").await;
    until(STEP, "both attackers counted as peers lost", || {
        monitor.peers_lost() == 2
    })
    .await;
    let after = Memory::now();
    println!(
        "{FRAME_HEADER_FIGURES}1 TiB announced, then {HUGE} bytes announced and {written} of them \
         written before the cut; VmHWM {} KiB before, {} KiB after (VmRSS {} KiB)",
        before.peak_kib, after.peak_kib, after.rss_kib
    );
    assert!(
        written < HUGE / 4,
        "{written} bytes of the frame were written: the connection was not cut at its header"
    );
    assert!(
        after.peak_kib <= before.peak_kib + CUT_MARGIN_KIB,
        "the peak resident set grew from {} to {} KiB: the frame was read",
        before.peak_kib,
        after.peak_kib
    );

    let mut next = raw_push(&address).await;
    next.write_all(&good(3)).await.unwrap();
    assert_eq!(json_of(&tap.expect("the next peer's job").await)["n"], 3);
    assert_eq!(
        monitor.refused(),
        0,
        "omq cut both before the service saw a message"
    );
    assert_eq!(monitor.peers_lost(), 2, "only the attackers were cut");
    connected.shutdown().await.unwrap();
}

// -------------------------------------------------------------------------------------------
// A message that never ends

fn endless_message() -> String {
    test_name(
        module_path!(),
        "a_message_that_never_ends_is_cut_at_the_size_limit_and_the_service_serves_on",
    )
}

const ENDLESS_FIGURES: &str = "endless message figures: ";

/// The attack `hostile.rs` pins on the other backends (each frame under every limit, the message
/// never ended): omq counts the frames of a message as they arrive and cuts the connection at
/// the limit, 66,176 bytes at the defaults, so of 64 MiB of frames marked "more" the service
/// reads about 64 KiB. In a process of its own, which measures itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_never_ends_is_cut_at_the_size_limit_and_the_service_serves_on() {
    if is_child(&endless_message()) {
        return endless_message_in_a_process_of_its_own().await;
    }
    alone_with_figures(&endless_message(), ENDLESS_FIGURES).await;
}

async fn endless_message_in_a_process_of_its_own() {
    logs();
    const FRAME: usize = 1 << 10;
    const SENT: usize = 64 << 20;
    let (connected, mut tap, monitor, address) = bound_queue(WireLimits::default()).await;
    let before = Memory::now();
    let mut attacker = served_raw_peer(&address, &mut tap, 1).await;
    // Frames of 1 KiB marked "more", a thousand to a write.
    let mut frame = long_frame_header(FRAME as u64, true);
    frame.resize(9 + FRAME, b'x');
    let chunk = frame.repeat(1_000);
    let written = write_until_cut(&mut attacker, &chunk, SENT / (FRAME * 1_000)).await;
    cut(&mut attacker, "a message that never ends").await;
    until(STEP, "the attacker counted as a peer lost", || {
        monitor.peers_lost() == 1
    })
    .await;
    let after = Memory::now();
    println!(
        "{ENDLESS_FIGURES}frames of {FRAME} bytes marked \"more\": {written} bytes written before \
         the cut, of {SENT}; VmHWM {} KiB before, {} KiB after (VmRSS {} KiB)",
        before.peak_kib, after.peak_kib, after.rss_kib
    );
    // What the socket buffers took before the cut, never the message.
    assert!(
        written < SENT / 4,
        "{written} bytes of a message that never ends were written: nothing cut it at the limit"
    );
    assert!(
        after.peak_kib <= before.peak_kib + CUT_MARGIN_KIB,
        "the peak resident set grew from {} to {} KiB: the message was held",
        before.peak_kib,
        after.peak_kib
    );
    let mut next = PyPeer::connect("PUSH", &address, json!({})).await;
    next.send(&[b"jobs", br#"{"n":2}"#]).await;
    assert_eq!(json_of(&tap.expect("the next peer's job").await)["n"], 2);
    assert_eq!(
        monitor.refused(),
        0,
        "nothing reached the service to refuse"
    );
    assert_eq!(monitor.peers_lost(), 1, "only the attacker was cut");
    connected.shutdown().await.unwrap();
}

// -------------------------------------------------------------------------------------------
// A message of millions of small frames

fn empty_frames() -> String {
    test_name(
        module_path!(),
        "a_message_of_millions_of_empty_frames_is_cut_after_1_033_and_one_of_1_032_is_refused_by_rule",
    )
}

const EMPTY_FRAMES_FIGURES: &str = "empty frames figures: ";

/// The frames a message of `jobs` and empty frames may have under omq's limit at the defaults:
/// `jobs` costs 4 + 64 bytes, each empty frame 64.
const MOST_EMPTY_FRAMES: usize = (DEFAULT_OMQ_LIMIT - (4 + FRAME_COST)) / FRAME_COST;

/// A frame costs omq 64 bytes beyond its own, so the limit bounds a message's frames too: at the
/// defaults `jobs` and 1,032 empty frames are read, and refused by the crate under `max-frames`,
/// while one more frame cuts the connection, as does a message of 4 million (8 MB on the wire,
/// which would cost 256 MB held as frames). In a process of its own, which measures itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_of_millions_of_empty_frames_is_cut_after_1_033_and_one_of_1_032_is_refused_by_rule()
 {
    if is_child(&empty_frames()) {
        return empty_frames_in_a_process_of_its_own().await;
    }
    alone_with_figures(&empty_frames(), EMPTY_FRAMES_FIGURES).await;
}

/// `jobs` marked "more", then `empty` empty frames, the last of them ending the message when
/// `ends`.
fn jobs_and_empty_frames(empty: usize, ends: bool) -> Vec<u8> {
    let mut frames = short_frame(b"jobs", true);
    for i in 0..empty {
        frames.extend(short_frame(b"", !ends || i + 1 < empty));
    }
    frames
}

async fn empty_frames_in_a_process_of_its_own() {
    logs();
    const MILLIONS: usize = 4_000_000;
    assert_eq!(MOST_EMPTY_FRAMES, 1_032);
    let (connected, mut tap, monitor, address) = bound_queue(WireLimits::default()).await;

    // The most frames the limit takes: read, then refused by rule, and the peer served on.
    let mut peer = served_raw_peer(&address, &mut tap, 1).await;
    peer.write_all(&jobs_and_empty_frames(MOST_EMPTY_FRAMES, true))
        .await
        .unwrap();
    peer.write_all(&good(2)).await.unwrap();
    assert_eq!(
        json_of(&tap.expect("the job after the message at the limit").await)["n"],
        2
    );
    assert_eq!(
        monitor.refused_by("max-frames"),
        1,
        "the message of {MOST_EMPTY_FRAMES} empty frames, refused by the crate"
    );

    // One more frame: cut as it arrives.
    peer.write_all(&jobs_and_empty_frames(MOST_EMPTY_FRAMES + 1, true))
        .await
        .unwrap();
    cut(&mut peer, "a message of one frame past the limit").await;
    until(STEP, "the peer counted as lost", || {
        monitor.peers_lost() == 1
    })
    .await;

    // Millions, never ended.
    let mut attacker = served_raw_peer(&address, &mut tap, 3).await;
    let before = Memory::now();
    let chunk = short_frame(b"", true).repeat(MILLIONS / 100);
    let written = write_until_cut(&mut attacker, &chunk, 100).await;
    cut(&mut attacker, "a message of millions of empty frames").await;
    until(STEP, "both peers counted as lost", || {
        monitor.peers_lost() == 2
    })
    .await;
    let after = Memory::now();
    println!(
        "{EMPTY_FRAMES_FIGURES}{MOST_EMPTY_FRAMES} empty frames read and refused, one more cut; \
         of {MILLIONS} empty frames marked \"more\" {} written before the cut; VmHWM {} KiB \
         before, {} KiB after (VmRSS {} KiB)",
        written / 2,
        before.peak_kib,
        after.peak_kib,
        after.rss_kib
    );
    // What was written is what the socket buffers took before the cut (half of the frames on
    // an idle machine): the bound is the memory, 64 bytes a frame held.
    assert!(
        after.peak_kib <= before.peak_kib + CUT_MARGIN_KIB,
        "the peak resident set grew from {} to {} KiB: the frames were held",
        before.peak_kib,
        after.peak_kib
    );
    let mut next = raw_push(&address).await;
    next.write_all(&good(4)).await.unwrap();
    assert_eq!(json_of(&tap.expect("the next peer's job").await)["n"], 4);
    assert_eq!(
        monitor.refused(),
        1,
        "only the message at the limit was refused"
    );
    assert_eq!(monitor.peers_lost(), 2, "only the two cut were lost");
    connected.shutdown().await.unwrap();
}

// -------------------------------------------------------------------------------------------
// Routing ids a peer claims

/// A request and its answer: the id, echoed.
#[derive(Debug, Serialize, Deserialize, Outgoing)]
struct Asked {
    id: u64,
}

/// Holds the handler of request 1 until the test lets it answer.
#[derive(Clone)]
struct Gate {
    opened: Arc<Semaphore>,
    seen: mpsc::UnboundedSender<u64>,
}

#[derive(FromRef)]
struct GateState {
    gate: Gate,
}

#[subscriber(Responder::<Bound>, reply("reply"))]
async fn held_echo(ask: &Asked, State(gate): State<Gate>) -> Asked {
    let _ = gate.seen.send(ask.id);
    if ask.id == 1 {
        let _ = gate.opened.acquire().await;
    }
    Asked { id: ask.id }
}

/// libzmq gives anonymous peers ids that start with a zero byte, and a peer that claimed the
/// next one aborted the process (`on_libzmq::libzmq_faults`). omq refuses every claim that
/// starts with one, at the handshake: the claimant is refused (again at each reconnect),
/// counted, never answered, and an anonymous requester is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_claiming_a_routing_id_that_starts_with_a_zero_byte_is_refused_at_the_handshake() {
    logs();
    let (running, address, monitor) =
        echo_responder(ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))).await;
    // The id libzmq's first ROUTER of an unseeded process gives its first anonymous peer.
    let mut claimant = PyPeer::connect(
        "DEALER",
        &address,
        json!({"ROUTING_ID": "\u{0}\u{6b}\u{8b}\u{45}\u{67}"}),
    )
    .await;
    claimant
        .send(&[b"echo", b"", br#"{"id":1,"pad":""}"#])
        .await;
    until(STEP, "the claimant refused twice", || {
        monitor.peers_refused() >= 2
    })
    .await;
    let mut anonymous = PyPeer::connect("DEALER", &address, json!({})).await;
    anonymous
        .send(&[b"echo", b"", br#"{"id":2,"pad":""}"#])
        .await;
    assert_eq!(
        anonymous
            .expect("the anonymous requester's answer")
            .await
            .payload()["id"],
        2
    );
    assert_eq!(
        monitor.peers_connected(),
        1,
        "the anonymous requester alone got in"
    );
    assert!(
        claimant.recv(Duration::ZERO).await.is_none(),
        "the claimant was answered"
    );
    println!(
        "a routing id starting with a zero byte: {} handshakes refused",
        monitor.peers_refused()
    );
    running.shutdown().await.unwrap();
}

/// A pin: omq hands a routing id over to the last peer that claims it (libzmq's ROUTER refuses
/// the newcomer instead). In clear, a peer that claims the id of a connected requester takes
/// over: the requester's connection is dropped, counted as a peer lost, and the answer to the
/// request it was waiting on goes to the newcomer. Keep such peers out with CURVE and an
/// allow-list; the requester here does not reconnect, so that the claim is not taken back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_claiming_the_routing_id_of_a_connected_requester_takes_over_and_gets_its_answer() {
    logs();
    let (seen, mut seen_rx) = mpsc::unbounded_channel();
    let gate = Gate {
        opened: Arc::new(Semaphore::new(0)),
        seen,
    };
    let opened = Arc::clone(&gate.opened);
    let broker = ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("echo", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(GateState { gate }))
        .with_broker(broker, |b| {
            b.include(
                held_echo
                    .name("echo")
                    .out_retry("echo.retry@tcp://127.0.0.1:1"),
            )
            .out_reply(Publish)
            .transform(ToRequester);
        });
    let running = app.start().await.unwrap();
    let address = monitor.bound_address().unwrap();
    let claimed = json!({"ROUTING_ID": "alice", "RECONNECT_IVL": -1});

    let mut first = PyPeer::connect("DEALER", &address, claimed.clone()).await;
    first.send(&[b"echo", b"", br#"{"id":0}"#]).await;
    assert_eq!(first.expect("the first answer").await.payload()["id"], 0);
    first.send(&[b"echo", b"", br#"{"id":1}"#]).await;
    // Request 1 is with the handler, held.
    tokio::time::timeout(STEP, async { while seen_rx.recv().await != Some(1) {} })
        .await
        .expect("request 1 reached the handler");

    let mut newcomer = PyPeer::connect("DEALER", &address, claimed).await;
    until(
        STEP,
        "the first requester dropped for the newcomer (omq's handover)",
        || {
            let (connected, lost) = (monitor.peers_connected(), monitor.peers_lost());
            if connected == 1 && lost == 1 {
                Ok(())
            } else {
                Err(format!(
                    "{connected} connected, {lost} lost: if the first requester kept its id, omq \
                     refuses a claim in use now; update the security guide's hostile-peer table"
                ))
            }
        },
    )
    .await;
    opened.add_permits(1);
    assert_eq!(
        newcomer
            .expect("the first requester's answer, at the newcomer")
            .await
            .payload()["id"],
        1
    );
    newcomer.send(&[b"echo", b"", br#"{"id":2}"#]).await;
    assert_eq!(newcomer.expect("its own answer").await.payload()["id"], 2);
    assert!(
        first.recv(Duration::ZERO).await.is_none(),
        "the first requester got an answer after it was dropped"
    );
    let events = first.events().await;
    assert!(
        events.iter().any(|e| e == "DISCONNECTED"),
        "the first requester was not disconnected: {events:?}"
    );
    running.shutdown().await.unwrap();
}

// -------------------------------------------------------------------------------------------
// Garbage

/// Bytes no ZMTP peer sends: an HTTP request where a greeting belongs.
const NOT_A_GREETING: &[u8] = b"GET / HTTP/1.1\r\nHost: service\r\nAccept: */*\r\n\r\n\
                                 garbage garbage garbage garbage garbage garbage";

/// A frame whose flags set bits ZMTP reserves.
const RESERVED_FLAGS: &[u8] = &[0xf0, 3, b'b', b'a', b'd'];

/// Garbage in place of a greeting, or in place of a frame after READY: either connection is
/// dropped, a refusal at the handshake or a peer lost after it, nothing reaches the service to
/// refuse, and the next peer is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_before_or_after_ready_drops_the_connection_and_the_next_peer_is_served() {
    logs();
    let (connected, mut tap, monitor, address) = bound_queue(WireLimits::default()).await;

    let mut before_ready = TcpStream::connect(address.trim_start_matches("tcp://"))
        .await
        .unwrap();
    // The connection may be gone before the whole write.
    let _ = before_ready.write_all(NOT_A_GREETING).await;
    cut(&mut before_ready, "garbage in place of a greeting").await;
    until(STEP, "the garbage before READY refused", || {
        monitor.peers_refused() == 1
    })
    .await;

    let mut after_ready = served_raw_peer(&address, &mut tap, 1).await;
    after_ready.write_all(RESERVED_FLAGS).await.unwrap();
    cut(&mut after_ready, "garbage after READY").await;
    until(
        STEP,
        "the garbage after READY counted as a peer lost",
        || monitor.peers_lost() == 1,
    )
    .await;

    let mut next = PyPeer::connect("PUSH", &address, json!({})).await;
    next.send(&[b"jobs", br#"{"n":2}"#]).await;
    assert_eq!(json_of(&tap.expect("the next peer's job").await)["n"], 2);
    assert_eq!(
        monitor.refused(),
        0,
        "nothing reached the service to refuse"
    );
    assert_eq!(monitor.peers_refused(), 1, "one refused at the handshake");
    assert_eq!(monitor.peers_lost(), 1, "one lost after it");
    connected.shutdown().await.unwrap();
}

/// A host that opens many connections and says nothing on them holds at most 128 handshakes of
/// a socket at once: each past them is refused at once and counted, while the first wait out
/// `handshake_timeout`. Meanwhile they keep a new peer out too; once they go, it gets in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_past_128_are_refused_at_once_and_a_peer_gets_in_once_they_go() {
    const SILENT: u64 = 140;
    logs();
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        // Far past the test: what refuses the connections is the count, not the timeout.
        .handshake_timeout(Duration::from_secs(60))
        .connect()
        .await
        .unwrap();
    let monitor = connected.monitor();
    let mut tap = Tap::new(connected.subscribe("jobs").await.unwrap());
    let address = monitor.bound_address().unwrap();
    let mut silent = Vec::new();
    for _ in 0..SILENT {
        silent.push(
            TcpStream::connect(address.trim_start_matches("tcp://"))
                .await
                .unwrap(),
        );
    }
    until(STEP, "the connections past 128 refused", || {
        monitor.peers_refused() >= SILENT - 128
    })
    .await;
    assert_eq!(
        monitor.peers_refused(),
        SILENT - 128,
        "refused other than the connections past 128"
    );
    assert_eq!(
        monitor.peers_connected(),
        0,
        "a silent connection counted a peer"
    );
    // A new peer meanwhile: refused with them, and nothing it sends gets in.
    let mut peer = PyPeer::connect("PUSH", &address, json!({})).await;
    peer.send(&[b"jobs", br#"{"n":1}"#]).await;
    until(STEP, "the new peer refused", || {
        monitor.peers_refused() > SILENT - 128
    })
    .await;
    assert!(
        tap.next(Duration::from_millis(300)).await.is_none(),
        "a peer got in past the full handshakes"
    );
    // Once they go, it gets in: libzmq keeps its message through the refusals.
    drop(silent);
    assert_eq!(
        json_of(&tap.expect("the peer's job, once the silent went").await)["n"],
        1
    );
    connected.shutdown().await.unwrap();
}
