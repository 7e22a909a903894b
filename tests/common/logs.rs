//! Log lines kept in memory, for the tests that assert what the crate logs, and logs shown in a
//! test's output when `RUST_LOG` asks. Included beside `poll.rs` (it waits with `super::poll`).
//!
//! A process has one global log subscriber, and the first to install one wins. So a test binary
//! whose tests run side by side either captures every line of the process into one buffer (the
//! live tests, each finding its own lines by names no other test uses), or runs each test that
//! reads its logs in a child process of its own (the interop tests: `child.rs`), or sets a
//! subscriber for its own thread only (`settlement_warnings`).

#![allow(
    dead_code,
    reason = "each test binary reads its logs through some of these, not all"
)]

use std::{
    io::Write,
    sync::{Arc, Mutex, OnceLock, PoisonError},
    time::Duration,
};

/// Formatted log lines, kept in memory: a writer for a `tracing_subscriber::fmt` subscriber
/// (`.with_writer(move || captured.clone())`, no ANSI colours), and what it wrote.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn bytes(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        // A test that panicked while a line was written leaves the buffer whole.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes()).into_owned()
    }

    /// Where the text ends now: [`Self::lines_since`] answers only what comes after.
    pub fn mark(&self) -> usize {
        self.bytes().len()
    }

    /// The lines written so far that contain each of `parts`.
    pub fn lines(&self, parts: &[&str]) -> Vec<String> {
        self.lines_since(0, parts)
    }

    /// The lines written after `mark` that contain each of `parts`.
    pub fn lines_since(&self, mark: usize, parts: &[&str]) -> Vec<String> {
        let bytes = self.bytes();
        String::from_utf8_lossy(&bytes[mark.min(bytes.len())..])
            .lines()
            .filter(|line| parts.iter().all(|part| line.contains(part)))
            .map(str::to_owned)
            .collect()
    }

    /// How many lines written so far contain `part`.
    pub fn count(&self, part: &str) -> usize {
        self.lines(&[part]).len()
    }

    /// Waits until a line contains each of `parts`, failing after `within`, and answers every
    /// such line.
    pub async fn logged(&self, parts: &[&str], within: Duration) -> Vec<String> {
        super::poll::until(within, format_args!("a log line with {parts:?}"), || {
            Some(self.lines(parts)).filter(|lines| !lines.is_empty())
        })
        .await
    }
}

/// The level of a line as `tracing_subscriber::fmt` writes it without colours (`ERROR`, `WARN`,
/// `INFO`, `DEBUG`, `TRACE`): the word after the time.
pub fn level(line: &str) -> &str {
    line.split_whitespace().nth(1).unwrap_or("")
}

/// Every log line of this process that `filter` lets through (an `EnvFilter`, such as `info`),
/// from the first call on, captured in one buffer for the whole process. Each call must give the
/// same filter; the first installs the process's global subscriber, and fails the test if
/// another was installed before it: then this capture would see nothing.
pub fn process_wide(filter: &str) -> &'static Captured {
    static CAPTURE: OnceLock<(String, Captured)> = OnceLock::new();
    let (installed, captured) = CAPTURE.get_or_init(|| {
        let captured = Captured::default();
        let sink = captured.clone();
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .try_init()
            .unwrap_or_else(|err| {
                panic!(
                    "another log subscriber was installed in this process before the capture \
                     ({err}): a test that reads its logs runs where nothing else installs one"
                )
            });
        (filter.to_owned(), captured)
    });
    assert_eq!(
        installed, filter,
        "this process captures its logs under one filter"
    );
    captured
}

/// Shows the logs in the test's output when `RUST_LOG` is set, for a run that needs looking
/// into; does nothing otherwise, or where a subscriber is installed already.
pub fn to_test_output() {
    if let Ok(filter) = std::env::var("RUST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    }
}
