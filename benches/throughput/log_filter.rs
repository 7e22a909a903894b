//! The global `tracing` subscriber, its filter off until the `warn` rows switch it to WARN or
//! to the README's filter, writing to `/dev/null`.

use std::sync::{Arc, OnceLock};

use tracing_subscriber::{EnvFilter, Registry, layer::SubscriberExt, reload};

static FILTER: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// Installs the global subscriber: a filter, off until a row switches it, over a fmt layer
/// writing to `/dev/null` (a write per line, as to a file, and nothing on the terminal).
pub fn install_subscriber() {
    use tracing_subscriber::util::SubscriberInitExt;
    let (filter, handle) = reload::Layer::new(EnvFilter::new("off"));
    let sink = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .expect("/dev/null");
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(Arc::new(sink)),
        )
        .init();
    let _ = FILTER.set(handle);
}

/// The README's filter: WARN, less the runtime's ack / nack line.
pub fn readme_filter() -> EnvFilter {
    let mut filter = EnvFilter::new("warn");
    for directive in [
        "ruststream::dispatch[{subscription,error}]=error",
        "ruststream::dispatch[{subscription,destination,error}]=warn",
        "ruststream::dispatch[{subscription,message_type,error}]=warn",
        "ruststream::dispatch[{subscription,headers_type,error}]=warn",
        "ruststream::dispatch[{subscription,reply,error}]=warn",
    ] {
        filter = filter.add_directive(directive.parse().expect("a directive"));
    }
    filter
}

pub fn set_filter(filter: EnvFilter) {
    if let Some(handle) = FILTER.get() {
        handle.reload(filter).expect("the filter reloads");
    }
}
