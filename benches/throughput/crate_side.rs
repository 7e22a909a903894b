//! The crate's side of the queue, fan-out, retry-burst and codec scenarios, on any backend
//! ([`Stack`]): the services it runs, the feeders and the runs they measure.

use std::{
    convert::Infallible,
    sync::Arc,
    time::{Duration, Instant},
};

use ruststream::{BytesMut, ConnectedBroker, HeaderMap, OutgoingMessage, Publisher};
use ruststream_zmq::{QueueKind, ZmqBroker, ZmqPublisher, prelude::*, wire};

use crate::{
    backend::Stack,
    burst::{Burst, lateness},
    handlers::{AppState, Mount, include_mount, on_job},
    messages::{Frames, big_frames, job_frames, json, tick_frames},
    meter::{Meter, Run, status_kib, trim_heap},
    raw_side::RawPusher,
    tally::{RUN_DEADLINE, Tally, WARM_UP, fanout_wait, warm_up},
};

#[derive(Clone, Copy)]
pub enum Body {
    Small,
    Big,
}

#[derive(Clone, Copy, PartialEq)]
pub enum Feed {
    RawPush,
    CratePublisher,
}

/// A bound queue service on backend `B` with `mount` as its subscription; answers it running
/// and its address.
async fn queue_service<B: Stack>(
    state: AppState,
    mount: Mount,
) -> (ruststream::runtime::RunningApp, String) {
    let broker = ZmqBroker::<QueueKind, Bound, B>::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let monitor = broker.monitor();
    let running = RustStream::new(AppInfo::new("bench", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(state))
        .with_broker(broker, |b| include_mount!(b, mount))
        .start()
        .await
        .unwrap();
    (running, monitor.bound_address().unwrap())
}

pub fn crate_message(frames: Frames) -> OutgoingMessage<'static, BytesMut> {
    let [_, _, payload] = frames;
    let mut headers = HeaderMap::new();
    headers.insert("x-tenant", "acme");
    OutgoingMessage::produced("jobs", BytesMut::from(&payload[..])).with_headers(headers)
}

/// The crate's publisher sending what `make` builds for `ids`, from a task of its own.
fn publish_all(
    publisher: ZmqPublisher,
    ids: std::ops::Range<u64>,
    make: fn(u64) -> Frames,
    name: &'static str,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        for id in ids {
            let [_, _, payload] = make(id);
            let mut headers = HeaderMap::new();
            headers.insert("x-tenant", "acme");
            let msg =
                OutgoingMessage::produced(name, BytesMut::from(&payload[..])).with_headers(headers);
            publisher.publish(msg, None).await.expect("the publish");
        }
    })
}

/// The crate's queue on backend `B`: `messages` fed by a raw PUSH of its client or the crate's
/// publisher on it. With `probe`, the resident set is read after a tenth of the messages and at
/// the end.
pub async fn crate_queue<B: Stack>(messages: u64, body: Body, feed: Feed, probe: bool) -> Run {
    let tally = Tally::default();
    let mount = match body {
        Body::Small => Mount::Count,
        Body::Big => Mount::CountBig,
    };
    let (running, address) = queue_service::<B>(AppState::of(&tally), mount).await;
    let make = match body {
        Body::Small => job_frames,
        Body::Big => big_frames,
    };
    trim_heap();
    let before = status_kib("VmRSS:").unwrap_or(0);
    let (meter, done, feeder) = if feed == Feed::RawPush {
        let mut pusher = B::Pusher::dial(&address).await;
        warm_up!([&tally], pusher.send(make(WARM_UP)));
        tally.arm(messages);
        let meter = Meter::start();
        let (pusher, done) = if probe {
            let (pusher, done, readings) = flood_in_tenths(pusher, &tally, messages, make).await;
            (pusher, (done, readings))
        } else {
            let sending = pusher.send_all(0..messages, make);
            let done = tally.wait(Duration::from_secs(10)).await;
            (sending.await.unwrap(), (done, [0; 3]))
        };
        pusher.close().await;
        (meter, done, None)
    } else {
        let peer = ZmqBroker::<QueueKind, Dialing, B>::new(ZmqEndpoint::dial(address))
            .connect()
            .await
            .unwrap();
        let publisher = peer.publisher();
        warm_up!([&tally], async {
            publisher
                .publish(crate_message(make(WARM_UP)), None)
                .await
                .unwrap();
        });
        tally.arm(messages);
        let meter = Meter::start();
        let sending = publish_all(publisher, 0..messages, make, "jobs");
        let done = tally.wait(Duration::from_secs(10)).await;
        sending.await.unwrap();
        (meter, (done, [0; 3]), Some(peer))
    };
    let mut run = meter.stop(messages);
    let (complete, readings) = done;
    assert!(
        complete,
        "the crate's queue handled {} of {messages}",
        tally.count()
    );
    if probe {
        let mb = |kib: u64| kib as f64 / 1024.0;
        run.fields = vec![
            ("RSS before, MB", mb(before)),
            ("after round 1 of 10, MB", mb(readings[0])),
            ("after round 5, MB", mb(readings[1])),
            ("after round 10, MB", mb(readings[2])),
        ];
    }
    running.shutdown().await.unwrap();
    if let Some(peer) = feeder {
        peer.shutdown().await.unwrap();
    }
    run
}

