//! The endpoint and the broker's lifecycle on real sockets: what starts, what is refused at
//! startup, what a shut-down broker answers, and reconnection after a peer restarts.

use std::convert::Infallible;

use ruststream::{Broker, BytesMut, ConnectedBroker, OutgoingMessage, Publisher};

use super::{Feeder, prelude::*};
use crate::support::{AppState, Calls, Payment, Plan, free_port, journal, poll::until_async, work};

fn service<S: Side>(calls: Calls, broker: ZmqQueue<S>, names: &'static [&'static str]) -> impl App
where
    ruststream_zmq::ConnectedZmqQueue<S>:
        ruststream::Subscribe<Copies = ruststream::AddressedCopies>,
{
    RustStream::new(AppInfo::new("lifecycle", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(AppState { calls }))
        .with_broker(broker, |b| {
            for name in names {
                b.include(work.name(*name));
            }
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_other_than_tcp_or_ipc_is_refused_at_startup_naming_it() {
    let (calls, _journal) = journal();
    let app = service(
        calls,
        ZmqQueue::new(ZmqEndpoint::bind("inproc://payments")),
        &["payments"],
    );
    let err = app
        .start()
        .await
        .expect_err("an inproc endpoint starts")
        .to_string();
    assert!(
        err.contains("inproc://payments") && err.contains("tcp://host:port"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn port_zero_resolves_and_the_bound_address_is_readable_once_started() {
    let (calls, mut journal) = journal();
    let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = broker.monitor();
    assert_eq!(monitor.bound_address(), None);
    let running = service(calls, broker, &["port-zero"])
        .start()
        .await
        .unwrap();
    let address = monitor.bound_address().unwrap();
    let port: u16 = address.rsplit(':').next().unwrap().parse().unwrap();
    assert!(
        address.starts_with("tcp://127.0.0.1:") && port != 0,
        "{address}"
    );
    // Kept until its payment arrived: a publisher dropped without `shutdown` lingers for
    // nothing, and what it had not yet written is lost.
    let feeder = Feeder::dial(&address).await;
    feeder.send("port-zero", 1, Plan::Ack).await;
    journal.until("the payment", |s| s.len() == 1).await;
    feeder.close().await;
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ipc_endpoint_carries_messages() {
    let path = std::env::temp_dir().join(format!("ruststream-zmq-{}.sock", std::process::id()));
    let address = format!("ipc://{}", path.display());
    let (calls, mut journal) = journal();
    let running = service(
        calls,
        ZmqQueue::new(ZmqEndpoint::bind(address.clone())),
        &["over-ipc"],
    )
    .start()
    .await
    .unwrap();
    // Kept until its payment arrived: a publisher dropped without `shutdown` lingers for
    // nothing, and what it had not yet written is lost.
    let feeder = Feeder::dial(&address).await;
    feeder.send("over-ipc", 1, Plan::Ack).await;
    journal.until("the payment", |s| s.len() == 1).await;
    feeder.close().await;
    running.shutdown().await.unwrap();
    let _ = std::fs::remove_file(path);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_subscription_on_a_bound_endpoint_is_refused_at_startup() {
    let (calls, _journal) = journal();
    let app = service(
        calls,
        ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0")),
        &["first", "second"],
    );
    let err = app
        .start()
        .await
        .expect_err("two subscriptions on one bound queue start")
        .to_string();
    assert!(
        err.contains("`second`") && err.contains("`first` already holds it"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publisher_used_after_shutdown_errors() {
    let connected = ZmqQueue::new(ZmqEndpoint::dial("tcp://127.0.0.1:1"))
        .connect()
        .await
        .unwrap();
    let publisher = connected.publisher();
    connected.shutdown().await.unwrap();
    let sent = publisher
        .publish(
            OutgoingMessage::produced("jobs", BytesMut::from(&b"{}"[..])),
            None,
        )
        .await;
    let err = sent.expect_err("a publish after shutdown succeeded");
    assert!(matches!(err, ZmqError::ShutDown { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_port_is_free_again_right_after_shutdown() {
    let address = format!("tcp://127.0.0.1:{}", free_port());
    for round in 0..2 {
        let (calls, mut journal) = journal();
        let running = service(
            calls,
            ZmqQueue::new(ZmqEndpoint::bind(address.clone())),
            &["rebind"],
        )
        .start()
        .await
        .unwrap();
        // Kept until its payment arrived: a publisher dropped without `shutdown` lingers for
        // nothing, and what it had not yet written is lost.
        let feeder = Feeder::dial(&address).await;
        feeder.send("rebind", round, Plan::Ack).await;
        journal.until("the payment", |s| s.len() == 1).await;
        feeder.close().await;
        running.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_pull_subscription_comes_back_after_its_peer_restarts() {
    let upstream_address = format!("tcp://127.0.0.1:{}", free_port());
    let (calls, mut journal) = journal();
    let broker = ZmqQueue::new(ZmqEndpoint::dial(upstream_address.clone()));
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("lifecycle", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(AppState { calls }))
        .with_broker(broker, |b| {
            b.include(work.name("restarts"))
                .out_retry(Publish)
                .to("restarts.retry@tcp://127.0.0.1:1");
        });
    let running = app.start().await.unwrap();
    for id in [1, 2] {
        // A fresh peer each round: the first one goes away and a new one binds the same port.
        let (upstream, _) = Feeder::bind(&upstream_address).await;
        upstream.send("restarts", id, Plan::Ack).await;
        journal
            .until("the payment from this peer", |s| {
                s.iter().any(|s| s.id == id)
            })
            .await;
        // The socket's monitor reports the connection on its own thread: it may come after
        // the message.
        crate::support::eventually(
            std::time::Duration::from_secs(5),
            &format!("round {id}: counted as connected"),
            || monitor.peers_connected() >= 1,
        )
        .await;
        upstream.close().await;
    }
    // The first peer's going away was noticed, counted, and the subscription reconnected.
    assert!(monitor.peers_lost() >= 1, "no lost peer was counted");
    assert!(monitor.reconnects() >= 1, "no reconnect was counted");
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_push_publisher_comes_back_after_its_peer_restarts() {
    let address = format!("tcp://127.0.0.1:{}", free_port());
    let feeder = Feeder::dial(&address).await;
    let mut next_id = 0;
    for round in 0..2 {
        let (calls, mut journal) = journal();
        let running = service(
            calls,
            ZmqQueue::new(ZmqEndpoint::bind(address.clone())),
            &["comeback"],
        )
        .start()
        .await
        .unwrap();
        // Sends into a connection the peer has already closed are lost (the client reports them
        // queued), so the feeder sends until one arrives; every round must get through.
        until_async(
            std::time::Duration::from_secs(15),
            format_args!("round {round}: a payment after the peer restarted"),
            async || {
                next_id += 1;
                let _ = feeder
                    .publisher
                    .publish(
                        OutgoingMessage::produced(
                            "comeback",
                            BytesMut::from(
                                serde_json::to_vec(&Payment {
                                    id: next_id,
                                    plan: Plan::Ack,
                                })
                                .unwrap()
                                .as_slice(),
                            ),
                        ),
                        None,
                    )
                    .await;
                tokio::time::timeout(
                    std::time::Duration::from_millis(200),
                    journal.until("a payment", |s| !s.is_empty()),
                )
                .await
                .is_ok()
            },
        )
        .await;
        running.shutdown().await.unwrap();
    }
    feeder.close().await;
}
