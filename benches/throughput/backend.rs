//! The backends a run can pick: [`Stack`] ties each of the crate's backends to the raw sockets
//! of its own client, [`Which`] names one at run time, and `on_backend!` turns a [`Which`] into
//! a type, so that a scenario is written once, generic over the backend.

use ruststream_zmq::{Backend, FanoutKind, ZmqBroker, prelude::*};

use crate::raw_side::{RawAsker, RawHops, RawPublisher, RawPusher, RawReader, raw_hops};

/// A socket backend of the crate, with the raw sockets of its own client that are its baseline.
/// A scenario is written once, generic over it: the crate's side runs on `ZmqBroker<_, _, B>`,
/// the raw side on `B::Pusher` and its siblings (`benches/raw/zeromq.rs`,
/// `benches/raw/libzmq.rs`).
pub trait Stack: Backend + Sized {
    /// The backend's name, as its feature and `--backend` spell it.
    const NAME: &'static str;
    /// What its raw side is.
    const CLIENT: &'static str;
    /// What its raw side's `--raw-hop router` and `--raw-hop dealer` are.
    const HOP_ROUTER: &'static str;
    const HOP_DEALER: &'static str;
    type Pusher: RawPusher;
    type Reader: RawReader;
    type Publisher: RawPublisher;
    type Asker: RawAsker;

    /// A fan-out broker whose queue for each subscriber holds `queue` messages, where the
    /// backend has that setting.
    fn fanout_broker<S: Side>(
        endpoint: ZmqEndpoint<S>,
        queue: usize,
    ) -> ZmqBroker<FanoutKind, S, Self>;
}

#[cfg(feature = "zeromq")]
impl Stack for ruststream_zmq::zeromq::Zeromq {
    const NAME: &'static str = "zeromq";
    const CLIENT: &'static str = crate::raw_zeromq::CLIENT;
    const HOP_ROUTER: &'static str = crate::raw_zeromq::HOP_ROUTER;
    const HOP_DEALER: &'static str = crate::raw_zeromq::HOP_DEALER;
    type Pusher = crate::raw_zeromq::Pusher;
    type Reader = crate::raw_zeromq::Reader;
    type Publisher = crate::raw_zeromq::Publisher;
    type Asker = crate::raw_zeromq::Asker;

    /// The `zeromq` client's PUB queues 100,000 messages for each subscriber, and has no
    /// setting for it.
    fn fanout_broker<S: Side>(
        endpoint: ZmqEndpoint<S>,
        _queue: usize,
    ) -> ruststream_zmq::zeromq::ZmqFanout<S> {
        ruststream_zmq::zeromq::ZmqFanout::new(endpoint)
    }
}

#[cfg(feature = "libzmq")]
impl Stack for ruststream_zmq::libzmq::Libzmq {
    const NAME: &'static str = "libzmq";
    const CLIENT: &'static str = crate::raw_libzmq::CLIENT;
    const HOP_ROUTER: &'static str = crate::raw_libzmq::HOP_ROUTER;
    const HOP_DEALER: &'static str = crate::raw_libzmq::HOP_DEALER;
    type Pusher = crate::raw_libzmq::Pusher;
    type Reader = crate::raw_libzmq::Reader;
    type Publisher = crate::raw_libzmq::Publisher;
    type Asker = crate::raw_libzmq::Asker;

    /// libzmq's `peer_queue`, a setting of libzmq brokers alone.
    fn fanout_broker<S: Side>(
        endpoint: ZmqEndpoint<S>,
        queue: usize,
    ) -> ruststream_zmq::libzmq::ZmqFanout<S> {
        ruststream_zmq::libzmq::ZmqFanout::new(endpoint).peer_queue(queue)
    }
}

/// A backend this build has, as `--backend` names it: what picks a [`Stack`] at run time.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Which {
    #[cfg(feature = "zeromq")]
    Zeromq,
    #[cfg(feature = "libzmq")]
    Libzmq,
}

/// Every backend this build has, in the order they run and their tables print.
pub const COMPILED: &[Which] = &[
    #[cfg(feature = "zeromq")]
    Which::Zeromq,
    #[cfg(feature = "libzmq")]
    Which::Libzmq,
];

/// `$body` with `$b` naming the [`Stack`] that `$which` picks.
macro_rules! on_backend {
    ($which:expr, $b:ident => $body:expr) => {
        match $which {
            #[cfg(feature = "zeromq")]
            $crate::backend::Which::Zeromq => {
                type $b = ruststream_zmq::zeromq::Zeromq;
                $body
            }
            #[cfg(feature = "libzmq")]
            $crate::backend::Which::Libzmq => {
                type $b = ruststream_zmq::libzmq::Libzmq;
                $body
            }
        }
    };
}

pub(crate) use on_backend;

impl Which {
    pub fn name(self) -> &'static str {
        on_backend!(self, B => B::NAME)
    }

    /// The backend `--backend` names; every compiled one for `both`.
    pub fn parse(name: &str) -> Vec<Self> {
        if name == "both" {
            assert!(
                COMPILED.len() > 1,
                "--backend both: this build has `{}` alone; build with `--features libzmq`",
                COMPILED[0].name()
            );
            return COMPILED.to_vec();
        }
        assert!(
            ["zeromq", "libzmq"].contains(&name),
            "--backend zeromq|libzmq|both"
        );
        let which = COMPILED.iter().copied().find(|which| which.name() == name);
        vec![which.unwrap_or_else(|| {
            let with = if name == "zeromq" {
                "the default features"
            } else {
                "`--features libzmq`"
            };
            panic!("--backend {name}: this build does not have it; build with {with}")
        })]
    }

    /// What its raw side is, with the hand-offs it was given.
    pub fn baseline(self) -> String {
        on_backend!(self, B => baseline::<B>())
    }
}

/// What backend `B`'s raw side is, with the hand-offs it was given.
pub fn baseline<B: Stack>() -> String {
    let RawHops { router, dealer } = raw_hops();
    let hops: Vec<&str> = [(router, B::HOP_ROUTER), (dealer, B::HOP_DEALER)]
        .into_iter()
        .filter_map(|(on, what)| on.then_some(what))
        .collect();
    if hops.is_empty() {
        B::CLIENT.to_owned()
    } else {
        format!("{}, with {}", B::CLIENT, hops.join(" and "))
    }
}
