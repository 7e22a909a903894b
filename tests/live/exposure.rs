//! A service that listens beyond the loopback says so once, at the bind: a warning in clear,
//! naming the endpoint and the backend; one that listens on the loopback says nothing of it.
//! Every socket that binds says it: a subscription's, a publisher's, a responder's. (Under CURVE,
//! which libzmq and omq speak, it is a note at info instead: `exposure_under_curve.rs`.)

use ruststream::{Broker, ConnectedBroker, Subscribe};

use super::{BACKEND, ZmqQueue, prelude::*};
use crate::support::{capture_logs, log_lines, logged};

const IN_CLEAR: &str = "listening beyond the loopback in clear";

/// The one line said of `address`: a warning in clear, naming this backend.
async fn warned_once_in_clear(address: &str) {
    let endpoint = format!("endpoint={address} ");
    let line = logged(&[IN_CLEAR, &endpoint]).await;
    assert!(line.contains(" WARN "), "not a warning: {line}");
    assert!(
        line.contains(&format!("backend=\"{}\"", BACKEND.name())),
        "{line}"
    );
    assert!(line.contains("curve=false"), "{line}");
    assert_eq!(
        log_lines(&["listening beyond the loopback", &endpoint]).len(),
        1,
        "said once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_beyond_the_loopback_is_warned_of_once_and_one_on_it_is_not() {
    capture_logs();
    let exposed = ZmqQueue::new(ZmqEndpoint::bind("tcp://0.0.0.0:0"));
    let exposed_monitor = exposed.monitor();
    let exposed = exposed.connect().await.unwrap();
    let subscriber = exposed.subscribe("payments").await.unwrap();
    warned_once_in_clear(&exposed_monitor.bound_address().unwrap()).await;

    let local = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let local_monitor = local.monitor();
    let local = local.connect().await.unwrap();
    let local_subscriber = local.subscribe("payments").await.unwrap();
    let local_address = local_monitor.bound_address().unwrap();
    assert!(
        log_lines(&["listening beyond the loopback", &local_address]).is_empty(),
        "nothing said of a loopback listener"
    );
    drop((subscriber, local_subscriber));
    exposed.shutdown().await.unwrap();
    local.shutdown().await.unwrap();
}

/// A publisher bound for peers to dial in (a fan-out's, here: its PUB) is a listener too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publisher_bound_beyond_the_loopback_is_warned_of_once() {
    capture_logs();
    let exposed = ZmqFanout::new(ZmqEndpoint::bind("tcp://0.0.0.0:0"))
        .connect()
        .await
        .unwrap();
    let address = exposed.bind_publisher().await.unwrap();
    warned_once_in_clear(&address).await;
    exposed.shutdown().await.unwrap();
}

/// A queue's publisher bound for workers to dial in (its PUSH).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_publisher_bound_beyond_the_loopback_is_warned_of_once() {
    capture_logs();
    let exposed = ZmqQueue::new(ZmqEndpoint::bind("tcp://0.0.0.0:0"))
        .connect()
        .await
        .unwrap();
    let address = exposed.bind_publisher().await.unwrap();
    warned_once_in_clear(&address).await;
    exposed.shutdown().await.unwrap();
}

/// A responder's ROUTER, which reads requests and sends answers through one socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_responder_bound_beyond_the_loopback_is_warned_of_once() {
    capture_logs();
    let exposed = ZmqRpc::new(ZmqEndpoint::bind("tcp://0.0.0.0:0"));
    let monitor = exposed.monitor();
    let exposed = exposed.connect().await.unwrap();
    let responder = exposed.subscribe("quotes").await.unwrap();
    warned_once_in_clear(&monitor.bound_address().unwrap()).await;
    drop(responder);
    exposed.shutdown().await.unwrap();
}
