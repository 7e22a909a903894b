//! A listener beyond the loopback under CURVE says so once, at info: only clients with the
//! server's key (and a listed key of their own) get in, so it is a note, not the warning a
//! listener in clear gets (`exposure.rs`). Only libzmq speaks CURVE (the `zeromq` client has no
//! security mechanism, and its brokers take no CURVE endpoint), so only the libzmq copy of the
//! topics includes this file.

use ruststream::{Broker, ConnectedBroker, Subscribe};
use ruststream_zmq::CurveKeyPair;

use super::{BACKEND, ZmqQueue, prelude::*};
use crate::support::{capture_logs, log_lines, logged};

const UNDER_CURVE: &str = "listening beyond the loopback under CURVE";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_curve_listener_beyond_the_loopback_is_noted_once_at_info_and_not_warned_of() {
    capture_logs();
    // An empty allow-list admits this process's own sockets alone: no client key to make.
    let exposed = ZmqQueue::new(
        ZmqEndpoint::bind("tcp://0.0.0.0:0")
            .curve(CurveKeyPair::generate().unwrap())
            .allow_clients([]),
    );
    let monitor = exposed.monitor();
    let exposed = exposed.connect().await.unwrap();
    let subscriber = exposed.subscribe("payments").await.unwrap();
    let address = monitor.bound_address().unwrap();
    let endpoint = format!("endpoint={address} ");

    let line = logged(&[UNDER_CURVE, &endpoint]).await;
    assert!(line.contains(" INFO "), "not a note at info: {line}");
    assert!(
        line.contains(&format!("backend=\"{}\"", BACKEND.name())),
        "{line}"
    );
    assert!(line.contains("curve=true"), "{line}");
    let said = log_lines(&["listening beyond the loopback", &endpoint]);
    assert_eq!(said, [line], "said once, and never as in clear");
    drop(subscriber);
    exposed.shutdown().await.unwrap();
}
