//! The real brokers on loopback, driven by random settlement plans and checked against the model:
//! every delivery a handler sees, the retry count it carries, the time a delayed copy waited,
//! every dead letter, and the number of messages the service published (so a drop, or a retry
//! the model says is gone, is seen to publish nothing).
//!
//! One harness serves the three patterns, each on both sides:
//!
//! - `ZmqQueue`: bound (a peer PUSH dials in; copies go back to the own listener) and dialing
//!   (a peer PUSH binds; copies go to a queue the service binds for itself);
//! - `ZmqFanout`: bound (a peer PUB dials in; copies go back to the own listener, and a dead
//!   letter under the subscription's prefix arrives back at it) and dialing (a peer PUB binds;
//!   copies go to a queue the service binds for itself);
//! - `ZmqRpc` responder: bound (a requester's DEALER dials in) and dialing (the responder dials a
//!   requester whose DEALER binds); either way copies go to a queue the service binds for itself.
//!   The requester sends fire-and-forget requests (`Publisher::publish` on the `ZmqRequester`)
//!   and the responder does not answer: the plan alone decides each delivery's outcome.
//!
//! A fan-out peer sends warm-ups until the subscription hears it (the slow joiner), and only then
//! the plans; a warm-up is acked and publishes nothing.
//!
//! Every declaration combination runs every time, in a fixed order, one test per pattern and
//! side: the mount site's form, the cap (none, 1 to 4) and the dead letter (none, another queue,
//! a bare name where the model and the broker agree on it). Each runs fixed plans that reach its
//! copies, cap and dead letter, and random plans besides: `RUSTSTREAM_ZMQ_PROPTEST_CASES` sets how
//! many sets of random plans per declaration (1 by default). Each case starts its own service on
//! fresh ports and shuts it down. `RUSTSTREAM_ZMQ_MODEL_TRACE=1` prints each case with the
//! journeys the model expected (run with `--nocapture`).
//!
//! A bound queue's own-endpoint dead letter is named `payments.dead`, never the subscription's
//! own name: `.dead_letter("payments")` on the bound queue `payments` is refused when the service
//! starts (`ZmqError::DeadLetterIsTheSubscription`), while the model lets the registration run and
//! has the publisher refuse each dead letter.
//!
//! A bare dead-letter name off a dialing queue or fan-out is not drawn here: the model has no way
//! out for it, the broker dials the peer that only sends with it (see
//! `a_bare_dead_letter_off_a_dialing_subscription_is_dropped_at_once`).

use std::{
    collections::BTreeMap,
    convert::Infallible,
    num::NonZeroU32,
    time::{Duration, Instant},
};

use futures::future::BoxFuture;
use proptest::{collection::vec, prelude::*, test_runner::TestCaseError};
use ruststream::{Broker, BytesMut, ConnectedBroker, OutgoingMessage, Publisher};
use ruststream_zmq::{ConnectedZmq, ZmqPublisher, ZmqRequester};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::prelude::*;
use crate::model::{
    self, Definition, Output, Pattern, Place, Registration, RetryDestination, Side as ModelSide,
};
use crate::poll::until_async;
use crate::ports::free_port;

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

    fn body(&self) -> BytesMut {
        BytesMut::from(serde_json::to_vec(self).unwrap().as_slice())
    }
}

/// Sent after the plans, on each subscription that can take it, to know the earlier deliveries
/// were handled (dispatch is sequential per subscription).
const SENTINEL: u64 = u64::MAX;

/// Sent to a fan-out until it hears its peer; its plan is empty (acked, nothing published).
const WARM_UP: u64 = u64::MAX - 1;

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
    /// The queue a dialing subscription's or a responder's copies are sent to (`out_retry`).
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

/// A by-name handler: mounted on any of the three brokers.
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

#[subscriber(FanoutSubscription::<Dialing>)]
async fn dialing_listen(
    payment: &Payment,
    Headers(attempt): Headers<Attempt>,
    State(calls): State<Calls>,
) -> HandlerOutcome {
    handle(&calls, Hop::Primary, payment, attempt.retry_count)
}

