//! The README's demo: a payments service and a peer that feeds it, on loopback, in one process.
//!
//! The service binds a queue for payments and a second one for dead letters. The peer dials the
//! first and sends eight payments: some are charged, some are dropped (nothing to charge), some
//! fail once and come back as a copy, and some fail every time, exhaust the cap of three
//! attempts and are parked on the dead-letter queue. The demo prints what happened to each and
//! exits by itself.
//!
//! ```text
//! cargo run --example payments_demo                                      # the pure-Rust client
//! cargo run --example payments_demo --features libzmq -- --backend libzmq   # libzmq
//! cargo run --example payments_demo --features omq -- --backend omq         # omq
//! ```

use std::{collections::BTreeMap, convert::Infallible, net::TcpListener, time::Duration};

use ruststream::{Broker, ConnectedBroker};
use ruststream_zmq::{Backend, QueueKind, ZmqBroker, prelude::*};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

#[derive(Debug, Clone, Serialize, Deserialize, Outgoing)]
struct Payment {
    id: u64,
    amount: u64,
    /// How many times the (pretend) gateway fails this payment before it goes through.
    failures: u32,
}

/// The retry count header the runtime stamps on every copy.
#[derive(Debug, Deserialize)]
struct Attempt {
    #[serde(rename = "x-ruststream-retry-count")]
    retries: Option<u32>,
}

/// What became of one payment, reported by the handlers.
#[derive(Debug)]
enum Fate {
    Charged { id: u64, attempt: u32 },
    Dropped { id: u64 },
    Failed { id: u64, attempt: u32 },
    DeadLettered { id: u64, attempts: u32 },
}

/// The attempts a payment gets before it is dead-lettered.
const CAP: u32 = 3;

#[derive(Clone)]
struct Ledger(mpsc::UnboundedSender<Fate>);

#[derive(FromRef)]
struct AppState {
    ledger: Ledger,
}

#[subscriber]
async fn charge(
    payment: &Payment,
    Headers(attempt): Headers<Attempt>,
    State(ledger): State<Ledger>,
) -> HandlerOutcome {
    let attempt = attempt.retries.unwrap_or(0) + 1;
    if payment.amount == 0 {
        tracing::warn!(payment.id, "a payment of nothing, dropped");
        let _ = ledger.0.send(Fate::Dropped { id: payment.id });
        return HandlerOutcome::drop();
    }
    if attempt <= payment.failures {
        tracing::warn!(
            payment.id,
            attempt,
            "the gateway failed, trying again later"
        );
        let _ = ledger.0.send(Fate::Failed {
            id: payment.id,
            attempt,
        });
        return HandlerOutcome::retry_after(Duration::from_millis(200));
    }
    tracing::info!(payment.id, payment.amount, attempt, "charged");
    let _ = ledger.0.send(Fate::Charged {
        id: payment.id,
        attempt,
    });
    HandlerOutcome::ack()
}

#[subscriber]
async fn park(
    payment: &Payment,
    Headers(attempt): Headers<Attempt>,
    State(ledger): State<Ledger>,
) -> HandlerOutcome {
    let attempts = attempt.retries.unwrap_or(0);
    tracing::error!(payment.id, attempts, "parked on the dead-letter queue");
    let _ = ledger.0.send(Fate::DeadLettered {
        id: payment.id,
        attempts,
    });
    HandlerOutcome::ack()
}

