//! Where a publish goes, and what is refused: pure decisions over plain values.
//!
//! The rule for copies: a bound subscription's copies reach its own listener; a dialing
//! one (or a responder) must be told where they go. The types carry the first half (which
//! subscription declares which copies); this module decides, per publish, which socket a message
//! leaves through and refuses the one that would land on the wrong subscription.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub use crate::host::LocalHost;
use crate::{error::ZmqError, wire::Requester};

/// A destination as a publish names it: `name`, or `name@tcp://host:port` / `name@ipc://path`
/// to leave through a socket dialing that endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Destination<'a> {
    /// What frame 0 carries.
    pub name: &'a str,
    /// The endpoint named after `@`, if any.
    pub endpoint: Option<&'a str>,
}

impl<'a> Destination<'a> {
    /// Splits `name@endpoint` at the last `@` that a `tcp://` or `ipc://` address follows (so a
    /// name may hold one); a name with any other `@` stays whole. An `ipc://` path holding
    /// `@tcp://` or `@ipc://` cannot be named.
    ///
    /// # Errors
    ///
    /// [`ZmqError::InvalidDestination`] for an empty name, or an endpoint the sockets cannot use.
    pub fn parse(destination: &'a str) -> Result<Self, ZmqError> {
        let split = destination
            .rmatch_indices('@')
            .map(|(at, _)| at)
            .find(|&at| {
                let rest = &destination[at + 1..];
                rest.starts_with("tcp://") || rest.starts_with("ipc://")
            });
        let (name, endpoint) = match split {
            Some(at) => (&destination[..at], Some(&destination[at + 1..])),
            None => (destination, None),
        };
        let invalid = |why: String| ZmqError::InvalidDestination {
            destination: destination.to_owned(),
            why,
        };
        if name.is_empty() {
            return Err(invalid("the name before `@` is empty".to_owned()));
        }
        if let Some(endpoint) = endpoint {
            crate::endpoint::check_address(endpoint).map_err(|err| invalid(err.to_string()))?;
        }
        Ok(Self { name, endpoint })
    }
}

/// How a subscription's listener picks its messages: a queue takes every one, a fan-out those
/// under its prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// A PULL reads everything, so only a message under its own name belongs there.
    Exact,
    /// A SUB reads what starts with its prefix.
    Prefix,
}

impl Admission {
    /// Whether a message named `name` published to the listener of `subscription` reaches it
    /// as a message of its own.
    #[must_use]
    pub fn admits(self, subscription: &str, name: &str) -> bool {
        match self {
            Self::Exact => name == subscription,
            Self::Prefix => name.starts_with(subscription),
        }
    }
}

/// A subscription this process binds on the broker's endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listener<'a> {
    /// Its name (the fan-out's prefix).
    pub subscription: &'a str,
    /// The address it listens on, port resolved.
    pub address: &'a str,
}

/// What a broker knows about its own endpoint when a publish asks where to go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnEndpoint<'a> {
    /// The address as configured.
    pub address: &'a str,
    /// Whether this process binds it.
    pub binds: bool,
    /// The subscription listening on it in this process, if one does.
    pub listener: Option<Listener<'a>>,
    /// How that listener picks its messages.
    pub admission: Admission,
    /// On a dialing endpoint: a subscription of this process that reads from the peer there,
    /// which then only sends.
    pub reader: Option<&'a str>,
    /// This host, for telling whether a named endpoint is the own listener under another form.
    pub host: &'a LocalHost,
}

/// The socket a publish leaves through.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// A socket of the broker's pattern dialing this address: its own endpoint, or the listener
    /// of its own bound subscription.
    Dial(String),
    /// A socket of the broker's pattern listening on this address, for peers that dial in.
    Bind(String),
    /// A PUSH dialing a queue at this address: an `@endpoint` destination. Copies and dead
    /// letters are work to be done once, so a named place is a queue whatever the pattern.
    Queue(String),
}

impl Target {
    /// The address the socket listens on or dials.
    #[must_use]
    pub fn address(&self) -> &str {
        match self {
            Self::Dial(address) | Self::Bind(address) | Self::Queue(address) => address,
        }
    }
}

