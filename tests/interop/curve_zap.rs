//! libzmq's CURVE authentication handler, a thread of the process that every allow-list relies
//! on: a signal to it leaves the lists closed, and a fault in it aborts the process before an
//! unlisted client gets in. omq asks its authenticator on tokio's blocking pool, for each
//! handshake, and fails the handshake when it panics.

use std::time::Duration;

use super::curve::{client_of, curve_queue, offer, python_keypair, the_allow_list_holds};
use ruststream_zmq::CurveKeyPair;

use crate::support::{
    ChildTest, PyPeer, STEP, interrupt_until_handled_by, is_child, json_of, until, until_async,
};

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
fn panicking_handler() -> String {
    crate::support::test_name(
        module_path!(),
        "a_log_layer_that_panics_in_the_authentication_handler_aborts_before_an_unlisted_client_gets_in",
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

/// The handler's thread panics (a log layer, here) while it answers an unlisted pyzmq client:
/// the process aborts with an ERROR naming the endpoint that relied on it, and no unlisted
/// client, that one or the ones that keep coming, gets a job in. Runs in a process of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_layer_that_panics_in_the_authentication_handler_aborts_before_an_unlisted_client_gets_in()
 {
    use std::os::unix::process::ExitStatusExt;
    if is_child(&panicking_handler()) {
        return panicking_handler_in_a_process_of_its_own().await;
    }
    let end = ChildTest::spawn(&panicking_handler()).end(STEP * 6).await;
    let shown = end.describe();
    assert!(!end.stdout.contains("received"), "a job got in: {shown}");
    assert_eq!(
        end.status.and_then(|status| status.signal()),
        Some(libc::SIGABRT),
        "{shown}"
    );
    let address = end
        .stdout
        .lines()
        .find_map(|line| Some(line.split_once("listening on ")?.1))
        .unwrap_or_else(|| panic!("no endpoint: {shown}"));
    let error = end
        .stderr
        .lines()
        .find(|line| line.contains("the CURVE authentication handler stopped"))
        .unwrap_or_else(|| panic!("no ERROR: {shown}"));
    assert!(error.contains("ERROR"), "{error}");
    assert!(error.contains(&format!("endpoints={address}")), "{error}");
    assert!(
        error.contains("its thread panicked: a log layer that panics"),
        "{error}"
    );
}

async fn panicking_handler_in_a_process_of_its_own() {
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
    let (_connected, mut tap, address) = curve_queue(&server, &[&listed]).await;
    println!("listening on {address}");
    // Unlisted clients, one after the other, each offering a job: the first is refused as the
    // handler panics; one that came after a handler gone would be admitted. The process aborts
    // meanwhile; that it does not is a failure.
    let mut peers = Vec::new();
    until_async(STEP * 3, "the process aborting", async || {
        let stranger = python_keypair();
        let mut peer =
            PyPeer::connect("PUSH", &address, client_of(&server.public(), &stranger)).await;
        offer(&mut peer, peers.len() as u64).await;
        peers.push(peer);
        if let Some(got) = tap.next(Duration::from_millis(200)).await {
            println!("received {}", json_of(&got)["n"]);
        }
        false
    })
    .await;
}