/// Sends `messages` in ten rounds, each handled whole before the next is sent, so that no
/// queue holds messages when the resident set is read: after the first, the fifth and the last
/// round (each time after trimming the heap). Growth that goes on from round to round is kept
/// per message; a queue's capacity, grown once to a round's size, shows after the first round
/// and stays. Answers the pusher, whether all were handled, and the three readings.
async fn flood_in_tenths<P: RawPusher>(
    mut pusher: P,
    tally: &Tally,
    messages: u64,
    make: fn(u64) -> Frames,
) -> (P, bool, [u64; 3]) {
    let tenth = messages / 10;
    let mut readings = [0; 3];
    let deadline = Instant::now() + RUN_DEADLINE;
    for round in 0..10 {
        let end = if round == 9 {
            messages
        } else {
            (round + 1) * tenth
        };
        pusher = pusher.send_all(round * tenth..end, make).await.unwrap();
        while tally.count() < end && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let at = match round {
            0 => 0,
            4 => 1,
            9 => 2,
            _ => continue,
        };
        trim_heap();
        readings[at] = status_kib("VmRSS:").unwrap_or(0);
    }
    (pusher, tally.count() >= messages, readings)
}

/// The crate's fan-out on backend `B`: its publisher to four subscribing services; `messages`
/// each.
pub async fn crate_fanout<B: Stack>(messages: u64, subscribers: usize) -> Run {
    let queue = usize::try_from(messages).unwrap() + 1_000;
    let hub = B::fanout_broker(ZmqEndpoint::bind("tcp://127.0.0.1:0"), queue)
        .connect()
        .await
        .unwrap();
    let hub_address = hub.bind_publisher().await.unwrap();
    let publisher = hub.publisher();
    let mut tallies = Vec::new();
    let mut services = Vec::new();
    for _ in 0..subscribers {
        let tally = Tally::default();
        let state = AppState::of(&tally);
        let running = RustStream::new(AppInfo::new("bench", "0.1.0"))
            .on_startup(async move |()| Ok::<_, Infallible>(state))
            .with_broker(
                B::fanout_broker(ZmqEndpoint::dial(hub_address.clone()), queue),
                |b| {
                    b.include(on_job.name("ticks"))
                        .out_retry(Publish)
                        .to("ticks.retry@tcp://127.0.0.1:1");
                },
            )
            .start()
            .await
            .unwrap();
        tallies.push(tally);
        services.push(running);
    }
    warm_up!(tallies, async {
        let [_, _, payload] = tick_frames(WARM_UP);
        let msg = OutgoingMessage::produced("ticks", BytesMut::from(&payload[..]))
            .with_headers(tenant_headers());
        publisher.publish(msg, None).await.unwrap();
    });
    for tally in &tallies {
        tally.arm(messages);
    }
    let meter = Meter::start();
    let sending = publish_all(publisher, 0..messages, tick_frames, "ticks");
    let run = fanout_wait(&meter, &tallies, messages).await;
    sending.await.unwrap();
    for running in services {
        running.shutdown().await.unwrap();
    }
    hub.shutdown().await.unwrap();
    run
}

fn tenant_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("x-tenant", "acme");
    headers
}

/// 100,000 `retry_after(500 ms)` copies on backend `B`, fed by a raw PUSH of its client as fast
/// as it goes.
pub async fn crate_retry_burst<B: Stack>(messages: u64) -> Run {
    let tally = Tally::default();
    let burst = Arc::new(Burst::new(messages));
    let state = AppState {
        tally: tally.clone(),
        burst: Arc::clone(&burst),
    };
    let (running, address) = queue_service::<B>(state, Mount::Burst).await;
    let mut pusher = B::Pusher::dial(&address).await;
    warm_up!([&tally], pusher.send(job_frames(WARM_UP)));
    tally.arm(messages);
    let meter = Meter::start();
    let pusher = pusher.send_all(0..messages, job_frames).await.unwrap();
    tally.wait(Duration::from_secs(10)).await;
    let mut run = meter.stop(messages);
    pusher.close().await;
    run.fields = lateness(&burst, &run);
    running.shutdown().await.unwrap();
    run
}

pub fn codec(rounds: u64) -> Run {
    let mut headers = HeaderMap::new();
    headers.insert("correlation-id", "4f1c2a");
    headers.insert("x-ruststream-retry-count", "2");
    headers.insert("x-tenant", "acme");
    let body = json(7);
    let limits = WireLimits::default();
    let meter = Meter::start();
    for _ in 0..rounds {
        let frames = wire::encode("payments.eu", &headers, body.clone()).unwrap();
        let decoded = wire::decode(&frames, &limits, None).unwrap();
        std::hint::black_box(decoded);
    }
    let mut run = meter.stop(rounds);
    run.fields = vec![("ns a round", 1e9 / run.rate)];
    run
}