/// Decides the socket for a publish to `destination` from a broker whose endpoint is `own`.
///
/// # Errors
///
/// [`ZmqError::WouldLoopBack`] when the message would reach a subscription of this process that
/// it does not name: the dead letter of a bound queue aimed at its own endpoint is the case the
/// rule forbids.
pub fn route(own: &OwnEndpoint<'_>, destination: &Destination<'_>) -> Result<Target, ZmqError> {
    let lands_on_listener = own.listener.filter(|listener| match destination.endpoint {
        None => own.binds,
        Some(endpoint) => [listener.address, own.address]
            .iter()
            .any(|address| endpoint == *address || reaches(address, endpoint, own.host)),
    });
    if let Some(listener) = lands_on_listener {
        if !own
            .admission
            .admits(listener.subscription, destination.name)
        {
            return Err(ZmqError::WouldLoopBack {
                destination: destination.name.to_owned(),
                subscription: listener.subscription.to_owned(),
                endpoint: listener.address.to_owned(),
            });
        }
        return Ok(Target::Dial(listener.address.to_owned()));
    }
    if let (None, false, Some(subscription)) = (destination.endpoint, own.binds, own.reader) {
        return Err(ZmqError::PeerOnlySends {
            destination: destination.name.to_owned(),
            subscription: subscription.to_owned(),
            endpoint: own.address.to_owned(),
        });
    }
    Ok(match destination.endpoint {
        Some(endpoint) => Target::Queue(endpoint.to_owned()),
        None if own.binds => Target::Bind(own.address.to_owned()),
        None => Target::Dial(own.address.to_owned()),
    })
}

/// Whether a listener bound at `address` can be reached from other hosts: a `tcp://` address on
/// every interface, or on one that is not the loopback (`ipc://` and `inproc://` stay on this
/// host).
#[must_use]
pub fn beyond_loopback(address: &str) -> bool {
    match tcp_parts(address) {
        None => false,
        Some((HostForm::Wildcard, _)) => true,
        Some((HostForm::Ip(ip), _)) => !ip.is_loopback(),
        Some((HostForm::Name(name), _)) => !name.eq_ignore_ascii_case("localhost"),
    }
}

/// How a host part of a `tcp://` address names a machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HostForm<'a> {
    /// `*`, `0.0.0.0`, `::`: every address of this host.
    Wildcard,
    Ip(IpAddr),
    Name(&'a str),
}

/// Splits `tcp://host:port` into its host form and port; `None` for anything else.
fn tcp_parts(address: &str) -> Option<(HostForm<'_>, u16)> {
    let rest = address.strip_prefix("tcp://")?;
    let (host, port) = rest.rsplit_once(':')?;
    let port = port.parse().ok()?;
    let host = host
        .strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .unwrap_or(host);
    let form = match host.parse::<IpAddr>() {
        _ if host == "*" => HostForm::Wildcard,
        Ok(ip) if ip.is_unspecified() => HostForm::Wildcard,
        // `::ffff:127.0.0.1` is 127.0.0.1.
        Ok(IpAddr::V6(v6)) => HostForm::Ip(v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)),
        Ok(ip) => HostForm::Ip(ip),
        Err(_) => HostForm::Name(host),
    };
    Some((form, port))
}

/// The addresses a host form stands for on this host; empty for a name that is not this host's.
fn addresses_of(form: HostForm<'_>, host: &LocalHost) -> Vec<IpAddr> {
    match form {
        HostForm::Wildcard => Vec::new(),
        HostForm::Ip(ip) => vec![ip],
        HostForm::Name(name) if name.eq_ignore_ascii_case("localhost") => {
            vec![
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(Ipv6Addr::LOCALHOST),
            ]
        }
        HostForm::Name(name) if host.names.iter().any(|own| own.eq_ignore_ascii_case(name)) => {
            host.addresses.clone()
        }
        HostForm::Name(_) => Vec::new(),
    }
}

/// Whether an address belongs to this host: a loopback one, or one of its own.
fn is_local(ip: IpAddr, host: &LocalHost) -> bool {
    ip.is_loopback() || host.addresses.contains(&ip)
}