#[subscriber(Responder::<Bound>)]
async fn bound_respond(
    payment: &Payment,
    Headers(attempt): Headers<Attempt>,
    State(calls): State<Calls>,
) -> HandlerOutcome {
    handle(&calls, Hop::Primary, payment, attempt.retry_count)
}

#[subscriber(Responder::<Dialing>)]
async fn dialing_respond(
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

/// How the mount site says where copies go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// Nothing: a bound queue or fan-out, whose copies go back to its own listener.
    OwnListener,
    /// The crate's step on the typed definition: `.out_retry("name@endpoint")`.
    OutRetryStep,
    /// The framework's form on a by-name registration: `.out_retry(Publish).to("name@endpoint")`.
    FrameworkTo,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DeadLetterCase {
    None,
    /// A queue the service binds on another port.
    AnotherQueue,
    /// A bare name, which leaves through the subscription's own endpoint.
    OwnEndpoint(&'static str),
}

#[derive(Debug, Clone)]
struct Case {
    pattern: Pattern,
    side: ModelSide,
    form: Form,
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

/// The bare dead-letter names through the own endpoint where the model and the broker agree on
/// their fate: refused on a bound queue, under or outside the prefix of a bound fan-out, no way
/// out of a responder. A dialing queue's or fan-out's is tested on its own (see the module docs).
fn own_endpoint_dead_letters(pattern: Pattern, side: ModelSide) -> &'static [&'static str] {
    match (pattern, side) {
        (Pattern::Queue, ModelSide::Bound) | (Pattern::Responder, _) => &[DEAD_QUEUE],
        (Pattern::Fanout, ModelSide::Bound) => &["payments.dead", "payments", "parcels.dead"],
        (Pattern::Queue | Pattern::Fanout, ModelSide::Dialing) => &[],
    }
}

/// Every declaration of `pattern` on `side`, each once, in a fixed order: the mount site's form,
/// the cap (none, or 1 to 4 attempts) and the dead letter (none, another queue, or each bare name
/// above). The plans are left empty for the caller.
fn every_declaration(pattern: Pattern, side: ModelSide) -> Vec<Case> {
    let needs_a_place = side == ModelSide::Dialing || pattern == Pattern::Responder;
    // A subscription that cannot address its copies names a place, by the crate's step or the
    // framework's `.to(..)`; a bound queue or fan-out sends them to its own listener, or to the
    // place the framework's `.to(..)` names, which the model says overrides it.
    let forms = if needs_a_place {
        [Form::OutRetryStep, Form::FrameworkTo]
    } else {
        [Form::OwnListener, Form::FrameworkTo]
    };
    let dead_letters: Vec<DeadLetterCase> = [DeadLetterCase::None, DeadLetterCase::AnotherQueue]
        .into_iter()
        .chain(
            own_endpoint_dead_letters(pattern, side)
                .iter()
                .map(|name| DeadLetterCase::OwnEndpoint(name)),
        )
        .collect();
    let mut cases = Vec::new();
    for form in forms {
        for max_attempts in [None, Some(1), Some(2), Some(3), Some(4)] {
            for &dead_letter in &dead_letters {
                cases.push(Case {
                    pattern,
                    side,
                    form,
                    max_attempts,
                    dead_letter,
                    plans: Vec::new(),
                });
            }
        }
    }
    cases
}

/// Plans every declaration runs, so that each reaches its copies, its cap and its dead letter
/// every time: delayed copies then plain retries past the highest cap, and a plain retry first
/// (gone at once under no declaration) then a delayed copy and an ack.
fn fixed_plans() -> Vec<Vec<Step>> {
    vec![
        vec![
            Step::RetryAfter { ms: 20 },
            Step::RetryAfter { ms: 0 },
            Step::Retry,
            Step::Retry,
            Step::Retry,
        ],
        vec![Step::Retry, Step::RetryAfter { ms: 5 }, Step::Ack],
    ]
}

/// Random plans added to the fixed ones: one to three payments of up to five steps.
fn random_plans() -> impl Strategy<Value = Vec<Vec<Step>>> {
    vec(vec(step(), 0..=5), 1..=3)
}

/// How many sets of random plans each declaration runs (1 by default).
fn live_cases() -> u32 {
    std::env::var("RUSTSTREAM_ZMQ_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

fn loopback() -> String {
    format!("tcp://127.0.0.1:{}", free_port())
}

const SUBSCRIPTION: &str = "payments";
const RETRY_QUEUE: &str = "payments.retry";
const DEAD_QUEUE: &str = "payments.dead";

/// The addresses one case uses, fixed before the service starts.
struct Layout {
    /// `payments.retry@tcp://127.0.0.1:port`, where the mount site names a place.
    retry_to: Option<String>,
    /// The dead-letter destination as the registration declares it.
    dead_letter: Option<String>,
    /// The dead-letter queue's own address, where one is bound.
    dead_address: Option<String>,
    /// On the dialing side, the peer the service dials: a PUSH, a PUB or a requester's DEALER,
    /// each binding this address.
    upstream: Option<String>,
}

impl Layout {
    fn new(case: &Case) -> Self {
        let dead_address = (case.dead_letter == DeadLetterCase::AnotherQueue).then(loopback);
        Self {
            retry_to: (case.form != Form::OwnListener)
                .then(|| format!("{RETRY_QUEUE}@{}", loopback())),
            dead_letter: match case.dead_letter {
                DeadLetterCase::None => None,
                DeadLetterCase::AnotherQueue => {
                    Some(format!("{DEAD_QUEUE}@{}", dead_address.as_deref().unwrap()))
                }
                DeadLetterCase::OwnEndpoint(name) => Some(name.to_owned()),
            },
            dead_address,
            upstream: (case.side == ModelSide::Dialing).then(loopback),
        }
    }

    fn retry_address(&self) -> Option<&str> {
        self.retry_to
            .as_deref()
            .and_then(|to| to.split_once('@'))
            .map(|(_, at)| at)
    }

    /// The registrations of this case, as the model reads them: the primary subscription, and
    /// where the mount site names a place, the queue its copies go to.
    fn registrations(&self, case: &Case) -> (Registration, Option<Registration>) {
        let dead_letter = self.dead_letter.clone().map(|dl| match case.dead_letter {
            DeadLetterCase::OwnEndpoint(_) => Place::OwnEndpoint(dl),
            _ => Place::Elsewhere(dl),
        });
        let declare = |mut reg: Registration| {
            reg.max_attempts = case.max_attempts;
            reg.dead_letter = dead_letter.clone();
            reg
        };
        let mut primary = Registration::queue(case.side, SUBSCRIPTION);
        primary.pattern = case.pattern;
        let place = self.retry_to.clone().map(Place::Elsewhere);
        let primary = match (case.form, place) {
            (Form::OwnListener, None) => primary,
            (Form::OutRetryStep, Some(place)) => primary
                .definition(Definition::Typed)
                .retry_to(RetryDestination::OutRetry(place)),
            (Form::FrameworkTo, Some(place)) => {
                primary.retry_to(RetryDestination::FrameworkTo(place))
            }
            (form, place) => panic!("no layout for {form:?} with {place:?}"),
        };
        let named = self
            .retry_to
            .is_some()
            .then(|| declare(Registration::queue(ModelSide::Bound, RETRY_QUEUE)));
        (declare(primary), named)
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
        // A bare name the model lets through lands back on the subscription it left.
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
            Hop::NamedPlace => named.as_ref().expect("a registration at the named place"),
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
            // Done, gone, dropped at the cap, refused, or no way out: nothing more arrives.
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

/// The primary registration on broker scope `$b`, in the case's form: the by-name `work` alone,
/// or with the framework's `.out_retry(Publish).to(..)`; or the `typed` definition with the
/// crate's `out_retry` step (a bound queue or fan-out builder has none).
macro_rules! mount_primary {
    ($b:expr, $form:expr, $retry_to:expr, $cap:expr, $dead:expr, typed: $typed:expr) => {{
        let (b, cap, dead, retry_to) = ($b, $cap, $dead, $retry_to);
        match $form {
            Form::OutRetryStep => declare!(
                b.include(
                    $typed
                        .name(SUBSCRIPTION)
                        .out_retry(retry_to.expect("a named place"))
                ),
                cap,
                dead
            ),
            form => mount_primary!(b, form, retry_to, cap, dead),
        }
    }};
    ($b:expr, $form:expr, $retry_to:expr, $cap:expr, $dead:expr) => {{
        let (b, cap, dead, retry_to) = ($b, $cap, $dead, $retry_to);
        match $form {
            Form::OwnListener => declare!(b.include(work.name(SUBSCRIPTION)), cap, dead),
            Form::FrameworkTo => declare!(
                b.include(work.name(SUBSCRIPTION)),
                cap,
                dead,
                then.out_retry(Publish).to(retry_to.expect("a named place"))
            ),
            Form::OutRetryStep => unreachable!("a bound queue or fan-out builder has no such step"),
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

/// How a peer sends: a one-way publisher, or a requester's fire-and-forget publish.
enum Sending {
    OneWay(ZmqPublisher),
    Requests(ZmqRequester),
}

/// A peer of the service, over a connected broker of its own: feeds the primary subscription, or
/// sends a sentinel to the named place.
struct Peer {
    sending: Sending,
    close: Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send>,
}

impl Peer {
    fn of<P: ruststream_zmq::Pattern, S: ruststream_zmq::Side>(
        connected: ConnectedZmq<P, S>,
        sending: Sending,
    ) -> Self {
        Self {
            sending,
            close: Box::new(move || {
                Box::pin(async move { drop(connected.shutdown().await.unwrap()) })
            }),
        }
    }

    async fn connect<
        P: ruststream_zmq::Pattern,
        S: ruststream_zmq::Side,
        B: ruststream_zmq::Backend,
    >(
        broker: ruststream_zmq::ZmqBroker<P, S, B>,
    ) -> ConnectedZmq<P, S> {
        broker.connect().await.unwrap()
    }

    /// A PUSH; it dials `address`, or binds it on its first send.
    async fn queue<S: ruststream_zmq::Side>(endpoint: ZmqEndpoint<S>) -> Self {
        let connected = Self::connect(ZmqQueue::new(endpoint)).await;
        let publisher = connected.publisher();
        Self::of(connected, Sending::OneWay(publisher))
    }

    /// A PUB dialing a bound fan-out.
    async fn dialing_pub(address: &str) -> Self {
        let connected = Self::connect(ZmqFanout::new(ZmqEndpoint::dial(address))).await;
        let publisher = connected.publisher();
        Self::of(connected, Sending::OneWay(publisher))
    }

    /// A PUB that binds `address` now, for a dialing fan-out.
    async fn bound_pub(address: &str) -> Self {
        let connected = Self::connect(ZmqFanout::new(ZmqEndpoint::bind(address))).await;
        connected.bind_publisher().await.unwrap();
        let publisher = connected.publisher();
        Self::of(connected, Sending::OneWay(publisher))
    }

    /// A requester; its DEALER dials `address`, or binds it on its first send.
    async fn requester<S: ruststream_zmq::Side>(endpoint: ZmqEndpoint<S>) -> Self {
        let connected = Self::connect(ZmqRpc::new(endpoint)).await;
        let requester = connected.requester();
        Self::of(connected, Sending::Requests(requester))
    }

    async fn send(&self, name: &str, payment: &Payment) {
        let msg = OutgoingMessage::produced(name, payment.body());
        match &self.sending {
            Sending::OneWay(publisher) => publisher.publish(msg, None).await.unwrap(),
            Sending::Requests(requester) => requester.publish(msg, None).await.unwrap(),
        }
    }

    async fn close(self) {
        (self.close)().await;
    }
}

/// A running case: the service, its peers, and the monitors of the service's brokers.
struct Running {
    app: ruststream::runtime::RunningApp,
    feeder: Peer,
    /// A peer dialing the named place, for its sentinel.
    named_peer: Option<Peer>,
    monitors: Vec<ZmqMonitor>,
}

impl Running {
    /// How many messages the service's brokers handed to a socket.
    fn published(&self) -> u64 {
        self.monitors.iter().map(ZmqMonitor::sent).sum()
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
    let retry_to = layout.retry_to.clone();
    let upstream = layout.upstream.clone();
    let any_port = || ZmqEndpoint::bind("tcp://127.0.0.1:0");
    let dial_upstream = || ZmqEndpoint::dial(upstream.clone().expect("an upstream"));
    let form = case.form;
    let app = service!(calls);
    // The service's primary broker, and the peer that will feed it on the dialing side (made
    // before the service starts: a bound peer is what the service dials).
    let (app, primary, upstream_peer) = match (case.pattern, case.side) {
        (Pattern::Queue, ModelSide::Bound) => {
            let broker = ZmqQueue::new(any_port());
            let monitor = broker.monitor();
            let app = app.with_broker(broker, |b| {
                mount_primary!(b, form, retry_to, cap, dead.clone());
            });
            (app, monitor, None)
        }
        (Pattern::Queue, ModelSide::Dialing) => {
            let peer = Peer::queue(ZmqEndpoint::bind(upstream.clone().unwrap())).await;
            let broker = ZmqQueue::new(dial_upstream());
            let monitor = broker.monitor();
            let app = app.with_broker(broker, |b| {
                mount_primary!(b, form, retry_to, cap, dead.clone(), typed: dialing_work);
            });
            (app, monitor, Some(peer))
        }
        (Pattern::Fanout, ModelSide::Bound) => {
            let broker = ZmqFanout::new(any_port());
            let monitor = broker.monitor();
            let app = app.with_broker(broker, |b| {
                mount_primary!(b, form, retry_to, cap, dead.clone());
            });
            (app, monitor, None)
        }
        (Pattern::Fanout, ModelSide::Dialing) => {
            let peer = Peer::bound_pub(&upstream.clone().unwrap()).await;
            let broker = ZmqFanout::new(dial_upstream());
            let monitor = broker.monitor();
            let app = app.with_broker(broker, |b| {
                mount_primary!(b, form, retry_to, cap, dead.clone(), typed: dialing_listen);
            });
            (app, monitor, Some(peer))
        }
        (Pattern::Responder, ModelSide::Bound) => {
            let broker = ZmqRpc::new(any_port());
            let monitor = broker.monitor();
            let app = app.with_broker(broker, |b| {
                mount_primary!(b, form, retry_to, cap, dead.clone(), typed: bound_respond);
            });
            (app, monitor, None)
        }
        (Pattern::Responder, ModelSide::Dialing) => {
            // The requester's DEALER binds on its first send; the responder dials it until then.
            let peer = Peer::requester(ZmqEndpoint::bind(upstream.clone().unwrap())).await;
            let broker = ZmqRpc::new(dial_upstream());
            let monitor = broker.monitor();
            let app = app.with_broker(broker, |b| {
                mount_primary!(b, form, retry_to, cap, dead.clone(), typed: dialing_respond);
            });
            (app, monitor, Some(peer))
        }
    };
    let mut app = app;
    let mut monitors = vec![primary.clone()];
    if let Some(address) = layout.retry_address() {
        let retry_queue = ZmqQueue::new(ZmqEndpoint::bind(address));
        monitors.push(retry_queue.monitor());
        app = app.with_broker(retry_queue, |b| {
            declare!(b.include(retried.name(RETRY_QUEUE)), cap, dead.clone());
        });
    }
    if let Some(address) = layout.dead_address.clone() {
        let dead_queue = ZmqQueue::new(ZmqEndpoint::bind(address));
        monitors.push(dead_queue.monitor());
        app = app.with_broker(dead_queue, |b| {
            b.include(parked.name(DEAD_QUEUE));
        });
    }
    let app = app.start().await.expect("the service starts");
    let feeder = match upstream_peer {
        Some(peer) => peer,
        None => {
            let address = primary.bound_address().expect("bound once started");
            match case.pattern {
                Pattern::Queue => Peer::queue(ZmqEndpoint::dial(address)).await,
                Pattern::Fanout => Peer::dialing_pub(&address).await,
                Pattern::Responder => Peer::requester(ZmqEndpoint::dial(address)).await,
            }
        }
    };
    let named_peer = match layout.retry_address() {
        Some(address) => Some(Peer::queue(ZmqEndpoint::dial(address)).await),
        None => None,
    };
    Running {
        app,
        feeder,
        named_peer,
        monitors,
    }
}

/// The calls seen so far, by payment; warm-ups are noted and set aside.
struct Journal {
    rx: mpsc::UnboundedReceiver<Seen>,
    by_id: BTreeMap<u64, Vec<Seen>>,
    last: Instant,
    warmed_up: bool,
}

impl Journal {
    /// Takes the next call that is not a warm-up, or `None` once `deadline` passes.
    async fn next(&mut self, deadline: tokio::time::Instant) -> Option<Seen> {
        loop {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(seen)) if seen.id == WARM_UP => self.warmed_up = true,
                Ok(Some(seen)) => {
                    self.last = self.last.max(seen.at);
                    self.by_id.entry(seen.id).or_default().push(seen.clone());
                    return Some(seen);
                }
                Ok(None) => panic!("the handlers went away"),
                Err(_) => return None,
            }
        }
    }
}

/// PUB drops what it sends before the subscription reaches it (the slow joiner): warm-ups go out
/// until the fan-out hears one. Later ones may still arrive; the journal sets them aside.
async fn warm_up(feeder: &Peer, journal: &mut Journal) -> Result<(), TestCaseError> {
    let warm_up = Payment {
        id: WARM_UP,
        plan: Vec::new(),
    };
    // Done once a warm-up is heard, or at once with a delivery that came before any payment.
    let early = until_async(
        Duration::from_secs(10),
        "the fan-out to hear its peer",
        async || {
            feeder.send(SUBSCRIPTION, &warm_up).await;
            let wait = tokio::time::Instant::now() + Duration::from_millis(50);
            match journal.next(wait).await {
                Some(seen) => Some(Some(seen)),
                None if journal.warmed_up => Some(None),
                None => None,
            }
        },
    )
    .await;
    if let Some(seen) = early {
        prop_assert!(false, "a delivery before any payment was sent: {:?}", seen);
    }
    Ok(())
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
        warmed_up: false,
    };
    if case.pattern == Pattern::Fanout {
        warm_up(&running.feeder, &mut journal).await?;
    }
    // Nothing the service did so far (its start, the warm-ups) published anything.
    prop_assert_eq!(running.published(), 0, "published before any payment");
    for payment in &payments {
        running.feeder.send(SUBSCRIPTION, payment).await;
    }

    // Every expected call, in order per payment; a call the model does not expect fails at once.
    // A case's copies wait 250 ms at most, so the deadline is generous on a loaded machine.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
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
        prop_assert!(
            journeys.contains_key(&seen.id),
            "a delivery of no payment: {:?}",
            seen
        );
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
    prop_assert_eq!(
        journal.by_id.get(&SENTINEL).map_or(0, Vec::len),
        sentinels,
        "a sentinel arrived twice"
    );
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
    let stray: Vec<_> = journal
        .by_id
        .keys()
        .filter(|id| **id != SENTINEL && !journeys.contains_key(id))
        .collect();
    prop_assert!(stray.is_empty(), "deliveries of no payment: {:?}", stray);
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

fn run(case: Case) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(check(case))
}

/// Runs every declaration of `pattern` on `side` against the model, each with the fixed plans and
/// random ones; a failing declaration's random plans are shrunk for at most a minute (each try
/// starts a service). Every declaration runs, and the failures are reported together.
fn every_declaration_settles_as_the_model_says(pattern: Pattern, side: ModelSide) {
    let declarations = every_declaration(pattern, side);
    let mut failures = Vec::new();
    for declaration in &declarations {
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
            cases: live_cases(),
            max_shrink_time: 60_000,
            failure_persistence: None,
            ..ProptestConfig::default()
        });
        let result = runner.run(&random_plans(), |random| {
            let mut case = declaration.clone();
            case.plans = fixed_plans().into_iter().chain(random).collect();
            run(case)
        });
        if let Err(err) = result {
            failures.push(format!(
                "{declaration:?}, with the fixed plans and random ones: {err}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} declarations of a {side:?} {pattern:?} did not settle as the model says:\n{}",
        failures.len(),
        declarations.len(),
        failures.join("\n")
    );
}

#[test]
fn the_real_bound_queue_settles_every_declaration_as_the_model_says() {
    every_declaration_settles_as_the_model_says(Pattern::Queue, ModelSide::Bound);
}

#[test]
fn the_real_dialing_queue_settles_every_declaration_as_the_model_says() {
    every_declaration_settles_as_the_model_says(Pattern::Queue, ModelSide::Dialing);
}

#[test]
fn the_real_bound_fanout_settles_every_declaration_as_the_model_says() {
    every_declaration_settles_as_the_model_says(Pattern::Fanout, ModelSide::Bound);
}

#[test]
fn the_real_dialing_fanout_settles_every_declaration_as_the_model_says() {
    every_declaration_settles_as_the_model_says(Pattern::Fanout, ModelSide::Dialing);
}

#[test]
fn the_real_bound_responder_settles_every_declaration_as_the_model_says() {
    every_declaration_settles_as_the_model_says(Pattern::Responder, ModelSide::Bound);
}

#[test]
fn the_real_dialing_responder_settles_every_declaration_as_the_model_says() {
    every_declaration_settles_as_the_model_says(Pattern::Responder, ModelSide::Dialing);
}

#[test]
fn the_declarations_are_every_combination_once() {
    // Form x cap x dead letter: 2 x 5 x (2 + the bare names each side can take).
    let counts: Vec<usize> = [
        (Pattern::Queue, ModelSide::Bound),
        (Pattern::Queue, ModelSide::Dialing),
        (Pattern::Fanout, ModelSide::Bound),
        (Pattern::Fanout, ModelSide::Dialing),
        (Pattern::Responder, ModelSide::Bound),
        (Pattern::Responder, ModelSide::Dialing),
    ]
    .into_iter()
    .map(|(pattern, side)| {
        let all = every_declaration(pattern, side);
        let distinct: std::collections::BTreeSet<String> =
            all.iter().map(|case| format!("{case:?}")).collect();
        assert_eq!(distinct.len(), all.len(), "{pattern:?} {side:?}");
        all.len()
    })
    .collect();
    assert_eq!(counts, [30, 20, 50, 20, 30, 30]);
}

/// A bare dead-letter name off a dialing queue or fan-out has no way out (the model's `NoWayOut`;
/// the broker says so at startup: "this subscription's own socket cannot take it"): the delivery
/// is dropped and nothing is published, at once: the publisher refuses a bare name toward the
/// peer that only sends (`ZmqError::PeerOnlySends`) rather than dial it with a socket of the
/// same kind, which would never complete the handshake and hold the subscription for
/// `send_timeout`.
#[test]
fn a_bare_dead_letter_off_a_dialing_subscription_is_dropped_at_once() {
    let mut held_back = Vec::new();
    for pattern in [Pattern::Queue, Pattern::Fanout] {
        let case = Case {
            pattern,
            side: ModelSide::Dialing,
            form: Form::OutRetryStep,
            max_attempts: Some(1),
            dead_letter: DeadLetterCase::OwnEndpoint(DEAD_QUEUE),
            plans: vec![vec![Step::Retry], Vec::new()],
        };
        let layout = Layout::new(&case);
        let (primary, _) = layout.registrations(&case);
        assert_eq!(
            model::settle(&primary, None, model::Outcome::Retry),
            Output::NoWayOut {
                place: Place::OwnEndpoint(DEAD_QUEUE.to_owned())
            },
            "the model's fate of this dead letter"
        );
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let held = runtime.block_on(async {
            let (tx, rx) = mpsc::unbounded_channel();
            let running = start(&case, &layout, Calls(tx)).await;
            let mut journal = Journal {
                rx,
                by_id: BTreeMap::new(),
                last: Instant::now(),
                warmed_up: false,
            };
            if pattern == Pattern::Fanout {
                warm_up(&running.feeder, &mut journal).await.unwrap();
            }
            for (id, plan) in case.plans.iter().enumerate() {
                let payment = Payment {
                    id: id as u64 + 1,
                    plan: plan.clone(),
                };
                running.feeder.send(SUBSCRIPTION, &payment).await;
            }
            let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
            let first = journal.next(deadline).await.expect("the first payment");
            let second = journal.next(deadline).await.expect("the second payment");
            assert_eq!((first.id, second.id), (1, 2), "{pattern:?}");
            let held = second.at - first.at;
            assert_eq!(running.published(), 0, "{pattern:?}: nothing is published");
            running.shutdown().await;
            held
        });
        if held >= Duration::from_secs(1) {
            held_back.push((pattern, held));
        }
    }
    assert!(
        held_back.is_empty(),
        "the next delivery waited behind a dead letter with no way out: {held_back:?}"
    );
}
