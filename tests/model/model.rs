//! A model of settlement and copy routing, written from the seeds' tables (DESIGN.md section 1)
//! and the framework's documented arithmetic, without reading the crate.
//!
//! One function, [`settle`], answers what becomes of one delivery: which registration it arrived
//! on, which attempt it is (the `x-ruststream-retry-count` header it carries) and what the handler
//! returned. Everything the other tests check against comes from here.
//!
//! The framework's facts the model uses:
//! - the attempt is the header plus one; a delivery without the header is attempt 1;
//! - every copy (retry or dead letter) carries the header plus one, so the copy's header is the
//!   attempt of the delivery it was made from;
//! - a plain `retry()` with neither `max_attempts` nor `dead_letter` is no copy at all;
//! - with a dead letter and no cap, every retry goes to the dead letter, at once;
//! - with a cap, a delivery at attempt >= cap goes to the dead letter (at once, the delay dropped)
//!   or, with none declared, is dropped with a warning;
//! - `retry_after(d)` is always a copy after `d`, under the same cap rules; `drop()` is never
//!   dead-lettered.
//!
//! Fan-out and responder rows are written down too: the live tests drive all three patterns, on
//! both sides, against the same function.

use std::time::Duration;

/// The messaging pattern of the subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// `ZmqQueue`: PUSH/PULL, one reader per message.
    Queue,
    /// `ZmqFanout`: PUB/SUB, a subscription is a prefix.
    Fanout,
    /// `ZmqRpc` responder: ROUTER; its publisher sends only to the identities requests carry.
    Responder,
}

/// The side of the endpoint this process takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// This process listens.
    Bound,
    /// This process connects to a peer that listens (and, on the one-way patterns, only sends).
    Dialing,
}

/// What a handler returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ack,
    Drop,
    Retry,
    RetryAfter(Duration),
}

/// A destination a registration names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A bare name, which leaves through the subscription's own endpoint.
    OwnEndpoint(String),
    /// `name@endpoint` of another endpoint (a queue the service binds for itself, say).
    Elsewhere(String),
}

/// How the handler is defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Definition {
    /// `#[subscriber("name")]` or `.name(..)`: the broker's own subscription by name.
    ByName,
    /// The crate's typed builder (`#[subscriber(QueueSubscription::<Dialing>)]`), which starts
    /// wanting a retry destination on the sides whose copies go to a named place.
    Typed,
}

/// Where the registration is mounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mount {
    /// `b.include(..)` in a broker scope: commits when the statement ends.
    Scope,
    /// `Router::new().include(..)...build()`: the chain can refuse at compile time.
    RouterChain,
}

/// What the mount site says about where copies go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetryDestination {
    /// Nothing.
    Unnamed,
    /// The crate's own step, `.out_retry("name@endpoint")`.
    OutRetry(Place),
    /// The framework's `.out_retry(Publish).to("name")`.
    FrameworkTo(Place),
    /// The framework's `.out_retry(Publish)` with no `.to(..)`.
    FrameworkWithoutTo,
}

/// One registration: a handler mounted on a subscription, with what it declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    pub pattern: Pattern,
    pub side: Side,
    /// The subscription's name (the fan-out's prefix).
    pub subscription: String,
    pub definition: Definition,
    pub mount: Mount,
    pub max_attempts: Option<u32>,
    pub dead_letter: Option<Place>,
    pub retry_to: RetryDestination,
}

impl Registration {
    /// A by-name queue registration in a broker scope that declares nothing.
    pub fn queue(side: Side, subscription: &str) -> Self {
        Self {
            pattern: Pattern::Queue,
            side,
            subscription: subscription.to_owned(),
            definition: Definition::ByName,
            mount: Mount::Scope,
            max_attempts: None,
            dead_letter: None,
            retry_to: RetryDestination::Unnamed,
        }
    }

    pub fn max_attempts(mut self, cap: u32) -> Self {
        self.max_attempts = Some(cap);
        self
    }

    pub fn dead_letter(mut self, place: Place) -> Self {
        self.dead_letter = Some(place);
        self
    }