/// Whether a peer dialing `dialed` reaches the socket listening on `listening` in this
/// process: the same `ipc://` path, or the same port and a host part that leads to it (a
/// wildcard listener takes every local address; `localhost`, the host's own names and the
/// IPv4-mapped forms are resolved; dialing the wildcard reaches a loopback listener). Port 0 is
/// no listener yet, so it reaches nothing.
#[must_use]
pub fn reaches(listening: &str, dialed: &str, host: &LocalHost) -> bool {
    if listening.starts_with("ipc://") || dialed.starts_with("ipc://") {
        return listening == dialed;
    }
    let (Some((listening, port)), Some((dialed, dialed_port))) =
        (tcp_parts(listening), tcp_parts(dialed))
    else {
        return false;
    };
    if port == 0 || port != dialed_port {
        return false;
    }
    let dialed_ips = addresses_of(dialed, host);
    match listening {
        HostForm::Wildcard => {
            dialed == HostForm::Wildcard || dialed_ips.iter().any(|&ip| is_local(ip, host))
        }
        form => {
            let listening_ips = addresses_of(form, host);
            let dials_the_wildcard =
                dialed == HostForm::Wildcard && listening_ips.iter().any(|ip| ip.is_loopback());
            dials_the_wildcard || dialed_ips.iter().any(|ip| listening_ips.contains(ip))
        }
    }
}

/// Where a responder's publisher sends: to a requester, or to a named place on another endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponderTarget<'a> {
    /// An answer, to this requester (its identity, and whether a REQ delimiter is due).
    Reply(Requester),
    /// A copy or a dead letter, through a socket dialing this endpoint, named `name`.
    Dial {
        /// What frame 0 carries.
        name: &'a str,
        /// The endpoint.
        endpoint: &'a str,
    },
}

/// Decides where a responder's publish goes. Its own socket only reaches the identities requests
/// carry, so anything else must name an endpoint.
///
/// # Errors
///
/// [`ZmqError::ReplyAddress`] for a reply address that does not parse, and
/// [`ZmqError::InvalidDestination`] for a destination that names no endpoint.
pub fn route_responder(destination: &str) -> Result<ResponderTarget<'_>, ZmqError> {
    if destination.starts_with(crate::wire::REPLY_PREFIX) {
        return crate::wire::parse_requester(destination).map(ResponderTarget::Reply);
    }
    let parsed = Destination::parse(destination)?;
    match parsed.endpoint {
        Some(endpoint) => Ok(ResponderTarget::Dial {
            name: parsed.name,
            endpoint,
        }),
        None => Err(ZmqError::InvalidDestination {
            destination: destination.to_owned(),
            why: "a responder's socket sends only to the identities requests carry; name where \
                  this goes as `name@tcp://host:port`"
                .to_owned(),
        }),
    }
}

/// What becomes of a registration's dead letters, as far as the declaration alone tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadLetterFate {
    /// They leave for another endpoint.
    LeavesElsewhere,
    /// A bound fan-out's dead-letter name is under its own prefix: they arrive back at it.
    ArrivesBack,
    /// They would land on the subscription's own listener under another name: the publisher
    /// refuses each one and the delivery is dropped.
    RefusedAsLoop,
    /// They name no endpoint where the broker's own socket cannot take them (a dialing
    /// subscription's peer only sends; a responder answers only requesters).
    NoWayOut,
}

