//! The framework's own in-process broker (`ruststream::memory`) under the crate's handlers: the
//! shared baseline of the `framework`, `rr64-framework` and `retry-framework` rows, what
//! dispatch costs with no socket at all.

use std::{convert::Infallible, sync::Arc, sync::atomic::AtomicU64, time::Duration};

use ruststream::Publisher;
use ruststream::memory::{MemoryBroker, MemoryPublish, MemoryPublisher};
use ruststream_zmq::prelude::*;

use crate::{
    burst::{Burst, lateness},
    crate_requests::{ask, ask_all},
    crate_side::crate_message,
    handlers::{AppState, Mount, include_mount},
    messages::{Job, job_frames},
    meter::{Meter, Run, percentiles},
    tally::{Tally, WARM_UP, warm_up},
};

/// The same echo on the framework's in-process broker; [`ReplyTo`] sends its answer to the
/// request's inbox.
#[subscriber("echo", reply("echoed"))]
async fn memory_echo(job: &Job) -> Job {
    Job { id: job.id }
}

/// Names an answer on the in-process broker after its request's `reply-to`, as the crate's
/// `ToRequester` does on a responder.
struct ReplyTo;

impl<C, Options> PublishTransform<ForReply<C>, Options> for ReplyTo {
    type Destination = Names;

    fn apply(
        &self,
        out: &mut ruststream::runtime::Outgoing<'_>,
        _options: &mut Option<Options>,
        cx: &ruststream::runtime::PublishContext<'_, C>,
    ) {
        if let Some(to) = cx.headers().get_shared("reply-to")
            && let Ok(to) = ruststream::Str::try_from(to)
        {
            out.set_name(to);
        }
    }
}

/// The same handler on the framework's own in-process broker (`ruststream::memory`), fed by its
/// publisher from a task of its own: what the framework's dispatch costs with no socket at all,
/// the ceiling of any transport under the same handler.
pub async fn memory_queue(messages: u64) -> Run {
    let tally = Tally::default();
    let (running, publisher) = memory_service(AppState::of(&tally), &tally, Mount::Count).await;
    tally.arm(messages);
    let meter = Meter::start();
    let sending = memory_publish_all(publisher, messages);
    let done = tally.wait(Duration::from_secs(10)).await;
    sending.await.unwrap();
    let run = meter.stop(messages);
    assert!(
        done,
        "the memory broker handled {} of {messages}",
        tally.count()
    );
    running.shutdown().await.unwrap();
    run
}

/// The framework's in-process broker running `mount`'s handler, warmed up with one message;
/// answers the running app and the broker's publisher.
async fn memory_service(
    state: AppState,
    tally: &Tally,
    mount: Mount,
) -> (ruststream::runtime::RunningApp, MemoryPublisher) {
    let broker = MemoryBroker::new();
    let publisher = broker.publisher();
    let running = RustStream::new(AppInfo::new("bench", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(state))
        .with_broker(broker, |b| include_mount!(b, mount))
        .start()
        .await
        .unwrap();
    warm_up!([tally], async {
        publisher
            .publish(crate_message(job_frames(WARM_UP)), None)
            .await
            .unwrap();
    });
    (running, publisher)
}

/// The in-process broker's publisher sending `messages` jobs, from a task of its own.
fn memory_publish_all(publisher: MemoryPublisher, messages: u64) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        for id in 0..messages {
            let message = crate_message(job_frames(id));
            publisher.publish(message, None).await.unwrap();
        }
    })
}

/// The same echo and asker on the framework's in-process broker (`window` in flight): what
/// the framework's dispatch and its request machinery cost with no socket.
pub async fn memory_request_reply(requests: u64, window: usize) -> Run {
    let broker = MemoryBroker::new();
    let requester = broker.requester();
    let running = RustStream::new(AppInfo::new("bench", "0.1.0"))
        .with_broker(broker, |b| {
            b.include(memory_echo)
                .out_reply(MemoryPublish)
                .transform(ReplyTo);
        })
        .start()
        .await
        .unwrap();
    ask(&requester, WARM_UP).await;
    let meter = Meter::start();
    let latencies = ask_all(requester, requests, window, Arc::new(AtomicU64::new(0)))
        .await
        .unwrap();
    let mut run = meter.stop(requests);
    run.latencies = percentiles(latencies);
    running.shutdown().await.unwrap();
    run
}

/// The same burst on the framework's in-process broker, which delays a redelivery itself (a
/// task that sleeps, then puts the delivery back in the queue): no copy is published, so this
/// is the least a delayed retry costs in this framework, the ceiling of any transport.
pub async fn memory_retry_burst(messages: u64) -> Run {
    let tally = Tally::default();
    let burst = Arc::new(Burst::new(messages));
    let state = AppState {
        tally: tally.clone(),
        burst: Arc::clone(&burst),
    };
    let (running, publisher) = memory_service(state, &tally, Mount::RedeliveredBurst).await;
    tally.arm(messages);
    let meter = Meter::start();
    let sending = memory_publish_all(publisher, messages);
    tally.wait(Duration::from_secs(10)).await;
    sending.await.unwrap();
    let mut run = meter.stop(messages);
    run.fields = lateness(&burst, &run);
    running.shutdown().await.unwrap();
    run
}
