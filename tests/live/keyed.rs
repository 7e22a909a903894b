//! Keyed worker lanes on real sockets: `workers(n, by_key)` reads each delivery's
//! `partition_key`, which is the `zmq-partition-key` header, or the header the broker or the
//! subscription names (`partition_header`), or on a responder keyed by requester
//! (`partition_by_requester`) the identity of the requester. One key's messages run one at a
//! time in the order they came, while other keys' run beside them.
//!
//! Every scenario holds its handlers until one message of each key is in flight at once, so
//! that keys which do not get lanes of their own (or one key let onto two lanes) show at once,
//! not by timing. Keys are chosen to fall on distinct lanes: the runtime picks a key's lane by
//! hashing it with std's `DefaultHasher` (`ruststream-runtime`'s `lane_of`), and [`lane_of`]
//! here hashes the same way.

use std::{
    collections::{BTreeMap, BTreeSet},
    convert::Infallible,
    hash::{DefaultHasher, Hash, Hasher},
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use ruststream::{
    Broker, BytesMut, ConnectedBroker, HeaderMap, OutgoingMessage, Publisher, RequestReply,
};
use ruststream_zmq::{ConnectedZmqRpc, Ready, SocketUse};
use serde::{Deserialize, Serialize};
use tokio::{sync::Notify, time::Instant};

use super::{Feeder, prelude::*};
use crate::support::eventually;

/// The lanes every scenario's handler runs on.
const LANES: usize = 4;
const JOBS_PER_KEY: u32 = 5;
/// How long the handlers wait, at most, for a message of each key to be in flight at once.
const GATE: Duration = Duration::from_secs(15);

/// The lane the runtime gives `key` among `lanes`: as `ruststream-runtime`'s `lane_of` does.
fn lane_of(key: &[u8], lanes: usize) -> usize {
    let mut hasher = DefaultHasher::new();
    key.hash(&mut hasher);
    usize::try_from(hasher.finish() % lanes as u64).unwrap()
}

/// `LANES` keys, one on each lane.
fn keys_on_every_lane() -> Vec<String> {
    let mut by_lane: BTreeMap<usize, String> = BTreeMap::new();
    for candidate in (0..).map(|n| format!("account-{n}")) {
        by_lane
            .entry(lane_of(candidate.as_bytes(), LANES))
            .or_insert(candidate);
        if by_lane.len() == LANES {
            return by_lane.into_values().collect();
        }
    }
    unreachable!("the candidates never end")
}

#[derive(Debug, Serialize, Deserialize)]
struct Job {
    key: String,
    seq: u32,
}

/// What the handlers saw.
#[derive(Debug, Default)]
struct Seen {
    /// How many messages of each key are in its handler now.
    running: BTreeMap<String, usize>,
    /// Each key's messages, in the order their handlers began and ended.
    started: BTreeMap<String, Vec<u32>>,
    finished: BTreeMap<String, Vec<u32>>,
    /// The keys two messages of which were in the handler at once.
    doubled: BTreeSet<String>,
    /// The most keys in the handler at once.
    most_keys_at_once: usize,
    /// How many keys in flight at once open the gate, and until when it holds.
    wanted: usize,
    deadline: Option<Instant>,
    /// Whether the handlers go ahead: once `wanted` keys were in at once (or the gate's deadline
    /// passed, or a key doubled, which fails the test anyway).
    open: bool,
}

/// The handlers' shared record, and the gate that holds each handler until `wanted` keys are in
/// flight at once.
#[derive(Clone, Default)]
struct Lanes(Arc<Gate>);

#[derive(Default)]
struct Gate {
    seen: Mutex<Seen>,
    changed: Notify,
}

impl Lanes {
    /// Holds the handlers from now until `wanted` keys are in flight at once, for at most
    /// [`GATE`].
    fn hold_until(&self, wanted: usize) {
        let mut seen = self.seen();
        seen.wanted = wanted;
        seen.deadline = Some(Instant::now() + GATE);
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.0.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Handles message `seq` of `key`: notes it in, waits at the gate, notes it out.
    async fn run(&self, key: &str, seq: u32) {
        {
            let mut seen = self.seen();
            let running = seen.running.entry(key.to_owned()).or_default();
            *running += 1;
            if *running > 1 {
                seen.doubled.insert(key.to_owned());
                seen.open = true;
            }
            seen.started.entry(key.to_owned()).or_default().push(seq);
            let at_once = seen.running.values().filter(|&&n| n > 0).count();
            seen.most_keys_at_once = seen.most_keys_at_once.max(at_once);
            if at_once >= seen.wanted {
                seen.open = true;
            }
            if seen.open {
                self.0.changed.notify_waiters();
            }
        }
        loop {
            let notified = self.0.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let deadline = {
                let seen = self.seen();
                if seen.open {
                    break;
                }
                seen.deadline
                    .expect("the gate is set before the first message")
            };
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                self.seen().open = true;
                self.0.changed.notify_waiters();
                break;
            }
        }
        // A turn for the other tasks while this message is in: a second message of its key let
        // onto another lane would be seen in beside it.
        tokio::task::yield_now().await;
        let mut seen = self.seen();
        *seen.running.get_mut(key).unwrap() -= 1;
        seen.finished.entry(key.to_owned()).or_default().push(seq);
    }

    fn handled(&self) -> usize {
        self.seen().finished.values().map(Vec::len).sum()
    }

    /// Each key's `jobs` ran one at a time, in the order sent, and `wanted` keys side by side.
    fn assert_keyed(&self, keys: &[String], jobs: u32) {
        let seen = self.seen();
        assert!(
            seen.doubled.is_empty(),
            "two messages of one key ran at once, on two lanes: {:?}",
            seen.doubled
        );
        let in_order: Vec<u32> = (0..jobs).collect();
        for key in keys {
            assert_eq!(
                (seen.started.get(key), seen.finished.get(key)),
                (Some(&in_order), Some(&in_order)),
                "key {key}'s messages out of order: {seen:?}"
            );
        }
        assert!(
            seen.most_keys_at_once >= seen.wanted,
            "at most {} keys ran at once, of {} on lanes of their own (the lanes picked as \
             std's DefaultHasher picks them): {seen:?}",
            seen.most_keys_at_once,
            seen.wanted
        );
    }
}

#[derive(Clone, FromRef)]
struct KeyedState {
    lanes: Lanes,
}

async fn run_job(job: &Job, lanes: &Lanes) -> HandlerOutcome {
    lanes.run(&job.key, job.seq).await;
    HandlerOutcome::ack()
}

#[subscriber("keyed", workers(LANES, by_key))]
async fn by_default_header(job: &Job, State(lanes): State<Lanes>) -> HandlerOutcome {
    run_job(job, &lanes).await
}

#[subscriber("keyed.account", workers(LANES, by_key))]
async fn by_brokers_header(job: &Job, State(lanes): State<Lanes>) -> HandlerOutcome {
    run_job(job, &lanes).await
}

#[subscriber(
    QueueSubscription::<Bound>::new("keyed.tenant").partition_header("tenant"),
    workers(LANES, by_key)
)]
async fn by_own_header(job: &Job, State(lanes): State<Lanes>) -> HandlerOutcome {
    run_job(job, &lanes).await
}

