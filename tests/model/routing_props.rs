//! The pure routing decisions (`ruststream_zmq::routing`) against the model: where a publish
//! leaves (`route`, `route_responder`), what is refused because it would land on the wrong
//! subscription or toward a peer that only sends, and what becomes of a dead letter
//! (`dead_letter_fate`).
//!
//! Every declaration combination is enumerated: pattern (queue, fan-out, responder), side (bound,
//! dialing), listener (none, or one of two subscriptions), reader (none, or one), and a set of
//! destination names and endpoints chosen to hit each rule's edge (the subscription's own name, a
//! name under its prefix, another name; no endpoint, the configured address, the listener's
//! address, another address). Random properties follow, for names and addresses outside that set.

use std::collections::BTreeSet;

use proptest::prelude::*;
use ruststream_zmq::{
    ZmqError,
    routing::{
        Admission, DeadLetterFate, Destination, Listener, LocalHost, OwnEndpoint, ResponderTarget,
        Target, dead_letter_fate, reaches, route, route_responder,
    },
};

use crate::model::{
    self, Endpoint, Output, Pattern, Place, ResponderDestination, ResponderRoute, Route, Side,
};

/// Addresses drawn from a small pool, so that a destination often names the broker's own
/// endpoint or its listener, plus random ones.
fn address() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("tcp://127.0.0.1:5555".to_owned()),
        Just("tcp://0.0.0.0:0".to_owned()),
        Just("ipc:///tmp/payments.sock".to_owned()),
        valid_endpoint(),
    ]
}

fn tcp_endpoint() -> impl Strategy<Value = String> {
    ("[a-z0-9][a-z0-9.-]{0,14}", any::<u16>())
        .prop_map(|(host, port)| format!("tcp://{host}:{port}"))
}

/// An `ipc://` path; it may hold `@`, but never `@tcp://` or `@ipc://` (see
/// `a_name_with_an_endpoint_round_trips_through_parse`).
fn ipc_endpoint() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9/._@-]{1,20}".prop_map(|path| format!("ipc://{path}"))
}

fn valid_endpoint() -> impl Strategy<Value = String> {
    prop_oneof![tcp_endpoint(), ipc_endpoint()]
}

/// A destination name: anything non-empty, `@` included, sometimes with an `@tcp://` address
/// inside it (which the last-`@` rule must leave in the name when an endpoint follows).
fn valid_name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-zA-Z0-9._@ -]{1,16}",
        1 => "[a-z]{1,6}".prop_map(|n| format!("{n}@tcp://10.0.0.1:7")),
        1 => "\\PC{1,10}".prop_filter("an address would split the name", |n| {
            !n.contains("@tcp://") && !n.contains("@ipc://")
        }),
    ]
}

/// A subscription name drawn from a small pool, so that a destination's name often equals it or
/// starts with it.
fn subscription() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("payments".to_owned()),
        Just("pay".to_owned()),
        "[a-z.]{1,10}"
    ]
}

fn destination_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("payments".to_owned()),
        Just("payments.dead".to_owned()),
        Just("pay".to_owned()),
        "[a-z.]{1,10}",
        any::<String>(),
    ]
}

/// A host with no names of its own.
static NO_NAMES: LocalHost = LocalHost {
    names: Vec::new(),
    addresses: Vec::new(),
};

/// Plain values for an `OwnEndpoint` and a `Destination`, which borrow them.
#[derive(Debug, Clone)]
struct Case {
    pattern: Pattern,
    address: String,
    binds: bool,
    listener: Option<(String, String)>,
    reader: Option<String>,
    name: String,
    endpoint: Option<String>,
}

impl Case {
    fn admission(&self) -> Admission {
        match self.pattern {
            Pattern::Fanout => Admission::Prefix,
            Pattern::Queue | Pattern::Responder => Admission::Exact,
        }
    }