fn app<B: Backend>(
    ledger: Ledger,
    payments: ZmqBroker<QueueKind, Bound, B>,
    dead_port: u16,
) -> impl App {
    RustStream::new(AppInfo::new("payments", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(AppState { ledger }))
        .with_broker(payments, |b| {
            b.include(charge.name("payments"))
                .max_attempts(std::num::NonZeroU32::new(CAP).expect("a cap of at least one"))
                .dead_letter(format!("payments.dead@tcp://127.0.0.1:{dead_port}"));
        })
        .with_broker(
            ZmqBroker::<QueueKind, Bound, B>::new(ZmqEndpoint::bind(format!(
                "tcp://127.0.0.1:{dead_port}"
            ))),
            |b| {
                b.include(park.name("payments.dead"));
            },
        )
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    ruststream::logging::init()?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let backend = match args.as_slice() {
        // The crate root's backend: the pure-Rust client where the build has it.
        [] if cfg!(feature = "zeromq") => "zeromq",
        [] if cfg!(feature = "libzmq") => "libzmq",
        [] => "omq",
        [flag, name] if flag == "--backend" => name,
        _ => return Err("usage: payments_demo [--backend zeromq|libzmq|omq]".into()),
    };
    match backend {
        #[cfg(feature = "zeromq")]
        "zeromq" => demo::<ruststream_zmq::zeromq::Zeromq>().await,
        #[cfg(feature = "libzmq")]
        "libzmq" => demo::<ruststream_zmq::libzmq::Libzmq>().await,
        #[cfg(feature = "omq")]
        "omq" => demo::<ruststream_zmq::omq::Omq>().await,
        // A backend this build left out (a guard, so that no build finds the arm unreachable).
        name if ["zeromq", "libzmq", "omq"].contains(&name) => {
            Err(format!("this build has no {name} backend: run it with `--features {name}`").into())
        }
        other => Err(format!("--backend {other}: zeromq, libzmq or omq").into()),
    }
}

/// The service and its peer on backend `B`, to the end of the story.
async fn demo<B: Backend>() -> Result<(), Box<dyn std::error::Error>> {
    let dead_port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let payments = ZmqBroker::<QueueKind, Bound, B>::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = payments.monitor();
    let (tx, mut fates) = mpsc::unbounded_channel();
    let running = app(Ledger(tx), payments, dead_port).start().await?;
    let address = monitor
        .bound_address()
        .ok_or("the payments queue did not bind")?;

    // The peer: a PUSH dialing the service, as a Python or C++ peer would.
    let peer = ZmqBroker::<QueueKind, Dialing, B>::new(ZmqEndpoint::dial(address.clone()))
        .connect()
        .await?;
    let publisher = peer.publisher();
    let sent = [
        Payment {
            id: 1,
            amount: 250,
            failures: 0,
        },
        Payment {
            id: 2,
            amount: 0,
            failures: 0,
        },
        Payment {
            id: 3,
            amount: 1200,
            failures: 1,
        },
        Payment {
            id: 4,
            amount: 80,
            failures: 9,
        },
        Payment {
            id: 5,
            amount: 40,
            failures: 0,
        },
        Payment {
            id: 6,
            amount: 0,
            failures: 0,
        },
        Payment {
            id: 7,
            amount: 999,
            failures: 2,
        },
        Payment {
            id: 8,
            amount: 310,
            failures: 9,
        },
    ];
    for payment in &sent {
        publisher.message(payment).to("payments").publish().await?;
    }
    tracing::info!(count = sent.len(), endpoint = %address, "the peer sent its payments");

    let mut story: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut settled = 0;
    let waited = tokio::time::timeout(Duration::from_secs(20), async {
        while settled < sent.len() {
            let Some(fate) = fates.recv().await else {
                break;
            };
            let (id, line, last) = match fate {
                Fate::Charged { id, attempt } => {
                    (id, format!("charged on attempt {attempt}"), true)
                }
                Fate::Dropped { id } => (id, "dropped: nothing to charge".to_owned(), true),
                Fate::Failed { id, attempt } if attempt < CAP => (
                    id,
                    format!("failed on attempt {attempt}, a copy comes back in 200 ms"),
                    false,
                ),
                Fate::Failed { id, attempt } => {
                    (id, format!("failed on attempt {attempt}, the cap"), false)
                }
                Fate::DeadLettered { id, attempts } => {
                    (id, format!("dead-lettered after {attempts} attempts"), true)
                }
            };
            story.entry(id).or_default().push(line);
            settled += usize::from(last);
        }
    })
    .await;
    running.shutdown().await?;
    peer.shutdown().await?;

    println!("\nwhat happened to each payment:");
    for payment in &sent {
        let lines = story
            .get(&payment.id)
            .map_or_else(|| "nothing: lost".to_owned(), |lines| lines.join("; "));
        println!(
            "  payment {} ({} cents): {lines}",
            payment.id, payment.amount
        );
    }
    waited.map_err(|_| "not every payment was settled within 20 s")?;
    Ok(())
}
