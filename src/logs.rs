//! Keeping the runtime's settlement warnings out of a healthy service's log (feature `logs`).
//!
//! The runtime asks the broker to settle every delivery a handler acks or drops. ZeroMQ settles
//! nothing, so this transport answers `AckError::Unsupported`, and the runtime logs it once per
//! delivery, under its own target and words, which this crate cannot change:
//!
//! ```text
//! WARN ruststream::dispatch ack / nack failed subscription=payments error=acknowledgement is not supported by this broker
//! ```
//!
//! [`QuietSettlement`] is a `tracing-subscriber` layer that drops exactly that event (its target,
//! its level, its message and that error) and lets every other through, the runtime's other
//! warnings of the same target included (`retry attempts exhausted`, `codec decode failed`, a
//! lost retry copy, an ack that failed for another reason). Add it to a subscriber of your own
//! in one call:
//!
//! ```
//! use tracing_subscriber::{EnvFilter, layer::SubscriberExt, util::SubscriberInitExt};
//!
//! let _ = tracing_subscriber::fmt()
//!     .with_env_filter(EnvFilter::new("info"))
//!     .finish()
//!     .with(ruststream_zmq::logs::quiet_settlement())
//!     .try_init();
//! ```
//!
//! The `main` that `#[ruststream::app]` generates installs the framework's own logger before it
//! calls `app()`, and takes no layer: a service that wants this filter writes its `main` of three
//! lines, with [`init`] in place of the framework's logger:
//!
//! ```no_run
//! # use ruststream::runtime::{App, AppInfo, RustStream};
//! # fn app() -> impl App { RustStream::new(AppInfo::new("payments", "0.1.0")) }
//! fn main() -> std::process::ExitCode {
//!     // The framework's runner finds a logger installed and keeps it.
//!     let _ = ruststream_zmq::logs::init();
//!     ruststream::runtime::cli::run_main(app)
//! }
//! ```

use tracing::{
    Event, Level, Subscriber,
    field::{Field, Visit},
};
use tracing_subscriber::{
    EnvFilter,
    layer::{Context, Layer, SubscriberExt},
    util::{SubscriberInitExt, TryInitError},
};

/// The target the runtime logs a failed settlement under.
const TARGET: &str = "ruststream::dispatch";
/// The runtime's words for a failed settlement.
const MESSAGE: &str = "ack / nack failed";

/// A layer that drops the runtime's `ack / nack failed` warning where the broker answered that
/// it settles nothing, and nothing else. Made by [`quiet_settlement`].
#[derive(Debug, Clone)]
pub struct QuietSettlement {
    /// What the runtime writes in the `error` field for a transport that settles nothing.
    unsupported: String,
}

/// The layer that keeps the settlement warnings out of the log: add it to a `tracing-subscriber`
/// subscriber with `.with(quiet_settlement())`.
#[must_use]
pub fn quiet_settlement() -> QuietSettlement {
    QuietSettlement {
        unsupported: ruststream::AckError::Unsupported.to_string(),
    }
}

impl QuietSettlement {
    /// Whether `event` is the runtime's warning that this transport settles nothing.
    fn is_settlement_warning(&self, event: &Event<'_>) -> bool {
        let metadata = event.metadata();
        if metadata.target() != TARGET || *metadata.level() != Level::WARN {
            return false;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        fields.message.as_deref() == Some(MESSAGE)
            && fields.error.as_deref() == Some(self.unsupported.as_str())
    }
}

impl<S: Subscriber> Layer<S> for QuietSettlement {
    fn event_enabled(&self, event: &Event<'_>, _ctx: Context<'_, S>) -> bool {
        !self.is_settlement_warning(event)
    }
}

/// The two fields of an event the filter reads.
#[derive(Default)]
struct Fields {
    message: Option<String>,
    error: Option<String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.keep(field, value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // `%error` and the message arrive here, written as they display.
        self.keep(field, format!("{value:?}"));
    }
}

impl Fields {
    fn keep(&mut self, field: &Field, value: String) {
        match field.name() {
            "message" => self.message = Some(value),
            "error" => self.error = Some(value),
            _ => {}
        }
    }
}

/// Installs a console logger on stderr as the process's global one, without the settlement
/// warnings: the level from `RUST_LOG` (`info` where it is unset), every other event as the
/// `tracing-subscriber` formatter writes it.
///
/// # Errors
///
/// [`TryInitError`] when the process has a global logger already (it is kept).
pub fn init() -> Result<(), TryInitError> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .finish()
        .with(quiet_settlement())
        .try_init()
}
