//! CURVE between brokers of libzmq and omq in one process: each backend's listener admits the
//! other's client that holds a listed key, and refuses one that does not. Both speak the same
//! CurveZMQ, whichever cipher runs it.

use std::time::Duration;

use futures::StreamExt;
use ruststream::{
    Broker, BytesMut, ConnectedBroker, IncomingMessage, OutgoingMessage, Publisher, Subscribe,
};
use ruststream_zmq::{
    Backend, Bound, Curve, CurveKeyPair, Speaks, ZmqBroker, ZmqEndpoint, libzmq, omq,
};

/// A listener on backend `L` admitting one client key, and a publisher on backend `P` dialing
/// it with `client`: answers what the listener read within `wait`, if anything.
async fn across<L, P>(
    client: &CurveKeyPair,
    listed: &CurveKeyPair,
    wait: Duration,
) -> Option<Vec<u8>>
where
    L: Backend + Speaks<Curve>,
    P: Backend + Speaks<Curve>,
{
    let server = CurveKeyPair::generate().unwrap();
    let endpoint = ZmqEndpoint::bind("tcp://127.0.0.1:0")
        .curve(server.clone())
        .allow_clients([listed.public()]);
    let listener = ZmqBroker::<ruststream_zmq::QueueKind, Bound, L>::new(endpoint);
    let at = listener.monitor();
    let listener = listener.connect().await.unwrap();
    let mut jobs = listener.subscribe("jobs").await.unwrap();
    let dialing =
        ZmqEndpoint::dial(at.bound_address().unwrap()).curve(client.clone(), server.public());
    let publisher = ZmqBroker::<ruststream_zmq::QueueKind, _, P>::new(dialing)
        .send_timeout(wait)
        .connect()
        .await
        .unwrap();
    let sent = publisher
        .publisher()
        .publish(
            OutgoingMessage::produced("jobs", BytesMut::from(&b"{\"n\":1}"[..])),
            None,
        )
        .await;
    let read = {
        use ruststream::Subscriber;
        tokio::time::timeout(wait, jobs.stream().next()).await
    };
    let payload = match read {
        Ok(Some(Ok(delivery))) => Some(delivery.payload().to_vec()),
        _ => None,
    };
    if payload.is_some() {
        sent.expect("a publish that arrived succeeded");
    }
    publisher.shutdown().await.unwrap();
    listener.shutdown().await.unwrap();
    payload
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listed_client_of_either_backend_reaches_a_curve_listener_of_the_other() {
    let client = CurveKeyPair::generate().unwrap();
    let wait = Duration::from_secs(10);
    let job = Some(b"{\"n\":1}".to_vec());
    assert_eq!(
        across::<omq::Omq, libzmq::Libzmq>(&client, &client, wait).await,
        job
    );
    assert_eq!(
        across::<libzmq::Libzmq, omq::Omq>(&client, &client, wait).await,
        job
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlisted_client_of_either_backend_is_refused_by_a_curve_listener_of_the_other() {
    let (client, listed) = (
        CurveKeyPair::generate().unwrap(),
        CurveKeyPair::generate().unwrap(),
    );
    // Long enough for a handshake on a loaded machine: a refused one delivers nothing at all.
    let wait = Duration::from_secs(2);
    assert_eq!(
        across::<omq::Omq, libzmq::Libzmq>(&client, &listed, wait).await,
        None
    );
    assert_eq!(
        across::<libzmq::Libzmq, omq::Omq>(&client, &listed, wait).await,
        None
    );
}
