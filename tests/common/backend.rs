//! The socket backend one copy of the scenarios runs on. A test binary includes its scenarios once
//! per compiled backend (`on_zeromq`, `on_libzmq`, `on_omq`), each copy with its own `BACKEND`, for what a
//! scenario expects differently of them.

/// A socket backend, as a scenario tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(
    dead_code,
    reason = "a build with one backend runs one copy, which names the other only in its matches"
)]
pub enum Backend {
    /// The pure-Rust `zeromq` client (feature `zeromq`).
    Zeromq,
    /// libzmq, the C library (feature `libzmq`).
    Libzmq,
    /// omq, the pure-Rust ZeroMQ with heartbeats, limits and CURVE (feature `omq`).
    Omq,
}

impl Backend {
    /// Its name, as its feature and the fleet's summary spell it.
    #[allow(dead_code, reason = "not every test binary names its backend")]
    pub const fn name(self) -> &'static str {
        match self {
            Backend::Zeromq => "zeromq",
            Backend::Libzmq => "libzmq",
            Backend::Omq => "omq",
        }
    }

    /// `base` made this backend's own (`zeromq-payments`): a name for what a scenario finds again
    /// in the process's log, where the same scenario on the other backend logs beside it.
    #[allow(dead_code, reason = "not every test binary reads its log")]
    pub fn own(self, base: &str) -> String {
        format!("{}-{base}", self.name())
    }
}
