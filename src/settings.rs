//! What a broker is configured with besides its endpoint and pattern.
//!
//! Imports: the leaves (`wire`).

use std::time::Duration;

use crate::wire::WireLimits;

/// A broker's settings, copied into every part that acts on them.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub(crate) limits: WireLimits,
    /// How long a publish (or a request's send) waits for a peer when none is connected.
    pub(crate) send_timeout: Duration,
    /// How long a partial batch waits for more messages.
    pub(crate) batch_wait: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            limits: WireLimits::default(),
            send_timeout: Duration::from_secs(5),
            batch_wait: Duration::from_millis(20),
        }
    }
}
