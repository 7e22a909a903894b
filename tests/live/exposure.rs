//! A service that listens beyond the loopback says so once, at the bind: a warning in clear,
//! naming the endpoint and the backend; one that listens on the loopback says nothing of it.

use ruststream::{Broker, ConnectedBroker, Subscribe};

use super::{BACKEND, ZmqQueue, prelude::*};
use crate::support::{capture_logs, log_lines, logged};

const IN_CLEAR: &str = "listening beyond the loopback in clear";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_beyond_the_loopback_is_warned_of_once_and_one_on_it_is_not() {
    capture_logs();
    let exposed = ZmqQueue::new(ZmqEndpoint::bind("tcp://0.0.0.0:0"));
    let exposed_monitor = exposed.monitor();
    let exposed = exposed.connect().await.unwrap();
    let subscriber = exposed.subscribe("payments").await.unwrap();
    let address = exposed_monitor.bound_address().unwrap();
    let endpoint = format!("endpoint={address} ");
    let line = logged(&[IN_CLEAR, &endpoint]).await;
    assert!(line.contains(" WARN "), "{line}");
    assert!(
        line.contains(&format!("backend=\"{}\"", BACKEND.name())),
        "{line}"
    );
    assert!(line.contains("curve=false"), "{line}");
    assert_eq!(log_lines(&[IN_CLEAR, &endpoint]).len(), 1, "said once");

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
