//! libzmq peers with ZMTP heartbeats on (`ZMQ_HEARTBEAT_IVL`): what the `zeromq` 0.7 client
//! does with them, pinned. It knows no ZMTP command but READY:
//!
//! - A socket that reads its connection (PULL, SUB, PUB, which reads subscriptions, ROUTER,
//!   DEALER) fails to decode the first PING ("Codec Error: Unknown command received") and drops
//!   that connection, about one heartbeat interval after each handshake. A libzmq peer that
//!   dials comes back after its `ZMQ_RECONNECT_IVL` (100 ms by default); a socket of ours that
//!   dials is re-created by the supervisor and dials again at once. So the connection lives one
//!   interval, dies, and comes back, over and over. What libzmq still held in its own queue is
//!   sent on the next connection; what it had already written behind the PING is lost, and so
//!   is what a PUB publishes while no subscription is connected.
//! - A PUSH never reads its connection, so it never sees a PING: while it sends at least once
//!   per `ZMQ_HEARTBEAT_TIMEOUT` (the interval by default) nothing happens. Idle for longer,
//!   libzmq times the connection out and closes it, and the PUSH only notices when a write
//!   fails: the first publishes after the idle gap are reported sent and are lost.
//! - Neither is a refusal: `ZmqMonitor::refused()` does not count the drops; `peers_lost()`
//!   does, and the transport logs each at debug level ("a peer's connection failed").
//! - Other peers on the same socket are not affected.

use std::time::Duration;

use ruststream::{
    Broker, BytesMut, ConnectedBroker, IncomingMessage, OutgoingMessage, Publisher, RequestReply,
    Subscribe,
};
use ruststream_zmq::{ZmqEndpoint, ZmqError};
use serde_json::{Value, json};

use super::{ZmqFanout, ZmqQueue, ZmqRpc};
use crate::support::{PyPeer, STEP, Tap, json_of, logs, until, until_async};

/// The heartbeat interval the libzmq peers use, in milliseconds.
const HEARTBEAT_IVL: u64 = 100;

fn heartbeats() -> Value {
    json!({ "HEARTBEAT_IVL": HEARTBEAT_IVL })
}

fn count(events: &[String], event: &str) -> usize {
    events.iter().filter(|e| *e == event).count()
}

/// The peer's socket events, once every drop so far is followed by a completed handshake: one
/// snapshot can fall between a drop and the redial it starts.
async fn events_after_redial(peer: &mut PyPeer) -> Vec<String> {
    until_async(STEP, "a handshake after the last drop", async || {
        let events = peer.events().await;
        if count(&events, "HANDSHAKE_SUCCEEDED") > count(&events, "DISCONNECTED") {
            Ok(events)
        } else {
            Err(format!("the peer did not dial again: {events:?}"))
        }
    })
    .await
}