    fn own(&self) -> OwnEndpoint<'_> {
        OwnEndpoint {
            address: &self.address,
            binds: self.binds,
            listener: self
                .listener
                .as_ref()
                .map(|(subscription, address)| Listener {
                    subscription,
                    address,
                }),
            admission: self.admission(),
            reader: self.reader.as_deref(),
            // The model knows no host names: only the loopback and wildcard forms are this host's.
            host: &NO_NAMES,
        }
    }

    fn destination(&self) -> Destination<'_> {
        Destination {
            name: &self.name,
            endpoint: self.endpoint.as_deref(),
        }
    }

    fn route(&self) -> Result<Target, ZmqError> {
        route(&self.own(), &self.destination())
    }

    /// What the crate decided, in the model's terms; `None` for an error the model has no word
    /// for.
    fn crate_route(&self) -> Option<Route> {
        Some(match self.route() {
            // The model tells the own listener from the own endpoint by address only, as the
            // crate's `Dial` does.
            Ok(Target::Dial(address)) => Route::Dial(address),
            Ok(Target::Bind(address)) => Route::Bind(address),
            Ok(Target::Queue(address)) => Route::QueueAt(address),
            Err(ZmqError::WouldLoopBack {
                destination,
                subscription,
                endpoint,
            }) => Route::LoopBack {
                name: destination,
                subscription,
                listener: endpoint,
            },
            Err(ZmqError::PeerOnlySends {
                destination,
                subscription,
                endpoint,
            }) => Route::PeerOnlySends {
                name: destination,
                reader: subscription,
                address: endpoint,
            },
            Err(_) => return None,
        })
    }

    fn model_route(&self) -> Route {
        let endpoint = Endpoint {
            pattern: self.pattern,
            side: if self.binds {
                Side::Bound
            } else {
                Side::Dialing
            },
            address: self.address.clone(),
            listener: self.listener.clone(),
            reader: self.reader.clone(),
        };
        model::route_of(&endpoint, &self.name, self.endpoint.as_deref())
    }
}

fn one_way_pattern() -> impl Strategy<Value = Pattern> {
    prop_oneof![Just(Pattern::Queue), Just(Pattern::Fanout)]
}

fn case() -> impl Strategy<Value = Case> {
    (
        one_way_pattern(),
        address(),
        any::<bool>(),
        proptest::option::of((subscription(), address())),
        proptest::option::of(subscription()),
        destination_name(),
        proptest::option::of(prop_oneof![address(), any::<String>()]),
    )
        .prop_map(
            |(pattern, address, binds, listener, reader, name, endpoint)| Case {
                pattern,
                address,
                binds,
                // Only a bound endpoint has a listener in this process.
                listener: listener.filter(|_| binds),
                reader,
                name,
                endpoint,
            },
        )
}

/// A bound queue with its one subscription listening, and a destination aimed at that listener:
/// by a bare name, by the listener's resolved address, or by the configured address.
fn bound_queue_aimed_at_itself() -> impl Strategy<Value = Case> {
    (
        subscription(),
        destination_name(),
        0..3usize,
        proptest::option::of(subscription()),
    )
        .prop_map(|(subscription, name, aim, reader)| {
            let configured = "tcp://0.0.0.0:0".to_owned();
            let resolved = "tcp://0.0.0.0:5555".to_owned();
            let endpoint = match aim {
                0 => None,
                1 => Some(resolved.clone()),
                _ => Some(configured.clone()),
            };
            Case {
                pattern: Pattern::Queue,
                address: configured,
                binds: true,
                listener: Some((subscription, resolved)),
                reader,
                name,
                endpoint,
            }
        })
}

// The enumerated declaration space.

const BOUND_AT: &str = "tcp://0.0.0.0:0";
const LISTENING_AT: &str = "tcp://0.0.0.0:5555";
const DIALING_TO: &str = "tcp://127.0.0.1:5555";
const ELSEWHERE: &str = "tcp://127.0.0.1:6000";
const ELSEWHERE_IPC: &str = "ipc:///tmp/payments.dead.sock";
const SUBSCRIPTIONS: [&str; 2] = ["payments", "pay"];
/// The subscription's own name, names under its prefix or the other's, and names outside both.
const NAMES: [&str; 6] = [
    "payments",
    "payments.dead",
    "pay",
    "invoices",
    "p",
    "payments@example",
];

