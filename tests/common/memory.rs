//! This process's memory as Linux reports it, for the tests that bound it.

/// This process's memory, from `/proc/self/status` (Linux), in KiB.
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    /// The resident set now (`VmRSS`).
    pub rss_kib: u64,
    /// The most the resident set has been since the process started (`VmHWM`).
    pub peak_kib: u64,
}

impl Memory {
    /// Reads both figures. Fails the test, saying so, where there is no `/proc/self/status`: a
    /// memory bound that cannot be read is not a bound that holds.
    pub fn now() -> Self {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_else(|err| {
            panic!(
                "cannot read /proc/self/status ({err}): this memory check needs Linux's procfs, \
                 and without it there is nothing to check"
            )
        });
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or_else(|| panic!("no {name} line in /proc/self/status:\n{status}"))
        };
        Self {
            rss_kib: field("VmRSS:"),
            peak_kib: field("VmHWM:"),
        }
    }
}