fn beat(from: &str, n: u64) -> Vec<u8> {
    json!({"from": from, "n": n}).to_string().into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeating_libzmq_push_is_dropped_at_every_ping_and_dials_again_while_other_peers_are_served()
 {
    logs();
    const BEATS: u64 = 40;
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let mut tap = Tap::new(connected.subscribe("beats").await.unwrap());
    let monitor = connected.monitor();
    let address = monitor.bound_address().unwrap();
    let mut heartbeating = PyPeer::connect("PUSH", &address, heartbeats()).await;
    let mut plain = PyPeer::connect("PUSH", &address, json!({})).await;

    // A message sent right after the handshake, before the first PING, arrives.
    heartbeating.send(&[b"beats", &beat("hb", 0)]).await;
    let first = json_of(&tap.expect("the heartbeating peer's first message").await);
    assert_eq!(first, json!({"from": "hb", "n": 0}));

    // Both peers send for a second, paced so that it spans several heartbeat intervals.
    for n in 1..=BEATS {
        heartbeating.send(&[b"beats", &beat("hb", n)]).await;
        plain.send(&[b"beats", &beat("plain", n)]).await;
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let mut from_plain = Vec::new();
    let mut from_heartbeating = Vec::new();
    while from_plain.len() < BEATS as usize {
        let message = json_of(&tap.expect("the plain peer's messages").await);
        let n = message["n"].as_u64().unwrap();
        match message["from"].as_str().unwrap() {
            "plain" => from_plain.push(n),
            _ => from_heartbeating.push(n),
        }
    }
    assert_eq!(
        from_plain,
        (1..=BEATS).collect::<Vec<_>>(),
        "the other peer lost nothing"
    );
    // The heartbeating peer's traffic goes on over its new connections: send a closing mark
    // until one arrives.
    let mut mark = 1000;
    until_async(STEP, "the heartbeating peer's closing mark", async || {
        heartbeating.send(&[b"beats", &beat("hb", mark)]).await;
        mark += 1;
        while let Some(message) = tap.next(Duration::from_millis(200)).await {
            let n = json_of(&message)["n"].as_u64().unwrap();
            if n >= 1000 {
                return true;
            }
            from_heartbeating.push(n);
        }
        false
    })
    .await;
    let events = events_after_redial(&mut heartbeating).await;
    let drops = count(&events, "DISCONNECTED");
    println!(
        "heartbeating PUSH: {} of {BEATS} messages arrived, connection dropped {drops} times in \
         about {} ms; the plain peer lost none",
        from_heartbeating.len(),
        BEATS * 25,
    );
    assert!(
        drops >= 3,
        "the connection was not dropped at every PING: {events:?}"
    );
    assert!(
        count(&events, "HANDSHAKE_SUCCEEDED") > drops,
        "the peer dialed again after each drop: {events:?}"
    );
    assert!(
        from_heartbeating.windows(2).all(|w| w[0] < w[1]),
        "in order, no duplicates: {from_heartbeating:?}"
    );
    assert!(
        from_heartbeating.len() as u64 >= BEATS / 2,
        "most of what libzmq queued is sent over the next connection: {from_heartbeating:?}"
    );
    assert_eq!(
        monitor.refused(),
        0,
        "a dropped connection is not a refused message"
    );
    // The service counts a drop when its monitor reports it, and may have dropped one more
    // connection than the peer's snapshot shows; the plain peer's is never among them.
    until(
        STEP,
        format!("every connection dropped at a PING ({drops}) counted as a lost peer"),
        || monitor.peers_lost() >= drops as u64,
    )
    .await;
    connected.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_sub_subscription_is_dropped_at_every_ping_of_a_heartbeating_libzmq_pub_and_comes_back()
 {
    logs();
    const TICKS: u64 = 100;
    let mut publisher = PyPeer::bind("PUB", "tcp://127.0.0.1:*", heartbeats()).await;
    let connected = ZmqFanout::new(ZmqEndpoint::dial(publisher.endpoint.clone()))
        .connect()
        .await
        .unwrap();
    let mut tap = Tap::new(connected.subscribe("ticks").await.unwrap());
    for n in 0..TICKS {
        publisher
            .send(&[b"ticks", json!({"n": n}).to_string().as_bytes()])
            .await;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // What was published while no subscription was connected is gone; wait for the end with a
    // closing mark sent until one arrives.
    let mut heard = Vec::new();
    until_async(STEP, "the closing tick", async || {
        publisher
            .send(&[b"ticks", json!({"n": 1000}).to_string().as_bytes()])
            .await;
        while let Some(message) = tap.next(Duration::from_millis(100)).await {
            let n = json_of(&message)["n"].as_u64().unwrap();
            if n >= 1000 {
                return true;
            }
            heard.push(n);
        }
        false
    })
    .await;
    let events = events_after_redial(&mut publisher).await;
    let drops = count(&events, "DISCONNECTED");
    println!(
        "dialing SUB: heard {} of {TICKS} ticks over about {} ms; the PUB saw {drops} drops",
        heard.len(),
        TICKS * 10
    );
    assert!(
        drops >= 3,
        "the connection was not dropped at every PING: {events:?}"
    );
    assert!(
        count(&events, "HANDSHAKE_SUCCEEDED") > drops,
        "the subscription dialed again after each drop: {events:?}"
    );
    assert!(
        heard.len() as u64 >= TICKS / 2,
        "between drops the ticks arrive: {heard:?}"
    );
    assert!(heard.windows(2).all(|w| w[0] < w[1]), "{heard:?}");
    connected.shutdown().await.unwrap();
}

async fn publish(publisher: &ruststream_zmq::ZmqPublisher, n: u64) {
    publisher
        .publish(
            OutgoingMessage::produced(
                "jobs",
                BytesMut::from(json!({"n": n}).to_string().as_bytes()),
            ),
            None,
        )
        .await
        .unwrap();
}

/// Reads what the Python PULL has until `last` arrives; answers the numbers in order read.
async fn read_through(pull: &mut PyPeer, last: u64) -> Vec<u64> {
    let mut read = Vec::new();
    while read.last() != Some(&last) {
        let received = pull.expect(&format!("job {last}")).await;
        read.push(received.payload()["n"].as_u64().unwrap());
    }
    read
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_push_publisher_loses_its_first_publishes_after_an_idle_gap_to_a_heartbeating_libzmq_pull()
 {
    logs();
    // PINGs every 100 ms, and a PING timeout of a second, so that a loaded machine's pauses in
    // the steady phase below are not taken for idleness.
    let mut pull = PyPeer::bind(
        "PULL",
        "tcp://127.0.0.1:*",
        json!({"HEARTBEAT_IVL": HEARTBEAT_IVL, "HEARTBEAT_TIMEOUT": 1000}),
    )
    .await;
    let connected = ZmqQueue::new(ZmqEndpoint::dial(pull.endpoint.clone()))
        .connect()
        .await
        .unwrap();
    let publisher = connected.publisher();

    // Steady traffic: every write cancels libzmq's PING timeout, and the PUSH never reads the
    // PINGs, so the connection stays up and nothing is lost.
    for n in 0..30 {
        publish(&publisher, n).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        read_through(&mut pull, 29).await,
        (0..30).collect::<Vec<_>>()
    );
    assert_eq!(
        count(&pull.events().await, "DISCONNECTED"),
        0,
        "steady traffic keeps the connection"
    );

    // Idle past the PING timeout: libzmq closes the connection.
    until_async(STEP, "libzmq to time the idle connection out", async || {
        count(&pull.events().await, "DISCONNECTED") > 0
    })
    .await;
    for n in 100..110 {
        publish(&publisher, n).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let after_gap = read_through(&mut pull, 109).await;
    let lost = 10 - after_gap.len();
    println!(
        "dialing PUSH: {lost} of 10 publishes right after the idle gap were lost: read {after_gap:?}"
    );
    assert!(
        lost >= 1,
        "the first publish after the gap went into the closed connection and was reported sent; \
         if nothing is lost, the client learned heartbeats: update the backends guide ({after_gap:?})"
    );
    assert_eq!(
        after_gap,
        (100 + lost as u64..110).collect::<Vec<_>>(),
        "what is lost is the start of the batch; once reconnected nothing is"
    );
    connected.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_requester_is_redialed_at_every_ping_of_a_heartbeating_libzmq_router_and_still_answered()
 {
    logs();
    const REQUESTS: u64 = 30;
    let mut router = PyPeer::start_spec(json!({
        "socket": "ROUTER",
        "bind": "tcp://127.0.0.1:*",
        "serve": "echo",
        "options": heartbeats(),
    }))
    .await;
    let connected = ZmqRpc::new(ZmqEndpoint::dial(router.endpoint.clone()))
        .connect()
        .await
        .unwrap();
    let requester = connected.requester();
    let mut answered = 0;
    let mut timed_out = 0;
    for n in 0..REQUESTS {
        let asked = OutgoingMessage::produced(
            "prices",
            BytesMut::from(json!({"n": n}).to_string().as_bytes()),
        );
        // A request in flight when the connection drops gets no answer: its timeout ends it.
        // Any other error is not what a drop does, and fails the test.
        match requester.request(asked, Duration::from_secs(1)).await {
            Ok(answer) => {
                let echoed: Value = serde_json::from_slice(answer.payload()).unwrap();
                assert_eq!(echoed["n"], n);
                answered += 1;
            }
            Err(ZmqError::RequestTimeout { .. }) => timed_out += 1,
            Err(err) => panic!("request {n} failed otherwise than by its timeout: {err:?}"),
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    let events = router.events().await;
    let drops = count(&events, "DISCONNECTED");
    println!(
        "dialing DEALER: {answered} of {REQUESTS} requests answered, {timed_out} timed out; the \
         ROUTER saw {drops} drops"
    );
    assert!(
        drops >= 3,
        "the connection was not dropped at every PING: {events:?}"
    );
    assert!(
        answered >= REQUESTS * 2 / 3,
        "requests go out on the redialed connection: {answered} of {REQUESTS}"
    );
    connected.shutdown().await.unwrap();
}
