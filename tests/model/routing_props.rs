//! Properties of the pure routing decisions (`ruststream_zmq::routing`): where a publish leaves,
//! and what is refused because it would land on the wrong subscription.

use proptest::prelude::*;
use ruststream_zmq::{
    ZmqError,
    routing::{
        Admission, DeadLetterFate, Destination, Listener, OwnEndpoint, Target, dead_letter_fate,
        route,
    },
};

use crate::model::{self, Output, Pattern, Place, Registration, RetryDestination, Side};

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

/// Plain values for an `OwnEndpoint` and a `Destination`, which borrow them.
#[derive(Debug, Clone)]
struct Case {
    address: String,
    binds: bool,
    listener: Option<(String, String)>,
    admission: Admission,
    name: String,
    endpoint: Option<String>,
}

impl Case {
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
            admission: self.admission,
            reader: None,
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
}

fn admission() -> impl Strategy<Value = Admission> {
    prop_oneof![Just(Admission::Exact), Just(Admission::Prefix)]
}

fn case() -> impl Strategy<Value = Case> {
    (
        address(),
        any::<bool>(),
        proptest::option::of((subscription(), address())),
        admission(),
        destination_name(),
        proptest::option::of(prop_oneof![address(), any::<String>()]),
    )
        .prop_map(
            |(address, binds, listener, admission, name, endpoint)| Case {
                address,
                binds,
                // Only a bound endpoint has a listener in this process.
                listener: listener.filter(|_| binds),
                admission,
                name,
                endpoint,
            },
        )
}

/// A bound queue with its one subscription listening, and a destination aimed at that listener:
/// by a bare name, by the listener's resolved address, or by the configured address.
fn bound_queue_aimed_at_itself() -> impl Strategy<Value = Case> {
    (subscription(), destination_name(), 0..3usize).prop_map(|(subscription, name, aim)| {
        let configured = "tcp://0.0.0.0:0".to_owned();
        let resolved = "tcp://0.0.0.0:5555".to_owned();
        let endpoint = match aim {
            0 => None,
            1 => Some(resolved.clone()),
            _ => Some(configured.clone()),
        };
        Case {
            address: configured,
            binds: true,
            listener: Some((subscription, resolved)),
            admission: Admission::Exact,
            name,
            endpoint,
        }
    })
}

/// A registration at its cap with a dead letter declared, on any pattern and side, and the
/// dead-letter destination as its registration spells it.
fn registration_with_a_dead_letter() -> impl Strategy<Value = (Registration, String)> {
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
            let (written, place) = match endpoint {
                Some(endpoint) => {
                    let written = format!("{name}@{endpoint}");
                    (written.clone(), Place::Elsewhere(written))
                }
                None => (name.clone(), Place::OwnEndpoint(name)),
            };
            let mut reg = Registration::queue(side, &subscription)
                .max_attempts(1)
                .dead_letter(place)
                // Where the copies go does not matter here; naming a place lets every side run.
                .retry_to(RetryDestination::FrameworkTo(Place::Elsewhere(
                    "payments.retry@tcp://127.0.0.1:5556".to_owned(),
                )));
            reg.pattern = pattern;
            (reg, written)
        })
}

proptest! {
    #[test]
    fn the_dead_letter_fate_the_broker_announces_is_the_models(
        (reg, written) in registration_with_a_dead_letter(),
    ) {
        // The model's answer for a delivery at the cap: where its dead letter ends.
        let expected = match model::settle(&reg, None, model::Outcome::Retry) {
            Output::DeadLetter { place: Place::Elsewhere(_), .. } => DeadLetterFate::LeavesElsewhere,
            Output::DeadLetter { place: Place::OwnEndpoint(_), .. } => DeadLetterFate::ArrivesBack,
            Output::RefusedLoopBack { .. } => DeadLetterFate::RefusedAsLoop,
            Output::NoWayOut { .. } => DeadLetterFate::NoWayOut,
            other => panic!("a delivery at the cap with a dead letter became {other:?}"),
        };
        let admission = match reg.pattern {
            Pattern::Fanout => Admission::Prefix,
            Pattern::Queue | Pattern::Responder => Admission::Exact,
        };
        let fate = dead_letter_fate(
            admission,
            reg.side == Side::Bound,
            reg.pattern == Pattern::Responder,
            &reg.subscription,
            &written,
        );
        prop_assert_eq!(fate, expected, "{:?}", reg);
    }

    #[test]
    fn route_never_panics(case in case()) {
        let _ = case.route();
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
    fn a_dialing_endpoint_with_no_named_destination_dials_its_own_address(mut case in case()) {
        case.binds = false;
        case.listener = None;
        case.endpoint = None;
        prop_assert_eq!(case.route().unwrap(), Target::Dial(case.address.clone()));
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
    fn a_bound_queue_never_accepts_its_own_dead_letter(case in bound_queue_aimed_at_itself()) {
        let (subscription, resolved) = case.listener.clone().unwrap();
        let routed = case.route();
        if case.name == subscription {
            // Its own name: a copy back to its own listener.
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
        case.admission = Admission::Prefix;
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
    fn only_a_publish_onto_the_own_listener_is_ever_refused(case in case()) {
        if let Err(err) = case.route() {
            prop_assert!(matches!(err, ZmqError::WouldLoopBack { .. }), "{err}");
            let (subscription, at) = case.listener.clone().unwrap();
            prop_assert!(case.binds);
            prop_assert!(!case.admission.admits(&subscription, &case.name));
            prop_assert!(
                case.endpoint.is_none()
                    || case.endpoint.as_deref() == Some(at.as_str())
                    || case.endpoint.as_deref() == Some(case.address.as_str())
            );
        }
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
