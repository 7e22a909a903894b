//! `ZmqFanout` on real sockets: prefix filtering, copies by side, dead letters under the own
//! prefix, several subscribers and a slow one.

use std::{convert::Infallible, sync::Arc};

use ruststream::{Broker, BytesMut, ConnectedBroker, OutgoingMessage, Publisher};
use ruststream_zmq::ZmqPublisher;

use tokio::sync::watch;

use super::{BACKEND, prelude::*};
use crate::support::{
    Attempt, Calls, Journal, Payment, Plan, Seen, capture_logs, free_port, journal, log_lines,
    logged, poll::until_async, sent_reaches,
};

#[derive(FromRef)]
struct AppState {
    calls: Calls,
    gate: Gate,
}

/// Holds a handler while the test keeps it shut; open by default.
#[derive(Clone)]
struct Gate(Arc<watch::Sender<bool>>);

impl Gate {
    fn open() -> Self {
        Self(Arc::new(watch::Sender::new(true)))
    }

    fn set(&self, open: bool) {
        self.0.send_replace(open);
    }

    async fn pass(&self) {
        let _ = self.0.subscribe().wait_for(|open| *open).await;
    }
}

#[subscriber]
async fn listen(
    payment: &Payment,
    Headers(attempt): Headers<Attempt>,
    State(calls): State<Calls>,
    State(gate): State<Gate>,
) -> HandlerOutcome {
    gate.pass().await;
    calls.settle("listen", payment, attempt.retry_count)
}

#[subscriber(FanoutSubscription::<Dialing>)]
async fn dialing_listen(
    payment: &Payment,
    Headers(attempt): Headers<Attempt>,
    State(calls): State<Calls>,
    State(gate): State<Gate>,
) -> HandlerOutcome {
    gate.pass().await;
    calls.settle("listen", payment, attempt.retry_count)
}

#[subscriber]
async fn again(
    payment: &Payment,
    Headers(attempt): Headers<Attempt>,
    State(calls): State<Calls>,
) -> HandlerOutcome {
    calls.record("again", payment.id, attempt.retry_count);
    HandlerOutcome::ack()
}

/// The app state's startup hook, over `calls` and `gate`.
macro_rules! state {
    ($calls:expr, $gate:expr) => {{
        let (calls, gate) = ($calls, $gate);
        async move |()| Ok::<_, Infallible>(AppState { calls, gate })
    }};
}

async fn publish(publisher: &ZmqPublisher, name: &str, id: u64, plan: Plan) {
    let body = BytesMut::from(
        serde_json::to_vec(&Payment { id, plan })
            .unwrap()
            .as_slice(),
    );
    publisher
        .publish(OutgoingMessage::produced(name, body), None)
        .await
        .unwrap();
}

/// The first id a warm-up message carries; a test's own messages stay below it.
const WARM_UP: u64 = 1_000_000;

/// The calls for a test's own messages: a warm-up sent before the first one was heard may still
/// arrive after `warm_up` returns, and is left out.
fn own(seen: &[Seen]) -> Vec<&Seen> {
    seen.iter().filter(|s| s.id < WARM_UP).collect()
}

/// PUB drops what it sends before a subscription reaches it (the slow joiner): send a warm-up
/// (an id from [`WARM_UP`] on) under `name` until every journal has seen one.
async fn warm_up(publisher: &ZmqPublisher, name: &str, journals: &mut [&mut Journal]) {
    let mut id = WARM_UP;
    until_async(
        std::time::Duration::from_secs(15),
        "a warm-up heard by every subscriber",
        async || {
            publish(publisher, name, id, Plan::Ack).await;
            id += 1;
            let mut heard = 0;
            for journal in journals.iter_mut() {
                let seen = tokio::time::timeout(
                    std::time::Duration::from_millis(50),
                    journal.until("a warm-up", |s| !s.is_empty()),
                )
                .await;
                heard += usize::from(seen.is_ok());
            }
            if heard == journals.len() {
                Ok(())
            } else {
                Err(format!("{heard} of {} heard one", journals.len()))
            }
        },
    )
    .await;
    for journal in journals.iter_mut() {
        journal.seen.clear();
    }
}

