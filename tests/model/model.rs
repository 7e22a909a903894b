//! A model of settlement and copy routing, written down as plain rules without reading the
//! crate's code.
//!
//! One function, [`settle`], answers what becomes of one delivery: which registration it arrived
//! on, which attempt it is (the `x-ruststream-retry-count` header it carries) and what the handler
//! returned. [`route_of`] and [`responder_route_of`] answer where one publish leaves. Everything
//! the other tests check against comes from here.
//!
//! The transport's rules the model uses:
//! - a bound queue or fan-out addresses its own copies: they go back to its own listener;
//! - a dialing subscription reads from a peer that only sends, and a responder's socket answers
//!   only the requesters it heard from: neither can address a copy, so the mount site must name a
//!   place for them (`name@endpoint`), and a bare name has no way out;
//! - a publish that lands on a listener of this process must be that listener's own (a queue:
//!   its name; a fan-out: a name under its prefix), or the publisher refuses it as a loop;
//! - a dead letter into a bound queue's own endpoint would come back to that subscription: the
//!   publisher refuses it, whatever its name; on a bound fan-out, a dead-letter name under the
//!   subscription's prefix arrives back at it, and any other is refused.
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
    /// one: it dials a peer that only sends, or it is a responder.
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
        // A by-name registration that names no place compiles wherever it is mounted, a router
        // chain included, and the service refuses it when it starts (see
        // `a_by_name_registration_in_a_router_chain_naming_no_destination_compiles_and_is_refused_at_startup`
        // in tests/conformance/test_app.rs).
        (RetryDestination::Unnamed, Definition::ByName, true) => Err(Output::RefusedAtStartup),
        // The framework's `.out_retry(Publish)` without `.to(..)` is refused at compile time in a
        // router chain (ui-tests/framework_out_retry_without_to_on_a_dialing_queue.rs) and when
        // the service starts in a broker scope.
        (RetryDestination::FrameworkWithoutTo, Definition::ByName, true) => Err(match reg.mount {
            Mount::RouterChain => Output::DoesNotCompile,
            Mount::Scope => Output::RefusedAtStartup,
        }),
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

/// Whether the listener of `subscription`, of `pattern`, takes a message named `name` as one of
/// its own: a queue's (PULL) reads everything, so only its own name belongs there; a fan-out's
/// (SUB) reads the names under its prefix.
fn listener_takes(pattern: Pattern, subscription: &str, name: &str) -> bool {
    match pattern {
        Pattern::Fanout => name.starts_with(subscription),
        Pattern::Queue | Pattern::Responder => name == subscription,
    }
}

/// Whether a message named `name` sent through the own endpoint may land on this subscription.
///
/// A copy may when the listener takes it as its own: it is the next attempt. A dead letter may
/// only on a fan-out, under its prefix: it arrives back at the subscription. On a queue a dead
/// letter would come back to the subscription it left: the publisher refuses it, whatever its
/// name.
fn admitted_by_own_listener(reg: &Registration, name: &str, leaving: Leaving) -> bool {
    match (reg.pattern, leaving) {
        (Pattern::Queue | Pattern::Responder, Leaving::DeadLetter) => false,
        _ => listener_takes(reg.pattern, &reg.subscription, name),
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

/// A queue's or fan-out's own endpoint, as a publish through it sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// [`Pattern::Queue`] or [`Pattern::Fanout`]; a responder's publishes follow
    /// [`responder_route_of`].
    pub pattern: Pattern,
    pub side: Side,
    /// The address as configured.
    pub address: String,
    /// On a bound endpoint: the subscription of this process listening there, and the address it
    /// listens on (its port resolved). A dialing endpoint has none.
    pub listener: Option<(String, String)>,
    /// On a dialing endpoint: the subscription of this process that reads from the peer there.
    /// A bound endpoint's peers dial in, so it means nothing there.
    pub reader: Option<String>,
}

/// Where one publish leaves, or why it is refused.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Route {
    /// Through a socket of the broker's pattern dialing this address: the own listener, or the
    /// own endpoint of a dialing broker.
    Dial(String),
    /// Through a socket of the broker's pattern listening on this address, for peers that dial in.
    Bind(String),
    /// Through a PUSH dialing a queue at this address: the publish named the endpoint.
    QueueAt(String),
    /// Refused: it would land on the listener of `subscription` at `listener` under a name that
    /// listener does not take as its own.
    LoopBack {
        name: String,
        subscription: String,
        listener: String,
    },
    /// Refused at once: a bare name toward the peer at `address`, which `reader` reads from and
    /// which only sends.
    PeerOnlySends {
        name: String,
        reader: String,
        address: String,
    },
}