/// Feeds `name` two jobs of each key first, then the rest key by key, each job carrying its key
/// in the header `header` alone: before the gate opens, each lane holds one key's first job and
/// queues its second, and no lane is asked for a third.
async fn feed(feeder: &Feeder, name: &str, header: &'static str, keys: &[String]) {
    let order = keys
        .iter()
        .flat_map(|key| (0..2).map(move |seq| (key, seq)))
        .chain((2..JOBS_PER_KEY).flat_map(|seq| keys.iter().map(move |key| (key, seq))));
    for (key, seq) in order {
        let mut headers = HeaderMap::new();
        headers.insert(header, key.clone());
        let body = serde_json::to_vec(&Job {
            key: key.clone(),
            seq,
        })
        .unwrap();
        feeder
            .publisher
            .publish(
                OutgoingMessage::produced(name, BytesMut::from(body.as_slice()))
                    .with_headers(headers),
                None,
            )
            .await
            .unwrap();
    }
}

/// Which header a queue's subscription is keyed by, and who names it.
#[derive(Clone, Copy)]
enum ByHeader {
    /// `zmq-partition-key`, named by no one.
    Default,
    /// `account`, named by the broker.
    Brokers,
    /// `tenant`, named by the subscription over the broker's `region`.
    Subscriptions,
}

