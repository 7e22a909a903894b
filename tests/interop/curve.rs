//! CURVE on the libzmq backend, against pyzmq CURVE peers: every pattern end to end with the
//! right keys, a wrong server key and a client off the allow-list refused and counted, and the
//! bytes on the wire never in clear (a relay between the two keeps them).

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use ruststream::{Broker, BytesMut, ConnectedBroker, OutgoingMessage, Publisher, Subscribe};
use ruststream_zmq::{Curve, CurveKeyPair, CurvePublicKey};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};

use super::prelude::*;
use crate::support::{
    Deadline, PyPeer, STEP, Tap, alone, captured_logs, interrupt_until_handled_by, is_child,
    json_of, log_lines, logged, logs, python,
};

/// What the messages carry: it must never be seen on the wire under CURVE.
const SECRET_TEXT: &str = "card 4111-1111-1111-1111";

/// A key pair made by pyzmq, as Z85 text: (public, secret).
fn python_keypair() -> (String, String) {
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
fn client_of(server: &CurvePublicKey, (public, secret): &(String, String)) -> Value {
    json!({
        "CURVE_SERVERKEY": server.to_z85(),
        "CURVE_PUBLICKEY": public,
        "CURVE_SECRETKEY": secret,
    })
}

/// A TCP relay to `target` that keeps every byte crossing it, both ways.
struct Relay {
    address: String,
    seen: Arc<Mutex<Vec<u8>>>,
}

impl Relay {
    async fn to(target: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("tcp://{}", listener.local_addr().unwrap());
        let target = target.trim_start_matches("tcp://").to_owned();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let Ok(outbound) = TcpStream::connect(&target).await else {
                    continue;
                };
                let (from_in, to_in) = inbound.into_split();
                let (from_out, to_out) = outbound.into_split();
                tokio::spawn(copy(from_in, to_out, Arc::clone(&kept)));
                tokio::spawn(copy(from_out, to_in, Arc::clone(&kept)));
            }
        });
        Self { address, seen }
    }

    /// Whether `text` crossed the relay in clear, and how many bytes crossed in all.
    fn saw(&self, text: &str) -> (bool, usize) {
        let seen = self.seen.lock().unwrap();
        let found = seen
            .windows(text.len())
            .any(|window| window == text.as_bytes());
        (found, seen.len())
    }
}

async fn copy(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    seen: Arc<Mutex<Vec<u8>>>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buffer = vec![0; 1 << 16];
    while let Ok(n) = from.read(&mut buffer).await {
        if n == 0 {
            break;
        }
        // Kept before it is passed on: once the far side has it, the relay has seen it.
        seen.lock().unwrap().extend_from_slice(&buffer[..n]);
        if to.write_all(&buffer[..n]).await.is_err() {
            break;
        }
    }
}

/// Sends job `n` from a peer whose handshake is refused: once refused, its PUSH has no peer to
/// queue for and the send may time out, which is not what the test is about.
async fn offer(peer: &mut PyPeer, n: u64) {
    let job = String::from_utf8(job(n)).unwrap();
    let _ = peer
        .call(json!({"op": "send", "frames": ["jobs", job], "timeout_ms": 500}))
        .await;
}

fn job(n: u64) -> Vec<u8> {
    json!({"n": n, "note": SECRET_TEXT})
        .to_string()
        .into_bytes()
}

/// A bound queue under CURVE that admits `clients`; its subscription `jobs`, tapped.
async fn curve_queue(
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
    let deadline = Deadline::after(STEP, "the handshake with a wrong server key refused");
    while monitor.peers_refused() == 0 {
        deadline.check();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(tap.next(Duration::from_millis(300)).await.is_none());
    connected.shutdown().await.unwrap();
}

/// Whether a thread of this process goes by `name` (its `comm`).
fn a_thread_named(name: &str) -> bool {
    std::fs::read_dir("/proc/self/task")
        .expect("this process's threads")
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
        .any(|comm| comm.trim() == name)
}

/// A client off the allow-list is refused and counted, gets nothing in, and a listed one's job
/// arrives, alone; with `signalled`, after every thread of the process was interrupted by a
/// signal it handles.
async fn the_allow_list_holds(signalled: bool) {
    logs();
    let server = CurveKeyPair::generate().unwrap();
    let (listed, stranger) = (python_keypair(), python_keypair());
    let (connected, mut tap, address) = curve_queue(&server, &[&listed]).await;
    let monitor = connected.monitor();
    if signalled {
        // The handler's thread takes its name once it runs; until then it carries its parent's.
        let deadline = Deadline::after(STEP, "the authentication handler's thread (zmq-zap)");
        while !a_thread_named("zmq-zap") {
            deadline.check();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        interrupt_until_handled_by("zmq-zap").await;
    }
    let mut peer = PyPeer::connect("PUSH", &address, client_of(&server.public(), &stranger)).await;
    offer(&mut peer, 1).await;
    let deadline = Deadline::after(STEP, "the unlisted client refused");
    while monitor.peers_refused() == 0 {
        assert!(
            tap.next(Duration::from_millis(10)).await.is_none(),
            "an unlisted client got a job in"
        );
        deadline.check();
    }
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
    the_allow_list_holds(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_to_the_authentication_handler_leaves_the_allow_list_closed() {
    // libzmq admits any client that knows the server's key while no authentication handler is
    // bound, and a signal the process handles interrupts the handler's wait: that must not
    // end it. tokio handles SIGCHLD for child processes and the shutdown signals.
    the_allow_list_holds(true).await;
}

/// Publishes price `n` until `sub` hears one (the slow joiner: a SUB misses what is sent before
/// its subscription reached the PUB), failing naming `what` after a step.
async fn price_heard(
    publisher: &ruststream_zmq::ZmqPublisher,
    sub: &mut PyPeer,
    n: u64,
    what: &str,
) -> crate::support::Received {
    let deadline = Deadline::after(STEP, what);
    loop {
        publisher
            .publish(
                OutgoingMessage::produced("prices", BytesMut::from(&job(n)[..])),
                None,
            )
            .await
            .unwrap();
        if let Some(received) = sub.recv(Duration::from_millis(50)).await {
            return received;
        }
        deadline.check();
    }
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
    let broker = ZmqRpc::new(endpoint);
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
    let deadline = Deadline::after(STEP, what);
    loop {
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
            return;
        }
        deadline.check();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `monitor` has counted `refused` refused handshakes.
async fn refused(monitor: &ZmqMonitor, refused: u64, what: &str) {
    let deadline = Deadline::after(STEP, what);
    while monitor.peers_refused() < refused {
        deadline.check();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
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
