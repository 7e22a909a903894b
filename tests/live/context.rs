//! What a handler reads of its delivery through `Ctx<..>`: the name it arrived under (a fan-out
//! handler tells `orders.eu` from `orders.us`), the attempt, the endpoint, and a requester's
//! identity.

use std::{convert::Infallible, sync::Arc, time::Duration};

use ruststream::testing::TestApp;
use ruststream::{Broker, BytesMut, ConnectedBroker, OutgoingMessage, RequestReply, Str};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::prelude::*;

#[derive(Debug, Serialize, Deserialize, Outgoing)]
struct Order {
    id: u64,
}

#[derive(Clone)]
struct Seen(mpsc::UnboundedSender<(Str, u32, Arc<str>)>);

#[derive(Clone, FromRef)]
struct State {
    seen: Seen,
}

#[subscriber(FanoutSubscription::<Bound>)]
async fn route(
    order: &Order,
    Ctx(name): Ctx<MessageName>,
    Ctx(attempt): Ctx<Attempt>,
    Ctx(endpoint): Ctx<SubscriptionEndpoint>,
    ruststream::runtime::State(seen): ruststream::runtime::State<Seen>,
) -> HandlerOutcome {
    let _ = seen.0.send((name, attempt, endpoint));
    // The first `orders.us` comes back once as a copy, to show the attempt.
    if order.id == 2 && attempt == 1 {
        return HandlerOutcome::retry();
    }
    HandlerOutcome::ack()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fanout_handler_tells_the_topic_the_attempt_and_the_endpoint_of_each_delivery()
-> Result<(), Box<dyn std::error::Error>> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let broker = ZmqFanout::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = broker.monitor();
    let app = RustStream::new(AppInfo::new("orders", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(State { seen: Seen(tx) }))
        .with_broker(broker, |b| {
            b.include(route.name("orders"))
                .max_attempts(std::num::NonZeroU32::new(2).unwrap());
        });
    let tb = TestApp::start_live(app).await?;
    let orders = tb.broker::<ZmqFanout>();
    orders
        .message(&Order { id: 1 })
        .to("orders.eu")
        .publish()
        .await?;
    orders
        .message(&Order { id: 2 })
        .to("orders.us")
        .publish()
        .await?;
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let next = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("three deliveries")
            .expect("the handler's channel is open");
        seen.push(next);
    }
    let address = monitor.bound_address().unwrap();
    let names: Vec<(&str, u32)> = seen
        .iter()
        .map(|(name, attempt, _)| (&**name, *attempt))
        .collect();
    // A retry copy goes to the subscription's own address, so it arrives under its name.
    assert_eq!(names, [("orders.eu", 1), ("orders.us", 1), ("orders", 2)]);
    assert!(seen.iter().all(|(_, _, endpoint)| **endpoint == *address));
    Ok(())
}

/// The `reply-to` a requester's broker stamps on each request.
#[derive(Debug, Deserialize)]
struct ReplyTo {
    #[serde(rename = "reply-to")]
    reply_to: Option<String>,
}

/// What the responder saw of one request: the requester's identity and where the answer goes.
#[derive(Debug, Serialize, Deserialize, Outgoing)]
struct Asker {
    identity: Option<Vec<u8>>,
    reply_to: Option<String>,
}

#[subscriber(Responder::<Bound>, reply("reply"))]
async fn who_asks(
    _order: &Order,
    Ctx(requester): Ctx<RequesterIdentity>,
    Headers(header): Headers<ReplyTo>,
) -> Asker {
    Asker {
        identity: requester.map(|identity| identity.to_vec()),
        reply_to: header.reply_to,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_responder_handler_reads_the_identity_of_the_requester() {
    let broker = ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = broker.monitor();
    let running = RustStream::new(AppInfo::new("who", "0.1.0"))
        .with_broker(broker, |b| {
            b.include(
                who_asks
                    .name("who")
                    .out_retry("who.retry@tcp://127.0.0.1:1"),
            )
            .out_reply(Publish)
            .transform(ToRequester);
        })
        .start()
        .await
        .unwrap();
    let address = monitor.bound_address().unwrap();
    // Two requesters, two requests each: what the handler reads must tell them apart and
    // name the peer the answer is routed back to.
    let mut identities = Vec::new();
    for _ in 0..2 {
        let client = ZmqRpc::new(ZmqEndpoint::dial(address.clone()))
            .connect()
            .await
            .unwrap();
        let mut seen = Vec::new();
        for id in 0..2 {
            let answer = client
                .requester()
                .request(
                    OutgoingMessage::produced(
                        "who",
                        BytesMut::from(format!(r#"{{"id":{id}}}"#).as_bytes()),
                    ),
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
            let asker: Asker =
                serde_json::from_slice(ruststream::IncomingMessage::payload(&answer)).unwrap();
            let identity = asker
                .identity
                .expect("the handler saw a requester identity");
            assert_eq!(
                asker.reply_to.as_deref(),
                Some(ruststream_zmq::wire::reply_address(&identity).as_str()),
                "the identity is the peer the answer is routed to"
            );
            seen.push(identity);
        }
        assert_eq!(seen[0], seen[1], "one requester keeps its identity");
        identities.push(seen.swap_remove(0));
        client.shutdown().await.unwrap();
    }
    assert_ne!(
        identities[0], identities[1],
        "two requesters have two identities"
    );
    running.shutdown().await.unwrap();
}
