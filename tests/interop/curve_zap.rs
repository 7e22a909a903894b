//! libzmq's CURVE authentication handler, a thread of the process that every allow-list relies
//! on: a signal to it leaves the lists closed, and a log layer that panics on its warnings costs
//! a line, not the handler (its faults abort the process: `zap.rs`'s unit tests). omq asks its authenticator on tokio's blocking pool, for each
//! handshake, and fails the handshake when it panics.

use std::time::Duration;

use super::curve::{client_of, curve_queue, offer, python_keypair, the_allow_list_holds};
use ruststream::ConnectedBroker;
use ruststream_zmq::CurveKeyPair;

use crate::support::{PyPeer, STEP, interrupt_until_handled_by, is_child, json_of, until};

/// Interrupts the authentication handler's thread with a signal the process handles, once it
/// runs.
pub(crate) async fn interrupt_the_authentication_handler() {
    // The handler's thread takes its name once it runs; until then it carries its parent's.
    until(
        STEP,
        "the authentication handler's thread (zmq-zap)",
        || a_thread_named("zmq-zap"),
    )
    .await;
    interrupt_until_handled_by("zmq-zap").await;
}

/// Whether a thread of this process goes by `name` (its `comm`).
fn a_thread_named(name: &str) -> bool {
    std::fs::read_dir("/proc/self/task")
        .expect("this process's threads")
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
        .any(|comm| comm.trim() == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_to_the_authentication_handler_leaves_the_allow_list_closed() {
    // libzmq admits any client that knows the server's key while no authentication handler is
    // bound, and a signal the process handles interrupts the handler's wait: that must not
    // end it. tokio handles SIGCHLD for child processes and the shutdown signals.
    the_allow_list_holds(interrupt_the_authentication_handler()).await;
}

// -------------------------------------------------------------------------------------------
// Enforcement never lapses

/// The test below, by the name libtest gives it.
fn panicking_log() -> String {
    crate::support::test_name(
        module_path!(),
        "a_log_layer_that_panics_on_a_refusal_leaves_the_allow_list_enforced",
    )
}

/// A tracing layer that panics on the warning of a refused CURVE client: the handler's thread
/// panics, answering an unlisted client.
struct PanicsOnRefusal;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for PanicsOnRefusal {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        if message.0.starts_with("refused a client whose CURVE key") {
            panic!("a log layer that panics");
        }
    }
}

/// A log layer that panics on each refusal's warning costs only that line: the handler writes
/// no line itself (a thread of its own does), so it goes on answering. Unlisted pyzmq clients,
/// one after another, are each refused and counted and get nothing in, a listed one's job
/// arrives, and the process does not abort. Runs in a process of its own, with that layer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_layer_that_panics_on_a_refusal_leaves_the_allow_list_enforced() {
    if is_child(&panicking_log()) {
        return panicking_log_in_a_process_of_its_own().await;
    }
    crate::support::alone(&panicking_log()).await;
}

async fn panicking_log_in_a_process_of_its_own() {
    use tracing_subscriber::{layer::SubscriberExt, util::SubscriberInitExt};
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false),
        )
        .with(PanicsOnRefusal)
        .init();
    let server = CurveKeyPair::generate().unwrap();
    let listed = python_keypair();
    let (connected, mut tap, address) = curve_queue(&server, &[&listed]).await;
    let monitor = connected.monitor();
    let mut peers = Vec::new();
    for n in 1..=3 {
        let stranger = python_keypair();
        let mut peer =
            PyPeer::connect("PUSH", &address, client_of(&server.public(), &stranger)).await;
        offer(&mut peer, n).await;
        until(STEP, format!("unlisted client {n} refused"), || {
            monitor.peers_refused() >= n
        })
        .await;
        peers.push(peer);
    }
    let mut friend = PyPeer::connect("PUSH", &address, client_of(&server.public(), &listed)).await;
    friend.send(&[b"jobs", b"{\"n\": 7}"]).await;
    assert_eq!(
        json_of(&tap.expect("the listed client's job").await)["n"],
        7,
        "an unlisted client's job got in"
    );
    assert!(tap.next(Duration::from_millis(300)).await.is_none());
    connected.shutdown().await.unwrap();
}
