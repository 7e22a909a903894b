//! The real queue broker on loopback, driven by random settlement plans and checked against the
//! model: every delivery a handler sees, the retry count it carries, the time a delayed copy
//! waited, every dead letter, and the number of messages the service published (so a drop, or a
//! retry the model says is gone, is seen to publish nothing).
//!
//! Each case starts its own service on fresh ports and shuts it down. The number of cases is
//! `RUSTSTREAM_ZMQ_PROPTEST_CASES` (8 by default); `RUSTSTREAM_ZMQ_MODEL_TRACE=1` prints each case
//! with the journeys the model expected (run with `--nocapture`).
//!
//! The case's own-endpoint dead letter is named `payments.dead`, never the subscription's own
//! name: `.dead_letter("payments")` on the bound queue `payments` is delivered back to it by
//! `routing::route` (while `routing::dead_letter_fate` announces it refused, and DESIGN.md says
//! the publisher refuses it), so that case would fail here until the broker refuses it.

use std::{
    collections::BTreeMap,
    convert::Infallible,
    net::TcpListener,
    num::NonZeroU32,
    time::{Duration, Instant},
};

use proptest::{collection::vec, prelude::*, test_runner::TestCaseError};
use ruststream::{Broker, BytesMut, ConnectedBroker, OutgoingMessage, Publisher};
use ruststream_zmq::{ConnectedZmqQueue, ZmqPublisher, prelude::*};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::model::{self, Definition, Output, Place, Registration, RetryDestination, Side};

/// What the handler returns on one attempt of a payment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Step {
    Ack,
    Drop,
    Retry,
    RetryAfter { ms: u64 },
}

impl Step {
    fn outcome(self) -> model::Outcome {
        match self {
            Self::Ack => model::Outcome::Ack,
            Self::Drop => model::Outcome::Drop,
            Self::Retry => model::Outcome::Retry,
            Self::RetryAfter { ms } => model::Outcome::RetryAfter(Duration::from_millis(ms)),
        }
    }

    fn handler_outcome(self) -> HandlerOutcome {
        match self {
            Self::Ack => HandlerOutcome::ack(),
            Self::Drop => HandlerOutcome::drop(),
            Self::Retry => HandlerOutcome::retry(),
            Self::RetryAfter { ms } => HandlerOutcome::retry_after(Duration::from_millis(ms)),
        }
    }
}

/// A payment carries its plan: the step for attempt `n` is `plan[n - 1]`, and `ack` past the end.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Payment {
    id: u64,
    plan: Vec<Step>,
}

impl Payment {
    fn step(&self, retry_count: Option<u32>) -> Step {
        let attempt = retry_count.unwrap_or(0) as usize + 1;
        self.plan.get(attempt - 1).copied().unwrap_or(Step::Ack)
    }
}

/// Sent after the plans, on each subscription that can take it, to know the earlier deliveries
/// were handled (dispatch is sequential per subscription).
const SENTINEL: u64 = u64::MAX;

#[derive(Debug, Deserialize)]
struct Attempt {
    #[serde(rename = "x-ruststream-retry-count")]
    retry_count: Option<u32>,
}

/// Which handler saw a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Hop {
    /// The subscription the payments are fed to.
    Primary,
    /// The queue a dialing subscription's copies are sent to (`out_retry`).
    NamedPlace,
    /// The dead-letter queue.
    DeadLetter,
}

#[derive(Debug, Clone)]
struct Seen {
    hop: Hop,
    id: u64,
    retry_count: Option<u32>,
    at: Instant,
}

#[derive(Clone)]
struct Calls(mpsc::UnboundedSender<Seen>);

#[derive(FromRef)]
struct AppState {
    calls: Calls,
}

fn handle(calls: &Calls, hop: Hop, payment: &Payment, retry_count: Option<u32>) -> HandlerOutcome {
    let _ = calls.0.send(Seen {
        hop,
        id: payment.id,
        retry_count,
        at: Instant::now(),
    });
    if hop == Hop::DeadLetter {
        return HandlerOutcome::ack();
    }
    payment.step(retry_count).handler_outcome()
}