/// Starts a bound queue keyed `by` a header, feeds it jobs carrying their key in that header
/// alone, and checks the lanes.
async fn keyed_by_header(by: ByHeader) {
    let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let (broker, name, header) = match by {
        ByHeader::Default => (broker, "keyed", ruststream_zmq::PARTITION_KEY_HEADER),
        ByHeader::Brokers => (
            broker.partition_header("account"),
            "keyed.account",
            "account",
        ),
        ByHeader::Subscriptions => (broker.partition_header("region"), "keyed.tenant", "tenant"),
    };
    let keys = keys_on_every_lane();
    let lanes = Lanes::default();
    lanes.hold_until(LANES);
    let monitor = broker.monitor();
    let state = KeyedState {
        lanes: lanes.clone(),
    };
    let running = RustStream::new(AppInfo::new("keyed", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(state))
        .with_broker(broker, move |b| match by {
            ByHeader::Default => {
                b.include(by_default_header);
            }
            ByHeader::Brokers => {
                b.include(by_brokers_header);
            }
            ByHeader::Subscriptions => {
                b.include(by_own_header);
            }
        })
        .start()
        .await
        .unwrap();
    let feeder = Feeder::dial(&monitor.bound_address().unwrap()).await;
    feed(&feeder, name, header, &keys).await;
    let total = keys.len() * JOBS_PER_KEY as usize;
    eventually(GATE * 2, "every job handled", || lanes.handled() == total).await;
    lanes.assert_keyed(&keys, JOBS_PER_KEY);
    feeder.close().await;
    running.shutdown().await.unwrap();
}

/// Four keys over four lanes: each key's jobs in order and one at a time, all four keys at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_workers_run_each_key_in_order_on_a_lane_of_its_own_and_every_lane_at_once() {
    keyed_by_header(ByHeader::Default).await;
}

/// The jobs carry only the broker's header: keyed by the default header, they would have no key
/// and rotate over the lanes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_brokers_partition_header_keys_the_lanes_by_that_header() {
    keyed_by_header(ByHeader::Brokers).await;
}

/// The broker names `region`, the subscription `tenant`, and the jobs carry only `tenant`: keyed
/// by the broker's header, they would have no key and rotate over the lanes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriptions_partition_header_keys_its_lanes_over_the_brokers() {
    keyed_by_header(ByHeader::Subscriptions).await;
}

/// A request: the requester it came from (as the test counts them) and its place in that
/// requester's sequence; [`PROBE`] asks only who the requester is.
#[derive(Debug, Serialize, Deserialize)]
struct Ask {
    requester: usize,
    seq: u32,
}

const PROBE: u32 = u32::MAX;

#[derive(Debug, Serialize, Deserialize, Outgoing)]
struct Answer {
    seq: u32,
    identity: Vec<u8>,
}

#[subscriber(Responder::<Bound>, reply("reply"), workers(LANES, by_key))]
async fn respond(
    ask: &Ask,
    Ctx(requester): Ctx<RequesterIdentity>,
    State(lanes): State<Lanes>,
) -> Answer {
    if ask.seq != PROBE {
        lanes
            .run(&format!("requester-{}", ask.requester), ask.seq)
            .await;
    }
    Answer {
        seq: ask.seq,
        identity: requester
            .map(|identity| identity.to_vec())
            .unwrap_or_default(),
    }
}

/// Where a requester-keyed responder is told to key by requester.
#[derive(Clone, Copy)]
enum ByRequester {
    Broker,
    Responder,
}

/// What the responder's socket has read so far.
fn read_so_far(monitor: &ZmqMonitor) -> u64 {
    monitor
        .sockets()
        .iter()
        .filter(|socket| socket.what() == SocketUse::Subscriber)
        .map(ruststream_zmq::SocketSummary::received)
        .sum()
}

