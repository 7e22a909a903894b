//! The backends a run can pick: [`Stack`] ties each of the crate's backends to the raw sockets
//! of its own client, [`Which`] names one at run time, and `on_backend!` turns a [`Which`] into
//! a type, so that a scenario is written once, generic over the backend.

use ruststream_zmq::{Backend, FanoutKind, ZmqBroker, prelude::*};

use crate::raw_side::{RawAsker, RawHops, RawPublisher, RawPusher, RawReader, raw_hops};

/// A socket backend of the crate, with the raw sockets of its own client that are its baseline.
/// A scenario is written once, generic over it: the crate's side runs on `ZmqBroker<_, _, B>`,
/// the raw side on `B::Pusher` and its siblings (`benches/raw/zeromq.rs`,
/// `benches/raw/libzmq.rs`, `benches/raw/omq.rs`).
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

/// The [`Stack`] of a backend whose brokers take the settings it shares with libzmq
/// (`peer_queue` among them): libzmq and omq, which differ here by their types alone.
#[cfg(any(feature = "libzmq", feature = "omq"))]
macro_rules! settable_stack {
    ($backend:ty, $name:literal, $raw:ident) => {
        impl Stack for $backend {
            const NAME: &'static str = $name;
            const CLIENT: &'static str = crate::$raw::CLIENT;
            const HOP_ROUTER: &'static str = crate::$raw::HOP_ROUTER;
            const HOP_DEALER: &'static str = crate::$raw::HOP_DEALER;
            type Pusher = crate::$raw::Pusher;
            type Reader = crate::$raw::Reader;
            type Publisher = crate::$raw::Publisher;
            type Asker = crate::$raw::Asker;

            /// The broker's `peer_queue`, a setting of the backends that share libzmq's.
            fn fanout_broker<S: Side>(
                endpoint: ZmqEndpoint<S>,
                queue: usize,
            ) -> ZmqBroker<FanoutKind, S, Self> {
                ZmqBroker::<FanoutKind, S, Self>::new(endpoint).peer_queue(queue)
            }
        }
    };
}

#[cfg(feature = "libzmq")]
settable_stack!(ruststream_zmq::libzmq::Libzmq, "libzmq", raw_libzmq);

#[cfg(feature = "omq")]
settable_stack!(ruststream_zmq::omq::Omq, "omq", raw_omq);

/// A backend this build has, as `--backend` names it: what picks a [`Stack`] at run time.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Which {
    #[cfg(feature = "zeromq")]
    Zeromq,
    #[cfg(feature = "libzmq")]
    Libzmq,
    #[cfg(feature = "omq")]
    Omq,
}

/// Every backend this build has, in the order they run and their tables print.
pub const COMPILED: &[Which] = &[
    #[cfg(feature = "zeromq")]
    Which::Zeromq,
    #[cfg(feature = "libzmq")]
    Which::Libzmq,
    #[cfg(feature = "omq")]
    Which::Omq,
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
            #[cfg(feature = "omq")]
            $crate::backend::Which::Omq => {
                type $b = ruststream_zmq::omq::Omq;
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

    /// The backends `--backend` names: one, or a comma-separated list (`libzmq,omq`); every
    /// compiled one for `all` (or `both`, its older spelling).
    pub fn parse(names: &str) -> Vec<Self> {
        if names == "all" || names == "both" {
            assert!(
                COMPILED.len() > 1,
                "--backend {names}: this build has `{}` alone; build with `--features libzmq,omq`",
                COMPILED[0].name()
            );
            return COMPILED.to_vec();
        }
        names
            .split(',')
            .map(|name| {
                assert!(
                    ["zeromq", "libzmq", "omq"].contains(&name),
                    "--backend zeromq|libzmq|omq|all, or a list: `libzmq,omq`"
                );
                let which = COMPILED.iter().copied().find(|which| which.name() == name);
                which.unwrap_or_else(|| {
                    let with = if name == "zeromq" {
                        "the default features".to_owned()
                    } else {
                        format!("`--features {name}`")
                    };
                    panic!("--backend {name}: this build does not have it; build with {with}")
                })
            })
            .collect()
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