    pub fn retry_to(mut self, retry_to: RetryDestination) -> Self {
        self.retry_to = retry_to;
        self
    }

    pub fn definition(mut self, definition: Definition) -> Self {
        self.definition = definition;
        self
    }

    pub fn mount(mut self, mount: Mount) -> Self {
        self.mount = mount;
        self
    }

    /// Whether this subscription has no address for its copies, so the mount site must name
    /// one: it dials a peer that only sends, or it is a responder (section 1, second table).
    pub fn copies_need_a_named_place(&self) -> bool {
        self.side == Side::Dialing || self.pattern == Pattern::Responder
    }
}

/// What becomes of one delivery (or of the registration, before any delivery).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// `ack()`: answered `Unsupported`, nothing to settle, the message is done.
    Done,
    /// `drop()`, or a plain `retry()` under no declaration: the message is gone.
    Gone,
    /// A copy to the subscription's own listener, carrying `retry_count`, after `delay`.
    CopyToOwnListener { retry_count: u32, delay: Duration },
    /// A copy to the place the mount site named, carrying `retry_count`, after `delay`.
    CopyToNamedPlace {
        place: Place,
        retry_count: u32,
        delay: Duration,
    },
    /// The delivery republished to the dead-letter destination at once, carrying `retry_count`.
    DeadLetter { place: Place, retry_count: u32 },
    /// A copy or dead letter the publisher refuses because it would land on this process's own
    /// listener under another name; the delivery is dropped with a warning.
    RefusedLoopBack { place: Place },
    /// A copy or dead letter to a bare name where the subscription's own socket cannot take one
    /// (a dialing subscription's peer only sends; a responder's socket answers only requesters):
    /// it has no way out, and the delivery is dropped.
    NoWayOut { place: Place },
    /// At the cap with no dead letter: dropped with a warning.
    DroppedAtCap,
    /// The registration is refused when the service starts, naming the subscription.
    RefusedAtStartup,
    /// The registration does not compile.
    DoesNotCompile,
}

impl Output {
    /// Whether this output publishes a message (and so counts in the broker's `sent()`).
    pub fn publishes(&self) -> bool {
        matches!(
            self,
            Self::CopyToOwnListener { .. }
                | Self::CopyToNamedPlace { .. }
                | Self::DeadLetter { .. }
        )
    }
}

/// Where a copy of this registration goes, or why the registration never runs.
fn copy_target(reg: &Registration) -> Result<Option<Place>, Output> {
    let named = reg.copies_need_a_named_place();
    match (&reg.retry_to, reg.definition, named) {
        // The crate's step exists only on the builders that want it: a bound builder has none,
        // and a by-name definition is not the crate's builder.
        (RetryDestination::OutRetry(_), _, false) => Err(Output::DoesNotCompile),
        (RetryDestination::OutRetry(_), Definition::ByName, true) => Err(Output::DoesNotCompile),
        (RetryDestination::OutRetry(place), Definition::Typed, true) => Ok(Some(place.clone())),
        // The typed builder that still wants a destination is not a subscription yet.
        (_, Definition::Typed, true) => Err(Output::DoesNotCompile),
        (RetryDestination::FrameworkTo(place), _, _) => Ok(Some(place.clone())),
        (RetryDestination::Unnamed | RetryDestination::FrameworkWithoutTo, _, false) => Ok(None),
        // DESIGN.md: "a router chain without it does not compile". (The crate meets this for the
        // typed builder and for `.out_retry(Publish)` without `.to(..)`; a by-name registration
        // that names nothing at all still compiles in a router chain and is refused at startup.)
        (RetryDestination::Unnamed | RetryDestination::FrameworkWithoutTo, _, true) => {
            Err(match reg.mount {
                Mount::RouterChain => Output::DoesNotCompile,
                Mount::Scope => Output::RefusedAtStartup,
            })
        }
    }
}

/// Whether the registration runs at all; `None` when it does.
pub fn registration_verdict(reg: &Registration) -> Option<Output> {
    copy_target(reg).err()
}