#[subscriber]
async fn work(
    payment: &Payment,
    Headers(attempt): Headers<Attempt>,
    State(calls): State<Calls>,
) -> HandlerOutcome {
    handle(&calls, Hop::Primary, payment, attempt.retry_count)
}

#[subscriber(QueueSubscription::<Dialing>)]
async fn dialing_work(
    payment: &Payment,
    Headers(attempt): Headers<Attempt>,
    State(calls): State<Calls>,
) -> HandlerOutcome {
    handle(&calls, Hop::Primary, payment, attempt.retry_count)
}

#[subscriber]
async fn retried(
    payment: &Payment,
    Headers(attempt): Headers<Attempt>,
    State(calls): State<Calls>,
) -> HandlerOutcome {
    handle(&calls, Hop::NamedPlace, payment, attempt.retry_count)
}

#[subscriber]
async fn parked(
    payment: &Payment,
    Headers(attempt): Headers<Attempt>,
    State(calls): State<Calls>,
) -> HandlerOutcome {
    handle(&calls, Hop::DeadLetter, payment, attempt.retry_count)
}

/// How a dialing subscription names where its copies go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DialingForm {
    /// The crate's step on the typed definition: `.out_retry("name@endpoint")`.
    OutRetryStep,
    /// The framework's form on a by-name registration: `.out_retry(Publish).to("name@endpoint")`.
    FrameworkTo,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CaseSide {
    /// Copies go back to the subscription's own listener.
    Bound,
    /// Copies go to a queue the service binds for itself.
    Dialing(DialingForm),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DeadLetterCase {
    None,
    /// A second bound queue on another port.
    AnotherQueue,
    /// A bare name, into the bound subscription's own endpoint (refused there).
    OwnEndpoint,
}

#[derive(Debug, Clone)]
struct Case {
    side: CaseSide,
    max_attempts: Option<u32>,
    dead_letter: DeadLetterCase,
    plans: Vec<Vec<Step>>,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => Just(Step::Ack),
        1 => Just(Step::Drop),
        3 => Just(Step::Retry),
        3 => (0..=50u64).prop_map(|ms| Step::RetryAfter { ms }),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    let side = prop_oneof![
        2 => Just(CaseSide::Bound),
        1 => Just(CaseSide::Dialing(DialingForm::OutRetryStep)),
        1 => Just(CaseSide::Dialing(DialingForm::FrameworkTo)),
    ];
    (
        side,
        proptest::option::of(1..=4u32),
        0..3u8,
        vec(vec(step(), 0..=5), 1..=3),
    )
        .prop_map(|(side, max_attempts, dead_letter, plans)| Case {
            side,
            max_attempts,
            dead_letter: match (dead_letter, side) {
                (0, _) => DeadLetterCase::None,
                // A dialing subscription's own endpoint is the peer that only sends.
                (1, _) | (_, CaseSide::Dialing(_)) => DeadLetterCase::AnotherQueue,
                _ => DeadLetterCase::OwnEndpoint,
            },
            plans,
        })
}

fn live_cases() -> u32 {
    std::env::var("RUSTSTREAM_ZMQ_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8)
}

/// A loopback port nobody listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

const SUBSCRIPTION: &str = "payments";
const RETRY_QUEUE: &str = "payments.retry";
const DEAD_QUEUE: &str = "payments.dead";

/// The addresses one case uses, fixed before the service starts.
struct Layout {
    /// `payments.retry@tcp://127.0.0.1:port`, on the dialing side.
    retry_to: Option<String>,
    /// The dead-letter destination as the registration declares it.
    dead_letter: Option<String>,
    /// The dead-letter queue's own address, where one is bound.
    dead_address: Option<String>,
    /// The peer that only sends, on the dialing side.
    upstream: Option<String>,
}

impl Layout {
    fn new(case: &Case) -> Self {
        let dialing = matches!(case.side, CaseSide::Dialing(_));
        let dead_address = (case.dead_letter == DeadLetterCase::AnotherQueue)
            .then(|| format!("tcp://127.0.0.1:{}", free_port()));
        Self {
            retry_to: dialing.then(|| format!("{RETRY_QUEUE}@tcp://127.0.0.1:{}", free_port())),
            dead_letter: match case.dead_letter {
                DeadLetterCase::None => None,
                DeadLetterCase::AnotherQueue => {
                    Some(format!("{DEAD_QUEUE}@{}", dead_address.as_deref().unwrap()))
                }
                DeadLetterCase::OwnEndpoint => Some(DEAD_QUEUE.to_owned()),
            },
            dead_address,
            upstream: dialing.then(|| format!("tcp://127.0.0.1:{}", free_port())),
        }
    }

    fn retry_address(&self) -> Option<&str> {
        self.retry_to
            .as_deref()
            .and_then(|to| to.split_once('@'))
            .map(|(_, at)| at)
    }

    /// The registrations of this case, as the model reads them: the primary subscription, and
    /// on the dialing side the queue its copies go to.
    fn registrations(&self, case: &Case) -> (Registration, Option<Registration>) {
        let dead_letter = self.dead_letter.clone().map(|dl| match case.dead_letter {
            DeadLetterCase::OwnEndpoint => Place::OwnEndpoint(dl),
            _ => Place::Elsewhere(dl),
        });
        let declare = |mut reg: Registration| {
            reg.max_attempts = case.max_attempts;
            reg.dead_letter = dead_letter.clone();
            reg
        };
        match case.side {
            CaseSide::Bound => (
                declare(Registration::queue(Side::Bound, SUBSCRIPTION)),
                None,
            ),
            CaseSide::Dialing(form) => {
                let place = Place::Elsewhere(self.retry_to.clone().unwrap());
                let primary = Registration::queue(Side::Dialing, SUBSCRIPTION);
                let primary = match form {
                    DialingForm::OutRetryStep => primary
                        .definition(Definition::Typed)
                        .retry_to(RetryDestination::OutRetry(place)),
                    DialingForm::FrameworkTo => {
                        primary.retry_to(RetryDestination::FrameworkTo(place))
                    }
                };
                (
                    declare(primary),
                    Some(declare(Registration::queue(Side::Bound, RETRY_QUEUE))),
                )
            }
        }
    }
}

/// One delivery the model expects a handler to see.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Arrival {
    hop: Hop,
    retry_count: Option<u32>,
    /// The least time since the arrival before (the delay of the copy that brought it).
    after: Duration,
}

/// What the model expects of one payment: its arrivals, in order, and how many messages the
/// service publishes for it.
#[derive(Debug, Clone)]
struct Journey {
    arrivals: Vec<Arrival>,
    published: u64,
}

fn journey(layout: &Layout, case: &Case, payment: &Payment) -> Journey {
    let (primary, named) = layout.registrations(case);
    let hop_of = |place: &Place, here: Hop| match place {
        Place::OwnEndpoint(_) => here,
        Place::Elsewhere(to) if Some(to) == layout.retry_to.as_ref() => Hop::NamedPlace,
        Place::Elsewhere(to) if Some(to) == layout.dead_letter.as_ref() => Hop::DeadLetter,
        Place::Elsewhere(to) => panic!("the model sent a copy to `{to}`, which no case names"),
    };
    let mut arrivals = Vec::new();
    let mut published = 0;
    let (mut hop, mut retry_count, mut after) = (Hop::Primary, None, Duration::ZERO);
    loop {
        assert!(arrivals.len() < 64, "an endless journey: {arrivals:?}");
        arrivals.push(Arrival {
            hop,
            retry_count,
            after,
        });
        let reg = match hop {
            Hop::Primary => &primary,
            Hop::NamedPlace => named.as_ref().expect("a named place on the dialing side"),
            Hop::DeadLetter => {
                return Journey {
                    arrivals,
                    published,
                };
            }
        };
        let output = model::settle(reg, retry_count, payment.step(retry_count).outcome());
        published += u64::from(output.publishes());
        match output {
            Output::CopyToOwnListener {
                retry_count: next,
                delay,
            } => (retry_count, after) = (Some(next), delay),
            Output::CopyToNamedPlace {
                ref place,
                retry_count: next,
                delay,
            } => (hop, retry_count, after) = (hop_of(place, hop), Some(next), delay),
            Output::DeadLetter {
                ref place,
                retry_count: next,
            } => (hop, retry_count, after) = (hop_of(place, hop), Some(next), Duration::ZERO),
            // Done, gone, dropped at the cap, or refused: nothing more arrives.
            _ => {
                return Journey {
                    arrivals,
                    published,
                };
            }
        }
    }
}

/// A service-side declaration of a registration: the cap and the dead letter the case draws,
/// then whatever `then` adds (the framework's `.out_retry(Publish).to(..)`).
macro_rules! declare {
    ($guard:expr, $cap:expr, $dead:expr $(, then $($tail:tt)+)?) => {{
        let guard = $guard;
        match ($cap, $dead) {
            (None, None) => {
                let _ = guard $($($tail)+)?;
            }
            (Some(cap), None) => {
                let _ = guard.max_attempts(cap) $($($tail)+)?;
            }
            (None, Some(dead)) => {
                let _ = guard.dead_letter(dead) $($($tail)+)?;
            }
            (Some(cap), Some(dead)) => {
                let _ = guard.max_attempts(cap).dead_letter(dead) $($($tail)+)?;
            }
        }
    }};
}

macro_rules! service {
    ($calls:expr) => {{
        let calls = $calls;
        RustStream::new(AppInfo::new("model", "0.1.0"))
            .on_startup(async move |()| Ok::<_, Infallible>(AppState { calls }))
    }};
}

/// A peer of the service: feeds the primary subscription, or sends a sentinel to the named place.
enum Peer {
    Dials(ConnectedZmqQueue<Dialing>),
    Binds(ConnectedZmqQueue<Bound>),
}

impl Peer {
    async fn dial(address: &str) -> Self {
        Self::Dials(
            ZmqQueue::new(ZmqEndpoint::dial(address))
                .connect()
                .await
                .unwrap(),
        )
    }

    async fn bind(address: &str) -> Self {
        Self::Binds(
            ZmqQueue::new(ZmqEndpoint::bind(address))
                .connect()
                .await
                .unwrap(),
        )
    }

    fn publisher(&self) -> ZmqPublisher {
        match self {
            Self::Dials(connected) => connected.publisher(),
            Self::Binds(connected) => connected.publisher(),
        }
    }

    async fn send(&self, name: &str, payment: &Payment) {
        let body = BytesMut::from(serde_json::to_vec(payment).unwrap().as_slice());
        self.publisher()
            .publish(OutgoingMessage::produced(name, body), None)
            .await
            .unwrap();
    }

    async fn close(self) {
        match self {
            Self::Dials(connected) => connected.shutdown().await.unwrap(),
            Self::Binds(connected) => connected.shutdown().await.unwrap(),
        }
    }
}

/// A running case: the service, its peers, and the monitors of the brokers that publish.
struct Running {
    app: ruststream::runtime::RunningApp,
    feeder: Peer,
    /// A peer dialing the named place, for its sentinel.
    named_peer: Option<Peer>,
    publishing: Vec<ZmqMonitor>,
}

impl Running {
    fn published(&self) -> u64 {
        self.publishing.iter().map(ZmqMonitor::sent).sum()
    }

    async fn shutdown(self) {
        self.app.shutdown().await.unwrap();
        self.feeder.close().await;
        if let Some(peer) = self.named_peer {
            peer.close().await;
        }
    }
}

async fn start(case: &Case, layout: &Layout, calls: Calls) -> Running {
    let cap = case.max_attempts.map(|n| NonZeroU32::new(n).unwrap());
    let dead = layout.dead_letter.clone();
    let dead_queue = layout
        .dead_address
        .clone()
        .map(|at| ZmqQueue::new(ZmqEndpoint::bind(at)));
    match case.side {
        CaseSide::Bound => {
            let broker = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"));
            let monitor = broker.monitor();
            let mut app = service!(calls).with_broker(broker, |b| {
                declare!(b.include(work.name(SUBSCRIPTION)), cap, dead);
            });
            if let Some(dead_queue) = dead_queue {
                app = app.with_broker(dead_queue, |b| {
                    b.include(parked.name(DEAD_QUEUE));
                });
            }
            let app = app.start().await.expect("the service starts");
            let address = monitor.bound_address().expect("bound once started");
            Running {
                app,
                feeder: Peer::dial(&address).await,
                named_peer: None,
                publishing: vec![monitor],
            }
        }
        CaseSide::Dialing(form) => {
            let upstream = layout.upstream.clone().unwrap();
            let retry_to = layout.retry_to.clone().unwrap();
            let retry_address = layout.retry_address().unwrap().to_owned();
            // The peer that only sends: a PUSH that binds on its first send.
            let feeder = Peer::bind(&upstream).await;
            let broker = ZmqQueue::new(ZmqEndpoint::dial(upstream));
            let monitor = broker.monitor();
            let retry_queue = ZmqQueue::new(ZmqEndpoint::bind(retry_address.clone()));
            let retry_monitor = retry_queue.monitor();
            let (cap_here, dead_here) = (cap, dead.clone());
            let mut app = service!(calls).with_broker(broker, |b| match form {
                DialingForm::OutRetryStep => declare!(
                    b.include(dialing_work.name(SUBSCRIPTION).out_retry(retry_to)),
                    cap_here,
                    dead_here
                ),
                DialingForm::FrameworkTo => declare!(
                    b.include(work.name(SUBSCRIPTION)),
                    cap_here,
                    dead_here,
                    then.out_retry(Publish).to(retry_to.clone())
                ),
            });
            app = app.with_broker(retry_queue, |b| {
                declare!(b.include(retried.name(RETRY_QUEUE)), cap, dead);
            });
            if let Some(dead_queue) = dead_queue {
                app = app.with_broker(dead_queue, |b| {
                    b.include(parked.name(DEAD_QUEUE));
                });
            }
            let app = app.start().await.expect("the service starts");
            Running {
                app,
                feeder,
                named_peer: Some(Peer::dial(&retry_address).await),
                publishing: vec![monitor, retry_monitor],
            }
        }
    }
}

/// The calls seen so far, by payment.
struct Journal {
    rx: mpsc::UnboundedReceiver<Seen>,
    by_id: BTreeMap<u64, Vec<Seen>>,
    last: Instant,
}

impl Journal {
    /// Takes the next call, or `None` once `deadline` passes.
    async fn next(&mut self, deadline: tokio::time::Instant) -> Option<Seen> {
        match tokio::time::timeout_at(deadline, self.rx.recv()).await {
            Ok(Some(seen)) => {
                self.last = self.last.max(seen.at);
                self.by_id.entry(seen.id).or_default().push(seen.clone());
                Some(seen)
            }
            Ok(None) => panic!("the handlers went away"),
            Err(_) => None,
        }
    }
}

fn observed(seen: &[Seen]) -> Vec<(Hop, Option<u32>)> {
    seen.iter().map(|s| (s.hop, s.retry_count)).collect()
}

fn expected(journey: &Journey) -> Vec<(Hop, Option<u32>)> {
    journey
        .arrivals
        .iter()
        .map(|a| (a.hop, a.retry_count))
        .collect()
}

/// Runs one case and checks every call against the model.
async fn check(case: Case) -> Result<(), TestCaseError> {
    let layout = Layout::new(&case);
    let (primary_reg, named_reg) = layout.registrations(&case);
    for reg in std::iter::once(&primary_reg).chain(named_reg.as_ref()) {
        prop_assert_eq!(model::registration_verdict(reg), None, "{:?}", reg);
    }
    let payments: Vec<Payment> = case
        .plans
        .iter()
        .enumerate()
        .map(|(i, plan)| Payment {
            id: i as u64 + 1,
            plan: plan.clone(),
        })
        .collect();
    let journeys: BTreeMap<u64, Journey> = payments
        .iter()
        .map(|p| (p.id, journey(&layout, &case, p)))
        .collect();
    let copies: u64 = journeys.values().map(|j| j.published).sum();
    let longest_delay = case
        .plans
        .iter()
        .flatten()
        .map(|step| match step {
            Step::RetryAfter { ms } => Duration::from_millis(*ms),
            _ => Duration::ZERO,
        })
        .max()
        .unwrap_or_default();

    let (tx, rx) = mpsc::unbounded_channel();
    let running = start(&case, &layout, Calls(tx)).await;
    let mut journal = Journal {
        rx,
        by_id: BTreeMap::new(),
        last: Instant::now(),
    };
    for payment in &payments {
        running.feeder.send(SUBSCRIPTION, payment).await;
    }

    // Every expected call, in order per payment; a call the model does not expect fails at once.
    // A case's copies wait 250 ms at most, so the deadline is generous on a loaded machine.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let complete = |journal: &Journal| {
        journeys.iter().all(|(id, journey)| {
            journal.by_id.get(id).map_or(0, Vec::len) >= journey.arrivals.len()
        })
    };
    while !complete(&journal) {
        let Some(seen) = journal.next(deadline).await else {
            let seen: BTreeMap<_, _> = journal
                .by_id
                .iter()
                .map(|(id, s)| (id, observed(s)))
                .collect();
            return Err(TestCaseError::fail(format!(
                "timed out; expected {journeys:?}, seen {seen:?}"
            )));
        };
        let journey = &journeys[&seen.id];
        let so_far = observed(&journal.by_id[&seen.id]);
        prop_assert!(
            expected(journey).starts_with(&so_far),
            "payment {} went {:?}; the model expects {:?}",
            seen.id,
            so_far,
            journey
        );
    }

    // Nothing more: the sentinels pass behind every delivery fed before them, then a window as
    // long as the longest delay lets any copy still on a timer arrive.
    let sentinel = Payment {
        id: SENTINEL,
        plan: Vec::new(),
    };
    running.feeder.send(SUBSCRIPTION, &sentinel).await;
    if let Some(peer) = &running.named_peer {
        peer.send(RETRY_QUEUE, &sentinel).await;
    }
    let sentinels = 1 + usize::from(running.named_peer.is_some());
    let quiet_after = |journal: &Journal| journal.last + longest_delay + Duration::from_millis(150);
    loop {
        let sentinel_seen = journal.by_id.get(&SENTINEL).map_or(0, Vec::len) >= sentinels;
        let quiet = tokio::time::Instant::from_std(quiet_after(&journal));
        let deadline = if sentinel_seen { quiet } else { deadline };
        if sentinel_seen && tokio::time::Instant::now() >= quiet {
            break;
        }
        if journal.next(deadline).await.is_none() && !sentinel_seen {
            prop_assert!(false, "the sentinels did not arrive");
        }
    }
    for (id, journey) in &journeys {
        let seen = journal.by_id.get(id).map(Vec::as_slice).unwrap_or_default();
        prop_assert_eq!(
            observed(seen),
            expected(journey),
            "payment {} (plan {:?}); the model's journey {:?}",
            id,
            payments[*id as usize - 1].plan,
            journey
        );
        for (pair, arrival) in seen.windows(2).zip(&journey.arrivals[1..]) {
            let waited = pair[1].at - pair[0].at;
            prop_assert!(
                waited >= arrival.after,
                "payment {}: a copy came after {:?}, before its {:?} delay",
                id,
                waited,
                arrival.after
            );
        }
    }
    let published = running.published();
    prop_assert_eq!(
        published,
        copies,
        "the service published {} messages, the model {} ({:?})",
        published,
        copies,
        journeys
    );
    running.shutdown().await;
    if std::env::var_os("RUSTSTREAM_ZMQ_MODEL_TRACE").is_some() {
        eprintln!("{case:?}: {copies} published; {journeys:?}");
    }
    Ok(())
}

proptest! {
    // A failing case is shrunk for at most a minute: each try starts a service.
    #![proptest_config(ProptestConfig {
        cases: live_cases(),
        max_shrink_time: 60_000,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_real_queue_settles_random_plans_as_the_model_says(case in case()) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(check(case))?;
    }
}
