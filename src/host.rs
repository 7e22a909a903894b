//! This host as the loop-back rule sees it: the names and addresses that reach it, found once
//! when a broker connects.

use std::{net::IpAddr, time::Duration};

/// How long a broker waits for its own host name to resolve at connect.
const LOOKUP_WAIT: Duration = Duration::from_secs(1);

/// The names and addresses of this host, beside the loopback and wildcard forms every host has.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalHost {
    /// The host's own names, lower-case.
    pub names: Vec<String>,
    /// The addresses those names resolve to.
    pub addresses: Vec<IpAddr>,
}

impl LocalHost {
    /// This host: its name (the kernel's, else `HOSTNAME`) and what it resolves to. A name that
    /// does not resolve within a second leaves only the loopback and wildcard forms.
    pub(crate) async fn discover() -> Self {
        let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .map(|name| name.trim().to_ascii_lowercase())
            .filter(|name| !name.is_empty());
        let Some(name) = name else {
            return Self::default();
        };
        let addresses =
            match tokio::time::timeout(LOOKUP_WAIT, tokio::net::lookup_host((name.as_str(), 0)))
                .await
            {
                Ok(Ok(found)) => found.map(|address| address.ip()).collect(),
                _ => Vec::new(),
            };
        Self {
            names: vec![name],
            addresses,
        }
    }
}