/// What a publish is: a retry copy, or the dead letter of a delivery at its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leaving {
    Copy,
    DeadLetter,
}

/// Whether a message named `name` sent through the own endpoint may land on this subscription.
///
/// A copy may: under the subscription's own name (a fan-out: its prefix) it is the next attempt.
/// A dead letter may only on a fan-out, under its prefix (section 1: "on a bound fan-out, a
/// dead-letter name under the subscription's prefix arrives back at it"); on a queue "a dead
/// letter would come back to that subscription: the publisher refuses it", whatever its name.
fn admitted_by_own_listener(reg: &Registration, name: &str, leaving: Leaving) -> bool {
    match (reg.pattern, leaving) {
        (Pattern::Fanout, _) => name.starts_with(&reg.subscription),
        (Pattern::Queue | Pattern::Responder, Leaving::Copy) => name == reg.subscription,
        (Pattern::Queue | Pattern::Responder, Leaving::DeadLetter) => false,
    }
}

/// A publish to `place`. Another endpoint takes it. A bare name leaves through the own endpoint:
/// on a bound queue or fan-out it lands on the own listener, which refuses what it may not take;
/// a dialing subscription or a responder has no socket that could take it at all.
fn publish_to(reg: &Registration, place: &Place, leaving: Leaving, output: Output) -> Output {
    let Place::OwnEndpoint(name) = place else {
        return output;
    };
    if reg.copies_need_a_named_place() {
        Output::NoWayOut {
            place: place.clone(),
        }
    } else if admitted_by_own_listener(reg, name, leaving) {
        output
    } else {
        Output::RefusedLoopBack {
            place: place.clone(),
        }
    }
}