/// A PUB dialing a bound fan-out service.
async fn dialing_publisher(
    address: &str,
) -> (ruststream_zmq::ConnectedZmqFanout<Dialing>, ZmqPublisher) {
    let connected = ZmqFanout::new(ZmqEndpoint::dial(address))
        .connect()
        .await
        .unwrap();
    let publisher = connected.publisher();
    (connected, publisher)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_name_is_a_prefix_filter() {
    let (calls, mut journal) = journal();
    let broker = ZmqFanout::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("fanout", "0.1.0"))
        .on_startup(state!(calls, Gate::open()))
        .with_broker(broker, |b| {
            b.include(listen.name("orders"));
        });
    let running = app.start().await.unwrap();
    let (peer, publisher) = dialing_publisher(&monitor.bound_address().unwrap()).await;
    warm_up(&publisher, "orders.warmup", &mut [&mut journal]).await;
    publish(&publisher, "orders", 1, Plan::Ack).await;
    publish(&publisher, "invoices", 2, Plan::Ack).await;
    publish(&publisher, "orders.eu", 3, Plan::Ack).await;
    // One connection keeps its order: once the last arrived, the filtered one would have too.
    publish(&publisher, "orders.end", 4, Plan::Ack).await;
    let seen = journal
        .until("the last order", |s| s.iter().any(|s| s.id == 4))
        .await;
    let ids: Vec<_> = own(seen).iter().map(|s| s.id).collect();
    assert_eq!(
        ids,
        [1, 3, 4],
        "`orders` hears `orders` and `orders.eu`, not `invoices`"
    );
    running.shutdown().await.unwrap();
    peer.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_fanout_copies_reach_its_own_listener_from_the_first_one() {
    let (calls, mut journal) = journal();
    let broker = ZmqFanout::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("fanout", "0.1.0"))
        .on_startup(state!(calls, Gate::open()))
        .with_broker(broker, |b| {
            b.include(listen.name("copies"))
                .max_attempts(nonzero!(4u32));
        });
    let running = app.start().await.unwrap();
    let (peer, publisher) = dialing_publisher(&monitor.bound_address().unwrap()).await;
    warm_up(&publisher, "copies.warmup", &mut [&mut journal]).await;
    let sent_before = monitor.sent();
    publish(&publisher, "copies", 1, Plan::Retry { times: 3 }).await;
    let seen = journal.until("three copies", |s| own(s).len() == 4).await;
    let counts: Vec<_> = own(seen).iter().map(|s| s.retry_count).collect();
    assert_eq!(counts, [None, Some(1), Some(2), Some(3)]);
    sent_reaches(&monitor, sent_before + 3).await;
    running.shutdown().await.unwrap();
    assert_eq!(
        monitor.sent() - sent_before,
        3,
        "three copies, none lost to the slow joiner, and no fourth"
    );
    assert_eq!(
        own(journal.arrived()).len(),
        4,
        "no delivery after the third copy"
    );
    peer.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_under_the_own_prefix_arrives_back_and_startup_says_so() {
    capture_logs();
    // The names are this backend's: the same test on the other one logs beside it.
    let parcels = BACKEND.own("parcels");
    let dead = format!("{parcels}.dead");
    let (calls, mut journal) = journal();
    let broker = ZmqFanout::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("fanout", "0.1.0"))
        .on_startup(state!(calls, Gate::open()))
        .with_broker(broker, |b| {
            b.include(listen.name(parcels.clone()))
                .max_attempts(nonzero!(2u32))
                .dead_letter(dead.clone());
        });
    let running = app.start().await.unwrap();
    let line = logged(&[&dead, "under this fan-out subscription's own prefix"]).await;
    assert!(
        line.contains(&format!("subscription=\"{parcels}\""))
            || line.contains(&format!("subscription={parcels}")),
        "{line}"
    );
    let (peer, publisher) = dialing_publisher(&monitor.bound_address().unwrap()).await;
    warm_up(
        &publisher,
        &format!("{parcels}.warmup"),
        &mut [&mut journal],
    )
    .await;
    let sent_before = monitor.sent();
    // Retries twice: the second is at the cap, so the delivery leaves as a dead letter, whose
    // name `parcels.dead` the subscription `parcels` hears.
    publish(&publisher, &parcels, 1, Plan::Retry { times: 2 }).await;
    let seen = journal
        .until("the dead letter back at the subscription", |s| {
            own(s).len() == 3
        })
        .await;
    let counts: Vec<_> = own(seen).iter().map(|s| s.retry_count).collect();
    assert_eq!(counts, [None, Some(1), Some(2)]);
    // The handler cannot read the name a delivery came under, so the runtime's own account says
    // which one the third was: the second delivery was at the cap and left as the dead letter,
    // once, and the service sent two messages in all, the copy and that dead letter.
    let dead_lettered = log_lines(&[
        &dead,
        "retry attempts exhausted; publishing the delivery to the dead-letter destination",
    ]);
    assert_eq!(dead_lettered.len(), 1, "{dead_lettered:#?}");
    assert!(
        dead_lettered[0].contains("attempt=2")
            && (dead_lettered[0].contains(&format!("subscription={parcels} "))
                || dead_lettered[0].contains(&format!("subscription=\"{parcels}\""))),
        "{}",
        dead_lettered[0]
    );
    sent_reaches(&monitor, sent_before + 2).await;
    running.shutdown().await.unwrap();
    assert_eq!(
        monitor.sent() - sent_before,
        2,
        "the retry copy, then the dead letter, and nothing after"
    );
    peer.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_fanout_copies_go_where_out_retry_names() {
    let retry_port = free_port();
    let upstream = ZmqFanout::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let upstream_address = upstream.bind_publisher().await.unwrap();
    let publisher = upstream.publisher();
    let (calls, mut journal) = journal();
    let app = RustStream::new(AppInfo::new("fanout", "0.1.0"))
        .on_startup(state!(calls, Gate::open()))
        .with_broker(ZmqFanout::new(ZmqEndpoint::dial(upstream_address)), |b| {
            b.include(
                dialing_listen
                    .name("news")
                    .out_retry(format!("news.retry@tcp://127.0.0.1:{retry_port}")),
            )
            .max_attempts(nonzero!(3u32));
        })
        .with_broker(
            ZmqQueue::new(ZmqEndpoint::bind(format!("tcp://127.0.0.1:{retry_port}"))),
            |b| {
                b.include(again.name("news.retry"));
            },
        );
    let running = app.start().await.unwrap();
    warm_up(&publisher, "news.warmup", &mut [&mut journal]).await;
    publish(&publisher, "news", 5, Plan::Retry { times: 1 }).await;
    journal
        .until("the copy at the named place", |s| {
            s.iter().any(|s| s.handler == "again")
        })
        .await;
    assert_eq!(journal.of("again", 5)[0].retry_count, Some(1));
    running.shutdown().await.unwrap();
    upstream.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_fanout_registration_that_names_no_destination_is_refused_at_startup() {
    let (calls, _journal) = journal();
    let app = RustStream::new(AppInfo::new("fanout", "0.1.0"))
        .on_startup(state!(calls, Gate::open()))
        .with_broker(
            ZmqFanout::new(ZmqEndpoint::dial("tcp://127.0.0.1:1")),
            |b| {
                b.include(listen.name("unnamed-news"));
            },
        );
    let err = app
        .start()
        .await
        .expect_err("a dialing fan-out with no destination started")
        .to_string();
    assert!(
        err.contains("unnamed-news") && err.contains("NamedCopies"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_subscriber_gets_every_message_and_a_slow_one_holds_no_one_back() {
    const MESSAGES: u64 = 2_000;
    // Under its queue's limit a subscriber loses nothing. On libzmq the limit is the broker's
    // `peer_queue` (1,000 by default, past which a PUB drops for that subscriber, as the README
    // says): here every queue holds the whole burst twice over, so only a subscriber held back
    // by another could lose a message. Twice, because libzmq's PUB counts a message as queued
    // until the subscriber's side reports it read, in steps of half the queue: with room for
    // the burst exactly, the warm-up message still counted can cost the burst's last message.
    // The `zeromq` client's queue is 100,000.
    fn queued<S: ruststream_zmq::Side>(broker: ZmqFanout<S>) -> ZmqFanout<S> {
        super::with_subscriber_queue(broker, 2 * MESSAGES as usize)
    }
    let hub = queued(ZmqFanout::new(ZmqEndpoint::bind("tcp://127.0.0.1:0")))
        .connect()
        .await
        .unwrap();
    let hub_address = hub.bind_publisher().await.unwrap();
    let publisher = hub.publisher();
    let subscriber = |calls: Calls, gate: Gate| {
        RustStream::new(AppInfo::new("fanout", "0.1.0"))
            .on_startup(state!(calls, gate))
            .with_broker(
                queued(ZmqFanout::new(ZmqEndpoint::dial(hub_address.clone()))),
                |b| {
                    b.include(listen.name("ticks"))
                        .out_retry(Publish)
                        .to("ticks.retry@tcp://127.0.0.1:1");
                },
            )
    };
    let (fast_calls, mut fast) = journal();
    let (slow_calls, mut slow) = journal();
    let slow_gate = Gate::open();
    let fast_app = subscriber(fast_calls, Gate::open()).start().await.unwrap();
    let slow_app = subscriber(slow_calls, slow_gate.clone())
        .start()
        .await
        .unwrap();
    warm_up(&publisher, "ticks.warmup", &mut [&mut fast, &mut slow]).await;

    // The slow subscriber's handler now blocks on its first message.
    slow_gate.set(false);
    for id in 0..MESSAGES {
        publish(&publisher, "ticks", id, Plan::Ack).await;
    }
    fast.until("every message at the fast subscriber", |s| {
        own(s).len() as u64 == MESSAGES
    })
    .await;
    // The slow handler records a message only once the gate lets it through.
    let let_through: Vec<_> = own(slow.arrived()).iter().map(|s| s.id).collect();
    assert!(
        let_through.is_empty(),
        "the slow subscriber was let through {} messages, from {:?}",
        let_through.len(),
        let_through.first()
    );
    println!("the fast subscriber got all {MESSAGES} messages while the slow one was stuck");

    slow_gate.set(true);
    let seen = slow
        .until("every message at the slow subscriber", |s| {
            own(s).len() as u64 == MESSAGES
        })
        .await;
    let ids: Vec<_> = own(seen).iter().map(|s| s.id).collect();
    assert_eq!(
        ids,
        (0..MESSAGES).collect::<Vec<_>>(),
        "under its queue's limit the slow one loses nothing"
    );
    fast_app.shutdown().await.unwrap();
    slow_app.shutdown().await.unwrap();
    hub.shutdown().await.unwrap();
}
