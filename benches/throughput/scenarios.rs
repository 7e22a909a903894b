//! The scenario table: every row's name, what it measures, its sides and its message count at
//! `--scale 1`. What each side runs is the driver's (`driver::run_side`).

/// One row of the table.
pub struct Scenario {
    pub name: &'static str,
    pub what: &'static str,
    /// The label of the measured side, and the baseline.
    pub sides: (&'static str, Baseline),
    /// How many messages at `--scale 1`.
    pub messages: u64,
}

pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "sender",
        what: "sender ceiling: raw PUSH into a raw PULL that only counts",
        sides: ("raw", Baseline::Alone),
        messages: 200_000,
    },
    Scenario {
        name: "queue",
        what: "queue, {n} messages, handler reads the header, decodes, acks; raw PUSH feeds",
        sides: ("crate", Baseline::Each("raw")),
        messages: 200_000,
    },
    Scenario {
        name: "framework",
        what: "queue, {n} messages, the crate (raw PUSH feeds) vs the framework's in-process broker",
        sides: ("crate", Baseline::Shared("memory broker")),
        messages: 200_000,
    },
    Scenario {
        name: "queue-publisher",
        what: "queue, {n} messages, fed by the crate's publisher (vs the raw PUSH)",
        sides: ("crate publisher", Baseline::Each("raw PUSH")),
        messages: 200_000,
    },
    Scenario {
        name: "rr1",
        what: "request-reply, {n} requests, one in flight",
        sides: ("crate", Baseline::Each("raw")),
        messages: 20_000,
    },
    Scenario {
        name: "rr64",
        what: "request-reply, {n} requests, 64 in flight on one requester",
        sides: ("crate", Baseline::Each("raw")),
        messages: 200_000,
    },
    Scenario {
        name: "rr64-framework",
        what: "request-reply, {n} requests, 64 in flight, the crate vs the framework's in-process broker",
        sides: ("crate", Baseline::Shared("memory broker")),
        messages: 200_000,
    },
    Scenario {
        name: "fanout",
        what: "fan-out, {n} messages from one publisher to 4 subscribers",
        sides: ("crate", Baseline::Each("raw")),
        messages: 50_000,
    },
    Scenario {
        name: "queue16k",
        what: "queue, {n} messages of 16 KiB, handler decodes, acks",
        sides: ("crate", Baseline::Each("raw")),
        messages: 20_000,
    },
    Scenario {
        name: "retry",
        what: "retry burst: {n} `retry_after(500 ms)` copies",
        sides: ("crate", Baseline::Alone),
        messages: 100_000,
    },
    Scenario {
        name: "retry-framework",
        what: "retry burst: {n} `retry_after(500 ms)` copies, the crate vs the framework's in-process broker (it delays each redelivery itself)",
        sides: ("crate", Baseline::Shared("memory broker")),
        messages: 100_000,
    },
    Scenario {
        name: "responder-rss",
        what: "responder RSS over {n} requests, 64 in flight",
        sides: ("crate", Baseline::Alone),
        messages: 1_000_000,
    },
    Scenario {
        name: "flood",
        what: "RSS over a flood of {n} queue messages",
        sides: ("crate", Baseline::Alone),
        messages: 1_000_000,
    },
    Scenario {
        name: "warn",
        what: "queue, {n} messages, a WARN fmt subscriber (vs none)",
        sides: ("WARN", Baseline::Each("off")),
        messages: 200_000,
    },
    Scenario {
        name: "warn-filtered",
        what: "queue, {n} messages, WARN with the README's filter (vs none)",
        sides: ("filtered", Baseline::Each("off")),
        messages: 200_000,
    },
    Scenario {
        name: "codec",
        what: "wire: encode and decode of a 3-header message, {n} rounds",
        sides: ("crate", Baseline::Alone),
        messages: 200_000,
    },
];

/// What a scenario's measured side is set against.
#[derive(Clone, Copy)]
pub enum Baseline {
    /// Nothing: the measured side alone.
    Alone,
    /// Its label; run on each backend (raw sockets of its client, or the crate on it otherwise
    /// set up).
    Each(&'static str),
    /// Its label; the same whatever the backend (the framework's in-process broker), so run
    /// once a repetition and set against each backend's measured side.
    Shared(&'static str),
}

impl Baseline {
    pub fn label(self) -> Option<&'static str> {
        match self {
            Self::Alone => None,
            Self::Each(label) | Self::Shared(label) => Some(label),
        }
    }
}
