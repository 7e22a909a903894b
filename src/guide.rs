//! Guides: one page a topic, each opening with what it covers and an example that runs.
//!
//! | Guide | For |
//! |---|---|
//! | [`patterns`] | queue, fan-out, request-reply; bound and dialing; what a handler reads |
//! | [`settlement`] | what `ack`, `drop` and retries do; where copies go; the ack warning |
//! | [`wire`] | the frames a Python or C++ peer sends and reads |
//! | [`backends`] | `zeromq` or libzmq: which for which network, installing, each one's limits |
//! | [`security`] | CURVE, allow-lists and keys; bad input, wire limits, hostile peers |
//! | [`backpressure`] | a peer that is down or does not read; send deadlines; read-ahead |
//! | [`operations`] | keyed worker lanes, readiness for `/healthz`, what `shutdown` reports |
//! | [`metrics`] | the Prometheus series, beside the framework's |
//! | [`asyncapi`] | the AsyncAPI document and its `x-zeromq` bindings |
//! | [`testing`] | `TestApp` in process; the framework's conformance suites |
//! | [`across_hosts`] | a fleet over several hosts, and what each fault costs |
//! | [`from_ruststream_zeromq`] | moving a service from `ruststream-zeromq` |
//! | [`cli`] | `zmqs`: send, tail, ask and make CURVE keys from a shell |
//!
//! Imports: nothing; it holds documentation only.

#[doc = include_str!("../docs/patterns.md")]
pub mod patterns {}

#[doc = include_str!("../docs/settlement.md")]
pub mod settlement {}

#[doc = include_str!("../docs/wire.md")]
pub mod wire {}

#[doc = include_str!("../docs/backends.md")]
pub mod backends {}

#[doc = include_str!("../docs/security.md")]
pub mod security {}

#[doc = include_str!("../docs/backpressure.md")]
pub mod backpressure {}

#[doc = include_str!("../docs/operations.md")]
pub mod operations {}

#[doc = include_str!("../docs/metrics.md")]
pub mod metrics {}

#[doc = include_str!("../docs/asyncapi.md")]
pub mod asyncapi {}

#[doc = include_str!("../docs/testing.md")]
pub mod testing {}

#[doc = include_str!("../docs/across_hosts.md")]
pub mod across_hosts {}

#[doc = include_str!("../docs/from_ruststream_zeromq.md")]
pub mod from_ruststream_zeromq {}

#[doc = include_str!("../docs/cli.md")]
pub mod cli {}

#[cfg(test)]
mod tests {
    /// The settlement table is stated in its guide; the README shows the same table, and this
    /// keeps the two from drifting.
    #[test]
    fn the_readme_shows_the_settlement_guides_table() {
        let guide = include_str!("../docs/settlement.md");
        let table: String = guide
            .lines()
            .skip_while(|line| !line.starts_with("| Handler returns"))
            .take_while(|line| line.starts_with('|'))
            .map(|line| format!("{line}\n"))
            .collect();
        assert!(table.lines().count() > 2, "the guide's table is missing");
        assert!(
            include_str!("../README.md").contains(&table),
            "README.md's settlement table differs from docs/settlement.md's:\n{table}"
        );
    }
}
