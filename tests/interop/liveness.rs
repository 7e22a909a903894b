//! What a backend with heartbeats and a handshake timeout (libzmq, omq) does with a peer that
//! heartbeats, one that stops, and one that connects and says nothing: the counterparts of what
//! the `zeromq` client cannot notice (`on_zeromq::heartbeat`).

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use ruststream::{Broker, ConnectedBroker, Subscribe};
use serde_json::json;
use tokio::io::AsyncReadExt;

use super::{BACKEND, prelude::*};
use crate::{
    backend::Backend,
    support::{PyPeer, STEP, Tap, json_of, logs, relay::Relay, until, until_async},
};

fn count(events: &[String], event: &str) -> usize {
    events.iter().filter(|e| *e == event).count()
}

/// The ZMTP commands by name in what a service sent on one connection (`sent`, from its start),
/// in the frames complete so far.
fn commands(sent: &[u8]) -> HashMap<String, u64> {
    let mut counted = HashMap::new();
    // Frames follow the 64-byte greeting: flags (0x04 a command, 0x02 a long size), size, body;
    // a command's body starts with its name's length and name.
    let mut at = 64;
    loop {
        let Some(&flags) = sent.get(at) else {
            return counted;
        };
        let (size, head) = if flags & 0x02 != 0 {
            let Some(size) = sent.get(at + 1..at + 9) else {
                return counted;
            };
            (u64::from_be_bytes(size.try_into().unwrap()) as usize, 9)
        } else {
            let Some(&size) = sent.get(at + 1) else {
                return counted;
            };
            (usize::from(size), 2)
        };
        let Some(body) = sent.get(at + head..at + head + size) else {
            return counted;
        };
        if flags & 0x04 != 0 {
            let length = usize::from(body[0]);
            let name = String::from_utf8_lossy(&body[1..1 + length]).into_owned();
            *counted.entry(name).or_default() += 1;
        }
        at += head + size;
    }
}

