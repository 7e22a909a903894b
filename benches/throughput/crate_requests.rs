//! The crate's request-reply: the echo responder every request scenario (and `clients`) runs,
//! one request checked against its answer, the asker that keeps a window in flight, and the
//! request-reply run.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures::StreamExt;
use ruststream::{BytesMut, ConnectedBroker, OutgoingMessage, RequestReply};
use ruststream_zmq::{RpcKind, ZmqBroker, prelude::*};

use crate::{
    backend::Stack,
    handlers::echo,
    messages::{answered, json},
    meter::{Meter, Run, percentiles, status_kib, trim_heap},
    tally::WARM_UP,
};

/// A service whose responder, on backend `B`, binds `address` and echoes each request; answers
/// it running and the address it listens on.
pub async fn echo_responder<B: Stack>(address: &str) -> (ruststream::runtime::RunningApp, String) {
    let broker = ZmqBroker::<RpcKind, Bound, B>::new(ZmqEndpoint::bind(address));
    let monitor = broker.monitor();
    let running = RustStream::new(AppInfo::new("bench", "0.1.0"))
        .with_broker(broker, |b| {
            b.include(echo.name("echo").out_retry("echo.retry@tcp://127.0.0.1:1"))
                .out_reply(Publish)
                .transform(ToRequester);
        })
        .start()
        .await
        .unwrap();
    (running, monitor.bound_address().unwrap())
}

/// One request through `requester` (the crate's or the in-process broker's), checked against
/// its answer.
pub async fn ask<R>(requester: &R, id: u64)
where
    R: RequestReply<Payload = ruststream::Take>,
    R::Error: std::fmt::Debug,
{
    let msg = OutgoingMessage::produced("echo", BytesMut::from(&json(id)[..]));
    let answer = requester
        .request(msg, Duration::from_secs(30))
        .await
        .expect("an answer");
    assert_eq!(answered(answer.payload()), id, "the answer to its request");
}

/// Asks `requests` through `requester`, `window` in flight, from a task of its own; each
/// finished request counts in `progress`. Answers how long each took.
pub fn ask_all<R>(
    requester: R,
    requests: u64,
    window: usize,
    progress: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<Vec<Duration>>
where
    R: RequestReply<Payload = ruststream::Take> + Send + Sync + 'static,
    R::Error: std::fmt::Debug,
{
    tokio::spawn(async move {
        let timed = |id| {
            let asked = Instant::now();
            let answered = ask(&requester, id);
            let progress = &progress;
            async move {
                answered.await;
                progress.fetch_add(1, Ordering::Relaxed);
                asked.elapsed()
            }
        };
        // One in flight is a plain loop, as the raw asker's: a `FuturesUnordered` of one
        // future yields to the scheduler after every poll that finds it pending, and each
        // such yield wakes the other worker (1.2 context switches a request, none raw).
        if window == 1 {
            let mut latencies = Vec::with_capacity(usize::try_from(requests).unwrap());
            for id in 0..requests {
                latencies.push(timed(id).await);
            }
            return latencies;
        }
        futures::stream::iter(0..requests)
            .map(timed)
            .buffer_unordered(window)
            .collect::<Vec<_>>()
            .await
    })
}

/// The crate's responder and requester on backend `B`: `requests`, `window` in flight on one
/// requester. With `probe`, the resident set after a tenth and at the end.
pub async fn crate_request_reply<B: Stack>(requests: u64, window: usize, probe: bool) -> Run {
    let (running, address) = echo_responder::<B>("tcp://127.0.0.1:0").await;
    let client = ZmqBroker::<RpcKind, Dialing, B>::new(ZmqEndpoint::dial(address))
        .connect()
        .await
        .unwrap();
    let requester = client.requester();
    ask(&requester, WARM_UP).await;
    let progress = Arc::new(AtomicU64::new(0));
    let meter = Meter::start();
    let asking = ask_all(requester, requests, window, Arc::clone(&progress));
    let mut early = None;
    if probe {
        while progress.load(Ordering::Relaxed) < requests {
            if early.is_none() && progress.load(Ordering::Relaxed) >= requests / 10 {
                trim_heap();
                early = status_kib("VmRSS:");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let latencies = asking.await.unwrap();
    let mut run = meter.stop(requests);
    run.latencies = percentiles(latencies);
    if probe {
        run.fields = vec![
            ("RSS after a tenth, MB", early.unwrap_or(0) as f64 / 1024.0),
            ("RSS at the end, MB", {
                trim_heap();
                status_kib("VmRSS:").unwrap_or(0) as f64 / 1024.0
            }),
        ];
    }
    running.shutdown().await.unwrap();
    client.shutdown().await.unwrap();
    run
}
