//! Readiness counts a peer once its handshake succeeded, not at TCP connect: a dialing service
//! pointed at a listener that accepts and says nothing stays not ready, and is ready once a real
//! peer answers at the same address.

use std::{
    net::TcpListener,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use ruststream_zmq::{Readiness, ZmqMonitor};

use super::{BACKEND, Feeder, prelude::*};
use crate::support::eventually;

/// How long a check that the service is not ready goes on, once the TCP connection it must not
/// count is made: counting at connect showed within milliseconds of it (the socket's monitor
/// reports it at once), so 2 s leaves a loaded machine a hundred times that margin, and a
/// handshake that was coming would have come (a real peer's takes milliseconds).
pub(crate) const NOT_READY_FOR: Duration = Duration::from_secs(2);

/// Checks, every 20 ms for [`NOT_READY_FOR`], that `readiness` answers not ready and that
/// `monitor` has seen no peer: `what` names the upstream.
pub(crate) async fn stays_not_ready(readiness: &Readiness, monitor: &ZmqMonitor, what: &str) {
    let until = Instant::now() + NOT_READY_FOR;
    while Instant::now() < until {
        assert!(
            !readiness.is_ready(),
            "{}: ready against {what}",
            BACKEND.name()
        );
        assert_eq!(
            (monitor.peers_connected(), monitor.peers_seen()),
            (0, 0),
            "{}: a peer counted against {what}",
            BACKEND.name()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A service whose dialing queue is the broker given, its retries to `tcp://127.0.0.1:1` (no
/// one), and its readiness needing the queue's peer: `(running, readiness, monitor)`. A macro,
/// as the endpoint's security is a type of its own.
macro_rules! dialing_service {
    ($broker:expr) => {{
        let broker = $broker;
        let monitor = broker.monitor();
        let (calls, _journal) = crate::support::journal();
        let running = RustStream::new(AppInfo::new("ready", "0.1.0"))
            .on_startup(async move |()| {
                Ok::<_, std::convert::Infallible>(crate::support::AppState { calls })
            })
            .with_broker(broker, |b| {
                b.include(crate::support::work.name("ready"))
                    .out_retry(Publish)
                    .to("ready.retry@tcp://127.0.0.1:1");
            })
            .start()
            .await
            .unwrap();
        let readiness =
            ruststream_zmq::Readiness::new(running.health()).needs_peer(monitor.clone());
        (running, readiness, monitor)
    }};
}
#[allow(
    unused_imports,
    reason = "the CURVE topic's file uses it, on libzmq and omq"
)]
pub(crate) use dialing_service;

/// A TCP listener that accepts every connection and holds it, saying nothing, until stopped.
struct Silent {
    address: String,
    accepted: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Silent {
    fn listen() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let address = format!("tcp://{}", listener.local_addr().unwrap());
        let (accepted, stop) = (Arc::<AtomicUsize>::default(), Arc::<AtomicBool>::default());
        let (counting, stopping) = (Arc::clone(&accepted), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            let mut held = Vec::new();
            while !stopping.load(Ordering::Acquire) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        held.push(stream);
                        counting.fetch_add(1, Ordering::AcqRel);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Self {
            address,
            accepted,
            stop,
            thread,
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Acquire)
    }

    /// Stops listening and closes every connection it held.
    fn close(self) {
        self.stop.store(true, Ordering::Release);
        self.thread.join().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_service_is_not_ready_against_a_silent_listener_and_is_once_a_peer_answers() {
    let silent = Silent::listen();
    let address = silent.address.clone();
    let (running, readiness, monitor) =
        dialing_service!(ZmqQueue::new(ZmqEndpoint::dial(address.clone())));
    eventually(
        Duration::from_secs(15),
        "the service's connection accepted",
        || silent.accepted() > 0,
    )
    .await;
    stays_not_ready(&readiness, &monitor, "a silent TCP listener").await;

    // The control: the same address answered by a peer that speaks ZMTP.
    silent.close();
    let (peer, _) = Feeder::bind(&address).await;
    eventually(Duration::from_secs(15), "ready once a peer answers", || {
        readiness.is_ready()
    })
    .await;
    assert_eq!(monitor.peers_connected(), 1);
    peer.close().await;
    running.shutdown().await.unwrap();
}