/// Where a publish named `name` leaves `endpoint`, through the endpoint `named` after `@` if the
/// destination names one.
///
/// - It lands on this process's listener when the endpoint is bound with one and the destination
///   names no endpoint, or names the configured address or the listener's own: the listener must
///   take the name as its own, or the publish is refused as a loop.
/// - Otherwise a named endpoint is a queue there.
/// - A bare name leaves through the own endpoint: bound, by listening there; dialing, by dialing
///   the peer, unless a subscription of this process reads from that peer, which then only sends.
pub fn route_of(endpoint: &Endpoint, name: &str, named: Option<&str>) -> Route {
    assert_ne!(
        endpoint.pattern,
        Pattern::Responder,
        "a responder routes by `responder_route_of`"
    );
    let listener = match endpoint.side {
        Side::Bound => endpoint.listener.as_ref(),
        Side::Dialing => None,
    };
    if let Some((subscription, at)) = listener {
        let lands = named.is_none_or(|named| {
            [at, &endpoint.address]
                .iter()
                .any(|address| named == *address || reaches(address, named))
        });
        if lands {
            return if listener_takes(endpoint.pattern, subscription, name) {
                Route::Dial(at.clone())
            } else {
                Route::LoopBack {
                    name: name.to_owned(),
                    subscription: subscription.clone(),
                    listener: at.clone(),
                }
            };
        }
    }
    match (named, endpoint.side, &endpoint.reader) {
        (Some(named), _, _) => Route::QueueAt(named.to_owned()),
        (None, Side::Bound, _) => Route::Bind(endpoint.address.clone()),
        (None, Side::Dialing, Some(reader)) => Route::PeerOnlySends {
            name: name.to_owned(),
            reader: reader.clone(),
            address: endpoint.address.clone(),
        },
        (None, Side::Dialing, None) => Route::Dial(endpoint.address.clone()),
    }
}

/// The host part of a `tcp://` address, as the loop-back rule reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum HostPart {
    /// `*`, `0.0.0.0`, `::`: every address of the host.
    Any,
    Ip(std::net::IpAddr),
    Localhost,
    /// Any other name: not this host (the model's host has no names of its own).
    Elsewhere,
}

fn host_part(address: &str) -> Option<(HostPart, u16)> {
    let (host, port) = address.strip_prefix("tcp://")?.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let part = if host == "*" {
        HostPart::Any
    } else if host.eq_ignore_ascii_case("localhost") {
        HostPart::Localhost
    } else {
        match host.parse::<std::net::IpAddr>() {
            Ok(ip) if ip.is_unspecified() => HostPart::Any,
            Ok(std::net::IpAddr::V6(v6)) => HostPart::Ip(
                v6.to_ipv4_mapped()
                    .map_or(std::net::IpAddr::V6(v6), std::net::IpAddr::V4),
            ),
            Ok(ip) => HostPart::Ip(ip),
            Err(_) => HostPart::Elsewhere,
        }
    };
    Some((part, port))
}