/// The commands the service sent on the relay's first connection, by name.
fn sent_by_the_service(relay: &Relay) -> HashMap<String, u64> {
    relay
        .connections()
        .first()
        .map(|connection| commands(&connection.from_target))
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeating_libzmq_peer_stays_connected_through_100_pings_and_loses_nothing() {
    logs();
    const INTERVAL_MS: u64 = 20;
    const PINGS: u64 = 100;
    // Silence both sides tolerate: what a loaded machine may hold up a PONG by, far longer
    // than the interval.
    const TIMEOUT_MS: u64 = 2_000;
    let interval = Duration::from_millis(INTERVAL_MS);
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .heartbeat(interval, Duration::from_millis(TIMEOUT_MS))
        .connect()
        .await
        .unwrap();
    let monitor = connected.monitor();
    let mut tap = Tap::new(connected.subscribe("beats").await.unwrap());
    // The peer dials through a relay that keeps what the service sends, to count its PINGs;
    // the peer PINGs too: it cuts the connection should the service not answer within its
    // timeout.
    let relay = Relay::to(&monitor.bound_address().unwrap()).await;
    let heartbeats = json!({"HEARTBEAT_IVL": INTERVAL_MS, "HEARTBEAT_TIMEOUT": TIMEOUT_MS});
    let mut peer = PyPeer::connect("PUSH", &relay.address, heartbeats).await;

    // Messages every five intervals until the service has sent its 100th PING.
    let started = Instant::now();
    let mut sent = 0;
    until_async(
        STEP * 3,
        format!("{PINGS} PINGs from the service"),
        async || {
            let pings = sent_by_the_service(&relay)
                .get("PING")
                .copied()
                .unwrap_or(0);
            if pings >= PINGS {
                return Ok(());
            }
            sent += 1;
            peer.send(&[b"beats", json!({ "n": sent }).to_string().as_bytes()])
                .await;
            // The pace of the messages, not a wait for anything.
            tokio::time::sleep(interval * 5).await;
            Err(format!("{pings} PINGs so far"))
        },
    )
    .await;
    let commands = sent_by_the_service(&relay);
    let of = |name: &str| commands.get(name).copied().unwrap_or(0);
    let mut arrived = Vec::new();
    while arrived.len() < sent {
        arrived.push(
            json_of(&tap.expect("every beat").await)["n"]
                .as_u64()
                .unwrap() as usize,
        );
    }
    assert_eq!(arrived, (1..=sent).collect::<Vec<_>>(), "all, in order");
    let events = peer.events().await;
    println!(
        "{sent} messages over {:?} of {INTERVAL_MS} ms heartbeats: the service sent {} PINGs and \
         {} PONGs; peer events {events:?}",
        started.elapsed(),
        of("PING"),
        of("PONG"),
    );
    assert!(
        of("PONG") >= 1,
        "the service never answered the peer's PINGs"
    );
    assert_eq!(count(&events, "DISCONNECTED"), 0, "{events:?}");
    assert_eq!(count(&events, "HANDSHAKE_SUCCEEDED"), 1, "{events:?}");
    assert_eq!(relay.connections().len(), 1, "one connection throughout");
    assert_eq!(monitor.peers_lost(), 0);
    connected.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_stopped_with_sigstop_is_found_dead_by_the_heartbeat_timeout_and_counted() {
    logs();
    let (interval, timeout) = (Duration::from_millis(100), Duration::from_millis(500));
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .heartbeat(interval, timeout)
        .connect()
        .await
        .unwrap();
    let monitor = connected.monitor();
    let mut tap = Tap::new(connected.subscribe("jobs").await.unwrap());
    // The peer sets no heartbeat of its own: libzmq answers a PING whatever its options.
    let mut peer = PyPeer::connect("PUSH", &monitor.bound_address().unwrap(), json!({})).await;
    peer.send(&[b"jobs", br#"{"n":1}"#]).await;
    tap.expect("the peer's message").await;

    peer.pause();
    let stopped = Instant::now();
    // A loaded machine may add seconds to the timer's own interval and timeout; still far
    // below the default timeout of ten seconds, so the setting is what cut it.
    until(
        timeout + interval + Duration::from_secs(3),
        "the stopped peer cut",
        || monitor.peers_lost() == 1,
    )
    .await;
    let noticed = stopped.elapsed();
    println!("a peer stopped with SIGSTOP was cut after {noticed:?} (timeout {timeout:?})");
    assert!(
        noticed >= timeout - interval,
        "cut before the timeout: {noticed:?}"
    );
    peer.resume();
    peer.kill().await;
    connected.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_connects_and_says_nothing_is_cut_at_the_handshake_timeout() {
    logs();
    let handshake = Duration::from_millis(300);
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .handshake_timeout(handshake)
        .connect()
        .await
        .unwrap();
    let monitor = connected.monitor();
    let _subscriber = connected.subscribe("jobs").await.unwrap();
    let address = monitor.bound_address().unwrap();
    let mut silent = tokio::net::TcpStream::connect(address.trim_start_matches("tcp://"))
        .await
        .unwrap();
    let opened = Instant::now();
    if BACKEND == Backend::Omq {
        // Not through its handshake: not a peer, and the service not ready for it.
        assert_eq!(
            monitor.peers_connected(),
            0,
            "a silent connection counted as a peer"
        );
    }
    // The service greets first; the connection ends when it gives up on the rest.
    // Waits past the crate's default handshake timeout, so that a cut at the default is
    // measured, not taken for a connection left open.
    let mut greeting = Vec::new();
    let read = tokio::time::timeout(STEP * 2, silent.read_to_end(&mut greeting)).await;
    let cut = opened.elapsed();
    assert!(
        matches!(read, Ok(Ok(_)) | Ok(Err(_))),
        "the silent connection was still open after {:?}",
        STEP * 2
    );
    println!("a silent peer was cut after {cut:?} (handshake timeout {handshake:?})");
    // libzmq's timer starts at the accept, a little before this side's connect returned.
    assert!(
        cut >= handshake / 2,
        "cut long before the handshake timeout: {cut:?}"
    );
    // A loaded machine's delay on top, and far below the default of ten seconds.
    assert!(
        cut <= handshake + Duration::from_secs(3),
        "cut long after the handshake timeout of {handshake:?}: {cut:?}"
    );
    // A peer counts once through its handshake on omq: the silent one never was one, so none
    // was lost; libzmq counts the connection, and its loss.
    let lost = match BACKEND {
        Backend::Omq => 0,
        Backend::Libzmq | Backend::Zeromq => 1,
    };
    until(STEP, "the silent peer counted", || {
        monitor.peers_refused() == 1 && monitor.peers_lost() == lost
    })
    .await;
    connected.shutdown().await.unwrap();
}