/// Requesters on distinct lanes: each one's requests run one at a time in the order it sent
/// them, and the requesters' side by side.
async fn keyed_by_requester(by: ByRequester) {
    const CANDIDATES: usize = 12;
    let broker = ZmqRpc::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
    let broker = match by {
        ByRequester::Broker => broker.partition_by_requester(),
        ByRequester::Responder => broker,
    };
    let monitor = broker.monitor();
    let lanes = Lanes::default();
    let state = KeyedState {
        lanes: lanes.clone(),
    };
    let running = RustStream::new(AppInfo::new("keyed-rpc", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(state))
        .with_broker(broker, move |b| {
            let mounted = respond
                .name("keyed.rpc")
                .out_retry("keyed.rpc.retry@tcp://127.0.0.1:1");
            match by {
                ByRequester::Broker => {
                    b.include(mounted).out_reply(Publish).transform(ToRequester);
                }
                ByRequester::Responder => {
                    b.include(mounted.map_source(|responder: Responder<Bound, Ready>| {
                        responder.partition_by_requester()
                    }))
                    .out_reply(Publish)
                    .transform(ToRequester);
                }
            }
        })
        .start()
        .await
        .unwrap();
    let address = monitor.bound_address().unwrap();

    // The requesters' identities, and so their lanes, are the sockets' to pick: probe up to a
    // dozen and keep one a lane (the chance that all twelve share one lane is 4^-11).
    let mut requesters: Vec<(Arc<ConnectedZmqRpc<Dialing>>, usize)> = Vec::new();
    let mut lanes_taken = BTreeSet::new();
    for index in 0..CANDIDATES {
        let connected = ZmqRpc::new(ZmqEndpoint::dial(address.clone()))
            .connect()
            .await
            .unwrap();
        let probe = ask(&connected, index, PROBE).await.unwrap();
        if lanes_taken.insert(lane_of(&probe.identity, LANES)) {
            requesters.push((Arc::new(connected), index));
        } else {
            connected.shutdown().await.unwrap();
        }
        if lanes_taken.len() == LANES {
            break;
        }
    }
    assert!(
        requesters.len() >= 2,
        "all {CANDIDATES} requesters fell on one lane"
    );
    lanes.hold_until(requesters.len());

    // Each request is sent once the responder has read the one before, so that they reach the
    // lanes in the order sent. Two of each requester first: before the gate opens each lane holds
    // one requester's first request and queues its second, and no lane is asked for a third.
    let order = requesters
        .iter()
        .flat_map(|requester| (0..2).map(move |seq| (requester, seq)))
        .chain(
            (2..JOBS_PER_KEY)
                .flat_map(|seq| requesters.iter().map(move |requester| (requester, seq))),
        );
    let mut in_flight = Vec::new();
    for ((connected, index), seq) in order {
        if seq == 2 {
            eventually(GATE * 2, "the requesters side by side", || {
                lanes.seen().open
            })
            .await;
        }
        let read = read_so_far(&monitor);
        let (connected, index) = (Arc::clone(connected), *index);
        in_flight.push(tokio::spawn(async move {
            let _ = ask(&connected, index, seq).await;
        }));
        eventually(GATE, "the responder reading the request", || {
            read_so_far(&monitor) > read
        })
        .await;
    }
    // What the lanes did is the handlers' record; the answers are not waited for (answers the
    // `zeromq` ROUTER sends side by side may be dropped, as to a requester not reading).
    let total = requesters.len() * JOBS_PER_KEY as usize;
    eventually(GATE * 2, "every request handled", || {
        lanes.handled() == total
    })
    .await;
    for request in in_flight {
        request.abort();
        let _ = request.await;
    }
    let keys: Vec<String> = requesters
        .iter()
        .map(|(_, index)| format!("requester-{index}"))
        .collect();
    lanes.assert_keyed(&keys, JOBS_PER_KEY);
    for (connected, _) in requesters {
        Arc::into_inner(connected)
            .expect("no request in flight")
            .shutdown()
            .await
            .unwrap();
    }
    running.shutdown().await.unwrap();
}

/// The broker keys its responders by requester: keyed by the default header, which requests
/// do not carry, they would rotate over the lanes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_brokers_partition_by_requester_runs_each_requesters_requests_in_order_on_its_lane() {
    keyed_by_requester(ByRequester::Broker).await;
}

/// The responder keys itself by requester, on a broker that says nothing of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_responders_partition_by_requester_runs_each_requesters_requests_in_order_on_its_lane() {
    keyed_by_requester(ByRequester::Responder).await;
}

/// Sends request `seq` of requester `index`; answers its answer.
async fn ask(
    connected: &ConnectedZmqRpc<Dialing>,
    index: usize,
    seq: u32,
) -> Result<Answer, ZmqError> {
    let body = serde_json::to_vec(&Ask {
        requester: index,
        seq,
    })
    .unwrap();
    let answer = connected
        .requester()
        .request(
            OutgoingMessage::produced("keyed.rpc", BytesMut::from(body.as_slice())),
            GATE * 2,
        )
        .await?;
    Ok(serde_json::from_slice(ruststream::IncomingMessage::payload(&answer)).unwrap())
}