/// Every endpoint of a queue or a fan-out: bound with no listener or either subscription
/// listening, or dialing; each with no reader and with one.
fn every_endpoint() -> Vec<Case> {
    let mut cases = Vec::new();
    for pattern in [Pattern::Queue, Pattern::Fanout] {
        for binds in [true, false] {
            let listeners: Vec<Option<(String, String)>> = if binds {
                std::iter::once(None)
                    .chain(
                        SUBSCRIPTIONS
                            .iter()
                            .map(|s| Some(((*s).to_owned(), LISTENING_AT.to_owned()))),
                    )
                    .collect()
            } else {
                vec![None]
            };
            for listener in listeners {
                for reader in [None, Some("payments".to_owned())] {
                    cases.push(Case {
                        pattern,
                        address: if binds { BOUND_AT } else { DIALING_TO }.to_owned(),
                        binds,
                        listener: listener.clone(),
                        reader,
                        name: String::new(),
                        endpoint: None,
                    });
                }
            }
        }
    }
    cases
}

/// Every endpoint with every destination: each name, bare or naming the configured address, the
/// listener's address, or another endpoint.
fn every_route_case() -> Vec<Case> {
    let mut cases = Vec::new();
    for own in every_endpoint() {
        let endpoints = [
            None,
            Some(own.address.clone()),
            Some(LISTENING_AT.to_owned()),
            Some(ELSEWHERE.to_owned()),
            Some(ELSEWHERE_IPC.to_owned()),
        ];
        for name in NAMES {
            for endpoint in endpoints.clone() {
                cases.push(Case {
                    name: name.to_owned(),
                    endpoint,
                    ..own.clone()
                });
            }
        }
    }
    cases
}

/// The kind of a route, to show the enumeration reaches every one.
fn kind(route: &Route, case: &Case) -> &'static str {
    match route {
        Route::Dial(at) if case.listener.as_ref().is_some_and(|(_, l)| l == at) => "own listener",
        Route::Dial(_) => "dial own endpoint",
        Route::Bind(_) => "bind",
        Route::QueueAt(_) => "queue elsewhere",
        Route::LoopBack { .. } => "loop back",
        Route::PeerOnlySends { .. } => "peer only sends",
    }
}