/// What becomes of one delivery of `reg` carrying `retry_count` (the header) whose handler
/// returned `outcome`.
pub fn settle(reg: &Registration, retry_count: Option<u32>, outcome: Outcome) -> Output {
    let target = match copy_target(reg) {
        Ok(target) => target,
        Err(verdict) => return verdict,
    };
    let attempt = retry_count.unwrap_or(0) + 1;
    let delay = match outcome {
        Outcome::Ack => return Output::Done,
        Outcome::Drop => return Output::Gone,
        Outcome::Retry if reg.max_attempts.is_none() && reg.dead_letter.is_none() => {
            return Output::Gone;
        }
        Outcome::Retry => Duration::ZERO,
        Outcome::RetryAfter(delay) => delay,
    };
    let dead_letter = |place: &Place| {
        publish_to(
            reg,
            place,
            Leaving::DeadLetter,
            Output::DeadLetter {
                place: place.clone(),
                retry_count: attempt,
            },
        )
    };
    match (reg.max_attempts, &reg.dead_letter) {
        (Some(cap), Some(place)) if attempt >= cap => dead_letter(place),
        (Some(cap), None) if attempt >= cap => Output::DroppedAtCap,
        (None, Some(place)) => dead_letter(place),
        _ => match target {
            None => Output::CopyToOwnListener {
                retry_count: attempt,
                delay,
            },
            Some(place) => publish_to(
                reg,
                &place,
                Leaving::Copy,
                Output::CopyToNamedPlace {
                    place: place.clone(),
                    retry_count: attempt,
                    delay,
                },
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    //! The seeds' rows, one test each: the model is checked against the tables before anything
    //! is checked against the model.

    use super::*;

    const MS: Duration = Duration::from_millis(10);

    fn bound() -> Registration {
        Registration::queue(Side::Bound, "payments")
    }

    fn elsewhere() -> Place {
        Place::Elsewhere("payments.dead@tcp://127.0.0.1:6000".into())
    }

    fn every_declaration() -> Vec<Registration> {
        vec![
            bound(),
            bound().max_attempts(1),
            bound().max_attempts(3),
            bound().dead_letter(elsewhere()),
            bound().max_attempts(3).dead_letter(elsewhere()),
        ]
    }

    #[test]
    fn an_ack_is_done_whatever_the_registration_declares() {
        for reg in every_declaration() {
            for header in [None, Some(1), Some(7)] {
                assert_eq!(settle(&reg, header, Outcome::Ack), Output::Done, "{reg:?}");
            }
        }
    }

    #[test]
    fn a_drop_is_gone_and_never_dead_lettered() {
        for reg in every_declaration() {
            for header in [None, Some(2), Some(9)] {
                assert_eq!(settle(&reg, header, Outcome::Drop), Output::Gone, "{reg:?}");
            }
        }
    }

    #[test]
    fn a_plain_retry_without_cap_or_dead_letter_is_gone() {
        assert_eq!(settle(&bound(), None, Outcome::Retry), Output::Gone);
        assert_eq!(settle(&bound(), Some(4), Outcome::Retry), Output::Gone);
    }

    #[test]
    fn a_plain_retry_under_a_cap_is_an_immediate_copy_counting_one_more() {
        assert_eq!(
            settle(&bound().max_attempts(3), None, Outcome::Retry),
            Output::CopyToOwnListener {
                retry_count: 1,
                delay: Duration::ZERO
            }
        );
        assert_eq!(
            settle(&bound().max_attempts(3), Some(1), Outcome::Retry),
            Output::CopyToOwnListener {
                retry_count: 2,
                delay: Duration::ZERO
            }
        );
    }

    #[test]
    fn a_retry_after_is_a_copy_after_the_delay_even_without_a_cap() {
        assert_eq!(
            settle(&bound(), None, Outcome::RetryAfter(MS)),
            Output::CopyToOwnListener {
                retry_count: 1,
                delay: MS
            }
        );
        assert_eq!(
            settle(&bound(), Some(5), Outcome::RetryAfter(MS)),
            Output::CopyToOwnListener {
                retry_count: 6,
                delay: MS
            }
        );
    }

    #[test]
    fn a_dead_letter_without_a_cap_takes_every_retry_at_once() {
        let reg = bound().dead_letter(elsewhere());
        for outcome in [Outcome::Retry, Outcome::RetryAfter(MS)] {
            assert_eq!(
                settle(&reg, Some(2), outcome),
                Output::DeadLetter {
                    place: elsewhere(),
                    retry_count: 3
                }
            );
        }
    }

    #[test]
    fn at_the_cap_a_retry_goes_to_the_dead_letter_carrying_one_more() {
        let reg = bound().max_attempts(3).dead_letter(elsewhere());
        assert!(matches!(
            settle(&reg, Some(1), Outcome::Retry),
            Output::CopyToOwnListener { retry_count: 2, .. }
        ));
        for outcome in [Outcome::Retry, Outcome::RetryAfter(MS)] {
            assert_eq!(
                settle(&reg, Some(2), outcome),
                Output::DeadLetter {
                    place: elsewhere(),
                    retry_count: 3
                }
            );
        }
    }

    #[test]
    fn at_the_cap_without_a_dead_letter_the_delivery_is_dropped() {
        let reg = bound().max_attempts(2);
        assert!(matches!(
            settle(&reg, None, Outcome::RetryAfter(MS)),
            Output::CopyToOwnListener { .. }
        ));
        assert_eq!(settle(&reg, Some(1), Outcome::Retry), Output::DroppedAtCap);
        assert_eq!(
            settle(&bound().max_attempts(1), None, Outcome::RetryAfter(MS)),
            Output::DroppedAtCap
        );
    }

    #[test]
    fn a_bound_queue_dead_letter_into_its_own_endpoint_is_refused_whatever_its_name() {
        for name in ["payments.dead", "payments"] {
            let own = Place::OwnEndpoint(name.into());
            let reg = bound().max_attempts(1).dead_letter(own.clone());
            assert_eq!(
                settle(&reg, None, Outcome::Retry),
                Output::RefusedLoopBack { place: own }
            );
        }
    }

    #[test]
    fn a_bare_dead_letter_name_has_no_way_out_of_a_dialing_subscription_or_a_responder() {
        let place = Place::OwnEndpoint("payments.dead".into());
        let named = RetryDestination::FrameworkTo(elsewhere());
        let dialing = Registration::queue(Side::Dialing, "payments")
            .retry_to(named.clone())
            .dead_letter(place.clone());
        let mut responder = Registration::queue(Side::Bound, "payments")
            .retry_to(named)
            .dead_letter(place.clone());
        responder.pattern = Pattern::Responder;
        for reg in [dialing, responder] {
            assert_eq!(
                settle(&reg, None, Outcome::Retry),
                Output::NoWayOut {
                    place: place.clone()
                }
            );
        }
    }

    #[test]
    fn a_bound_fanout_dead_letter_under_its_prefix_arrives_back() {
        let mut reg = bound().max_attempts(1);
        reg.pattern = Pattern::Fanout;
        let under = Place::OwnEndpoint("payments.dead".into());
        let outside = Place::OwnEndpoint("invoices.dead".into());
        assert_eq!(
            settle(
                &reg.clone().dead_letter(under.clone()),
                None,
                Outcome::Retry
            ),
            Output::DeadLetter {
                place: under,
                retry_count: 1
            }
        );
        assert_eq!(
            settle(&reg.dead_letter(outside.clone()), None, Outcome::Retry),
            Output::RefusedLoopBack { place: outside }
        );
    }

    #[test]
    fn a_dialing_subscription_copies_go_to_the_place_its_mount_site_names() {
        let place = Place::Elsewhere("payments.retry@tcp://127.0.0.1:5556".into());
        for retry_to in [
            RetryDestination::OutRetry(place.clone()),
            RetryDestination::FrameworkTo(place.clone()),
        ] {
            let definition = match retry_to {
                RetryDestination::OutRetry(_) => Definition::Typed,
                _ => Definition::ByName,
            };
            let reg = Registration::queue(Side::Dialing, "payments")
                .definition(definition)
                .retry_to(retry_to);
            assert_eq!(
                settle(&reg, None, Outcome::RetryAfter(MS)),
                Output::CopyToNamedPlace {
                    place: place.clone(),
                    retry_count: 1,
                    delay: MS
                }
            );
        }
    }

    #[test]
    fn a_responder_on_either_side_needs_a_named_place() {
        for side in [Side::Bound, Side::Dialing] {
            let mut reg = Registration::queue(side, "quotes");
            reg.pattern = Pattern::Responder;
            assert_eq!(registration_verdict(&reg), Some(Output::RefusedAtStartup));
            assert_eq!(
                registration_verdict(&reg.mount(Mount::RouterChain)),
                Some(Output::DoesNotCompile)
            );
        }
    }

    #[test]
    fn a_dialing_registration_naming_no_place_is_refused_at_startup_or_does_not_compile() {
        let by_name = Registration::queue(Side::Dialing, "payments");
        assert_eq!(
            settle(&by_name, None, Outcome::Ack),
            Output::RefusedAtStartup
        );
        assert_eq!(
            settle(
                &by_name
                    .clone()
                    .retry_to(RetryDestination::FrameworkWithoutTo),
                None,
                Outcome::Ack
            ),
            Output::RefusedAtStartup
        );
        assert_eq!(
            settle(
                &by_name
                    .clone()
                    .retry_to(RetryDestination::FrameworkWithoutTo)
                    .mount(Mount::RouterChain),
                None,
                Outcome::Ack
            ),
            Output::DoesNotCompile
        );
        for mount in [Mount::Scope, Mount::RouterChain] {
            let typed = by_name.clone().definition(Definition::Typed).mount(mount);
            assert_eq!(settle(&typed, None, Outcome::Ack), Output::DoesNotCompile);
        }
    }

    #[test]
    fn a_bound_builder_has_no_out_retry_step() {
        let reg = bound().retry_to(RetryDestination::OutRetry(elsewhere()));
        assert_eq!(registration_verdict(&reg), Some(Output::DoesNotCompile));
        // The framework's own form overrides the own listener and compiles.
        let reg = bound().retry_to(RetryDestination::FrameworkTo(elsewhere()));
        assert_eq!(registration_verdict(&reg), None);
    }
}