/// Decides [`DeadLetterFate`] for a subscription of `admission`'s pattern, bound or dialing.
/// `responder` marks a ROUTER subscription, whose socket reaches only requesters.
#[must_use]
pub fn dead_letter_fate(
    admission: Admission,
    binds: bool,
    responder: bool,
    subscription: &str,
    dead_letter: &str,
) -> DeadLetterFate {
    let Ok(destination) = Destination::parse(dead_letter) else {
        return DeadLetterFate::NoWayOut;
    };
    if destination.endpoint.is_some() {
        return DeadLetterFate::LeavesElsewhere;
    }
    if responder || !binds {
        return DeadLetterFate::NoWayOut;
    }
    match admission {
        Admission::Prefix if admission.admits(subscription, destination.name) => {
            DeadLetterFate::ArrivesBack
        }
        _ => DeadLetterFate::RefusedAsLoop,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host with no names of its own: only the loopback and wildcard forms reach it.
    static NO_NAMES: LocalHost = LocalHost {
        names: Vec::new(),
        addresses: Vec::new(),
    };

    #[test]
    fn a_listener_is_reached_through_every_form_of_its_address_and_port() {
        let host = LocalHost {
            names: vec!["pay-1".to_owned()],
            addresses: vec!["10.1.2.3".parse().unwrap()],
        };
        let reached = [
            ("tcp://0.0.0.0:5555", "tcp://127.0.0.1:5555"),
            ("tcp://0.0.0.0:5555", "tcp://localhost:5555"),
            ("tcp://0.0.0.0:5555", "tcp://PAY-1:5555"),
            ("tcp://0.0.0.0:5555", "tcp://10.1.2.3:5555"),
            ("tcp://*:5555", "tcp://[::1]:5555"),
            ("tcp://[::]:5555", "tcp://127.0.0.2:5555"),
            ("tcp://127.0.0.1:5555", "tcp://localhost:5555"),
            ("tcp://127.0.0.1:5555", "tcp://[::ffff:127.0.0.1]:5555"),
            ("tcp://127.0.0.1:5555", "tcp://0.0.0.0:5555"),
            ("tcp://10.1.2.3:5555", "tcp://pay-1:5555"),
            ("ipc:///tmp/a.sock", "ipc:///tmp/a.sock"),
        ];
        for (listening, dialed) in reached {
            assert!(
                reaches(listening, dialed, &host),
                "{dialed} reaches {listening}"
            );
        }
        let elsewhere = [
            ("tcp://0.0.0.0:5555", "tcp://127.0.0.1:5556"),
            ("tcp://0.0.0.0:5555", "tcp://10.9.9.9:5555"),
            ("tcp://0.0.0.0:5555", "tcp://payments.example:5555"),
            ("tcp://127.0.0.1:5555", "tcp://127.0.0.2:5555"),
            ("tcp://10.1.2.3:5555", "tcp://127.0.0.1:5555"),
            ("tcp://0.0.0.0:0", "tcp://127.0.0.1:0"),
            ("ipc:///tmp/a.sock", "ipc:///tmp/b.sock"),
            ("ipc:///tmp/a.sock", "tcp://127.0.0.1:5555"),
        ];
        for (listening, dialed) in elsewhere {
            assert!(
                !reaches(listening, dialed, &host),
                "{dialed} does not reach {listening}"
            );
        }
        assert!(
            !reaches("tcp://0.0.0.0:5555", "tcp://pay-1:5555", &NO_NAMES),
            "a name the host does not know as its own is another machine"
        );
    }

    fn bound_queue<'a>(listener: Option<Listener<'a>>) -> OwnEndpoint<'a> {
        OwnEndpoint {
            address: "tcp://0.0.0.0:0",
            binds: true,
            listener,
            admission: Admission::Exact,
            reader: None,
            host: &NO_NAMES,
        }
    }

    /// A dialing queue at `tcp://127.0.0.1:1`; `reader` names its subscription, if it has one.
    fn dialing_queue(reader: Option<&str>) -> OwnEndpoint<'_> {
        OwnEndpoint {
            address: "tcp://127.0.0.1:1",
            binds: false,
            listener: None,
            admission: Admission::Exact,
            reader,
            host: &NO_NAMES,
        }
    }

    const PAYMENTS: Listener<'static> = Listener {
        subscription: "payments",
        address: "tcp://0.0.0.0:5555",
    };

    #[test]
    fn only_a_listener_on_another_interface_than_the_loopback_is_beyond_it() {
        for exposed in [
            "tcp://0.0.0.0:5555",
            "tcp://*:5555",
            "tcp://[::]:5555",
            "tcp://10.0.0.7:5555",
            "tcp://payments.internal:5555",
        ] {
            assert!(beyond_loopback(exposed), "{exposed}");
        }
        for local in [
            "tcp://127.0.0.1:5555",
            "tcp://127.3.2.1:5555",
            "tcp://[::1]:5555",
            "tcp://localhost:5555",
            "ipc:///tmp/payments",
            "inproc://payments",
        ] {
            assert!(!beyond_loopback(local), "{local}");
        }
    }

    #[test]
    fn a_destination_splits_at_the_endpoint_it_names() {
        let d = Destination::parse("payments.retry@tcp://127.0.0.1:5556").unwrap();
        assert_eq!(
            (d.name, d.endpoint),
            ("payments.retry", Some("tcp://127.0.0.1:5556"))
        );
        let d = Destination::parse("user@example").unwrap();
        assert_eq!((d.name, d.endpoint), ("user@example", None));
        assert!(Destination::parse("@tcp://127.0.0.1:1").is_err());
        assert!(Destination::parse("x@tcp://nohost").is_err());
    }

    #[test]
    fn a_bound_queue_copy_goes_to_its_own_listener() {
        let own = bound_queue(Some(PAYMENTS));
        let target = route(&own, &Destination::parse("payments").unwrap()).unwrap();
        assert_eq!(target, Target::Dial("tcp://0.0.0.0:5555".into()));
    }

    #[test]
    fn a_bound_queue_refuses_a_dead_letter_into_its_own_endpoint() {
        let own = bound_queue(Some(PAYMENTS));
        for dest in [
            "payments.dead",
            "payments.dead@tcp://0.0.0.0:5555",
            "x@tcp://0.0.0.0:0",
        ] {
            let err = route(&own, &Destination::parse(dest).unwrap()).unwrap_err();
            assert!(matches!(err, ZmqError::WouldLoopBack { .. }), "{dest}");
        }
        let elsewhere = route(
            &own,
            &Destination::parse("payments.dead@tcp://127.0.0.1:6000").unwrap(),
        );
        assert_eq!(
            elsewhere.unwrap(),
            Target::Queue("tcp://127.0.0.1:6000".into())
        );
    }

    #[test]
    fn a_bound_endpoint_with_no_listener_binds_and_a_dialing_one_dials() {
        let own = bound_queue(None);
        assert_eq!(
            route(&own, &Destination::parse("jobs").unwrap()).unwrap(),
            Target::Bind("tcp://0.0.0.0:0".into())
        );
        let dialing = dialing_queue(None);
        assert_eq!(
            route(&dialing, &Destination::parse("jobs").unwrap()).unwrap(),
            Target::Dial("tcp://127.0.0.1:1".into())
        );
    }

    #[test]
    fn a_responder_answers_identities_and_sends_copies_only_to_named_endpoints() {
        assert_eq!(
            route_responder("zmq-reply:0a0b").unwrap(),
            ResponderTarget::Reply(Requester {
                identity: vec![10, 11].into(),
                delimited: false
            })
        );
        assert_eq!(
            route_responder("zmq-reply:req:0a0b").unwrap(),
            ResponderTarget::Reply(Requester {
                identity: vec![10, 11].into(),
                delimited: true
            })
        );
        assert_eq!(
            route_responder("quotes.retry@tcp://127.0.0.1:7").unwrap(),
            ResponderTarget::Dial {
                name: "quotes.retry",
                endpoint: "tcp://127.0.0.1:7"
            }
        );
        assert!(matches!(
            route_responder("quotes.retry"),
            Err(ZmqError::InvalidDestination { .. })
        ));
        assert!(matches!(
            route_responder("zmq-reply:xyz"),
            Err(ZmqError::ReplyAddress { .. })
        ));
    }

    #[test]
    fn a_bare_name_is_refused_at_once_toward_a_peer_that_only_sends() {
        let own = dialing_queue(Some("payments"));
        let err = route(&own, &Destination::parse("payments.dead").unwrap()).unwrap_err();
        assert!(matches!(err, ZmqError::PeerOnlySends { .. }), "{err}");
        let elsewhere = route(
            &own,
            &Destination::parse("payments.dead@tcp://127.0.0.1:2").unwrap(),
        );
        assert_eq!(
            elsewhere.unwrap(),
            Target::Queue("tcp://127.0.0.1:2".into())
        );
    }

    #[test]
    fn a_fanout_listener_admits_names_under_its_prefix() {
        assert!(Admission::Prefix.admits("orders", "orders.eu"));
        assert!(!Admission::Prefix.admits("orders", "invoices"));
        assert!(!Admission::Exact.admits("orders", "orders.eu"));
    }
}
