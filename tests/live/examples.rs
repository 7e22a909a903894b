//! What a newcomer runs first: the README's service, built from the README's Install list alone,
//! and each example, run as a process, saying only what it did.
//!
//! Once per suite, not per backend: the examples run on the default backend, the README's
//! service names no other, and `payments_demo` (which takes `--backend`) has its own test per
//! backend (`demo.rs`). `fleet` needs network namespaces and `healthz` is held by its own test.

use std::{
    collections::BTreeSet,
    fs,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use crate::support::example_binary;

const README: &str = include_str!("../../README.md");

/// The lines of the first block after `heading` that opens with `fence` (`"```toml"`,
/// `"```rust"`), without the fences.
fn block_after(heading: &str, fence: &str) -> Vec<&'static str> {
    let mut lines = README
        .lines()
        .skip_while(|line| *line != heading)
        .skip_while(|line| !line.starts_with(fence));
    assert!(lines.next().is_some(), "no {fence} block after `{heading}`");
    lines.take_while(|line| *line != "```").collect()
}

/// Code as rustdoc compiles it: a line `# ...` is hidden from the reader, not from the compiler.
fn as_compiled(lines: &[&str]) -> String {
    lines
        .iter()
        .map(|line| {
            let trimmed = line.trim_start();
            if trimmed == "#" {
                ""
            } else {
                trimmed.strip_prefix("# ").unwrap_or(line)
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The target directory this test was built into (`target/<profile>/deps/<test>`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    exe.ancestors()
        .nth(3)
        .expect("the test runs from target/<profile>/deps")
        .to_path_buf()
}

/// The README's first service, in a project of its own whose `[dependencies]` are the Install
/// list's, this crate taken from this checkout: it builds. The crate's doc tests compile the
/// same block with the crate's dev-dependencies, which is how a missing `tracing` went unseen.
#[test]
fn the_readmes_first_service_builds_from_the_install_list_alone() {
    let install = block_after("## Install", "```toml");
    let dependencies: Vec<String> = install
        .iter()
        .skip_while(|line| **line != "[dependencies]")
        .skip(1)
        .take_while(|line| !line.starts_with('['))
        .filter(|line| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
        .map(|line| {
            if line.starts_with("ruststream-zmq ") {
                format!(
                    "ruststream-zmq = {{ path = {:?} }}",
                    env!("CARGO_MANIFEST_DIR")
                )
            } else {
                (*line).to_owned()
            }
        })
        .collect();
    assert!(
        dependencies
            .iter()
            .any(|line| line.starts_with("ruststream-zmq ")),
        "the Install list names the crate: {install:?}"
    );
    let service = as_compiled(&block_after("## A service", "```rust"));
    assert!(service.contains("#[ruststream::app]"), "{service}");

    let project =
        std::env::temp_dir().join(format!("ruststream-zmq-readme-{}", std::process::id()));
    let _ = fs::remove_dir_all(&project);
    fs::create_dir_all(project.join("src")).expect("a project directory");
    fs::write(
        project.join("Cargo.toml"),
        format!(
            "[package]\nname = \"readme-service\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
             [workspace]\n\n[dependencies]\n{}\n",
            dependencies.join("\n")
        ),
    )
    .expect("its manifest");
    fs::write(project.join("src/main.rs"), &service).expect("its main.rs");
    // This checkout's lock: the same versions its own build fetched, so `--offline` finds them.
    fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.lock"),
        project.join("Cargo.lock"),
    )
    .expect("the lock file");

    // A target directory of its own, kept between runs: its features differ from the suite's.
    let out = Command::new(env!("CARGO"))
        .current_dir(&project)
        .args(["check", "--offline", "--quiet"])
        .env("CARGO_TARGET_DIR", target_dir().join("readme"))
        .env_remove("RUSTFLAGS")
        .output()
        .expect("cargo runs");
    let _ = fs::remove_dir_all(&project);
    assert!(
        out.status.success(),
        "the README's first service does not build from its Install list:\n{}\n--- \
         Cargo.toml [dependencies]\n{}\n--- src/main.rs\n{service}",
        String::from_utf8_lossy(&out.stderr),
        dependencies.join("\n")
    );
}

/// The features this suite was built with: each example is built with exactly these, so its
/// build is the suite's.
fn features() -> String {
    [
        (cfg!(feature = "testing"), "testing"),
        (cfg!(feature = "asyncapi"), "asyncapi"),
        (cfg!(feature = "metrics"), "metrics"),
        (cfg!(feature = "zeromq"), "zeromq"),
        (cfg!(feature = "libzmq"), "libzmq"),
        (cfg!(feature = "omq"), "omq"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect::<Vec<_>>()
    .join(",")
}

/// What a process printed, line by line as it comes, from a thread per stream.
struct Running {
    child: std::process::Child,
    lines: mpsc::Receiver<(Stream, String)>,
    stdout: Vec<String>,
    stderr: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Out,
    Err,
}

impl Running {
    fn start(command: &mut Command) -> Self {
        let mut child = command
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the example starts");
        let (send, lines) = mpsc::channel();
        let out = child.stdout.take().expect("piped stdout");
        let err = child.stderr.take().expect("piped stderr");
        for (stream, reader) in [
            (Stream::Out, Box::new(out) as Box<dyn std::io::Read + Send>),
            (Stream::Err, Box::new(err)),
        ] {
            let send = send.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(reader).lines().map_while(Result::ok) {
                    // Log lines keep their colour codes even when piped; the words are between.
                    if send.send((stream, strip_ansi(&line))).is_err() {
                        break;
                    }
                }
            });
        }
        Self {
            child,
            lines,
            stdout: Vec::new(),
            stderr: Vec::new(),
        }
    }

    /// Reads until a line of `stream` contains `words`, within `limit`; answers that line.
    /// A line read before counts: the lines of two streams, or of two handlers, come in any order.
    fn until(&mut self, stream: Stream, words: &str, limit: Duration) -> String {
        let kept = match stream {
            Stream::Out => &self.stdout,
            Stream::Err => &self.stderr,
        };
        if let Some(line) = kept.iter().find(|line| line.contains(words)) {
            return line.clone();
        }
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok((from, line)) => {
                    self.keep(from, line.clone());
                    if from == stream && line.contains(words) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "no line with `{words}` within {limit:?}\n--- stdout\n{}\n--- stderr\n{}",
                    self.stdout.join("\n"),
                    self.stderr.join("\n")
                ),
            }
        }
    }

    fn keep(&mut self, from: Stream, line: String) {
        match from {
            Stream::Out => self.stdout.push(line),
            Stream::Err => self.stderr.push(line),
        }
    }

    /// Waits for the process to end within `limit` (killing it past that), and for every line
    /// it printed. Answers the moment it ended.
    fn end(&mut self, limit: Duration) -> (std::process::ExitStatus, Instant) {
        let deadline = Instant::now() + limit;
        let (status, ended) = loop {
            if let Some(status) = self.child.try_wait().expect("the example's status") {
                break (status, Instant::now());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "the example did not end within {limit:?}\n--- stdout\n{}\n--- stderr\n{}",
                    self.stdout.join("\n"),
                    self.stderr.join("\n")
                );
            }
            while let Ok((from, line)) = self.lines.try_recv() {
                self.keep(from, line);
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        // The readers end with the pipes, once the process has gone.
        while let Ok((from, line)) = self.lines.recv_timeout(Duration::from_secs(10)) {
            self.keep(from, line);
        }
        (status, ended)
    }

    fn output(&self) -> String {
        format!(
            "--- stdout\n{}\n--- stderr\n{}",
            self.stdout.join("\n"),
            self.stderr.join("\n")
        )
    }
}

fn strip_ansi(line: &str) -> String {
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters, ended by a letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

/// Runs the example `name` with `args` to its end, within a minute; it must succeed.
fn run_example(name: &str, args: &[&str]) -> Running {
    let mut running = Running::start(Command::new(example_binary(name)).args(args));
    let (status, _) = running.end(Duration::from_secs(60));
    assert!(
        status.success(),
        "{name} failed: {status:?}\n{}",
        running.output()
    );
    running
}

/// The number in `line` between `before` and `after`.
fn number_in(line: &str, before: &str, after: &str) -> u64 {
    let (_, rest) = line
        .split_once(before)
        .unwrap_or_else(|| panic!("no `{before}` in `{line}`"));
    let (number, _) = rest
        .split_once(after)
        .unwrap_or_else(|| panic!("no `{after}` after `{before}` in `{line}`"));
    number
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("`{number}` in `{line}` is not a count"))
}

/// The broadcast example's last lines count what each subscriber heard, and the counts are the
/// handlers' own log lines: it never claims a tick it did not hear.
#[test]
fn broadcast_ends_saying_how_many_ticks_each_subscriber_heard() {
    let running = run_example("broadcast", &[]);
    let out = running.output();
    let logged = |words: &str| {
        running
            .stderr
            .iter()
            .filter(|line| line.contains(words))
            .count() as u64
    };
    let rendered = logged("dashboard: rendered") - logged("dashboard: rendered on the second try");
    let busy = logged("the chart was busy");
    let again = logged("dashboard: rendered on the second try");
    let audited = logged("audit: an EU price recorded");

    let last: Vec<&String> = running.stdout.iter().rev().take(3).rev().collect();
    let [hub, dashboard, audit] = last.as_slice() else {
        panic!("three closing lines\n{out}");
    };
    let published = number_in(hub, "the hub published ", " of 30 quotes as ticks");
    assert!(published <= 30, "{out}");
    assert_eq!(
        number_in(dashboard, "the dashboard heard ", " of 30 `prices.*`"),
        rendered + busy,
        "the dashboard's count is what it logged hearing\n{out}"
    );
    assert_eq!(
        number_in(dashboard, "; ", " of the "),
        again,
        "copies back\n{out}"
    );
    assert_eq!(
        number_in(dashboard, " of the ", " it retried came back"),
        busy,
        "copies asked for\n{out}"
    );
    // Ticks 1..=30 go to `prices.eu` unless a multiple of 3: 20 of them.
    assert_eq!(
        number_in(audit, "the audit heard ", " of 20 `prices.eu`"),
        audited,
        "the audit's count is what it logged hearing\n{out}"
    );
    assert!(
        rendered + busy <= published && audited <= published,
        "{out}"
    );
}

/// The request-reply example's closing lines: four answers, each the quote its request asked
/// for, each under a correlation-id of its own.
#[test]
fn request_reply_ends_with_each_answer_under_its_own_correlation_id() {
    let running = run_example("request_reply", &[]);
    let out = running.output();
    let last: Vec<&String> = running.stdout.iter().rev().take(5).rev().collect();
    assert_eq!(
        last.first().map(|line| line.as_str()),
        Some("four requests in flight on one DEALER:"),
        "{out}"
    );
    // The responder's price: 40 + the item's length, per unit; quantities 1 to 4.
    let expected = [
        ("lamp", 44),
        ("desk", 88),
        ("chair", 135),
        ("bookshelf", 196),
    ];
    let mut ids = BTreeSet::new();
    for (line, (item, total)) in last[1..].iter().zip(expected) {
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words.first(), Some(&item), "{out}");
        assert_eq!(number_in(line, "total ", "(correlation-id"), total, "{out}");
        let id = line
            .split_once("(correlation-id ")
            .and_then(|(_, rest)| rest.strip_suffix(')'))
            .unwrap_or_else(|| panic!("no correlation-id in `{line}`"));
        assert!(id != "?" && ids.insert(id.to_owned()), "{out}");
    }
    assert_eq!(ids.len(), 4, "{out}");
}

/// The AsyncAPI example prints a document of all three patterns: a server per endpoint, each
/// with its socket pair.
#[cfg(feature = "asyncapi")]
#[test]
fn asyncapi_gen_prints_a_document_of_the_three_patterns() {
    let running = run_example("asyncapi", &["asyncapi", "gen"]);
    let document: serde_json::Value = serde_json::from_str(&running.stdout.join("\n"))
        .unwrap_or_else(|err| panic!("not JSON ({err})\n{}", running.output()));
    let pairs: BTreeSet<&str> = document["servers"]
        .as_object()
        .expect("servers")
        .values()
        .filter_map(|server| server["bindings"]["x-zeromq"]["socketPair"].as_str())
        .collect();
    assert_eq!(
        pairs,
        BTreeSet::from(["PUSH/PULL", "PUB/SUB", "DEALER/ROUTER"]),
        "{document:#}"
    );
    for channel in ["payments", "prices", "quotes"] {
        assert!(
            document["channels"].get(channel).is_some(),
            "no `{channel}` channel: {document:#}"
        );
    }
}

/// The testing example's tests, run as its header says, pass.
#[cfg(feature = "testing")]
#[test]
fn testing_payments_tests_pass_as_its_header_says() {
    let binary = example_binary("testing_payments");
    let running = {
        let mut running = Running::start(&mut Command::new(&binary));
        let (status, _) = running.end(Duration::from_secs(60));
        assert!(status.success(), "{}", running.output());
        running
    };
    assert_eq!(
        running.stdout.last().map(String::as_str),
        Some("run the tests: cargo test --example testing_payments --features testing"),
        "{}",
        running.output()
    );
    let target = target_dir();
    // This test's profile, as `example_binary` builds with: `target/debug` is `dev`.
    let exe = std::env::current_exe().expect("the test's own path");
    let profile = match exe.ancestors().nth(2).and_then(Path::file_name) {
        Some(name) if name == "debug" => "dev".to_owned(),
        Some(name) => name.to_string_lossy().into_owned(),
        None => panic!("no profile directory above {}", exe.display()),
    };
    let out = Command::new(env!("CARGO"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["test", "--quiet", "--example", "testing_payments"])
        .args(["--no-default-features", "--features", &features()])
        .args(["--profile", &profile])
        .arg("--target-dir")
        .arg(&target)
        .output()
        .expect("cargo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("test result: ok. 2 passed"),
        "both of its tests ran and passed:\n{stdout}"
    );
}

#[derive(serde::Serialize, ruststream::Outgoing)]
struct Payment {
    id: u64,
    amount: u64,
}

/// Ctrl-C on the at-most-once service while a retry copy waits out its 10 s: the service stops
/// without waiting for it, and its last words name the payment whose copy is lost, and that it
/// stopped. The one charged is not among them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_on_the_at_most_once_service_stops_at_once_naming_the_copies_it_loses() {
    use ruststream::{Broker, ConnectedBroker, prelude::PublishExt};
    use ruststream_zmq::{ZmqEndpoint, ZmqQueue};

    let endpoint = format!("tcp://127.0.0.1:{}", crate::support::free_port());
    let binary = example_binary("zmq_settlement_at_most_once");
    let mut running = Running::start(
        Command::new(binary)
            .arg("run")
            .env("PAYMENTS_ENDPOINT", &endpoint),
    );
    let mut running = tokio::task::spawn_blocking(move || {
        running.until(Stream::Err, "service running", Duration::from_secs(30));
        running
    })
    .await
    .expect("the reader");

    let feed = ZmqQueue::new(ZmqEndpoint::dial(endpoint))
        .connect()
        .await
        .expect("the feed connects");
    let publisher = feed.publisher();
    for (id, amount) in [(1, 20_000), (2, 250)] {
        publisher
            .message(&Payment { id, amount })
            .to("payments")
            .publish()
            .await
            .expect("a payment is sent");
    }
    feed.shutdown().await.expect("the feed closes");

    let (status, stopped, failed_at, interrupted) = tokio::task::spawn_blocking(move || {
        running.until(Stream::Err, "the gateway failed", Duration::from_secs(30));
        let failed_at = Instant::now();
        running.until(Stream::Err, "charged", Duration::from_secs(30));
        // SAFETY: a signal to the child this test started and has not yet reaped.
        let pid = i32::try_from(running.child.id()).expect("a pid");
        assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0, "Ctrl-C");
        let interrupted = Instant::now();
        let (status, stopped) = running.end(Duration::from_secs(60));
        (status, (stopped, running), failed_at, interrupted)
    })
    .await
    .expect("the reader");
    let (stopped, running) = stopped;
    let out = running.output();
    assert!(status.success(), "{status:?}\n{out}");
    // The copy falls due 10 s after the failure: a stop that waited for it ends after that.
    assert!(
        stopped < failed_at + Duration::from_secs(10),
        "the stop waited {:?} for a copy it cannot deliver\n{out}",
        stopped - interrupted
    );
    let last: Vec<&String> = running.stderr.iter().rev().take(2).rev().collect();
    let [lost, end] = last.as_slice() else {
        panic!("two closing lines\n{out}");
    };
    assert!(
        lost.contains("are lost with it") && lost.contains("payments={1}"),
        "the last words name payment 1's copy, lost, and no other\n{out}"
    );
    assert!(end.contains("service stopped"), "{out}");
    assert!(
        !out.contains("message lost"),
        "no copy was sent toward the closing listener\n{out}"
    );
}
