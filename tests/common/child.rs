//! A test that needs a process of its own: its memory measured, its logs read, its process
//! aborted. It runs this test binary again for itself alone, marked as the child, and does the
//! child's half only where [`is_child`] says so: run by name without the mark, the same test is
//! the parent, so running it alone never passes doing nothing. Included beside `stderr.rs`.
//!
//! ```ignore
//! #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//! async fn a_test_alone() {
//!     let me = test_name(module_path!(), "a_test_alone");
//!     if is_child(&me) {
//!         return the_work().await;
//!     }
//!     alone(&me, Duration::from_secs(60)).await;
//! }
//! ```

#![allow(
    dead_code,
    reason = "each test binary runs its children through some of these"
)]

use std::{process::Stdio, time::Duration};

use tokio::{
    io::{AsyncBufReadExt, BufReader, Lines},
    process::{Child, ChildStdout, Command},
    time::Instant,
};

use super::stderr::Collected;

/// The variable that marks a child process of a test binary; its value is the one test the
/// child runs.
pub const CHILD: &str = "RUSTSTREAM_ZMQ_TEST_CHILD";

/// Whether this process is the child that runs `test` (its name as libtest prints it).
pub fn is_child(test: &str) -> bool {
    std::env::var_os(CHILD).is_some_and(|value| value == test)
}

/// The name libtest gives the test `name` of the module whose `module_path!()` is `module`: that
/// path without the crate's name (`on_libzmq::hostile::...`), as [`ChildTest`] runs it again.
pub fn test_name(module: &str, name: &str) -> String {
    let (_, within) = module
        .split_once("::")
        .expect("a test module inside the test crate");
    format!("{within}::{name}")
}

/// This test binary, to run again: the file it runs from, even where a build since replaced the
/// file at its path (Linux's `/proc/self/exe`).
fn this_binary() -> std::path::PathBuf {
    let running = std::path::PathBuf::from("/proc/self/exe");
    if running.exists() {
        running
    } else {
        std::env::current_exe().expect("this test binary's path")
    }
}

/// This test binary run again for the one test `test` (`--exact`, `--nocapture`, one thread),
/// marked as its child by [`CHILD`]. Killed when dropped.
pub struct ChildTest {
    test: String,
    child: Child,
    stdout: Lines<BufReader<ChildStdout>>,
    printed: String,
    stderr: Collected,
}

/// How a child ended: its status (`None` when it outlived its time and was killed), and what it
/// printed.
pub struct ChildEnd {
    pub status: Option<std::process::ExitStatus>,
    pub stdout: String,
    pub stderr: String,
}

impl ChildEnd {
    /// Whether libtest ran the one test and it passed.
    pub fn passed(&self) -> bool {
        self.status.is_some_and(|status| status.success())
            && self.stdout.contains("test result: ok. 1 passed")
    }

    /// The status and both outputs, for a failure message.
    pub fn describe(&self) -> String {
        format!(
            "{}\n--- its stdout:\n{}\n--- its stderr:\n{}--- (end of the child's output)",
            match self.status {
                Some(status) => format!("The child process ended: {status}."),
                None => "The child process was killed when its time ran out.".to_owned(),
            },
            self.stdout,
            self.stderr
        )
    }
}

impl ChildTest {
    pub fn spawn(test: &str) -> Self {
        let mut child = Command::new(this_binary())
            .args(["--exact", test, "--nocapture", "--test-threads=1"])
            .env(CHILD, test)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|err| panic!("starting the child process for {test}: {err}"));
        let stdout = BufReader::new(child.stdout.take().expect("a piped stdout")).lines();
        let stderr = Collected::start(child.stderr.take().expect("a piped stderr"));
        Self {
            test: test.to_owned(),
            child,
            stdout,
            printed: String::new(),
            stderr,
        }
    }

    /// What follows `mark` on the next line of the child's stdout that has it, or `None` when the
    /// child's stdout ends or `within` passes first. Lines before it are kept for [`Self::end`].
    pub async fn after(&mut self, mark: &str, within: Duration) -> Option<String> {
        let deadline = Instant::now() + within;
        loop {
            let line = match tokio::time::timeout_at(deadline, self.stdout.next_line()).await {
                Ok(Ok(Some(line))) => line,
                _ => return None,
            };
            self.printed.push_str(&line);
            self.printed.push('\n');
            if let Some((_, rest)) = line.split_once(mark) {
                return Some(rest.to_owned());
            }
        }
    }

    /// Waits up to `within` for the child to end, and kills it past that; answers how it ended,
    /// with everything it printed.
    pub async fn end(mut self, within: Duration) -> ChildEnd {
        let deadline = Instant::now() + within;
        let mut rest = String::new();
        let read = async {
            while let Ok(Some(line)) = self.stdout.next_line().await {
                rest.push_str(&line);
                rest.push('\n');
            }
            self.child.wait().await
        };
        let status = match tokio::time::timeout_at(deadline, read).await {
            Ok(status) => Some(status.unwrap_or_else(|err| {
                panic!("waiting for the child process of {}: {err}", self.test)
            })),
            Err(_) => {
                let _ = self.child.kill().await;
                None
            }
        };
        self.printed.push_str(&rest);
        // The pipe closes with the process; a grandchild holding it is bounded the same way.
        let stderr = self.stderr.whole(Duration::from_secs(10)).await;
        ChildEnd {
            status,
            stdout: self.printed,
            stderr,
        }
    }
}

/// Runs the test `test` (its name as libtest gives it) in a child process of its own and
/// requires that it passed within `within`; the child, marked by [`is_child`], does the test's
/// work.
pub async fn alone(test: &str, within: Duration) {
    let end = ChildTest::spawn(test).end(within).await;
    assert!(
        end.passed(),
        "the child process that runs {test} did not pass: {}",
        end.describe()
    );
}

/// [`alone`] for a child that measures itself: it prints a line holding `figures`, which this
/// prints too and answers (what follows `figures`), and requires that the child printed one.
pub async fn alone_with_figures(test: &str, figures: &str, within: Duration) -> String {
    let end = ChildTest::spawn(test).end(within).await;
    let line = end
        .stdout
        .lines()
        .find_map(|line| line.split_once(figures).map(|(_, rest)| rest.to_owned()));
    if let Some(line) = &line {
        println!("{figures}{line}");
    }
    match line {
        Some(line) if end.passed() => line,
        _ => panic!(
            "the child process that runs {test} did not pass with its figures: {}",
            end.describe()
        ),
    }
}