/// Whether a peer dialing `dialed` reaches a socket of this host listening at `listening`: the
/// same `ipc://` path, or the same port (not 0) where a wildcard listener takes any loopback
/// form, `localhost` is 127.0.0.1 and ::1, and dialing the wildcard reaches a loopback listener.
pub fn reaches(listening: &str, dialed: &str) -> bool {
    if listening.starts_with("ipc://") || dialed.starts_with("ipc://") {
        return listening == dialed;
    }
    let (Some((at, port)), Some((to, to_port))) = (host_part(listening), host_part(dialed)) else {
        return false;
    };
    if port == 0 || port != to_port {
        return false;
    }
    let loopback = |ip: std::net::IpAddr| ip.is_loopback();
    let localhost = |ip: std::net::IpAddr| {
        ip == std::net::IpAddr::from([127, 0, 0, 1]) || ip == std::net::Ipv6Addr::LOCALHOST
    };
    match (at, to) {
        (HostPart::Any, HostPart::Any | HostPart::Localhost) => true,
        (HostPart::Any, HostPart::Ip(ip)) => loopback(ip),
        (HostPart::Ip(ip), HostPart::Ip(other)) => ip == other,
        (HostPart::Ip(ip), HostPart::Localhost) => localhost(ip),
        (HostPart::Ip(ip), HostPart::Any) => loopback(ip),
        (HostPart::Localhost, HostPart::Ip(ip)) => localhost(ip),
        (HostPart::Localhost, HostPart::Localhost | HostPart::Any) => true,
        _ => false,
    }
}

/// A destination a responder's publisher is given, as its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponderDestination<'a> {
    /// `zmq-reply:<identity>`: the identity, as written after the prefix.
    Reply(&'a str),
    /// `name`, or `name@endpoint`.
    Named {
        name: &'a str,
        endpoint: Option<&'a str>,
    },
}

/// Where a responder's publish goes, or why it cannot.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum ResponderRoute {
    /// An answer to the requester with this identity.
    Reply(Vec<u8>, bool),
    /// A copy or dead letter named `name`, through a socket dialing `endpoint`.
    Dial { name: String, endpoint: String },
    /// Refused: the reply address names no identity (it must be 1 to 255 bytes, each written as
    /// two hex digits).
    BadReplyAddress,
    /// Refused: a bare name, which the responder's socket cannot send to on either side (it
    /// answers only requesters).
    NoEndpoint,
}

/// Where a responder's publish to `destination` goes. Neither the side nor any subscription
/// changes it: the responder's socket only answers the identities requests carry.
pub fn responder_route_of(destination: ResponderDestination<'_>) -> ResponderRoute {
    match destination {
        ResponderDestination::Reply(written) => {
            // A REQ peer's address marks that its answer carries the empty delimiter back.
            let (delimited, hex) = match written.strip_prefix("req:") {
                Some(hex) => (true, hex),
                None => (false, written),
            };
            let digits: Option<Vec<u8>> = hex
                .chars()
                .map(|c| c.to_digit(16).and_then(|d| u8::try_from(d).ok()))
                .collect();
            match digits {
                Some(digits)
                    if !digits.is_empty() && digits.len() % 2 == 0 && digits.len() <= 510 =>
                {
                    ResponderRoute::Reply(
                        digits.chunks(2).map(|p| p[0] * 16 + p[1]).collect(),
                        delimited,
                    )
                }
                _ => ResponderRoute::BadReplyAddress,
            }
        }
        ResponderDestination::Named {
            name,
            endpoint: Some(endpoint),
        } => ResponderRoute::Dial {
            name: name.to_owned(),
            endpoint: endpoint.to_owned(),
        },
        ResponderDestination::Named { endpoint: None, .. } => ResponderRoute::NoEndpoint,
    }
}

/// What becomes of the dead letter of a `pattern` subscription on `side`, declared as `place`:
/// [`settle`] for a delivery at its cap, with the copies sent to a place the mount site names so
/// that every side runs.
pub fn dead_letter_end(pattern: Pattern, side: Side, subscription: &str, place: Place) -> Output {
    let mut reg = Registration::queue(side, subscription)
        .max_attempts(1)
        .dead_letter(place)
        .retry_to(RetryDestination::FrameworkTo(Place::Elsewhere(
            "payments.retry@tcp://127.0.0.1:5556".to_owned(),
        )));
    reg.pattern = pattern;
    settle(&reg, None, Outcome::Retry)
}

