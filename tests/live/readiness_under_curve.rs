//! Readiness under CURVE: a dialing service that holds another server key than its upstream's
//! never completes a handshake, so it stays not ready; one with the right key is ready. CURVE is
//! libzmq's and omq's (the `zeromq` client's brokers take no CURVE endpoint), so only their
//! copies of the topics include this file.

use std::time::Duration;

use ruststream::{Broker, ConnectedBroker};
use ruststream_zmq::CurveKeyPair;

use super::{
    ZmqQueue,
    prelude::*,
    readiness_handshake::{dialing_service, stays_not_ready},
};
use crate::support::eventually;

/// A queue dialing with `endpoint`, with keys for its retries' destination (no one listens).
fn dialing(
    endpoint: ZmqEndpoint<Dialing, ruststream_zmq::Curve>,
    client: &CurveKeyPair,
) -> ZmqQueue<Dialing> {
    let nowhere = CurveKeyPair::generate().unwrap().public();
    ZmqQueue::new(endpoint)
        .destination(ZmqEndpoint::dial("tcp://127.0.0.1:1").curve(client.clone(), nowhere))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_service_is_not_ready_against_a_curve_server_of_another_key_and_is_with_its_key()
{
    let (server, client) = (
        CurveKeyPair::generate().unwrap(),
        CurveKeyPair::generate().unwrap(),
    );
    // The upstream: a bound CURVE queue's publisher that admits the client's key.
    let upstream = ZmqQueue::new(
        ZmqEndpoint::bind("tcp://127.0.0.1:0")
            .curve(server.clone())
            .allow_clients([client.public()]),
    );
    let refusals = upstream.monitor();
    let upstream = upstream.connect().await.unwrap();
    let address = upstream.bind_publisher().await.unwrap();

    let wrong = CurveKeyPair::generate().unwrap().public();
    let (mistaken, readiness, monitor) = dialing_service!(dialing(
        ZmqEndpoint::dial(address.clone()).curve(client.clone(), wrong),
        &client
    ));
    eventually(
        Duration::from_secs(15),
        "the upstream failing the handshake of the wrong server key",
        || refusals.peers_refused() > 0,
    )
    .await;
    stays_not_ready(&readiness, &monitor, "a CURVE server of another key").await;

    // The control: the same upstream, dialed with its key.
    let (right, readiness, monitor) = dialing_service!(dialing(
        ZmqEndpoint::dial(address).curve(client.clone(), server.public()),
        &client
    ));
    eventually(
        Duration::from_secs(15),
        "ready with the server's key",
        || readiness.is_ready(),
    )
    .await;
    assert_eq!(monitor.peers_connected(), 1);
    mistaken.shutdown().await.unwrap();
    right.shutdown().await.unwrap();
    upstream.shutdown().await.unwrap();
}
