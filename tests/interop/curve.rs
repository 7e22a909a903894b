//! CURVE, against pyzmq CURVE peers: every pattern end to end with the
//! right keys, a wrong server key and a client off the allow-list refused and counted, and the
//! bytes on the wire never in clear (a relay between the two keeps them); key pairs and
//! certificates as pyzmq makes them; `allow_any_client`; keys per destination, and the
//! process's own toward its own listeners. On libzmq and on omq alike; libzmq's authentication
//! handler, a thread of its own, has its faults in `curve_zap`.

use std::time::Duration;

use ruststream::{Broker, BytesMut, ConnectedBroker, OutgoingMessage, Publisher, Subscribe};
use ruststream_zmq::{Curve, CurveKeyPair, CurvePublicKey};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::prelude::*;
use crate::support::{
    PyPeer, STEP, Tap, alone, captured_logs, is_child, json_of, log_lines, logged, logs, python,
    relay::Relay, until, until_async,
};

/// What the messages carry: it must never be seen on the wire under CURVE.
const SECRET_TEXT: &str = "card 4111-1111-1111-1111";

/// A key pair made by pyzmq, as Z85 text: (public, secret).
pub(crate) fn python_keypair() -> (String, String) {
    let out = std::process::Command::new(python())
        .args([
            "-c",
            "import zmq; p, s = zmq.curve_keypair(); print(p.decode(), s.decode())",
        ])
        .output()
        .expect("running Python for a key pair");
    let text = String::from_utf8(out.stdout).unwrap();
    let (public, secret) = text.trim().split_once(' ').expect("two keys");
    (public.to_owned(), secret.to_owned())
}

/// The options of a pyzmq CURVE client with `keys` of the server `server`.
pub(crate) fn client_of(server: &CurvePublicKey, (public, secret): &(String, String)) -> Value {
    json!({
        "CURVE_SERVERKEY": server.to_z85(),
        "CURVE_PUBLICKEY": public,
        "CURVE_SECRETKEY": secret,
    })
}

/// Sends job `n` from a peer whose handshake is refused: once refused, its PUSH has no peer to
/// queue for and the send may time out, which is not what the test is about.
pub(crate) async fn offer(peer: &mut PyPeer, n: u64) {
    let job = String::from_utf8(job(n)).unwrap();
    let _ = peer
        .call(json!({"op": "send", "frames": ["jobs", job], "timeout_ms": 500}))
        .await;
}

pub(crate) fn job(n: u64) -> Vec<u8> {
    json!({"n": n, "note": SECRET_TEXT})
        .to_string()
        .into_bytes()
}

