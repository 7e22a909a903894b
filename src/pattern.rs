//! What each pattern is, as plain data: the sockets at each end, how its listener admits names,
//! whether it answers requests, and the dead-letter rules a registration meets at startup.
//!
//! The rest of the crate reads these facts instead of matching on the pattern, so a rule
//! lives here once.

use ruststream::{DeclareRetryError, RetryDeclaration};

use crate::{
    error::ZmqError,
    routing::{Admission, DeadLetterFate, Destination, LocalHost, dead_letter_fate, reaches},
};

/// Where a broker listens, as a registration's dead letters are checked against it.
pub(crate) struct Listening<'a> {
    /// The endpoint as configured.
    pub(crate) address: &'a str,
    pub(crate) binds: bool,
    pub(crate) host: &'a LocalHost,
}

/// The socket types this transport uses, one per pattern end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Role {
    /// A queue subscription.
    Pull,
    /// A queue publisher.
    Push,
    /// A fan-out subscription.
    Sub,
    /// A fan-out publisher.
    Pub,
    /// A responder: reads requests, answers at the identity they carry.
    Router,
    /// A requester: sends requests, reads answers.
    Dealer,
}

impl Role {
    /// The name libzmq gives the socket type, for logs and errors.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::Pull => "PULL",
            Self::Push => "PUSH",
            Self::Sub => "SUB",
            Self::Pub => "PUB",
            Self::Router => "ROUTER",
            Self::Dealer => "DEALER",
        }
    }
}

/// The facts of one pattern that the connection, the intake and the in-process mode act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatternFacts {
    /// The socket a subscription reads with.
    pub(crate) reads_with: Role,
    /// The socket a publish to the broker's own endpoint leaves through.
    pub(crate) writes_with: Role,
    /// The socket of a peer that sends to a subscription of this pattern.
    pub(crate) peer_sends_with: Role,
    /// How a subscription's listener picks its messages.
    pub(crate) admission: Admission,
    /// A responder: one per broker, bound or dialing, answering at each request's identity.
    pub(crate) answers_requests: bool,
    /// A lone frame is the payload (a queue peer that only does `send_json`); elsewhere it is
    /// refused, since a fan-out filters on the name and a request needs one.
    pub(crate) lone_frame_is_payload: bool,
    /// What a peer sent before the subscription opened waits for it (PUSH, DEALER keep it; PUB
    /// drops it).
    pub(crate) peer_keeps_backlog: bool,
    /// Why one broker of this pattern carries one subscription where it holds the socket.
    pub(crate) one_subscription: &'static str,
}

impl PatternFacts {
    /// PUSH / PULL.
    pub(crate) const QUEUE: Self = Self {
        reads_with: Role::Pull,
        writes_with: Role::Push,
        peer_sends_with: Role::Push,
        admission: Admission::Exact,
        answers_requests: false,
        lone_frame_is_payload: true,
        peer_keeps_backlog: true,
        one_subscription: "a PULL takes every message, so two subscriptions could not tell theirs apart",
    };

    /// PUB / SUB.
    pub(crate) const FANOUT: Self = Self {
        reads_with: Role::Sub,
        writes_with: Role::Pub,
        peer_sends_with: Role::Pub,
        admission: Admission::Prefix,
        answers_requests: false,
        lone_frame_is_payload: false,
        peer_keeps_backlog: false,
        one_subscription: "one SUB listens on a bound endpoint, and the broker's copies are addressed to it",
    };

    /// ROUTER responder, DEALER requester; copies leave through a PUSH.
    pub(crate) const RPC: Self = Self {
        reads_with: Role::Router,
        writes_with: Role::Push,
        peer_sends_with: Role::Dealer,
        admission: Admission::Exact,
        answers_requests: true,
        lone_frame_is_payload: false,
        peer_keeps_backlog: true,
        one_subscription: "answers leave through the responder's own ROUTER, so a broker carries one responder",
    };

