//! `TestApp::start_live`: the production app over real sockets, driven by the framework's test
//! harness, for every pattern and side (the bound fan-out is `context.rs`'s first test). On a
//! bound subscription the harness publishes itself; a dialing one reads from a peer the test
//! runs, and the harness sees what that peer sends.

use ruststream::testing::TestApp;
use serde::{Deserialize, Serialize};

use super::prelude::*;
use crate::support::poll::{until, until_async};

#[derive(Debug, PartialEq, Serialize, Deserialize, Outgoing)]
struct Payment {
    id: u64,
}

#[subscriber("payments")]
async fn charge(payment: &Payment) -> HandlerOutcome {
    let _ = payment.id;
    HandlerOutcome::ack()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_queue_runs_live_under_the_test_harness() -> Result<(), Box<dyn std::error::Error>>
{
    let app = RustStream::new(AppInfo::new("payments", "0.1.0")).with_broker(
        ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0")),
        |b| {
            b.include(charge);
        },
    );
    let tb = TestApp::start_live(app).await?;
    let payments = tb.broker::<ZmqQueue>();
    payments
        .message(&Payment { id: 1 })
        .to("payments")
        .publish()
        .await?;
    payments
        .subscriber("payments")
        .assert_called_once()
        .with(&Payment { id: 1 });
    // Shut down, not dropped: on omq, a runtime that ends with a service's sockets still open
    // can spin in omq's receive and never end (seen in 4 of 40 runs of these tests).
    tb.shutdown().await?;
    Ok(())
}

#[subscriber(QueueSubscription::<Dialing>)]
async fn charge_dialing(payment: &Payment) -> HandlerOutcome {
    let _ = payment.id;
    HandlerOutcome::ack()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_queue_runs_live_and_the_harness_sees_what_a_peer_sends()
-> Result<(), Box<dyn std::error::Error>> {
    let (feeder, upstream) = super::Feeder::bind("tcp://127.0.0.1:0").await;
    let app = RustStream::new(AppInfo::new("payments", "0.1.0")).with_broker(
        ZmqQueue::new(ZmqEndpoint::dial(upstream)),
        |b| {
            b.include(
                charge_dialing
                    .name("payments")
                    .out_retry("payments.retry@tcp://127.0.0.1:1"),
            );
        },
    );
    let tb = TestApp::start_live(app).await?;
    feeder
        .publisher
        .publish(
            ruststream::OutgoingMessage::produced(
                "payments",
                ruststream::BytesMut::from(&br#"{"id":5}"#[..]),
            ),
            None,
        )
        .await?;
    let payments = tb.broker::<ZmqQueue<Dialing>>();
    crate::support::eventually(
        std::time::Duration::from_secs(10),
        "the peer's payment handled",
        || payments.subscriber("payments").received_raw().len() == 1,
    )
    .await;
    payments
        .subscriber("payments")
        .assert_called_once()
        .with(&Payment { id: 5 });
    feeder.close().await;
    // Shut down, not dropped: on omq, a runtime that ends with a service's sockets still open
    // can spin in omq's receive and never end (seen in 4 of 40 runs of these tests).
    tb.shutdown().await?;
    Ok(())
}

#[subscriber(Responder::<Bound>, reply("reply"))]
async fn quote(payment: &Payment) -> Payment {
    Payment {
        id: payment.id * 10,
    }
}

#[subscriber(Responder::<Dialing>, reply("reply"))]
async fn dialing_quote(payment: &Payment) -> Payment {
    Payment {
        id: payment.id * 10,
    }
}

fn ask(id: u64) -> ruststream::OutgoingMessage<'static, ruststream::BytesMut> {
    ruststream::OutgoingMessage::produced(
        "quotes",
        ruststream::BytesMut::from(format!(r#"{{"id":{id}}}"#).as_bytes()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_and_a_dialing_responder_run_live_and_the_harness_sees_each_request()
-> Result<(), Box<dyn std::error::Error>> {
    use ruststream::{ConnectedBroker, RequestReply};
    let timeout = std::time::Duration::from_secs(10);

    // Bound: a requester of the test's own dials it.
    let broker = ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("quotes", "0.1.0")).with_broker(broker, |b| {
        b.include(
            quote
                .name("quotes")
                .out_retry("quotes.retry@tcp://127.0.0.1:1"),
        )
        .out_reply(Publish)
        .transform(ToRequester);
    });
    let tb = TestApp::start_live(app).await?;
    let client = ZmqRpc::new(ZmqEndpoint::dial(monitor.bound_address().unwrap()))
        .connect()
        .await?;
    client.requester().request(ask(1), timeout).await?;
    crate::support::eventually(
        std::time::Duration::from_secs(10),
        "the bound responder's request handled",
        || {
            tb.broker::<ZmqRpc>()
                .subscriber("quotes")
                .received_raw()
                .len()
                == 1
        },
    )
    .await;
    tb.broker::<ZmqRpc>()
        .subscriber("quotes")
        .assert_called_once()
        .with(&Payment { id: 1 });
    client.shutdown().await?;

    // Dialing: the test's requester binds, the responder dials it.
    let requester = ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let requester_monitor = requester.monitor();
    let requester = requester.connect().await?;
    let asking = requester.requester();
    let first = tokio::spawn(async move { asking.request(ask(2), timeout).await });
    let address = until(timeout, "the requester to bind", || {
        requester_monitor.bound_address()
    })
    .await;
    let app = RustStream::new(AppInfo::new("quotes", "0.1.0")).with_broker(
        ZmqRpc::new(ZmqEndpoint::dial(address)),
        |b| {
            b.include(
                dialing_quote
                    .name("quotes")
                    .out_retry("quotes.retry@tcp://127.0.0.1:1"),
            )
            .out_reply(Publish)
            .transform(ToRequester);
        },
    );
    let dialing = TestApp::start_live(app).await?;
    first.await??;
    crate::support::eventually(
        std::time::Duration::from_secs(10),
        "the dialing responder's request handled",
        || {
            dialing
                .broker::<ZmqRpc<Dialing>>()
                .subscriber("quotes")
                .received_raw()
                .len()
                == 1
        },
    )
    .await;
    dialing
        .broker::<ZmqRpc<Dialing>>()
        .subscriber("quotes")
        .assert_called_once()
        .with(&Payment { id: 2 });
    requester.shutdown().await?;
    // Shut down, not dropped: on omq, a runtime that ends with a service's sockets still open
    // can spin in omq's receive and never end (seen in 4 of 40 runs of these tests).
    dialing.shutdown().await?;
    tb.shutdown().await?;
    Ok(())
}

#[subscriber(FanoutSubscription::<Dialing>)]
async fn listen(payment: &Payment) -> HandlerOutcome {
    let _ = payment.id;
    HandlerOutcome::ack()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_fanout_runs_live_and_the_harness_sees_what_the_publisher_sends()
-> Result<(), Box<dyn std::error::Error>> {
    use ruststream::{Broker, ConnectedBroker, Publisher};
    // The peer: a PUB this test binds.
    let hub = ZmqFanout::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await?;
    let address = hub.bind_publisher().await?;
    let publisher = hub.publisher();
    let app = RustStream::new(AppInfo::new("news", "0.1.0")).with_broker(
        ZmqFanout::new(ZmqEndpoint::dial(address)),
        |b| {
            b.include(
                listen
                    .name("news")
                    .out_retry("news.retry@tcp://127.0.0.1:1"),
            );
        },
    );
    let tb = TestApp::start_live(app).await?;
    // The slow joiner: the PUB drops what it sends before the subscription reaches it, so the
    // test sends until one arrives.
    let mut sent = 0_u64;
    until_async(
        std::time::Duration::from_secs(10),
        "news at the subscription",
        async || {
            let heard = !tb
                .broker::<ZmqFanout<Dialing>>()
                .subscriber("news")
                .received_raw()
                .is_empty();
            if !heard {
                sent += 1;
                let body = format!(r#"{{"id":{sent}}}"#);
                publisher
                    .publish(
                        ruststream::OutgoingMessage::produced(
                            "news.eu",
                            ruststream::BytesMut::from(body.as_bytes()),
                        ),
                        None,
                    )
                    .await
                    .expect("the hub's publisher publishes");
            }
            heard
        },
    )
    .await;
    let received: Vec<Payment> = tb
        .broker::<ZmqFanout<Dialing>>()
        .subscriber("news")
        .received();
    assert!(
        received
            .iter()
            .all(|payment| (1..=sent).contains(&payment.id))
    );
    hub.shutdown().await?;
    // Shut down, not dropped: on omq, a runtime that ends with a service's sockets still open
    // can spin in omq's receive and never end (seen in 4 of 40 runs of these tests).
    tb.shutdown().await?;
    Ok(())
}