#[test]
fn route_decides_as_the_model_for_every_declaration_and_destination() {
    let cases = every_route_case();
    let mut reached = BTreeSet::new();
    let mut wrong = Vec::new();
    for case in &cases {
        let expected = case.model_route();
        reached.insert((
            case.pattern == Pattern::Fanout,
            case.binds,
            kind(&expected, case),
        ));
        let decided = case.crate_route();
        if decided.as_ref() != Some(&expected) {
            wrong.push(format!(
                "{case:?}: route {:?}, model {expected:?}",
                case.route()
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases disagree:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
    // Every rule is reached on both one-way patterns: bound (own listener, loop back, bind, a
    // queue elsewhere) and dialing (own endpoint, peer only sends, a queue elsewhere).
    for fanout in [false, true] {
        for (binds, kind) in [
            (true, "own listener"),
            (true, "loop back"),
            (true, "bind"),
            (true, "queue elsewhere"),
            (false, "dial own endpoint"),
            (false, "peer only sends"),
            (false, "queue elsewhere"),
        ] {
            assert!(
                reached.contains(&(fanout, binds, kind)),
                "no case reached {kind} (fan-out: {fanout}, bound: {binds})"
            );
        }
    }
}

/// The reply addresses and destinations a responder is given: identities well and badly
/// written, and names with and without an endpoint.
fn every_responder_destination() -> Vec<(String, ResponderDestination<'static>)> {
    const IDENTITIES: [&str; 16] = [
        "0a0b", "0A0B", "00", "ff00ff", "", "0", "abc", "zz", "0g", "\u{e9}0", " a", "+a",
        "req:0a0b", "req:", "req:zz", "REQ:0a0b",
    ];
    let mut destinations: Vec<(String, ResponderDestination<'static>)> = IDENTITIES
        .iter()
        .map(|hex| (format!("zmq-reply:{hex}"), ResponderDestination::Reply(hex)))
        .collect();
    // The longest identity, and one byte over.
    for hex in [&*"ab".repeat(255).leak(), &*"ab".repeat(256).leak()] {
        destinations.push((format!("zmq-reply:{hex}"), ResponderDestination::Reply(hex)));
    }
    for name in NAMES {
        for endpoint in [None, Some(ELSEWHERE), Some(ELSEWHERE_IPC)] {
            let written = match endpoint {
                Some(endpoint) => format!("{name}@{endpoint}"),
                None => name.to_owned(),
            };
            destinations.push((written, ResponderDestination::Named { name, endpoint }));
        }
    }
    destinations
}

#[test]
fn route_responder_decides_as_the_model_on_either_side_for_every_destination() {
    // `route_responder` takes no side and no reader: a responder's socket only answers the
    // identities requests carry, bound or dialing, so every side and reader meets the same
    // decision, and the model's takes none either.
    let mut reached = std::collections::HashSet::new();
    let mut wrong = Vec::new();
    for (written, destination) in every_responder_destination() {
        let expected = model::responder_route_of(destination);
        reached.insert(std::mem::discriminant(&expected));
        let decided = match route_responder(&written) {
            Ok(ResponderTarget::Reply(requester)) => Some(ResponderRoute::Reply(
                requester.identity.to_vec(),
                requester.delimited,
            )),
            Ok(ResponderTarget::Dial { name, endpoint }) => Some(ResponderRoute::Dial {
                name: name.to_owned(),
                endpoint: endpoint.to_owned(),
            }),
            Err(ZmqError::ReplyAddress { .. }) => Some(ResponderRoute::BadReplyAddress),
            Err(ZmqError::InvalidDestination { .. }) => Some(ResponderRoute::NoEndpoint),
            Err(_) => None,
        };
        if decided.as_ref() != Some(&expected) {
            wrong.push(format!(
                "{written:?}: route_responder {:?}, model {expected:?}",
                route_responder(&written)
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert_eq!(reached.len(), 4, "every kind of responder route is reached");
}

#[test]
fn a_reply_address_with_a_sign_is_not_hex() {
    assert_eq!(
        model::responder_route_of(ResponderDestination::Reply("+a")),
        ResponderRoute::BadReplyAddress
    );
    assert!(
        matches!(
            route_responder("zmq-reply:+a"),
            Err(ZmqError::ReplyAddress { .. })
        ),
        "{:?}",
        route_responder("zmq-reply:+a")
    );
}

/// The crate's announcement for a dead letter, as the model's settlement ends.
fn fate_of(output: &Output) -> DeadLetterFate {
    match output {
        Output::DeadLetter {
            place: Place::Elsewhere(_),
            ..
        } => DeadLetterFate::LeavesElsewhere,
        Output::DeadLetter {
            place: Place::OwnEndpoint(_),
            ..
        } => DeadLetterFate::ArrivesBack,
        Output::RefusedLoopBack { .. } => DeadLetterFate::RefusedAsLoop,
        Output::NoWayOut { .. } => DeadLetterFate::NoWayOut,
        other => panic!("a delivery at the cap with a dead letter became {other:?}"),
    }
}

fn crate_fate(pattern: Pattern, side: Side, subscription: &str, written: &str) -> DeadLetterFate {
    let admission = match pattern {
        Pattern::Fanout => Admission::Prefix,
        Pattern::Queue | Pattern::Responder => Admission::Exact,
    };
    dead_letter_fate(
        admission,
        side == Side::Bound,
        pattern == Pattern::Responder,
        subscription,
        written,
    )
}

/// A dead-letter destination as a registration spells it, and as the model reads it.
fn dead_letter(name: &str, endpoint: Option<&str>) -> (String, Place) {
    match endpoint {
        Some(endpoint) => {
            let written = format!("{name}@{endpoint}");
            (written.clone(), Place::Elsewhere(written))
        }
        None => (name.to_owned(), Place::OwnEndpoint(name.to_owned())),
    }
}

#[test]
fn the_dead_letter_fate_the_broker_announces_is_the_models_for_every_declaration() {
    let mut reached = BTreeSet::new();
    let mut wrong = Vec::new();
    let mut count = 0;
    for pattern in [Pattern::Queue, Pattern::Fanout, Pattern::Responder] {
        for side in [Side::Bound, Side::Dialing] {
            for subscription in SUBSCRIPTIONS {
                for name in NAMES {
                    for endpoint in [None, Some(ELSEWHERE), Some(ELSEWHERE_IPC)] {
                        count += 1;
                        let (written, place) = dead_letter(name, endpoint);
                        let expected =
                            fate_of(&model::dead_letter_end(pattern, side, subscription, place));
                        reached.insert((pattern == Pattern::Fanout, format!("{expected:?}")));
                        let fate = crate_fate(pattern, side, subscription, &written);
                        if fate != expected {
                            wrong.push(format!(
                                "{pattern:?} {side:?} `{subscription}` -> `{written}`: \
                                 dead_letter_fate {fate:?}, model {expected:?}"
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {count} cases disagree:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    for fate in ["LeavesElsewhere", "RefusedAsLoop", "NoWayOut"] {
        assert!(
            reached.contains(&(false, fate.to_owned())),
            "{fate} on a queue"
        );
    }
    assert!(reached.contains(&(true, "ArrivesBack".to_owned())));
    assert!(reached.contains(&(true, "RefusedAsLoop".to_owned())));
}

#[test]
fn a_bound_queue_never_takes_back_its_own_dead_letter_whatever_its_name() {
    // Not even under the subscription's own name: a dead letter that came back would be read as
    // the next attempt of the delivery it ended.
    for subscription in SUBSCRIPTIONS {
        for name in NAMES.iter().copied().chain([subscription]) {
            let (written, place) = dead_letter(name, None);
            assert_eq!(
                crate_fate(Pattern::Queue, Side::Bound, subscription, &written),
                DeadLetterFate::RefusedAsLoop,
                "`{subscription}` -> `{name}`"
            );
            assert_eq!(
                fate_of(&model::dead_letter_end(
                    Pattern::Queue,
                    Side::Bound,
                    subscription,
                    place
                )),
                DeadLetterFate::RefusedAsLoop
            );
        }
    }
}

/// A registration at its cap with a dead letter declared, on any pattern and side, with names
/// outside the enumerated set.
fn registration_with_a_dead_letter() -> impl Strategy<Value = (Pattern, Side, String, String, Place)>
{
    let pattern = prop_oneof![
        Just(Pattern::Queue),
        Just(Pattern::Fanout),
        Just(Pattern::Responder)
    ];
    let side = prop_oneof![Just(Side::Bound), Just(Side::Dialing)];
    let dead_name = prop_oneof![
        Just("payments.dead".to_owned()),
        Just("pay".to_owned()),
        Just("invoices".to_owned()),
        "[a-z.]{1,10}",
    ];
    (
        pattern,
        side,
        subscription(),
        dead_name,
        proptest::option::of(valid_endpoint()),
    )
        .prop_map(|(pattern, side, subscription, name, endpoint)| {
            let (written, place) = dead_letter(&name, endpoint.as_deref());
            (pattern, side, subscription, written, place)
        })
}

proptest! {
    #[test]
    fn the_dead_letter_fate_the_broker_announces_is_the_models_for_any_names(
        (pattern, side, subscription, written, place) in registration_with_a_dead_letter(),
    ) {
        let expected = fate_of(&model::dead_letter_end(pattern, side, &subscription, place));
        let fate = crate_fate(pattern, side, &subscription, &written);
        prop_assert_eq!(fate, expected, "{:?} {:?} `{}` -> `{}`", pattern, side, subscription, written);
    }

    #[test]
    fn route_decides_as_the_model_for_any_names_and_addresses(case in case()) {
        prop_assert_eq!(case.crate_route(), Some(case.model_route()), "{:?}", case);
    }

    #[test]
    fn parse_never_panics_and_accepts_only_a_name_with_a_usable_endpoint(text in any::<String>()) {
        if let Ok(destination) = Destination::parse(&text) {
            prop_assert!(!destination.name.is_empty());
            if let Some(endpoint) = destination.endpoint {
                prop_assert!(endpoint.starts_with("tcp://") || endpoint.starts_with("ipc://"));
                prop_assert_eq!(format!("{}@{}", destination.name, endpoint), text);
            } else {
                prop_assert_eq!(destination.name, text.as_str());
            }
        }
    }

    #[test]
    fn a_name_with_an_endpoint_round_trips_through_parse(
        name in valid_name(),
        endpoint in valid_endpoint(),
    ) {
        let text = format!("{name}@{endpoint}");
        let parsed = Destination::parse(&text);
        prop_assert!(parsed.is_ok(), "{text:?}: {parsed:?}");
        let parsed = parsed.unwrap();
        prop_assert_eq!(parsed.name, name.as_str());
        prop_assert_eq!(parsed.endpoint, Some(endpoint.as_str()));
    }

    #[test]
    fn a_name_without_an_endpoint_stays_whole(name in "[a-zA-Z0-9._@ -]{1,16}") {
        let parsed = Destination::parse(&name).unwrap();
        prop_assert_eq!(parsed, Destination { name: &name, endpoint: None });
    }

    #[test]
    fn an_empty_name_or_an_unusable_endpoint_is_refused(
        endpoint in valid_endpoint(),
        host in "[a-z]{1,8}",
    ) {
        let empty = format!("@{endpoint}");
        prop_assert!(
            matches!(Destination::parse(&empty), Err(ZmqError::InvalidDestination { .. })),
            "{}", empty
        );
        // `tcp://` with no port is no address the sockets accept.
        let portless = format!("payments@tcp://{host}");
        prop_assert!(
            matches!(Destination::parse(&portless), Err(ZmqError::InvalidDestination { .. })),
            "{}", portless
        );
    }

    #[test]
    fn a_dialing_endpoint_never_gets_a_bind_target(mut case in case()) {
        case.binds = false;
        case.listener = None;
        prop_assert!(!matches!(case.route(), Ok(Target::Bind(_))), "{case:?}");
    }

    #[test]
    fn a_dialing_endpoint_dials_its_own_address_for_a_bare_name_unless_it_reads_from_that_peer(
        mut case in case(),
    ) {
        case.binds = false;
        case.listener = None;
        case.endpoint = None;
        match &case.reader {
            None => prop_assert_eq!(case.route().unwrap(), Target::Dial(case.address.clone())),
            Some(reader) => match case.route() {
                Err(ZmqError::PeerOnlySends { destination, subscription, endpoint }) => {
                    prop_assert_eq!(destination, case.name.clone());
                    prop_assert_eq!(&subscription, reader);
                    prop_assert_eq!(endpoint, case.address.clone());
                }
                other => prop_assert!(false, "{case:?} -> {other:?}"),
            },
        }
    }

    #[test]
    fn a_named_destination_never_leaves_toward_the_peer_that_only_sends(
        mut case in case(),
        named in valid_endpoint(),
    ) {
        // A dialing subscription's copies name another endpoint: they leave for a queue there and
        // never for the peer the subscription reads from.
        prop_assume!(named != case.address);
        case.binds = false;
        case.listener = None;
        case.endpoint = Some(named.clone());
        prop_assert_eq!(case.route().unwrap(), Target::Queue(named));
    }

    #[test]
    fn a_publish_that_names_an_endpoint_goes_to_a_queue_there_or_the_own_listener(case in case()) {
        if let (Ok(target), Some(endpoint)) = (case.route(), case.endpoint.as_ref()) {
            let own_listener = case
                .listener
                .as_ref()
                .filter(|(_, at)| endpoint == at || *endpoint == case.address)
                .map(|(_, at)| Target::Dial(at.clone()));
            prop_assert!(
                target == Target::Queue(endpoint.clone()) || Some(&target) == own_listener.as_ref(),
                "{case:?} -> {target:?}"
            );
        }
    }

    #[test]
    fn a_bound_queue_listener_takes_back_its_own_name_and_refuses_every_other(
        case in bound_queue_aimed_at_itself(),
    ) {
        let (subscription, resolved) = case.listener.clone().unwrap();
        let routed = case.route();
        if case.name == subscription {
            // Its own name: a copy back to its own listener, the next attempt.
            prop_assert_eq!(routed.unwrap(), Target::Dial(resolved));
        } else {
            match routed {
                Err(ZmqError::WouldLoopBack { destination, subscription: at, endpoint }) => {
                    prop_assert_eq!(destination, case.name.clone());
                    prop_assert_eq!(at, subscription);
                    prop_assert_eq!(endpoint, resolved);
                }
                other => prop_assert!(false, "{case:?} -> {other:?}"),
            }
        }
    }

    #[test]
    fn a_bound_fanout_takes_back_exactly_the_names_under_its_prefix(
        mut case in bound_queue_aimed_at_itself(),
    ) {
        case.pattern = Pattern::Fanout;
        let (prefix, resolved) = case.listener.clone().unwrap();
        let routed = case.route();
        if case.name.starts_with(&prefix) {
            prop_assert_eq!(routed.unwrap(), Target::Dial(resolved));
        } else {
            prop_assert!(matches!(routed, Err(ZmqError::WouldLoopBack { .. })), "{case:?}");
        }
    }

    #[test]
    fn a_bound_endpoint_with_no_listener_binds_for_a_bare_name(mut case in case()) {
        case.binds = true;
        case.listener = None;
        case.endpoint = None;
        prop_assert_eq!(case.route().unwrap(), Target::Bind(case.address.clone()));
    }

    #[test]
    fn an_exact_listener_admits_its_own_name_only_and_a_prefix_one_admits_more(
        subscription in subscription(),
        name in destination_name(),
    ) {
        prop_assert_eq!(Admission::Exact.admits(&subscription, &name), name == subscription);
        prop_assert_eq!(
            Admission::Prefix.admits(&subscription, &name),
            name.starts_with(&subscription)
        );
        if Admission::Exact.admits(&subscription, &name) {
            prop_assert!(Admission::Prefix.admits(&subscription, &name));
        }
    }
}

/// Every form of a listening address against every form of a dialed one, on every port: the
/// crate's loop-back rule is the model's.
#[test]
fn whether_a_dialed_address_reaches_a_listener_is_the_models_for_every_form() {
    const HOSTS: [&str; 10] = [
        "0.0.0.0",
        "*",
        "[::]",
        "127.0.0.1",
        "127.0.0.2",
        "localhost",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "10.0.0.1",
        "payments.example",
    ];
    let addresses: Vec<String> = HOSTS
        .iter()
        .flat_map(|host| [0, 5555, 5556].map(|port| format!("tcp://{host}:{port}")))
        .chain([
            "ipc:///tmp/a.sock".to_owned(),
            "ipc:///tmp/b.sock".to_owned(),
        ])
        .collect();
    let mut reached = 0;
    for listening in &addresses {
        for dialed in &addresses {
            let expected = model::reaches(listening, dialed);
            assert_eq!(
                reaches(listening, dialed, &NO_NAMES),
                expected,
                "dialing {dialed} toward a listener at {listening}"
            );
            reached += usize::from(expected);
        }
    }
    // The wildcard and loopback forms of one port reach each other: far more than equal strings.
    assert!(reached > addresses.len(), "{reached} pairs reach");
}
