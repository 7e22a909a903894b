//! libzmq's wildcard bind, `tcp://*:port`: every interface, as a libzmq user writes it.

use std::{convert::Infallible, net::TcpListener};

use super::{Feeder, prelude::*};
use crate::support::{AppState, Calls, Plan, journal, work};

fn service(calls: Calls, address: &str) -> (impl App, ZmqMonitor) {
    let broker = ZmqQueue::new(ZmqEndpoint::bind(address));
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("wildcard", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(AppState { calls }))
        .with_broker(broker, |b| {
            b.include(work.name("everywhere"));
        });
    (app, monitor)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wildcard_host_binds_every_interface_and_a_peer_on_loopback_delivers_through_it() {
    let (calls, mut journal) = journal();
    let (app, monitor) = service(calls, "tcp://*:0");
    let running = app.start().await.expect("`tcp://*:0` is refused");
    let address = monitor.bound_address().expect("no bound address reported");
    let port = address
        .strip_prefix("tcp://0.0.0.0:")
        .and_then(|port| port.parse::<u16>().ok())
        .unwrap_or_else(|| panic!("not bound on every interface: {address}"));
    assert_ne!(port, 0, "{address}");

    // Kept until its payment arrived: a publisher dropped without `shutdown` lingers for
    // nothing, and what it had not yet written is lost.
    let feeder = Feeder::dial(&format!("tcp://127.0.0.1:{port}")).await;
    feeder.send("everywhere", 7, Plan::Ack).await;
    let seen = journal.until("the payment", |s| !s.is_empty()).await;
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].id, 7, "{seen:?}");
    feeder.close().await;
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wildcard_bind_that_fails_names_the_address_as_the_user_wrote_it() {
    // Every interface of this port is taken, so the wildcard bind cannot succeed.
    let taken = TcpListener::bind("0.0.0.0:0").unwrap();
    let written = format!("tcp://*:{}", taken.local_addr().unwrap().port());
    let (calls, _journal) = journal();
    let (app, _monitor) = service(calls, &written);
    let err = app
        .start()
        .await
        .expect_err("a bind on a taken port starts")
        .to_string();
    assert!(err.contains(&written), "{err}");
}