/// A bound queue under CURVE that admits `clients`; its subscription `jobs`, tapped.
pub(crate) async fn curve_queue(
    server: &CurveKeyPair,
    clients: &[&(String, String)],
) -> (ruststream_zmq::ConnectedZmqQueue<Bound>, Tap, String) {
    let allowed = clients
        .iter()
        .map(|(public, _)| CurvePublicKey::from_z85(public).unwrap());
    let endpoint = ZmqEndpoint::bind("tcp://127.0.0.1:0")
        .curve(server.clone())
        .allow_clients(allowed);
    let connected = ZmqQueue::new(endpoint).connect().await.unwrap();
    let tap = Tap::new(connected.subscribe("jobs").await.unwrap());
    let address = connected.monitor().bound_address().unwrap();
    (connected, tap, address)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_queue_shows_its_messages_in_clear_to_the_relay() {
    // The control for the test below: the relay does see what crosses it.
    logs();
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let mut tap = Tap::new(connected.subscribe("jobs").await.unwrap());
    let relay = Relay::to(&connected.monitor().bound_address().unwrap()).await;
    let mut peer = PyPeer::connect("PUSH", &relay.address, json!({})).await;
    peer.send(&[b"jobs", &job(1)]).await;
    assert_eq!(json_of(&tap.expect("the plain job").await)["n"], 1);
    assert!(
        relay.saw(SECRET_TEXT).0,
        "the relay missed a message in clear"
    );
    connected.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_curve_queue_takes_a_listed_pyzmq_client_and_nothing_crosses_the_wire_in_clear() {
    logs();
    let server = CurveKeyPair::generate().unwrap();
    let client = python_keypair();
    let (connected, mut tap, address) = curve_queue(&server, &[&client]).await;
    let relay = Relay::to(&address).await;
    let mut peer =
        PyPeer::connect("PUSH", &relay.address, client_of(&server.public(), &client)).await;
    for n in 1..=3 {
        peer.send(&[b"jobs", &job(n)]).await;
    }
    for n in 1..=3 {
        let message = json_of(&tap.expect("a job over CURVE").await);
        assert_eq!(message, json!({"n": n, "note": SECRET_TEXT}));
    }
    let (in_clear, crossed) = relay.saw(SECRET_TEXT);
    println!("{crossed} bytes crossed the relay under CURVE");
    assert!(
        crossed > 3 * SECRET_TEXT.len(),
        "the messages did not cross the relay"
    );
    assert!(!in_clear, "a message crossed the wire in clear");
    assert_eq!(connected.monitor().peers_refused(), 0);
    connected.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_with_a_wrong_server_key_is_refused_and_counted_and_nothing_arrives() {
    logs();
    let server = CurveKeyPair::generate().unwrap();
    let client = python_keypair();
    let (connected, mut tap, address) = curve_queue(&server, &[&client]).await;
    let monitor = connected.monitor();
    let impostor = CurveKeyPair::generate().unwrap().public();
    let mut peer = PyPeer::connect("PUSH", &address, client_of(&impostor, &client)).await;
    offer(&mut peer, 1).await;
    refused(&monitor, 1, "the handshake with a wrong server key refused").await;
    assert!(tap.next(Duration::from_millis(300)).await.is_none());
    connected.shutdown().await.unwrap();
}

/// The test below, by the name libtest gives it.
fn wrong_key_logged() -> String {
    crate::support::test_name(
        module_path!(),
        "a_client_with_a_wrong_server_key_is_logged_at_debug_level_only",
    )
}

/// The security guide's promise: a client with the wrong server key hides its own key, so its
/// refusal is logged at debug level only, where an unlisted client's is a warning. Every line is
/// kept, debug ones too, from the wrong key's first handshake until it is counted: each is at
/// debug level, and one says the handshake failed, naming the endpoint. The lines are read from
/// the logs, so it runs in a process of its own. (CURVE is libzmq's and omq's.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_with_a_wrong_server_key_is_logged_at_debug_level_only() {
    if is_child(&wrong_key_logged()) {
        return wrong_key_logged_in_a_process_of_its_own().await;
    }
    alone(&wrong_key_logged()).await;
}

async fn wrong_key_logged_in_a_process_of_its_own() {
    use crate::support::logs::{level, process_wide};
    let logs = process_wide("info,ruststream_zmq=debug");
    let server = CurveKeyPair::generate().unwrap();
    let client = python_keypair();
    let (connected, mut tap, address) = curve_queue(&server, &[&client]).await;
    let monitor = connected.monitor();
    let from = logs.mark();
    let impostor = CurveKeyPair::generate().unwrap().public();
    let mut peer = PyPeer::connect("PUSH", &address, client_of(&impostor, &client)).await;
    offer(&mut peer, 1).await;
    refused_at(
        &mut peer,
        Refused::WrongServerKey,
        "a wrong server key refused",
    )
    .await;
    refused(&monitor, 1, "the wrong server key counted").await;
    let failed = logs
        .logged(
            &[
                "a peer failed its handshake",
                &format!("endpoint={address} "),
            ],
            STEP,
        )
        .await;
    let said = logs.lines_since(from, &[]);
    assert!(
        said.iter().all(|line| level(line) == "DEBUG"),
        "a line above debug level about a wrong server key: {said:#?}"
    );
    assert!(
        failed.iter().all(|line| level(line) == "DEBUG"),
        "{failed:#?}"
    );
    assert!(tap.next(Duration::from_millis(300)).await.is_none());
    connected.shutdown().await.unwrap();
}

/// A client off the allow-list is refused and counted, gets nothing in, and a listed one's job
/// arrives, alone; after `meanwhile`, once the listener runs.
pub(crate) async fn the_allow_list_holds(meanwhile: impl Future<Output = ()>) {
    logs();
    let server = CurveKeyPair::generate().unwrap();
    let (listed, stranger) = (python_keypair(), python_keypair());
    let (connected, mut tap, address) = curve_queue(&server, &[&listed]).await;
    let monitor = connected.monitor();
    meanwhile.await;
    let mut peer = PyPeer::connect("PUSH", &address, client_of(&server.public(), &stranger)).await;
    offer(&mut peer, 1).await;
    until_async(STEP, "the unlisted client refused", async || {
        assert!(
            tap.next(Duration::from_millis(10)).await.is_none(),
            "an unlisted client got a job in"
        );
        monitor.peers_refused() > 0
    })
    .await;
    let mut friend = PyPeer::connect("PUSH", &address, client_of(&server.public(), &listed)).await;
    friend.send(&[b"jobs", &job(2)]).await;
    assert_eq!(
        json_of(&tap.expect("the listed client's job").await)["n"],
        2
    );
    assert!(tap.next(Duration::from_millis(300)).await.is_none());
    assert_eq!(monitor.peers_refused(), 1);
    connected.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_off_the_allow_list_is_refused_and_counted_and_a_listed_one_still_gets_in() {
    the_allow_list_holds(async {}).await;
}

/// Publishes price `n` until `sub` hears one (the slow joiner: a SUB misses what is sent before
/// its subscription reached the PUB), failing naming `what` after a step.
async fn price_heard(
    publisher: &ruststream_zmq::ZmqPublisher,
    sub: &mut PyPeer,
    n: u64,
    what: &str,
) -> crate::support::Received {
    until_async(STEP, what, async || {
        publisher
            .publish(
                OutgoingMessage::produced("prices", BytesMut::from(&job(n)[..])),
                None,
            )
            .await
            .unwrap();
        sub.recv(Duration::from_millis(50)).await
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_curve_fanout_publishes_to_a_listed_pyzmq_subscriber_and_not_in_clear() {
    logs();
    let server = CurveKeyPair::generate().unwrap();
    let client = python_keypair();
    let endpoint = ZmqEndpoint::bind("tcp://127.0.0.1:0")
        .curve(server.clone())
        .allow_clients([CurvePublicKey::from_z85(&client.0).unwrap()]);
    let connected = ZmqFanout::new(endpoint).connect().await.unwrap();
    let address = connected.bind_publisher().await.unwrap();
    let publisher = connected.publisher();
    let relay = Relay::to(&address).await;
    let mut options = client_of(&server.public(), &client);
    options["SUBSCRIBE"] = json!("prices");
    let mut sub = PyPeer::connect("SUB", &relay.address, options).await;
    let received = price_heard(&publisher, &mut sub, 1, "a price at the CURVE subscriber").await;
    assert_eq!(received.payload()["note"], SECRET_TEXT);
    assert!(
        !relay.saw(SECRET_TEXT).0,
        "a price crossed the wire in clear"
    );
    connected.shutdown().await.unwrap();
}

#[derive(Debug, Serialize, Deserialize, Outgoing)]
struct Ask {
    id: u64,
    note: String,
}

#[subscriber(Responder::<Bound>, reply("reply"))]
async fn answer(ask: &Ask) -> Ask {
    Ask {
        id: ask.id * 10,
        note: ask.note.clone(),
    }
}

/// A service whose bound responder `asks` on `endpoint` answers with [`answer`].
async fn curve_responder(
    endpoint: ZmqEndpoint<Bound, Curve>,
) -> (ruststream::runtime::RunningApp, ZmqMonitor) {
    // Keys for the copies' queue, which nothing here sends to: a CURVE broker refuses at startup
    // a destination it could not reach.
    let retries = ZmqEndpoint::dial("tcp://127.0.0.1:1").curve(
        CurveKeyPair::generate().unwrap(),
        CurveKeyPair::generate().unwrap().public(),
    );
    let broker = ZmqRpc::new(endpoint).destination(retries);
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("curve-rpc", "0.1.0")).with_broker(broker, |b| {
        b.include(
            answer
                .name("asks")
                .out_retry("asks.retry@tcp://127.0.0.1:1"),
        )
        .out_reply(Publish)
        .transform(ToRequester);
    });
    (app.start().await.unwrap(), monitor)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_curve_responder_answers_a_listed_pyzmq_dealer_and_not_in_clear() {
    logs();
    let server = CurveKeyPair::generate().unwrap();
    let client = python_keypair();
    let endpoint = ZmqEndpoint::bind("tcp://127.0.0.1:0")
        .curve(server.clone())
        .allow_clients([CurvePublicKey::from_z85(&client.0).unwrap()]);
    let (running, monitor) = curve_responder(endpoint).await;
    let relay = Relay::to(&monitor.bound_address().unwrap()).await;
    let mut dealer = PyPeer::connect(
        "DEALER",
        &relay.address,
        client_of(&server.public(), &client),
    )
    .await;
    let ask = json!({"id": 4, "note": SECRET_TEXT}).to_string();
    dealer
        .send(&[b"asks", b"correlation-id: c-1", ask.as_bytes()])
        .await;
    let reply = dealer.expect("the answer over CURVE").await;
    assert_eq!(reply.payload(), json!({"id": 40, "note": SECRET_TEXT}));
    assert!(
        !relay.saw(SECRET_TEXT).0,
        "a request or answer crossed the wire in clear"
    );
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_curve_queue_reads_from_a_pyzmq_curve_server() {
    logs();
    let (server_public, server_secret) = python_keypair();
    let server = json!({"CURVE_SERVER": 1, "CURVE_SECRETKEY": server_secret});
    let mut push = PyPeer::bind("PUSH", "tcp://127.0.0.1:*", server).await;
    let own = CurveKeyPair::generate().unwrap();
    let endpoint = ZmqEndpoint::dial(push.endpoint.clone())
        .curve(own, CurvePublicKey::from_z85(&server_public).unwrap());
    let connected = ZmqQueue::new(endpoint).connect().await.unwrap();
    let mut tap = Tap::new(connected.subscribe("jobs").await.unwrap());
    push.send(&[b"jobs", &job(7)]).await;
    assert_eq!(json_of(&tap.expect("the server's job").await)["n"], 7);
    connected.shutdown().await.unwrap();
}

/// How a pyzmq client's own socket monitor reports its refused handshake.
#[derive(Debug, Clone, Copy)]
enum Refused {
    /// The server could not read its greeting, sealed to another key: its handshake fails, not
    /// as an authentication, and libzmq dials again.
    WrongServerKey,
    /// The authentication handler answered no: a failed authentication, and no more dialing.
    NotListed,
}

/// Waits until `peer`'s own monitor reports its handshake refused as `how` says, and never
/// admitted: the refusal is this peer's, not another's that dials again.
async fn refused_at(peer: &mut PyPeer, how: Refused, what: &str) {
    until_async(STEP, what, async || {
        let events = peer.events().await;
        assert!(
            !events.iter().any(|e| e == "HANDSHAKE_SUCCEEDED"),
            "{what}: the handshake went through: {events:?}"
        );
        let refused = events.iter().any(|event| match how {
            Refused::WrongServerKey => {
                event.starts_with("HANDSHAKE_FAILED_") && event != "HANDSHAKE_FAILED_AUTH"
            }
            Refused::NotListed => event == "HANDSHAKE_FAILED_AUTH",
        });
        if refused {
            Ok(())
        } else {
            Err(format!("the peer's events: {events:?}"))
        }
    })
    .await;
}

/// Waits until `monitor` has counted `refused` refused handshakes.
async fn refused(monitor: &ZmqMonitor, refused: u64, what: &str) {
    until(STEP, what, || {
        let counted = monitor.peers_refused();
        if counted >= refused {
            Ok(())
        } else {
            Err(format!("{counted} counted"))
        }
    })
    .await;
}

/// Each pattern against three pyzmq peers: one with a wrong server key, one off the allow-list,
/// each seen refused by its own socket's monitor and counted by the service's, and a listed one
/// that gets through, while the refused two get nothing through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pattern_refuses_a_wrong_server_key_and_an_unlisted_client() {
    logs();
    let server = CurveKeyPair::generate().unwrap();
    let (listed, stranger) = (python_keypair(), python_keypair());
    let impostor = CurveKeyPair::generate().unwrap().public();
    let endpoint = || {
        ZmqEndpoint::bind("tcp://127.0.0.1:0")
            .curve(server.clone())
            .allow_clients([CurvePublicKey::from_z85(&listed.0).unwrap()])
    };

    // A bound queue (PULL) against pyzmq PUSH peers: only the listed one's job arrives.
    let queue = ZmqQueue::new(endpoint()).connect().await.unwrap();
    let mut tap = Tap::new(queue.subscribe("jobs").await.unwrap());
    let (monitor, address) = (queue.monitor(), queue.monitor().bound_address().unwrap());
    let mut wrong = PyPeer::connect("PUSH", &address, client_of(&impostor, &listed)).await;
    offer(&mut wrong, 1).await;
    refused_at(
        &mut wrong,
        Refused::WrongServerKey,
        "the queue refusing a wrong server key",
    )
    .await;
    let mut unlisted =
        PyPeer::connect("PUSH", &address, client_of(&server.public(), &stranger)).await;
    offer(&mut unlisted, 2).await;
    refused_at(
        &mut unlisted,
        Refused::NotListed,
        "the queue refusing an unlisted client",
    )
    .await;
    refused(&monitor, 2, "the queue counting both refusals").await;
    let mut friend = PyPeer::connect("PUSH", &address, client_of(&server.public(), &listed)).await;
    friend.send(&[b"jobs", &job(3)]).await;
    assert_eq!(
        json_of(&tap.expect("the listed client's job").await)["n"],
        3,
        "a refused client's job arrived"
    );
    assert!(tap.next(Duration::from_millis(300)).await.is_none());
    queue.shutdown().await.unwrap();

    // A bound fan-out publisher (PUB) against pyzmq SUB peers: the listed one hears it, the
    // refused two hear nothing.
    let fanout = ZmqFanout::new(endpoint()).connect().await.unwrap();
    let address = fanout.bind_publisher().await.unwrap();
    let monitor = fanout.monitor();
    let publisher = fanout.publisher();
    let subscribe = |mut options: Value| {
        options["SUBSCRIBE"] = json!("");
        options
    };
    let mut wrong =
        PyPeer::connect("SUB", &address, subscribe(client_of(&impostor, &listed))).await;
    let mut unlisted = PyPeer::connect(
        "SUB",
        &address,
        subscribe(client_of(&server.public(), &stranger)),
    )
    .await;
    refused_at(
        &mut wrong,
        Refused::WrongServerKey,
        "the fan-out refusing a wrong server key",
    )
    .await;
    refused_at(
        &mut unlisted,
        Refused::NotListed,
        "the fan-out refusing an unlisted client",
    )
    .await;
    refused(&monitor, 2, "the fan-out counting both refusals").await;
    let mut friend = PyPeer::connect(
        "SUB",
        &address,
        subscribe(client_of(&server.public(), &listed)),
    )
    .await;
    let heard = price_heard(
        &publisher,
        &mut friend,
        4,
        "a price at the listed subscriber",
    )
    .await;
    assert_eq!(heard.payload()["n"], 4);
    for (peer, which) in [
        (&mut wrong, "wrong server key"),
        (&mut unlisted, "unlisted"),
    ] {
        let got = peer.recv(Duration::from_millis(200)).await;
        assert!(got.is_none(), "the {which} subscriber heard {got:?}");
    }
    fanout.shutdown().await.unwrap();

    // A bound responder (ROUTER) against pyzmq DEALER peers: only the listed one is answered.
    let (running, monitor) = curve_responder(endpoint()).await;
    let address = monitor.bound_address().unwrap();
    let ask = json!({"id": 1, "note": SECRET_TEXT}).to_string();
    let mut refused_dealers = Vec::new();
    for (options, how, what) in [
        (
            client_of(&impostor, &listed),
            Refused::WrongServerKey,
            "the responder refusing a wrong server key",
        ),
        (
            client_of(&server.public(), &stranger),
            Refused::NotListed,
            "the responder refusing an unlisted client",
        ),
    ] {
        let mut dealer = PyPeer::connect("DEALER", &address, options).await;
        // Once its handshake is refused the DEALER has no peer to queue for, and its send may
        // time out: either way nothing may come back.
        let _ = dealer
            .call(json!({"op": "send", "frames": ["asks", "", ask], "timeout_ms": 500}))
            .await;
        refused_at(&mut dealer, how, what).await;
        refused_dealers.push(dealer);
    }
    refused(&monitor, 2, "the responder counting both refusals").await;
    let mut friend =
        PyPeer::connect("DEALER", &address, client_of(&server.public(), &listed)).await;
    friend
        .send(&[b"asks", b"correlation-id: c-2", ask.as_bytes()])
        .await;
    let reply = friend.expect("the answer to the listed DEALER").await;
    assert_eq!(reply.payload(), json!({"id": 10, "note": SECRET_TEXT}));
    for dealer in &mut refused_dealers {
        let answered = dealer.recv(Duration::from_millis(200)).await;
        assert!(answered.is_none(), "a refused DEALER got {answered:?}");
    }
    running.shutdown().await.unwrap();
}

/// The test below, by the name libtest gives it: its child process runs it again by that name.
fn logged_once() -> String {
    crate::support::test_name(
        module_path!(),
        "a_refused_client_is_logged_once_per_key_naming_the_endpoint_its_address_and_the_key_fingerprint",
    )
}

/// How many times the same unlisted key is refused before its log lines are counted.
const ATTEMPTS: u64 = 4;

/// The README's promise for an unlisted client: one warning per key, however often it is
/// refused, naming the endpoint, the peer's address and its key's fingerprint (the start of its Z85
/// text).
/// The warnings are read from the logs, so it runs in a process of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_client_is_logged_once_per_key_naming_the_endpoint_its_address_and_the_key_fingerprint()
 {
    if is_child(&logged_once()) {
        return logged_once_in_a_process_of_its_own().await;
    }
    alone(&logged_once()).await;
}

async fn logged_once_in_a_process_of_its_own() {
    captured_logs();
    let server = CurveKeyPair::generate().unwrap();
    let (listed, stranger, other) = (python_keypair(), python_keypair(), python_keypair());
    let (connected, mut tap, address) = curve_queue(&server, &[&listed]).await;
    let monitor = connected.monitor();
    const REFUSAL: &str = "refused a client whose CURVE key is not on the endpoint's allow-list";

    // The same key again and again: libzmq stops dialing once refused, so each attempt is a
    // client of its own.
    for attempt in 1..=ATTEMPTS {
        let mut peer =
            PyPeer::connect("PUSH", &address, client_of(&server.public(), &stranger)).await;
        offer(&mut peer, attempt).await;
        refused_at(&mut peer, Refused::NotListed, "the unlisted key refused").await;
    }
    let mut peer = PyPeer::connect("PUSH", &address, client_of(&server.public(), &other)).await;
    offer(&mut peer, 0).await;
    refused_at(
        &mut peer,
        Refused::NotListed,
        "another unlisted key refused",
    )
    .await;
    refused(&monitor, ATTEMPTS + 1, "every attempt counted").await;

    let fingerprint = &stranger.0[..8];
    let other_fingerprint = &other.0[..8];
    // The handler logs before it answers the handshake, so the lines are there by now; the wait
    // is for the other key's only in case a writer lags.
    logged(&[REFUSAL, &format!("key={other_fingerprint}")]).await;
    let lines = log_lines(&[REFUSAL, &format!("key={fingerprint}")]);
    assert_eq!(
        lines.len(),
        1,
        "refused {ATTEMPTS} times, logged once: {lines:#?}"
    );
    let line = &lines[0];
    assert!(line.contains(" WARN "), "{line}");
    assert!(
        line.contains(&format!("endpoint={address} ")),
        "the endpoint {address} named: {line}"
    );
    assert!(
        line.contains("peer=127.0.0.1"),
        "the peer's address named: {line}"
    );
    assert_eq!(
        log_lines(&[REFUSAL, &format!("endpoint={address} ")]).len(),
        2,
        "one line for each key"
    );
    assert!(tap.next(Duration::from_millis(300)).await.is_none());
    connected.shutdown().await.unwrap();
}

// -------------------------------------------------------------------------------------------
// Keys: pairs read as pyzmq makes them, certificates as it writes them

/// The Z85 public key of one pair and the secret of another are refused; each pair whole, as
/// pyzmq made it, is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_pair_pyzmq_made_is_read_and_halves_of_two_pairs_are_refused() {
    let (a, b) = (python_keypair(), python_keypair());
    for (public, secret) in [&a, &b] {
        let pair = CurveKeyPair::from_z85(public, secret).expect("a pair pyzmq made");
        assert_eq!(pair.public().to_z85(), *public);
    }
    let err = CurveKeyPair::from_z85(&a.0, &b.1).unwrap_err().to_string();
    assert!(err.contains("do not belong together"), "{err}");
    assert!(!err.contains(&b.1[..8]), "the secret quoted: {err}");
}

/// A certificate pair as `zmq.auth.create_certificates` writes it into `dir`: (public file,
/// secret file), the secret file with pyzmq's own permissions (the umask's).
fn python_certificates(dir: &std::path::Path, name: &str) -> (String, String) {
    let out = std::process::Command::new(python())
        .args([
            "-c",
            "import sys, zmq.auth; print(*zmq.auth.create_certificates(sys.argv[1], sys.argv[2]))",
            dir.to_str().unwrap(),
            name,
        ])
        .output()
        .expect("running Python for a certificate");
    let text = String::from_utf8(out.stdout).unwrap();
    let (public, secret) = text.trim().split_once(' ').expect("two files");
    (public.to_owned(), secret.to_owned())
}

/// A secret certificate pyzmq wrote with the umask's permissions is refused, naming the file
/// and the `chmod` that fixes it; once only its owner may read it, a queue serves with it and a
/// pyzmq client that knows its public key gets a job in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pyzmq_certificate_is_refused_until_only_its_owner_may_read_it_then_serves() {
    use std::os::unix::fs::PermissionsExt;
    logs();
    let dir = std::env::temp_dir().join(format!("curve-certificates-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (_, secret_file) = python_certificates(&dir, "server");
    std::fs::set_permissions(&secret_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = CurveKeyPair::from_file(&secret_file)
        .unwrap_err()
        .to_string();
    assert!(err.contains(&secret_file), "{err}");
    assert!(err.contains("mode 0644"), "{err}");
    assert!(err.contains(&format!("`chmod 600 {secret_file}`")), "{err}");

    std::fs::set_permissions(&secret_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let server = CurveKeyPair::from_file(&secret_file).expect("the certificate, owner only");
    std::fs::remove_dir_all(&dir).unwrap();
    let client = python_keypair();
    let (connected, mut tap, address) = curve_queue(&server, &[&client]).await;
    let mut peer = PyPeer::connect("PUSH", &address, client_of(&server.public(), &client)).await;
    peer.send(&[b"jobs", &job(1)]).await;
    assert_eq!(
        json_of(&tap.expect("a job to the certificate's key").await)["n"],
        1
    );
    connected.shutdown().await.unwrap();
}

// -------------------------------------------------------------------------------------------
// Who may connect

/// The test below, by the name libtest gives it.
fn any_client() -> String {
    crate::support::test_name(
        module_path!(),
        "an_endpoint_that_allows_any_client_admits_any_holder_of_the_server_key_and_warns_once",
    )
}

/// `allow_any_client()`: two pyzmq clients of keys nobody listed get their jobs in, a wrong
/// server key is still refused, and the listener said once, naming its endpoint, that it
/// admits any holder of the key. The warning is read from the logs, so it runs alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_that_allows_any_client_admits_any_holder_of_the_server_key_and_warns_once() {
    if is_child(&any_client()) {
        return any_client_in_a_process_of_its_own().await;
    }
    alone(&any_client()).await;
}

async fn any_client_in_a_process_of_its_own() {
    captured_logs();
    let server = CurveKeyPair::generate().unwrap();
    let endpoint = ZmqEndpoint::bind("tcp://127.0.0.1:0")
        .curve(server.clone())
        .allow_any_client();
    let connected = ZmqQueue::new(endpoint).connect().await.unwrap();
    let mut tap = Tap::new(connected.subscribe("jobs").await.unwrap());
    let monitor = connected.monitor();
    let address = monitor.bound_address().unwrap();
    for n in 1..=2 {
        let anyone = python_keypair();
        let mut peer =
            PyPeer::connect("PUSH", &address, client_of(&server.public(), &anyone)).await;
        peer.send(&[b"jobs", &job(n)]).await;
        assert_eq!(json_of(&tap.expect("a job of any key").await)["n"], n);
    }
    let impostor = CurveKeyPair::generate().unwrap().public();
    let mut wrong =
        PyPeer::connect("PUSH", &address, client_of(&impostor, &python_keypair())).await;
    offer(&mut wrong, 3).await;
    refused_at(
        &mut wrong,
        Refused::WrongServerKey,
        "a wrong server key refused",
    )
    .await;
    assert!(tap.next(Duration::from_millis(300)).await.is_none());
    let lines = log_lines(&["admits any client that holds its server's public key"]);
    assert_eq!(lines.len(), 1, "said once: {lines:#?}");
    assert!(lines[0].contains(" WARN "), "{}", lines[0]);
    assert!(
        lines[0].contains(&format!("endpoint={address} ")),
        "the endpoint {address} named: {}",
        lines[0]
    );
    assert!(
        lines[0].contains(&format!("server={}", server.public().fingerprint())),
        "{}",
        lines[0]
    );
    connected.shutdown().await.unwrap();
}

/// A bound CURVE queue's copies to its own listener (a bare-name publish) go with the process's
/// own key, which its list admits though no one listed it; a client off the list is still
/// refused, and a listed one still gets in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_curve_queues_own_copies_reach_its_listener_and_unlisted_clients_stay_out() {
    logs();
    let server = CurveKeyPair::generate().unwrap();
    let (listed, stranger) = (python_keypair(), python_keypair());
    let (connected, mut tap, address) = curve_queue(&server, &[&listed]).await;
    let monitor = connected.monitor();
    let publisher = connected.publisher();
    publisher
        .publish(
            OutgoingMessage::produced("jobs", BytesMut::from(&job(1)[..])),
            None,
        )
        .await
        .expect("a copy to the queue's own listener");
    assert_eq!(json_of(&tap.expect("the broker's own copy").await)["n"], 1);
    let mut peer = PyPeer::connect("PUSH", &address, client_of(&server.public(), &stranger)).await;
    offer(&mut peer, 2).await;
    refused_at(&mut peer, Refused::NotListed, "an unlisted client refused").await;
    refused(&monitor, 1, "the unlisted client counted").await;
    let mut friend = PyPeer::connect("PUSH", &address, client_of(&server.public(), &listed)).await;
    friend.send(&[b"jobs", &job(3)]).await;
    assert_eq!(
        json_of(&tap.expect("the listed client's job").await)["n"],
        3
    );
    assert!(tap.next(Duration::from_millis(300)).await.is_none());
    assert_eq!(monitor.peers_refused(), 1);
    connected.shutdown().await.unwrap();
}

// -------------------------------------------------------------------------------------------
// Keys per destination

/// A pyzmq CURVE server of `socket` with a key pair of its own, bound on loopback, that admits
/// `allowed` only (pyzmq's authenticator); answers it and its public key.
async fn python_server(socket: &str, allowed: &[CurvePublicKey]) -> (PyPeer, CurvePublicKey) {
    let (public, secret) = python_keypair();
    let allowed: Vec<String> = allowed.iter().map(CurvePublicKey::to_z85).collect();
    let spec = json!({
        "socket": socket,
        "bind": "tcp://127.0.0.1:*",
        "options": {"CURVE_SERVER": 1, "CURVE_SECRETKEY": secret},
        "allow_curve": allowed,
    });
    let peer = PyPeer::start_spec(spec).await;
    (peer, CurvePublicKey::from_z85(&public).unwrap())
}

/// A dialing CURVE queue reads its jobs from a pyzmq server (the ventilator) through a relay,
/// and sends copies to a `name@endpoint` destination (another pyzmq server, the sink's, that
/// admits one client key) with the keys the broker gives that destination, through a second
/// relay: both relays carried the messages, neither in clear. The sink admits the destination's
/// client key alone, so a copy with the endpoint's keys or the process's would not arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_curve_queue_reads_and_sends_copies_with_each_destinations_keys_never_in_clear() {
    logs();
    let (worker, to_sink) = (
        CurveKeyPair::generate().unwrap(),
        CurveKeyPair::generate().unwrap(),
    );
    let (mut vent, vent_public) = python_server("PUSH", &[worker.public()]).await;
    let (mut sink, sink_public) = python_server("PULL", &[to_sink.public()]).await;
    let (jobs_relay, sink_relay) = (
        Relay::to(&vent.endpoint).await,
        Relay::to(&sink.endpoint).await,
    );
    let jobs = ZmqEndpoint::dial(jobs_relay.address.clone()).curve(worker, vent_public);
    let destination = ZmqEndpoint::dial(sink_relay.address.clone()).curve(to_sink, sink_public);
    let connected = ZmqQueue::new(jobs)
        .destination(destination)
        .connect()
        .await
        .unwrap();
    let mut tap = Tap::new(connected.subscribe("jobs").await.unwrap());
    vent.send(&[b"jobs", &job(1)]).await;
    assert_eq!(json_of(&tap.expect("the ventilator's job").await)["n"], 1);
    let to = format!("jobs.retry@{}", sink_relay.address);
    connected
        .publisher()
        .publish(
            OutgoingMessage::produced(&to, BytesMut::from(&job(2)[..])),
            None,
        )
        .await
        .expect("a copy with the destination's keys");
    let copy = sink.expect("the copy at the sink").await;
    assert_eq!(copy.payload()["n"], 2);
    for (relay, what) in [(&jobs_relay, "the jobs"), (&sink_relay, "the copies")] {
        let (in_clear, crossed) = relay.saw(SECRET_TEXT);
        assert!(
            crossed > SECRET_TEXT.len(),
            "{what} did not cross their relay"
        );
        assert!(!in_clear, "{what} crossed the wire in clear");
    }
    connected.shutdown().await.unwrap();
}

/// A worker's retry queue, as the fleet's: a dialing CURVE queue (it holds its own key pair and
/// the ventilator's public key, no other secret) sends its copies to a queue this process binds
/// under CURVE with a key pair of its own that lists no client; they go with the process's own
/// key and arrive, while a pyzmq client that knows the queue's server key is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_to_a_queue_this_process_binds_go_with_its_own_keys_and_no_one_elses_secret() {
    logs();
    let worker = CurveKeyPair::generate().unwrap();
    let (mut vent, vent_public) = python_server("PUSH", &[worker.public()]).await;
    let retry_keys = CurveKeyPair::generate().unwrap();
    let retry = ZmqEndpoint::bind("tcp://127.0.0.1:0")
        .curve(retry_keys.clone())
        .allow_clients([]);
    let retry = ZmqQueue::new(retry).connect().await.unwrap();
    let mut retries = Tap::new(retry.subscribe("jobs.retry").await.unwrap());
    let retry_at = retry.monitor().bound_address().unwrap();
    let jobs = ZmqEndpoint::dial(vent.endpoint.clone()).curve(worker, vent_public);
    let connected = ZmqQueue::new(jobs).connect().await.unwrap();
    let mut tap = Tap::new(connected.subscribe("jobs").await.unwrap());
    vent.send(&[b"jobs", &job(1)]).await;
    assert_eq!(json_of(&tap.expect("the ventilator's job").await)["n"], 1);
    let to = format!("jobs.retry@{retry_at}");
    connected
        .publisher()
        .publish(
            OutgoingMessage::produced(&to, BytesMut::from(&job(1)[..])),
            None,
        )
        .await
        .expect("a copy to the process's own retry queue");
    assert_eq!(json_of(&retries.expect("the copy").await)["n"], 1);
    let mut stranger = PyPeer::connect(
        "PUSH",
        &retry_at,
        client_of(&retry_keys.public(), &python_keypair()),
    )
    .await;
    stranger
        .call(json!({"op": "send", "frames": ["jobs.retry", "{}"], "timeout_ms": 500}))
        .await;
    refused_at(
        &mut stranger,
        Refused::NotListed,
        "a stranger at the retry queue",
    )
    .await;
    assert!(retries.next(Duration::from_millis(300)).await.is_none());
    connected.shutdown().await.unwrap();
    retry.shutdown().await.unwrap();
}

/// A CURVE broker, dialing or bound, with no keys for a destination's endpoint refuses the
/// send, saying how to give it keys, and nothing reaches the plain pyzmq queue listening there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_curve_broker_refuses_a_destination_it_has_no_keys_for_and_sends_nothing_in_clear() {
    logs();
    let mut plain = PyPeer::bind("PULL", "tcp://127.0.0.1:*", json!({})).await;
    let (vent, vent_public) = python_server("PUSH", &[]).await;
    let dialing = ZmqEndpoint::dial(vent.endpoint.clone())
        .curve(CurveKeyPair::generate().unwrap(), vent_public);
    let dialing = ZmqQueue::new(dialing).connect().await.unwrap();
    let (bound, _tap, _) = curve_queue(&CurveKeyPair::generate().unwrap(), &[]).await;
    for publisher in [dialing.publisher(), bound.publisher()] {
        let to = format!("jobs.retry@{}", plain.endpoint);
        let err = publisher
            .publish(
                OutgoingMessage::produced(&to, BytesMut::from(&job(1)[..])),
                None,
            )
            .await
            .expect_err("a copy in clear from a CURVE broker");
        let text = err.to_string();
        assert!(
            text.contains(&format!("no CURVE keys for `{}`", plain.endpoint)),
            "{text}"
        );
        assert!(text.contains(".destination(ZmqEndpoint::dial("), "{text}");
    }
    assert!(plain.recv(Duration::from_millis(300)).await.is_none());
    dialing.shutdown().await.unwrap();
    bound.shutdown().await.unwrap();
}

// -------------------------------------------------------------------------------------------
// Refusals under a flood: each endpoint's budget of lines, and a log that holds up nothing

/// What a refused client's first line says.
const REFUSAL: &str = "refused a client whose CURVE key is not on the endpoint's allow-list";

/// The budget `guide::security` states for an endpoint's refusal lines: this many at once...
const LINES_AT_ONCE: u64 = 10;
/// ... then one more each this long.
const LINE_EVERY: Duration = Duration::from_secs(6);

/// How long the flood lasts: past [`LINE_EVERY`], and past the 10 s after which the first keys'
/// bursts end and make room for new ones, so that lines come after some were withheld.
const FLOOD_SECONDS: u64 = 12;

/// A pyzmq flood of CURVE clients against `argv[1]` (server key `argv[2]`) for `argv[3]` seconds,
/// `argv[4]` at a time, each with a key pair of its own (`zmq.curve_keypair()`) and closed once
/// its own monitor reports its handshake's end; prints what came of them.
const FLOOD: &str = r#"
import json, sys, time, zmq
from zmq.utils.monitor import parse_monitor_message
address, server, seconds, window = sys.argv[1], sys.argv[2].encode(), float(sys.argv[3]), int(sys.argv[4])
context = zmq.Context()
poller = zmq.Poller()
clients = {}
told = {"opened": 0, "refused": 0, "admitted": 0, "unfinished": 0}
ENDS = zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
def start():
    public, secret = zmq.curve_keypair()
    client = context.socket(zmq.DEALER)
    client.linger = 0
    client.curve_serverkey = server
    client.curve_publickey = public
    client.curve_secretkey = secret
    events = client.get_monitor_socket(ENDS)
    client.connect(address)
    poller.register(events, zmq.POLLIN)
    clients[events] = (client, time.monotonic())
    told["opened"] += 1
def close(events):
    client, _ = clients.pop(events)
    poller.unregister(events)
    client.disable_monitor()
    events.close()
    client.close()
end = time.monotonic() + seconds
while time.monotonic() < end:
    while len(clients) < window:
        start()
    for events, _ in poller.poll(100):
        event = parse_monitor_message(events.recv_multipart())["event"]
        told["admitted" if event == zmq.EVENT_HANDSHAKE_SUCCEEDED else "refused"] += 1
        close(events)
    for events, (_, since) in list(clients.items()):
        if time.monotonic() - since > 5:
            told["unfinished"] += 1
            close(events)
for events in list(clients):
    told["unfinished"] += 1
    close(events)
print(json.dumps(told))
"#;

/// What came of a flood's clients: refused ones saw their handshake fail, unfinished ones were
/// closed before it ended.
#[derive(Debug, Deserialize)]
struct Flood {
    opened: u64,
    refused: u64,
    admitted: u64,
    unfinished: u64,
}

/// Floods `address` (server key `server`) with clients of new keys, 16 at a time, for
/// [`FLOOD_SECONDS`].
async fn flood(address: &str, server: &CurvePublicKey) -> Flood {
    let out = tokio::process::Command::new(python())
        .args(["-c", FLOOD, address, &server.to_z85()])
        .args([FLOOD_SECONDS.to_string(), "16".to_owned()])
        .kill_on_drop(true)
        .output()
        .await
        .expect("running Python for the flood");
    assert!(
        out.status.success(),
        "the flood failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the flood's tally")
}

/// The `withheld` field of a refusal line: the lines its endpoint held back before it.
fn withheld(line: &str) -> u64 {
    line.split("withheld=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no withheld count: {line}"))
}

/// The test below, by the name libtest gives it.
fn flood_logged() -> String {
    crate::support::test_name(
        module_path!(),
        "a_flood_of_rotating_keys_writes_the_endpoints_budget_of_lines_and_counts_every_refusal",
    )
}

/// The security guide's promise for a peer that changes key at every attempt: the endpoint
/// writes at most its budget of WARN lines (10, then one each 6 s), the lines past it are
/// withheld and the next line written says how many, and `peers_refused` counts every refused
/// handshake. Without the budget, each new key is a line of its own. The lines are read from the
/// logs, so it runs in a process of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_rotating_keys_writes_the_endpoints_budget_of_lines_and_counts_every_refusal() {
    if is_child(&flood_logged()) {
        return flood_in_a_process_of_its_own().await;
    }
    alone(&flood_logged()).await;
}

async fn flood_in_a_process_of_its_own() {
    captured_logs();
    let server = CurveKeyPair::generate().unwrap();
    let listed = python_keypair();
    let (connected, mut tap, address) = curve_queue(&server, &[&listed]).await;
    let monitor = connected.monitor();
    let endpoint = format!("endpoint={address} ");
    let started = std::time::Instant::now();
    let flood = flood(&address, &server.public()).await;
    println!("the flood: {flood:?}");
    assert_eq!(flood.admitted, 0, "a client of a new key got in");
    assert_eq!(
        flood.refused + flood.unfinished,
        flood.opened,
        "every client accounted for"
    );
    refused(&monitor, flood.refused, "every refused handshake counted").await;
    let lines = log_lines(&[" WARN ", &endpoint]);
    // Read after the lines: whatever was written, it was within this span.
    let span = started.elapsed();
    let budget = LINES_AT_ONCE
        + u64::try_from(span.as_millis())
            .unwrap()
            .div_ceil(u64::try_from(LINE_EVERY.as_millis()).unwrap());
    println!(
        "{} WARN lines in {span:?}, budget {budget}; {} refusals counted",
        lines.len(),
        monitor.peers_refused()
    );
    assert!(
        flood.refused > 2 * budget,
        "too few refusals to test the budget: {flood:?}"
    );
    assert!(
        monitor.peers_refused() <= flood.opened,
        "more refusals than clients: {} of {flood:?}",
        monitor.peers_refused()
    );
    assert!(
        lines.len() as u64 <= budget,
        "{} WARN lines for {} refusals in {span:?}, past the budget of {budget}: {lines:#?}",
        lines.len(),
        flood.refused
    );
    assert!(
        lines.iter().all(|line| line.contains("withheld=")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|line| withheld(line) > 0),
        "no line told of the lines withheld: {lines:#?}"
    );
    assert!(tap.next(Duration::from_millis(300)).await.is_none());
    connected.shutdown().await.unwrap();
}

/// A log sink that takes every line but the first refusal, on which it blocks until released:
/// a log writer stuck on a pipe nobody reads.
#[derive(Clone, Default)]
struct StuckOnARefusal(std::sync::Arc<(std::sync::Mutex<Stuck>, std::sync::Condvar)>);

#[derive(Default)]
struct Stuck {
    holding: bool,
    released: bool,
}

impl std::io::Write for StuckOnARefusal {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let (stuck, changed) = &*self.0;
        let mut state = stuck.lock().unwrap();
        if !state.holding && String::from_utf8_lossy(buf).contains(REFUSAL) {
            state.holding = true;
            changed.notify_all();
            drop(changed.wait_while(state, |state| !state.released).unwrap());
        } else {
            drop(state);
        }
        std::io::stderr().write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl StuckOnARefusal {
    fn holding(&self) -> bool {
        self.0.0.lock().unwrap().holding
    }

    fn release(&self) {
        self.0.0.lock().unwrap().released = true;
        self.0.1.notify_all();
    }
}

/// The test below, by the name libtest gives it.
fn stuck_log() -> String {
    crate::support::test_name(
        module_path!(),
        "a_log_writer_stuck_on_a_refusal_holds_up_no_other_handshake",
    )
}

/// No refusal line is written where a handshake waits for it: with the log writer stuck on one
/// client's refusal, another unlisted client is still refused, and a listed one gets in. On
/// libzmq one handler thread answers every handshake of the process; on omq each handshake asks
/// on its own thread, and the refusals share the endpoint's count. It installs its own log
/// subscriber, so it runs in a process of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_writer_stuck_on_a_refusal_holds_up_no_other_handshake() {
    if is_child(&stuck_log()) {
        return stuck_log_in_a_process_of_its_own().await;
    }
    alone(&stuck_log()).await;
}

async fn stuck_log_in_a_process_of_its_own() {
    let sink = StuckOnARefusal::default();
    let writer = sink.clone();
    tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();
    let server = CurveKeyPair::generate().unwrap();
    let (listed, first, second) = (python_keypair(), python_keypair(), python_keypair());
    let (connected, mut tap, address) = curve_queue(&server, &[&listed]).await;
    let mut stuck = PyPeer::connect("PUSH", &address, client_of(&server.public(), &first)).await;
    offer(&mut stuck, 1).await;
    until(STEP, "the log writer stuck on the first refusal", || {
        sink.holding().then_some(())
    })
    .await;
    let mut unlisted =
        PyPeer::connect("PUSH", &address, client_of(&server.public(), &second)).await;
    offer(&mut unlisted, 2).await;
    refused_at(
        &mut unlisted,
        Refused::NotListed,
        "another unlisted client refused while the log is stuck",
    )
    .await;
    let mut friend = PyPeer::connect("PUSH", &address, client_of(&server.public(), &listed)).await;
    friend.send(&[b"jobs", &job(3)]).await;
    assert_eq!(
        json_of(
            &tap.expect("the listed client's job while the log is stuck")
                .await
        )["n"],
        3
    );
    assert!(sink.holding(), "the writer was released before its time");
    sink.release();
    connected.shutdown().await.unwrap();
}