    /// Whether a subscription takes the endpoint for itself: a bound one listens there, and a
    /// responder answers through its own socket on either side.
    pub(crate) const fn holds_the_endpoint(self, binds: bool) -> bool {
        binds || self.answers_requests
    }

    /// A fan-out's SUB filters on a name prefix; the other patterns' sockets take everything.
    pub(crate) const fn filters_by_prefix(self) -> bool {
        matches!(self.admission, Admission::Prefix)
    }

    /// The topics a subscription's socket filters on: a fan-out's own prefix (a bound one's
    /// probe begins with it too); the other patterns take everything.
    pub(crate) fn topics(self, subscription: &str) -> Vec<String> {
        if self.filters_by_prefix() {
            vec![subscription.to_owned()]
        } else {
            Vec::new()
        }
    }

    /// Says at startup what will become of a registration's dead letters where the declaration
    /// alone shows they will not reach another endpoint, and refuses the one case the publisher
    /// could not refuse later: a bound queue's dead letter under its own name, which its
    /// listener would take as one more retry copy.
    pub(crate) fn check_dead_letter(
        self,
        subscription: &str,
        declaration: &RetryDeclaration,
        listening: &Listening<'_>,
    ) -> Result<(), DeclareRetryError> {
        let Some(dead_letter) = declaration.dead_letter() else {
            return Ok(());
        };
        let binds = listening.binds;
        // An endpoint that reaches the own listener under any form (`0.0.0.0` and `127.0.0.1`, a
        // host name) is no other place: the dead letter fares as its bare name would.
        let into_own_listener = Destination::parse(dead_letter)
            .ok()
            .filter(|destination| {
                binds
                    && destination.endpoint.is_some_and(|endpoint| {
                        reaches(listening.address, endpoint, listening.host)
                    })
            })
            .map(|destination| destination.name);
        let fate = dead_letter_fate(
            self.admission,
            binds,
            self.answers_requests,
            subscription,
            into_own_listener.unwrap_or(dead_letter),
        );
        if into_own_listener.is_some() && fate != DeadLetterFate::ArrivesBack {
            return Err(DeclareRetryError::Broker(Box::new(
                ZmqError::DeadLetterIntoOwnListener {
                    subscription: subscription.to_owned(),
                    dead_letter: dead_letter.to_owned(),
                    listener: listening.address.to_owned(),
                },
            )));
        }
        let a_copy_by_name = self.admission == Admission::Exact && !self.answers_requests;
        if a_copy_by_name && binds && dead_letter == subscription {
            return Err(DeclareRetryError::Broker(Box::new(
                ZmqError::DeadLetterIsTheSubscription {
                    subscription: subscription.to_owned(),
                },
            )));
        }
        say_fate(fate, subscription, dead_letter);
        Ok(())
    }
}

/// Says at startup what becomes of a registration's dead letters, where that is not another
/// endpoint.
fn say_fate(fate: DeadLetterFate, subscription: &str, dead_letter: &str) {
    match fate {
        DeadLetterFate::LeavesElsewhere => {}
        DeadLetterFate::ArrivesBack => tracing::warn!(
            subscription,
            dead_letter,
            "the dead-letter name is under this fan-out subscription's own prefix, so dead \
             letters arrive back at it; name another endpoint (`{dead_letter}@tcp://host:port`) \
             to park them elsewhere"
        ),
        DeadLetterFate::RefusedAsLoop => tracing::warn!(
            subscription,
            dead_letter,
            "the dead letter would come back to this subscription's own listener, so the \
             publisher will refuse each one and the delivery is dropped; name another endpoint \
             (`{dead_letter}@tcp://host:port`)"
        ),
        DeadLetterFate::NoWayOut => tracing::warn!(
            subscription,
            dead_letter,
            "the dead-letter destination names no endpoint, and this subscription's own socket \
             cannot take it; name one (`{dead_letter}@tcp://host:port`)"
        ),
    }
}