#[cfg(test)]
mod tests {
    //! The rules, one test each: the model is checked against them before anything
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
            // By name, in a router chain too: it compiles and is refused at startup.
            assert_eq!(
                registration_verdict(&reg.clone().mount(Mount::RouterChain)),
                Some(Output::RefusedAtStartup)
            );
            for mount in [Mount::Scope, Mount::RouterChain] {
                let typed = reg.clone().definition(Definition::Typed).mount(mount);
                assert_eq!(registration_verdict(&typed), Some(Output::DoesNotCompile));
            }
        }
    }

    #[test]
    fn a_dialing_registration_naming_no_place_is_refused_at_startup_unless_its_form_does_not_compile()
     {
        let by_name = Registration::queue(Side::Dialing, "payments");
        for mount in [Mount::Scope, Mount::RouterChain] {
            assert_eq!(
                settle(&by_name.clone().mount(mount), None, Outcome::Ack),
                Output::RefusedAtStartup,
                "{mount:?}"
            );
        }
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

    fn endpoint(side: Side, listener: Option<&str>, reader: Option<&str>) -> Endpoint {
        Endpoint {
            pattern: Pattern::Queue,
            side,
            address: "tcp://0.0.0.0:0".into(),
            listener: listener.map(|s| (s.to_owned(), "tcp://0.0.0.0:5555".to_owned())),
            reader: reader.map(str::to_owned),
        }
    }

    #[test]
    fn a_bare_name_toward_a_peer_this_process_reads_from_is_refused_and_a_named_endpoint_is_not() {
        let dialing = endpoint(Side::Dialing, None, Some("payments"));
        assert!(matches!(
            route_of(&dialing, "payments.dead", None),
            Route::PeerOnlySends { .. }
        ));
        assert_eq!(
            route_of(&dialing, "payments.dead", Some("tcp://127.0.0.1:6000")),
            Route::QueueAt("tcp://127.0.0.1:6000".into())
        );
        assert_eq!(
            route_of(&endpoint(Side::Dialing, None, None), "jobs", None),
            Route::Dial("tcp://0.0.0.0:0".into())
        );
    }

    #[test]
    fn a_publish_onto_the_own_listener_must_be_its_own() {
        let bound = endpoint(Side::Bound, Some("payments"), None);
        assert_eq!(
            route_of(&bound, "payments", None),
            Route::Dial("tcp://0.0.0.0:5555".into())
        );
        for named in [None, Some("tcp://0.0.0.0:5555"), Some("tcp://0.0.0.0:0")] {
            assert!(matches!(
                route_of(&bound, "payments.dead", named),
                Route::LoopBack { .. }
            ));
        }
        let mut fanout = bound.clone();
        fanout.pattern = Pattern::Fanout;
        assert_eq!(
            route_of(&fanout, "payments.dead", None),
            Route::Dial("tcp://0.0.0.0:5555".into())
        );
        assert_eq!(
            route_of(&endpoint(Side::Bound, None, None), "jobs", None),
            Route::Bind("tcp://0.0.0.0:0".into())
        );
    }

    #[test]
    fn a_responder_answers_identities_and_sends_elsewhere_only_to_named_endpoints() {
        assert_eq!(
            responder_route_of(ResponderDestination::Reply("0a0B")),
            ResponderRoute::Reply(vec![10, 11], false)
        );
        for bad in ["", "0", "zz", "+a", "\u{e9}0"] {
            assert_eq!(
                responder_route_of(ResponderDestination::Reply(bad)),
                ResponderRoute::BadReplyAddress,
                "{bad:?}"
            );
        }
        assert_eq!(
            responder_route_of(ResponderDestination::Named {
                name: "quotes",
                endpoint: None
            }),
            ResponderRoute::NoEndpoint
        );
    }
}
