//! Readiness on real sockets: a dialing service is ready while its peer is there, and not
//! before, after, or once it stops.

use std::{convert::Infallible, time::Duration};

use ruststream_zmq::{NotReady, Readiness};

use super::{Feeder, prelude::*};
use crate::support::{AppState, eventually, free_port, journal, work};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_service_is_ready_while_its_peer_is_connected() {
    let address = format!("tcp://127.0.0.1:{}", free_port());
    let broker = ZmqQueue::new(ZmqEndpoint::dial(address.clone()));
    let monitor = broker.monitor();
    let (calls, _journal) = journal();
    let running = RustStream::new(AppInfo::new("ready", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(AppState { calls }))
        .with_broker(broker, |b| {
            b.include(work.name("ready"))
                .out_retry(Publish)
                .to("ready.retry@tcp://127.0.0.1:1");
        })
        .start()
        .await
        .unwrap();
    let readiness = Readiness::new(running.health()).needs_peer(monitor);
    assert_eq!(
        readiness.check(),
        Err(NotReady::NoPeer {
            endpoint: address.clone()
        })
    );

    let (peer, _) = Feeder::bind(&address).await;
    eventually(Duration::from_secs(15), "ready once the peer is up", || {
        readiness.is_ready()
    })
    .await;
    peer.close().await;
    eventually(Duration::from_secs(15), "not ready once it left", || {
        readiness.check()
            == Err(NotReady::NoPeer {
                endpoint: address.clone(),
            })
    })
    .await;

    running.shutdown().await.unwrap();
    assert!(
        matches!(readiness.check(), Err(NotReady::NotRunning(_))),
        "{:?}",
        readiness.check()
    );
}
