//! The `zmqs` binary (feature `cli`), run as a process on this module's backend: `send` into a
//! queue of this crate and a Python PULL, `--bind`, `--fanout`, `--file`, and a progress line;
//! `tail` of a Python PUSH and of this crate's fan-out by prefix, and each way it ends
//! (`--count`, `--timeout` alone, Ctrl-C, a closed pipe); `ask` of this crate's responder and a
//! Python ROUTER, one request and many, the requests in flight counted at the ROUTER, the
//! percentiles, `--bind`; exit statuses scripts rely on. The helpers the binary's output goes
//! through (durations, dates, pacing, the backend a build can run) are its own unit tests.

use std::{
    process::{ExitStatus, Stdio},
    time::Duration,
};

use ruststream::{Broker, BytesMut, HeaderMap, OutgoingMessage, Publisher, Subscribe};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines},
    process::{Child, ChildStdout, Command},
};

use super::{BACKEND, prelude::*};
use crate::{
    backend::Backend,
    support::{
        Deadline, PyPeer, Received, STEP, Tap, header, json_of, logs, python, stderr::Collected,
        until, until_async,
    },
};

/// The binary under test.
const ZMQS: &str = env!("CARGO_BIN_EXE_zmqs");

/// `zmqs` with `args` as a user types them: the backend is the binary's choice.
fn zmqs_as_typed(args: &[&str]) -> Command {
    let mut command = Command::new(ZMQS);
    command.args(args);
    command.kill_on_drop(true);
    command
}

/// `zmqs` with `args`, on this module's backend where the command opens a socket.
fn zmqs(args: &[&str]) -> Command {
    let mut command = zmqs_as_typed(args);
    if matches!(args.first(), Some(&("send" | "tail" | "ask"))) {
        command.args(["--backend", BACKEND.name()]);
    }
    command
}

/// A finished run: its status, stdout and stderr.
pub struct Ran {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Asserts that it exited with `code`, saying `says` on stderr.
    #[track_caller]
    pub fn failed_with(&self, code: i32, says: &str) {
        assert_eq!(self.code(), Some(code), "{self:?}");
        assert!(
            self.stderr.contains(says),
            "no {says:?} on stderr: {self:?}"
        );
    }

    /// Each stdout line as JSON.
    pub fn json_lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{line:?}: {err}")))
            .collect()
    }
}

impl std::fmt::Debug for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "zmqs exited {:?}\n-- stdout:\n{}\n-- stderr:\n{}",
            self.status.code(),
            self.stdout,
            self.stderr
        )
    }
}

/// Runs `zmqs args` to its end, with `stdin` on its standard input, within `within`.
pub async fn run_with(args: &[&str], stdin: &[u8], within: Duration) -> Ran {
    run_command(zmqs(args), args, stdin, within).await
}

pub async fn run(args: &[&str]) -> Ran {
    run_with(args, b"", STEP * 2).await
}

/// Runs `zmqs args` as a user types them, with no `--backend` added.
#[allow(dead_code, reason = "the CURVE tests use it, in libzmq's module alone")]
pub async fn run_as_typed(args: &[&str]) -> Ran {
    run_command(zmqs_as_typed(args), args, b"", STEP * 2).await
}

async fn run_command(mut command: Command, args: &[&str], stdin: &[u8], within: Duration) -> Ran {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting zmqs");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin).await.unwrap();
    drop(input);
    let output = tokio::time::timeout(within, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("zmqs {args:?} did not end within {within:?}"))
        .unwrap();
    Ran {
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A `zmqs` still running: its stdout read a line at a time, its stderr kept.
pub struct Running {
    child: Child,
    /// `None` once the test closed it, as `| head` does when it has read enough.
    stdout: Option<Lines<BufReader<ChildStdout>>>,
    stderr: Collected,
}

impl Running {
    pub fn start(args: &[&str]) -> Self {
        Self::spawn(zmqs(args))
    }

    /// `zmqs args` as a user types them, with no `--backend` added.
    #[allow(dead_code, reason = "the CURVE tests use it, in libzmq's module alone")]
    pub fn start_as_typed(args: &[&str]) -> Self {
        Self::spawn(zmqs_as_typed(args))
    }

    /// A command the test built, with its own environment.
    #[allow(dead_code, reason = "the CURVE tests use it, in libzmq's module alone")]
    pub fn spawn_command(mut command: Command) -> Self {
        command.kill_on_drop(true);
        Self::spawn(command)
    }

    fn spawn(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting zmqs");
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let stderr = Collected::start(child.stderr.take().unwrap());
        Self {
            child,
            stdout: Some(stdout),
            stderr,
        }
    }

    /// Closes the read end of its stdout: its next write finds no reader (EPIPE).
    pub fn close_stdout(&mut self) {
        self.stdout = None;
    }

    /// Sends it SIGINT, as Ctrl-C at a terminal does.
    pub fn interrupt(&self) {
        let pid = self.child.id().expect("zmqs is running");
        let pid = libc::pid_t::try_from(pid).unwrap();
        // SAFETY: kill(2) only sends a signal, to the child this test started and still holds.
        let sent = unsafe { libc::kill(pid, libc::SIGINT) };
        assert_eq!(sent, 0, "SIGINT to zmqs {pid}");
    }

    pub fn stderr(&self) -> String {
        self.stderr.so_far()
    }

    /// The address it says it listens on (`--bind`), port resolved.
    pub async fn listening(&self) -> String {
        until(STEP, "zmqs to say where it listens", || {
            // Whole lines only: the pipe may have handed over half of one.
            self.stderr()
                .split_inclusive('\n')
                .filter(|line| line.ends_with('\n'))
                .find_map(|line| line.strip_prefix("zmqs: listening on "))
                .map(|address| address.trim().to_owned())
        })
        .await
    }

    /// Its next stdout line as JSON, or `None` after `within`.
    pub async fn line(&mut self, within: Duration) -> Option<Value> {
        self.text_line(within)
            .await
            .map(|line| serde_json::from_str(&line).unwrap())
    }

    /// Its next stdout line as it was written, or `None` after `within`.
    pub async fn text_line(&mut self, within: Duration) -> Option<String> {
        let stdout = self.stdout.as_mut().expect("the test closed zmqs's stdout");
        match tokio::time::timeout(within, stdout.next_line()).await {
            Ok(Ok(Some(line))) => Some(line),
            Ok(_) => panic!("zmqs ended its stdout; stderr:\n{}", self.stderr()),
            Err(_) => None,
        }
    }

    pub async fn expect_line(&mut self, what: &str) -> Value {
        match self.line(STEP).await {
            Some(line) => line,
            None => panic!("zmqs printed no {what}; stderr:\n{}", self.stderr()),
        }
    }

    /// Whether it has exited, waiting up to `within`.
    pub async fn ended_within(&mut self, within: Duration) -> bool {
        tokio::time::timeout(within, self.child.wait())
            .await
            .is_ok()
    }

    /// Waits for its end: its status and all it wrote on stderr.
    pub async fn finish(mut self) -> (ExitStatus, String) {
        let status = tokio::time::timeout(STEP, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("zmqs did not end; stderr:\n{}", self.stderr()))
            .unwrap();
        // The last bytes are in once the pipe has closed.
        (status, self.stderr.whole(STEP).await)
    }

    /// The rest of its stdout, as JSON lines, to the end that comes as it exits.
    pub async fn rest_of_stdout(&mut self) -> Vec<Value> {
        let stdout = self.stdout.as_mut().expect("the test closed zmqs's stdout");
        let mut lines = Vec::new();
        while let Some(line) = tokio::time::timeout(STEP, stdout.next_line())
            .await
            .expect("zmqs's stdout did not end")
            .unwrap()
        {
            lines.push(serde_json::from_str(&line).unwrap());
        }
        lines
    }
}

/// What a test checks of an `arrived` time: RFC 3339 in UTC, within a minute of now, as
/// Python's own parser reads it.
fn assert_arrived_now(arrived: &str) {
    let out = std::process::Command::new(python())
        .args([
            "-c",
            "import sys, datetime; t = datetime.datetime.fromisoformat(sys.argv[1].replace('Z', '+00:00')); \
             print(abs((datetime.datetime.now(datetime.timezone.utc) - t).total_seconds()))",
            arrived,
        ])
        .output()
        .unwrap();
    let seconds: f64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("Python could not read {arrived:?}: {out:?}"));
    assert!(seconds < 60.0, "{arrived} is {seconds} s from now");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_reaches_a_queue_of_this_crate_with_its_headers_count_times() {
    logs();
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let mut tap = Tap::new(connected.subscribe("payments").await.unwrap());
    let address = connected.monitor().bound_address().unwrap();

    let ran = run(&[
        "send",
        &address,
        "payments",
        r#"{"id":1}"#,
        "-H",
        "x-tenant=acme",
        "-H",
        "x-trace=t 1",
        "--count",
        "3",
    ])
    .await;
    assert_eq!(ran.code(), Some(0), "{ran:?}");
    for n in 1..=3 {
        let message = tap.expect(&format!("message {n}")).await;
        assert_eq!(message.name(), "payments");
        assert_eq!(header(&message, "x-tenant"), Some("acme"));
        assert_eq!(header(&message, "x-trace"), Some("t 1"));
        assert_eq!(json_of(&message), json!({"id": 1}));
    }
    assert!(
        tap.next(Duration::from_millis(200)).await.is_none(),
        "only three were sent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_lines_from_stdin_reach_a_python_pull_in_the_crates_own_frames() {
    logs();
    let mut pull = PyPeer::bind("PULL", "tcp://127.0.0.1:*", json!({})).await;
    let ran = run_with(
        &[
            "send",
            &pull.endpoint.clone(),
            "orders",
            "--lines",
            "--raw",
            "-H",
            "x-tenant=acme",
        ],
        b"{\"id\":1}\n\n{\"id\":2}\r\nnot json\n",
        STEP * 2,
    )
    .await;
    assert_eq!(ran.code(), Some(0), "{ran:?}");
    // The frames the crate's own publisher writes for the same message.
    let mut headers = HeaderMap::new();
    headers.insert("x-tenant", "acme");
    for payload in [&br#"{"id":1}"#[..], br#"{"id":2}"#, b"not json"] {
        let expected =
            ruststream_zmq::wire::encode("orders", &headers, payload.to_vec().into()).unwrap();
        let received = pull.expect("a line's message").await;
        let expected: Vec<Vec<u8>> = expected.iter().map(|frame| frame.to_vec()).collect();
        assert_eq!(
            received.frames, expected,
            "an empty line is skipped, CRLF trimmed"
        );
    }
    assert!(pull.recv(Duration::from_millis(200)).await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_binds_for_a_python_pull_that_dials_in_and_reports_progress_on_a_long_run() {
    logs();
    // 30 messages at 20 a second: a run past a second, which prints progress.
    let sending = Running::start(&[
        "send",
        "tcp://127.0.0.1:0",
        "payments",
        "{}",
        "--bind",
        "--count",
        "30",
        "--rate",
        "20",
    ]);
    let address = sending.listening().await;
    let mut pull = PyPeer::connect("PULL", &address, json!({})).await;
    for n in 1..=30 {
        pull.expect(&format!("message {n}")).await;
    }
    let (status, stderr) = sending.finish().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains(" of 30 ("), "no progress line:\n{stderr}");
    assert!(
        stderr.contains("zmqs: sent 30 in "),
        "no summary:\n{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_fanout_reaches_this_crates_subscription_from_the_first_message() {
    logs();
    let connected = ZmqFanout::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let mut tap = Tap::new(connected.subscribe("prices").await.unwrap());
    let address = connected.monitor().bound_address().unwrap();
    let ran = run(&[
        "send",
        &address,
        "prices.eu",
        r#"{"p":1}"#,
        "--fanout",
        "--count",
        "5",
    ])
    .await;
    assert_eq!(ran.code(), Some(0), "{ran:?}");
    if BACKEND == Backend::Zeromq {
        // The `zeromq` client's PUB may lose what it still held at close (see
        // `send_fanout_binds_for_a_python_sub_that_dials_in_from_the_first_message`): what
        // holds is that whatever arrives is intact and arrives once.
        let mut arrived = 0;
        while let Some(message) = tap.next(Duration::from_secs(1)).await {
            arrived += 1;
            assert!(arrived <= 5, "more than the 5 sent arrived");
            assert_eq!(message.name(), "prices.eu");
            assert_eq!(json_of(&message), json!({"p": 1}));
        }
        println!("{arrived} of 5 arrived on zeromq");
        return;
    }
    for n in 1..=5 {
        let message = tap.expect(&format!("message {n}")).await;
        assert_eq!(message.name(), "prices.eu");
        assert_eq!(json_of(&message), json!({"p": 1}));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_fanout_binds_for_a_python_sub_that_dials_in_from_the_first_message() {
    logs();
    let sending = Running::start(&[
        "send",
        "tcp://127.0.0.1:0",
        "prices.eu",
        r#"{"p":1}"#,
        "--fanout",
        "--bind",
        "--count",
        "5",
    ]);
    let address = sending.listening().await;
    // A dialing SUB keeps what arrived after the publisher leaves; a bound one would not.
    let mut sub = PyPeer::connect("SUB", &address, json!({"SUBSCRIBE": "prices"})).await;
    let (status, stderr) = sending.finish().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    if BACKEND == Backend::Zeromq {
        // The `zeromq` client's PUB hands each message to a task of its own and says nothing of
        // when it passed it on; its close drops the subscribers first, so what that task still
        // held is lost whatever the linger (under load, all 5 in 5 runs of 20). What holds:
        // whatever arrives is intact, and nothing arrives twice. The backends guide says so.
        let mut arrived = 0;
        while let Some(received) = sub.recv(Duration::from_secs(1)).await {
            arrived += 1;
            assert!(arrived <= 5, "more than the 5 sent arrived");
            assert_eq!(received.wire["name"], "prices.eu");
            assert_eq!(received.payload(), json!({"p": 1}));
        }
        println!("{arrived} of 5 arrived on zeromq");
        return;
    }
    for n in 1..=5 {
        let received = sub.expect(&format!("message {n}")).await;
        assert_eq!(received.wire["name"], "prices.eu");
        assert_eq!(received.payload(), json!({"p": 1}));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_prints_a_python_push_as_json_lines_with_base64_where_not_json() {
    logs();
    let mut tail = Running::start(&[
        "tail",
        "tcp://127.0.0.1:0",
        "payments",
        "--bind",
        "--count",
        "3",
        "--timeout",
        "20s",
    ]);
    let address = tail.listening().await;
    let mut push = PyPeer::connect("PUSH", &address, json!({})).await;
    push.send(&[
        b"payments",
        b"x-tenant: acme\r\ncorrelation-id: c-1",
        br#"{"id":1}"#,
    ])
    .await;
    push.send(&[b"payments.eu", b"", &[0, 159, 255]]).await;
    push.send_json(json!({"id": 3})).await;

    let one = tail.expect_line("the first message").await;
    assert_eq!(one["name"], "payments");
    assert_eq!(
        one["headers"],
        json!({"x-tenant": "acme", "correlation-id": "c-1"})
    );
    assert_eq!(one["payload"], json!({"id": 1}));
    assert_arrived_now(one["arrived"].as_str().unwrap());
    let two = tail.expect_line("the binary message").await;
    assert_eq!(two["name"], "payments.eu");
    assert_eq!(two["payload_base64"], "AJ//");
    assert!(two.get("payload").is_none());
    let three = tail.expect_line("the lone frame").await;
    assert_eq!(
        three["name"], "payments",
        "a lone frame takes the queue's name"
    );
    assert_eq!(three["payload"], json!({"id": 3}));
    let (status, stderr) = tail.finish().await;
    assert_eq!(status.code(), Some(0), "--count 3 reached: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_reads_a_fanout_of_this_crate_by_prefix() {
    logs();
    let hub = ZmqFanout::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let address = hub.bind_publisher().await.unwrap();
    let publisher = hub.publisher();
    let publish = |name: &'static str, id: u64| {
        let publisher = publisher.clone();
        async move {
            let payload = BytesMut::from(json!({"id": id}).to_string().as_bytes());
            publisher
                .publish(
                    OutgoingMessage::assembled(name, payload, HeaderMap::new()),
                    None,
                )
                .await
                .unwrap();
        }
    };
    let mut tail = Running::start(&["tail", &address, "orders", "--fanout", "--timeout", "20s"]);
    // A subscriber hears what is published once its subscription arrived: publish until it does.
    let first = until_async(STEP, "the tail's subscription to arrive", async || {
        publish("orders.warmup", 0).await;
        tail.line(Duration::from_millis(50)).await
    })
    .await;
    assert_eq!(first["name"], "orders.warmup");
    publish("prices.eu", 1).await;
    publish("orders.eu", 2).await;
    let deadline = Deadline::after(STEP, "orders.eu");
    loop {
        let line = tail.expect_line("orders.eu").await;
        assert_ne!(line["name"], "prices.eu", "not under the prefix");
        if line["name"] == "orders.eu" {
            assert_eq!(line["payload"], json!({"id": 2}));
            break;
        }
        deadline.check();
    }
}

/// ZeroMQ acknowledges nothing, and neither client can be asked whether what it queued for a
/// peer has left: a sender that exits while a slow peer has not read loses what its socket still
/// held, on both backends, though every send succeeded. Pinned here, and said in the `cli` and
/// `operations` guides; this fails once a client can flush a socket before the process exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_exits_with_status_0_while_a_peer_that_reads_late_misses_what_was_still_queued() {
    logs();
    // A peer that reads nothing until `zmqs` is gone, holding one message in its own queue:
    // 1,000 messages of 32 KiB outgrow every buffer between the two (loopback TCP holds a few
    // MiB), so most of them sit in the sender's socket when it exits.
    let mut pull = PyPeer::bind("PULL", "tcp://127.0.0.1:*", json!({"RCVHWM": 1})).await;
    let payload = "x".repeat(32 << 10);
    let ran = run(&[
        "send",
        &pull.endpoint.clone(),
        "bulk",
        &payload,
        "--count",
        "1000",
        "--linger",
        "0ms",
        "--raw",
        "-q",
    ])
    .await;
    assert_eq!(ran.code(), Some(0), "every send succeeded: {ran:?}");
    let mut received = 0;
    while pull.recv(Duration::from_millis(500)).await.is_some() {
        received += 1;
    }
    assert!(
        (1..1_000).contains(&received),
        "{received} of 1,000 reached the peer after the sender exited"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_and_send_say_timed_out_with_status_3_and_a_bad_command_line_with_2() {
    logs();
    let ran = run(&[
        "tail",
        "tcp://127.0.0.1:0",
        "payments",
        "--bind",
        "--count",
        "2",
        "--timeout",
        "300ms",
    ])
    .await;
    ran.failed_with(3, "0 of 2 messages arrived within 300ms");

    // A listener that takes the connection and never speaks: no peer, and no cause to name.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent = format!("tcp://{}", silent.local_addr().unwrap());
    let ran = run(&["send", &silent, "payments", "{}", "--timeout", "300ms"]).await;
    ran.failed_with(3, &format!("no peer answered at {silent}"));

    let ran = run(&[
        "send",
        "tcp://127.0.0.1:1",
        "payments",
        "{}",
        "-H",
        "x-tenant",
    ])
    .await;
    ran.failed_with(2, "header `x-tenant` has no `=`");
    let ran = run(&[
        "send",
        "tcp://127.0.0.1:1",
        "payments",
        "{}",
        "-H",
        "x-bad=a\nb",
    ])
    .await;
    assert_eq!(
        ran.code(),
        Some(2),
        "a header the wire format cannot carry: {ran:?}"
    );
    let ran = run(&["send", "tcp://127.0.0.1:1"]).await;
    assert_eq!(ran.code(), Some(2), "clap's own usage errors: {ran:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_prints_the_answer_of_this_crates_responder_with_its_round_trip() {
    logs();
    let (running, address) = super::rpc::bound_responder().await;
    let ran = run(&["ask", &address, "quotes", r#"{"id":7}"#]).await;
    assert_eq!(ran.code(), Some(0), "{ran:?}");
    let lines = ran.json_lines();
    assert_eq!(lines.len(), 1, "{ran:?}");
    assert_eq!(lines[0]["name"], "reply");
    assert_eq!(lines[0]["payload"], json!({"id": 7, "price": 70}));
    assert!(lines[0]["headers"]["correlation-id"].is_string(), "{ran:?}");
    assert!(lines[0]["round_trip_ms"].as_f64().unwrap() > 0.0, "{ran:?}");

    let ran = run(&[
        "ask",
        &address,
        "quotes",
        r#"{"id":1}"#,
        "--count",
        "200",
        "--in-flight",
        "8",
    ])
    .await;
    assert_eq!(ran.code(), Some(0), "{ran:?}");
    let summary = &ran.json_lines()[0];
    assert_eq!(summary["answered"], 200, "{ran:?}");
    assert_eq!(summary["failed"], 0, "{ran:?}");
    assert_eq!(summary["in_flight"], 8, "{ran:?}");
    let (p50, p99) = (
        summary["p50_ms"].as_f64().unwrap(),
        summary["p99_ms"].as_f64().unwrap(),
    );
    assert!(0.0 < p50 && p50 <= p99, "{ran:?}");
    assert!(summary["per_second"].as_f64().unwrap() > 0.0, "{ran:?}");
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_sends_its_headers_to_a_python_router_and_times_out_with_status_3() {
    logs();
    let mut router = PyPeer::echo_router("tcp://127.0.0.1:*").await;
    let ran = run_with(
        &[
            "ask",
            &router.endpoint.clone(),
            "quotes",
            "-H",
            "x-tenant=acme",
        ],
        br#"{"item":"lamp"}"#,
        STEP * 2,
    )
    .await;
    assert_eq!(ran.code(), Some(0), "{ran:?}");
    let answer = &ran.json_lines()[0];
    assert_eq!(
        answer["payload"],
        json!({"item": "lamp"}),
        "the payload from stdin"
    );
    let asked = router.answered(STEP).await.expect("the router's request");
    assert_eq!(asked["name"], "quotes");
    let frame = asked["headers_frame"].as_str().unwrap();
    assert!(frame.contains("x-tenant: acme"), "{frame}");
    assert_eq!(
        answer["headers"]["correlation-id"], asked["correlation_id"],
        "the answer to this request"
    );

    // A ROUTER that reads requests and never answers.
    let silent = PyPeer::bind("ROUTER", "tcp://127.0.0.1:*", json!({})).await;
    let ran = run(&[
        "ask",
        &silent.endpoint.clone(),
        "quotes",
        "{}",
        "--timeout",
        "300ms",
    ])
    .await;
    ran.failed_with(3, "300ms");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_file_sends_its_bytes_as_they_are_and_a_file_it_cannot_read_exits_1() {
    logs();
    let mut pull = PyPeer::bind("PULL", "tcp://127.0.0.1:*", json!({})).await;
    let bytes = [0, 0x9f, 0xff, b'\r', b'\n', b'{', b'}', b'\n'];
    let path = std::env::temp_dir().join(format!(
        "zmqs-{}-{}-payload",
        std::process::id(),
        BACKEND.name()
    ));
    std::fs::write(&path, bytes).unwrap();
    let file = path.to_str().unwrap().to_owned();
    let ran = run(&[
        "send",
        &pull.endpoint.clone(),
        "payments",
        "--file",
        &file,
        "--raw",
    ])
    .await;
    std::fs::remove_file(&path).unwrap();
    assert_eq!(ran.code(), Some(0), "{ran:?}");
    let received = pull.expect("the file's message").await;
    assert_eq!(
        received.frames.last().unwrap(),
        &bytes,
        "the payload is the file's bytes, none trimmed"
    );

    let ran = run(&["send", &pull.endpoint.clone(), "payments", "--file", &file]).await;
    ran.failed_with(1, &format!("reading {file} failed"));
    let ran = run(&[
        "send",
        &pull.endpoint.clone(),
        "payments",
        "{}",
        "--file",
        &file,
    ])
    .await;
    assert_eq!(ran.code(), Some(2), "a payload and a file: {ran:?}");
    assert!(pull.recv(Duration::from_millis(200)).await.is_none());
}

/// `--timeout` alone bounds a tail that prints whatever comes: status 0 once something did, 3
/// when nothing did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_timeout_without_count_ends_with_0_after_messages_and_with_3_after_none() {
    logs();
    // Long enough for a Python peer to start, dial in and send on a busy machine.
    let mut tail = Running::start(&[
        "tail",
        "tcp://127.0.0.1:0",
        "payments",
        "--bind",
        "--timeout",
        "6s",
    ]);
    let address = tail.listening().await;
    let mut push = PyPeer::connect("PUSH", &address, json!({})).await;
    push.send_json(json!({"id": 1})).await;
    push.send_json(json!({"id": 2})).await;
    assert_eq!(
        tail.expect_line("the first").await["payload"],
        json!({"id": 1})
    );
    assert_eq!(
        tail.expect_line("the second").await["payload"],
        json!({"id": 2})
    );
    let rest = tail.rest_of_stdout().await;
    let (status, stderr) = tail.finish().await;
    assert_eq!(rest, Vec::<Value>::new(), "two were sent");
    assert_eq!(status.code(), Some(0), "two arrived within 6s: {stderr}");

    let ran = run(&[
        "tail",
        "tcp://127.0.0.1:0",
        "payments",
        "--bind",
        "--timeout",
        "300ms",
    ])
    .await;
    ran.failed_with(3, "no message arrived within 300ms");
    assert_eq!(ran.stdout, "", "{ran:?}");
}

/// Ctrl-C ends a tail as it ends every command: status 130 (as a shell reports a command
/// Ctrl-C ended), saying how many it printed, of how many `--count` asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_stops_on_ctrl_c_with_status_130_saying_how_many_it_printed() {
    logs();
    for (count, says) in [
        (None, "zmqs: interrupted after 1 message\n"),
        (Some("5"), "zmqs: interrupted after 1 of 5 messages\n"),
    ] {
        let mut args = vec!["tail", "tcp://127.0.0.1:0", "payments", "--bind"];
        if let Some(count) = count {
            args.extend(["--count", count]);
        }
        let mut tail = Running::start(&args);
        let address = tail.listening().await;
        let mut push = PyPeer::connect("PUSH", &address, json!({})).await;
        push.send_json(json!({"id": 1})).await;
        // A printed line: it reads, and waits on the next message with Ctrl-C in hand.
        assert_eq!(
            tail.expect_line("the message").await["payload"],
            json!({"id": 1})
        );
        tail.interrupt();
        let rest = tail.rest_of_stdout().await;
        let (status, stderr) = tail.finish().await;
        assert_eq!(status.code(), Some(130), "{status:?}: {stderr}");
        assert!(stderr.ends_with(says), "{stderr}");
        assert_eq!(rest, Vec::<Value>::new());
    }
}

/// Ctrl-C during a `send` run: status 130, saying how many of the run's messages went.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_stops_on_ctrl_c_with_status_130_saying_how_many_it_sent() {
    logs();
    let mut pull = PyPeer::bind("PULL", "tcp://127.0.0.1:*", json!({})).await;
    let sending = Running::start(&[
        "send",
        &pull.endpoint.clone(),
        "payments",
        "{}",
        "--count",
        "1000",
        "--rate",
        "20",
    ]);
    pull.expect("message 1").await;
    pull.expect("message 2").await;
    sending.interrupt();
    let (status, stderr) = sending.finish().await;
    assert_eq!(status.code(), Some(130), "{stderr}");
    let sent: u64 = stderr
        .split("zmqs: interrupted after ")
        .nth(1)
        .and_then(|rest| rest.strip_suffix(" of 1000 messages\n"))
        .unwrap_or_else(|| panic!("no count on stderr:\n{stderr}"))
        .parse()
        .unwrap();
    let mut received = 2;
    while pull.recv(Duration::from_millis(300)).await.is_some() {
        received += 1;
    }
    assert!((2..1000).contains(&sent), "{stderr}");
    assert_eq!(received, sent, "the count is what the peer got");
}

/// Ctrl-C before anything is counted (a bound `send` waiting for its peer) ends with 130 too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_waiting_for_its_peer_stops_on_ctrl_c_with_status_130() {
    logs();
    let sending = Running::start(&[
        "send",
        "tcp://127.0.0.1:0",
        "payments",
        "{}",
        "--bind",
        "--timeout",
        "60s",
    ]);
    sending.listening().await;
    sending.interrupt();
    let (status, stderr) = sending.finish().await;
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.ends_with("zmqs: interrupted\n"), "{stderr}");
}

/// Ctrl-C during an `ask --count` run prints the summary of what was answered, with the
/// requests left unfinished, then ends with 130.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_count_stops_on_ctrl_c_with_its_summary_and_status_130() {
    logs();
    let mut router = PyPeer::bind("ROUTER", "tcp://127.0.0.1:*", json!({})).await;
    let mut asking = Running::start(&[
        "ask",
        &router.endpoint.clone(),
        "quotes",
        r#"{"id":1}"#,
        "--count",
        "5",
        "--timeout",
        "60s",
    ]);
    let first = router.expect("request 1").await;
    answer(&mut router, &first).await;
    router.expect("request 2, left waiting").await;
    asking.interrupt();
    let summary = asking.expect_line("the summary").await;
    let (status, stderr) = asking.finish().await;
    assert_eq!(status.code(), Some(130), "{summary} {stderr}");
    assert_eq!(
        (
            &summary["answered"],
            &summary["failed"],
            &summary["unfinished"]
        ),
        (&json!(1), &json!(0), &json!(4)),
        "{summary}"
    );
    assert!(
        stderr.ends_with("zmqs: interrupted after 1 of 5 requests were answered\n"),
        "{stderr}"
    );
}

/// `send` with no payload reads stdin; at a terminal it says so, and what ends the payload,
/// rather than wait in silence. A pseudo-terminal made by Python stands for the user's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_reading_a_terminal_says_it_waits_for_the_payload_and_sends_what_is_typed() {
    logs();
    let mut pull = PyPeer::bind("PULL", "tcp://127.0.0.1:*", json!({})).await;
    // A zmqs that says nothing must fail the test, not hang it: the typist waits 10 s for the
    // line, then types anyway.
    const TYPIST: &str = r#"import os, pty, select, subprocess, sys
main, tty = pty.openpty()
child = subprocess.Popen(sys.argv[1:], stdin=tty, stderr=subprocess.PIPE)
os.close(tty)
ready, _, _ = select.select([child.stderr], [], [], 10)
said = child.stderr.readline() if ready else b''
os.write(main, b'{"typed": 1}\n\x04')
rest = child.stderr.read()
print(child.wait(), repr(said + rest))
"#;
    let typist = tokio::process::Command::new(python())
        .args([
            "-c",
            TYPIST,
            ZMQS,
            "send",
            &pull.endpoint.clone(),
            "payments",
        ])
        .args(["--backend", BACKEND.name()])
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(STEP * 2, typist)
        .await
        .expect("the typist and zmqs within the wait")
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed
            .starts_with("0 b'zmqs: reading the payload from the terminal: type it, then Ctrl-D"),
        "{printed} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let received = pull.expect("the typed payload").await;
    assert_eq!(received.frames.last().unwrap(), b"{\"typed\": 1}\n");
}

/// `zmqs tail ... | head -n 1`: the reader closes the pipe once it has its line, and the tail
/// ends on its next write, with status 0 and no panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_ends_with_status_0_when_its_reader_closes_the_pipe() {
    logs();
    let mut tail = Running::start(&["tail", "tcp://127.0.0.1:0", "payments", "--bind"]);
    let address = tail.listening().await;
    let mut push = PyPeer::connect("PUSH", &address, json!({})).await;
    push.send_json(json!({"id": 1})).await;
    tail.expect_line("the line the reader wanted").await;
    tail.close_stdout();
    // A write fails once no process holds the read end, and a child this test binary starts in
    // that moment (another test's) holds a copy until it runs its program: send until the tail
    // writes after that.
    let mut id = 1;
    until_async(
        STEP,
        "zmqs to end at a write to the closed pipe",
        async || {
            id += 1;
            push.send_json(json!({ "id": id })).await;
            tail.ended_within(Duration::from_millis(100)).await
        },
    )
    .await;
    let (status, stderr) = tail.finish().await;
    assert_eq!(status.code(), Some(0), "{status:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A headers frame must be UTF-8 to be read at all: the crate refuses the message, says why on
/// stderr (the binary's default log level), and the tail goes on. So no message off the wire
/// carries a header value that is not UTF-8, and `headers_base64` is left to the binary's unit
/// test of the line it prints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_prints_no_line_for_headers_that_are_not_utf8_warns_and_goes_on() {
    logs();
    let mut tail = Running::start(&[
        "tail",
        "tcp://127.0.0.1:0",
        "payments",
        "--bind",
        "--count",
        "1",
        "--timeout",
        "20s",
    ]);
    let address = tail.listening().await;
    let mut push = PyPeer::connect("PUSH", &address, json!({})).await;
    push.send(&[b"payments", b"x-raw: \xff\xfe", br#"{"id":1}"#])
        .await;
    push.send(&[b"payments", b"x-ok: yes", br#"{"id":2}"#])
        .await;
    let line = tail.expect_line("the second message").await;
    assert_eq!(line["payload"], json!({"id": 2}), "the first was refused");
    assert_eq!(line["headers"], json!({"x-ok": "yes"}));
    assert!(line.get("headers_base64").is_none(), "{line}");
    let (status, stderr) = tail.finish().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "refused a message from a peer: a headers frame of 9 bytes that is not UTF-8"
        ),
        "{stderr}"
    );
}

/// Answers a request a Python ROUTER read as the crate's requester matches an answer: by its
/// correlation-id, echoing the payload.
async fn answer(router: &mut PyPeer, request: &Received) {
    let (identity, rest) = request.frames.split_first().expect("a routed request");
    let (delimiter, rest): (&[&[u8]], _) = match rest {
        [empty, rest @ ..] if empty.is_empty() && rest.len() == 3 => (&[b""], rest),
        rest => (&[], rest),
    };
    let [_name, headers, payload] = rest else {
        panic!("[name][headers][payload] expected: {request:?}");
    };
    let correlation = std::str::from_utf8(headers)
        .unwrap()
        .lines()
        .find_map(|line| line.strip_prefix("correlation-id: "))
        .unwrap_or_else(|| panic!("no correlation-id: {request:?}"));
    let headers = format!("correlation-id: {correlation}");
    let mut frames: Vec<&[u8]> = vec![identity];
    frames.extend_from_slice(delimiter);
    frames.extend([&b"reply"[..], headers.as_bytes(), payload]);
    router.send(&frames).await;
}

/// `--in-flight N` sends N requests before the first answer, and an (N+1)th only once one of
/// them is answered: a Python ROUTER that answers when the test says counts them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_in_flight_keeps_that_many_requests_waiting_at_once_and_no_more() {
    logs();
    let mut router = PyPeer::bind("ROUTER", "tcp://127.0.0.1:*", json!({})).await;
    let mut asking = Running::start(&[
        "ask",
        &router.endpoint.clone(),
        "quotes",
        r#"{"id":1}"#,
        "--count",
        "6",
        "--in-flight",
        "3",
        "--timeout",
        "30s",
    ]);
    let mut waiting = std::collections::VecDeque::new();
    for n in 1..=3 {
        waiting.push_back(
            router
                .expect(&format!("request {n} of the 3 in flight"))
                .await,
        );
    }
    assert!(
        router.recv(Duration::from_millis(300)).await.is_none(),
        "a fourth request while three wait"
    );
    // Each of the first three answers lets one more request go.
    let mut answered = 0;
    while let Some(request) = waiting.pop_front() {
        answer(&mut router, &request).await;
        answered += 1;
        if answered <= 3 {
            waiting.push_back(router.expect(&format!("request {}", answered + 3)).await);
        }
    }
    let summary = asking.expect_line("the summary").await;
    let (status, stderr) = asking.finish().await;
    assert_eq!(status.code(), Some(0), "{summary} {stderr}");
    assert_eq!(
        (
            &summary["answered"],
            &summary["failed"],
            &summary["in_flight"]
        ),
        (&json!(6), &json!(0), &json!(3)),
        "{summary}"
    );
}

/// p50 and p99 are two percentiles: of ten round trips, one held a second by the responder is
/// the p99 and not the p50.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_reports_p50_and_p99_each_from_its_own_percentile() {
    logs();
    const HELD: Duration = Duration::from_secs(1);
    let mut router = PyPeer::bind("ROUTER", "tcp://127.0.0.1:*", json!({})).await;
    let mut asking = Running::start(&[
        "ask",
        &router.endpoint.clone(),
        "quotes",
        r#"{"id":1}"#,
        "--count",
        "10",
        "--in-flight",
        "1",
        "--timeout",
        "30s",
    ]);
    for n in 1..=10 {
        let request = router.expect(&format!("request {n}")).await;
        if n == 7 {
            // The slow answer itself, not a wait for something to happen.
            tokio::time::sleep(HELD).await;
        }
        answer(&mut router, &request).await;
    }
    let summary = asking.expect_line("the summary").await;
    let (status, stderr) = asking.finish().await;
    assert_eq!(status.code(), Some(0), "{summary} {stderr}");
    assert_eq!(summary["answered"], 10, "{summary}");
    let (p50, p99) = (
        summary["p50_ms"].as_f64().unwrap(),
        summary["p99_ms"].as_f64().unwrap(),
    );
    let held = HELD.as_secs_f64() * 1e3;
    assert!(p99 >= held, "the held answer is the p99: {summary}");
    assert!(p50 < held, "nine of ten were answered at once: {summary}");
}

/// A `--count` run some of whose requests went unanswered prints its summary and exits 3, as
/// one that got no answer at all does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_count_with_unanswered_requests_prints_its_summary_and_exits_3() {
    logs();
    let mut router = PyPeer::bind("ROUTER", "tcp://127.0.0.1:*", json!({})).await;
    // Each request waits 3 s: time for the test to read and answer one on a busy machine.
    let mut asking = Running::start(&[
        "ask",
        &router.endpoint.clone(),
        "quotes",
        r#"{"id":1}"#,
        "--count",
        "3",
        "--in-flight",
        "1",
        "--timeout",
        "3s",
    ]);
    let first = router.expect("request 1").await;
    answer(&mut router, &first).await;
    router.expect("request 2, left unanswered").await;
    let third = router.expect("request 3, after the second timed out").await;
    answer(&mut router, &third).await;
    let summary = asking.expect_line("the summary").await;
    let (status, stderr) = asking.finish().await;
    assert_eq!(status.code(), Some(3), "{summary} {stderr}");
    assert_eq!(
        (&summary["answered"], &summary["failed"]),
        (&json!(2), &json!(1)),
        "{summary}"
    );
    assert!(
        stderr.contains(
            "zmqs: 1 of 3 requests failed; the first: request to `quotes` got no answer within 3s"
        ),
        "{stderr}"
    );

    // None answered: the summary has no percentiles to give.
    let ran = run(&[
        "ask",
        &router.endpoint.clone(),
        "quotes",
        "{}",
        "--count",
        "2",
        "--timeout",
        "300ms",
    ])
    .await;
    ran.failed_with(3, "2 of 2 requests failed");
    assert_eq!(
        ran.json_lines(),
        [json!({"requests": 2, "in_flight": 1, "answered": 0, "failed": 2})],
        "{ran:?}"
    );
}

/// `ask --bind` listens for a responder to dial in: it says where (the port resolved) while its
/// request waits, and prints the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_bind_says_where_it_listens_and_asks_the_responder_that_dials_in() {
    logs();
    let mut asking = Running::start(&[
        "ask",
        "tcp://127.0.0.1:0",
        "quotes",
        r#"{"id":4}"#,
        "--bind",
        "--timeout",
        "20s",
    ]);
    let address = asking.listening().await;
    let mut router =
        PyPeer::start_spec(json!({"socket": "ROUTER", "connect": address, "serve": "echo"})).await;
    let line = asking.expect_line("the answer").await;
    let (status, stderr) = asking.finish().await;
    assert_eq!(status.code(), Some(0), "{line} {stderr}");
    assert_eq!(line["name"], "reply");
    assert_eq!(line["payload"], json!({"id": 4}));
    let asked = router.answered(STEP).await.expect("the router's request");
    assert_eq!(asked["name"], "quotes");
    assert_eq!(line["headers"]["correlation-id"], asked["correlation_id"]);
}

/// A number no flag can hold is a usage error (status 2) saying the range, never a panic: each
/// numeric and duration flag of each command, with a value past what it takes. Each command
/// would otherwise run to a peer that is not there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numbers_out_of_range_are_usage_errors_with_status_2_not_panics() {
    logs();
    const TOO_LONG: &str = "at most 8760h (a year)";
    let send: &[&str] = &["send", "tcp://127.0.0.1:1", "payments", "{}"];
    let tail: &[&str] = &["tail", "tcp://127.0.0.1:1", "payments"];
    let ask: &[&str] = &["ask", "tcp://127.0.0.1:1", "quotes", "{}"];
    for (command, flag, value, says) in [
        (send, "--rate", "1e-300", "0.001 or more"),
        (send, "--rate", "0", "0.001 or more"),
        (send, "--rate", "inf", "0.001 or more"),
        (send, "--timeout", "5000000000000000h", TOO_LONG),
        (send, "--settle", "5000000000000000h", TOO_LONG),
        (send, "--linger", "9999999999999999999999s", TOO_LONG),
        (send, "--count", "18446744073709551616", "number too large"),
        (tail, "--timeout", "5000000000000000h", TOO_LONG),
        (tail, "--count", "-1", "unexpected argument"),
        (ask, "--timeout", "5000000000000000h", TOO_LONG),
        (ask, "--count", "18446744073709551616", "number too large"),
        (
            ask,
            "--in-flight",
            "99999999999999999999999",
            "number too large",
        ),
    ] {
        let mut args = command.to_vec();
        args.extend([flag, value]);
        let ran = run(&args).await;
        ran.failed_with(2, says);
        assert!(!ran.stderr.contains("panicked"), "{ran:?}");
    }
}

/// `tail` prints a JSON payload's own text: duplicate keys, an integer past `u64`, a number past
/// `f64` and the key order reach stdout byte for byte, where a parsed and re-written value would
/// merge, round and reorder them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_prints_a_json_payload_byte_for_byte_as_it_arrived() {
    logs();
    const PAYLOAD: &str = r#"{"id":1,"id":2,"n":123456789012345678901234567890,"x":1e400,"b":0}"#;
    let mut tail = Running::start(&[
        "tail",
        "tcp://127.0.0.1:0",
        "payments",
        "--bind",
        "--count",
        "2",
        "--timeout",
        "20s",
    ]);
    let address = tail.listening().await;
    let mut push = PyPeer::connect("PUSH", &address, json!({})).await;
    push.send(&[b"payments", b"", PAYLOAD.as_bytes()]).await;
    // Pretty-printed: its line breaks go (one message, one line), its tokens stay.
    push.send(&[b"payments", b"", b"{\n  \"id\": 1,\n  \"id\": 2\n}\n"])
        .await;
    let line = tail.text_line(STEP).await.expect("the first message");
    assert!(line.contains(&format!(r#""payload":{PAYLOAD}"#)), "{line}");
    let line = tail.text_line(STEP).await.expect("the pretty one");
    assert!(
        line.contains(r#""payload":{  "id": 1,  "id": 2}"#),
        "{line}"
    );
    let (status, stderr) = tail.finish().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
}

/// `ask` prints the answer's JSON payload byte for byte, as `tail` does: a Python ROUTER echoes
/// a payload a parsed value could not hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_prints_the_answers_json_payload_byte_for_byte_as_it_arrived() {
    logs();
    const PAYLOAD: &str = r#"{"id":1,"id":2,"n":123456789012345678901234567890}"#;
    let router = PyPeer::echo_router("tcp://127.0.0.1:*").await;
    let ran = run(&["ask", &router.endpoint.clone(), "quotes", PAYLOAD]).await;
    assert_eq!(ran.code(), Some(0), "{ran:?}");
    assert!(
        ran.stdout.contains(&format!(r#""payload":{PAYLOAD}"#)),
        "{ran:?}"
    );
}

/// An endpoint no socket takes is a command line that is wrong (status 2, as the exit table
/// says), on each command and side; so is `--count 0` (or `--in-flight 0`), which would wait
/// for a peer to do nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_endpoint_and_a_count_of_0_are_usage_errors_with_status_2() {
    logs();
    for endpoint in [
        "foo",
        "tcp://127.0.0.1",
        "tcp://127.0.0.1:99999",
        "udp://127.0.0.1:5",
    ] {
        for args in [
            &["send", endpoint, "payments", "{}", "--timeout", "300ms"][..],
            &[
                "send",
                endpoint,
                "payments",
                "{}",
                "--bind",
                "--timeout",
                "300ms",
            ],
            &["tail", endpoint, "payments", "--timeout", "300ms"],
            &["tail", endpoint, "payments", "--bind", "--timeout", "300ms"],
            &["ask", endpoint, "quotes", "{}", "--timeout", "300ms"],
        ] {
            let ran = run(args).await;
            ran.failed_with(
                2,
                &format!("endpoint `{endpoint}` is not an address the ZeroMQ sockets accept"),
            );
        }
    }
    for args in [
        &[
            "send",
            "tcp://127.0.0.1:1",
            "payments",
            "{}",
            "--count",
            "0",
        ][..],
        &["tail", "tcp://127.0.0.1:1", "payments", "--count", "0"],
        &["ask", "tcp://127.0.0.1:1", "quotes", "{}", "--count", "0"],
        &[
            "ask",
            "tcp://127.0.0.1:1",
            "quotes",
            "{}",
            "--in-flight",
            "0",
        ],
    ] {
        run(args).await.failed_with(2, "0 is not in 1..");
    }
}

/// `-H` sets the user's headers, never those the crate or the framework set (a forged
/// `x-ruststream-retry-count` moves a service past its retry cap; `reply-to` and
/// `correlation-id` route answers), nor a name that is not a token: status 2, and the peer
/// gets nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_flags_for_reserved_or_malformed_names_are_refused_with_status_2_sending_nothing() {
    logs();
    let mut pull = PyPeer::bind("PULL", "tcp://127.0.0.1:*", json!({})).await;
    let endpoint = pull.endpoint.clone();
    for (header, says) in [
        (
            "x-ruststream-retry-count=7",
            "header `x-ruststream-retry-count` is the framework's",
        ),
        ("X-RustStream-Retry-Count=7", "is the framework's"),
        ("x-ruststream-anything=1", "is the framework's"),
        ("reply-to=zmq-reply:00", "header `reply-to` is the crate's"),
        (
            "correlation-id=c-1",
            "header `correlation-id` is the crate's",
        ),
        ("x tenant=acme", "header name `x tenant` is not a token"),
        ("x:tenant=acme", "header name `x:tenant` is not a token"),
        ("=acme", "header name `` is not a token"),
    ] {
        let ran = run(&["send", &endpoint, "payments", "{}", "-H", header]).await;
        ran.failed_with(2, says);
        let ran = run(&["ask", &endpoint, "quotes", "{}", "-H", header]).await;
        ran.failed_with(2, says);
    }
    let ran = run(&[
        "send", &endpoint, "payments", "{}", "-H", "a=1", "-H", "a=2",
    ])
    .await;
    ran.failed_with(2, "header `a` is given twice");
    assert!(
        pull.recv(Duration::from_millis(300)).await.is_none(),
        "nothing was sent"
    );
    // The partition key is the user's to set.
    let ran = run(&[
        "send",
        &endpoint,
        "payments",
        "{}",
        "-H",
        "zmq-partition-key=a-1",
    ])
    .await;
    assert_eq!(ran.code(), Some(0), "{ran:?}");
    let received = pull.expect("the keyed message").await;
    assert_eq!(received.headers_frame(), b"zmq-partition-key: a-1");
}

/// A payload that is not JSON is refused (status 2, the parse error and `--raw` named): a
/// service of the crate would drop it. `--raw` sends it as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_that_is_not_json_is_refused_with_status_2_and_raw_sends_it() {
    logs();
    let mut pull = PyPeer::bind("PULL", "tcp://127.0.0.1:*", json!({})).await;
    let endpoint = pull.endpoint.clone();
    let ran = run(&["send", &endpoint, "payments", "not json"]).await;
    ran.failed_with(
        2,
        "the payload is not JSON (expected ident at line 1 column 2)",
    );
    assert!(
        ran.stderr.contains("--raw sends the bytes as they are"),
        "{ran:?}"
    );
    let ran = run_with(
        &["send", &endpoint, "payments", "--lines"],
        b"{\"id\":1}\n{\"id\":\n",
        STEP * 2,
    )
    .await;
    ran.failed_with(2, "message 2 of --lines is not JSON");
    let ran = run(&["ask", &endpoint, "quotes", "{id:1}"]).await;
    ran.failed_with(2, "the payload is not JSON");
    assert!(
        pull.recv(Duration::from_millis(300)).await.is_none(),
        "nothing was sent"
    );

    let ran = run(&["send", &endpoint, "payments", "not json", "--raw"]).await;
    assert_eq!(ran.code(), Some(0), "{ran:?}");
    let received = pull.expect("the raw message").await;
    assert_eq!(received.frames.last().unwrap(), b"not json");
}

/// A port nothing listens on: bound, then let go.
async fn free_port() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    format!("tcp://{}", listener.local_addr().unwrap())
}

/// Nothing listens at the endpoint: each dialing command says the connection was refused
/// (status 6), not that it timed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialing_command_where_nothing_listens_says_connection_refused_with_status_6() {
    logs();
    let endpoint = free_port().await;
    for args in [
        &["send", &endpoint, "payments", "{}", "--timeout", "300ms"][..],
        &["tail", &endpoint, "payments", "--timeout", "300ms"],
        &["ask", &endpoint, "quotes", "{}", "--timeout", "300ms"],
    ] {
        let ran = run(args).await;
        ran.failed_with(6, &format!("connection refused at {endpoint}"));
        assert!(ran.stderr.contains("is the service up"), "{ran:?}");
    }
}

/// A host name that does not resolve (`.invalid` never does) is said so, with status 5.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_name_that_does_not_resolve_is_named_with_status_5() {
    logs();
    let ran = run(&[
        "send",
        "tcp://no-such-host.invalid:5555",
        "payments",
        "{}",
        "--timeout",
        "300ms",
    ])
    .await;
    ran.failed_with(5, "the name `no-such-host.invalid` does not resolve");
}

/// A socket of a type the command does not talk to (a queue command at a fan-out's PUB, a
/// fan-out send at a queue's PULL) is named, with the flag that fixes it, and status 7.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_type_that_does_not_match_is_named_with_the_fix_and_status_7() {
    logs();
    let publisher = PyPeer::bind("PUB", "tcp://127.0.0.1:*", json!({})).await;
    let at_pub = publisher.endpoint.clone();
    let ran = run(&["tail", &at_pub, "prices", "--timeout", "300ms"]).await;
    ran.failed_with(7, "is a PUB, and this command's PULL does not talk to one");
    assert!(ran.stderr.contains("add --fanout to read it"), "{ran:?}");
    let ran = run(&["send", &at_pub, "payments", "{}", "--timeout", "300ms"]).await;
    ran.failed_with(7, "send to the service's queue port");
    let pull = PyPeer::bind("PULL", "tcp://127.0.0.1:*", json!({})).await;
    let ran = run(&[
        "send",
        &pull.endpoint.clone(),
        "prices",
        "{}",
        "--fanout",
        "--timeout",
        "300ms",
    ])
    .await;
    ran.failed_with(
        7,
        "is a PULL, and this command's PUB does not talk to one: it reads a queue: drop --fanout",
    );
    let ran = run(&[
        "ask",
        &pull.endpoint.clone(),
        "quotes",
        "{}",
        "--timeout",
        "300ms",
    ])
    .await;
    ran.failed_with(7, "use `zmqs send`");
}

/// The crate's logs on stderr carry no colour codes where stderr is not a terminal: a warning
/// (a refused message) is the line it writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_in_a_pipe_carry_no_colour_codes() {
    logs();
    let tail = Running::start(&[
        "tail",
        "tcp://127.0.0.1:0",
        "payments",
        "--bind",
        "--count",
        "1",
        "--timeout",
        "20s",
    ]);
    let address = tail.listening().await;
    let mut push = PyPeer::connect("PUSH", &address, json!({})).await;
    push.send(&[b"payments", b"x-raw: \xff", b"{}"]).await;
    push.send(&[b"payments", b"", b"{}"]).await;
    let (status, stderr) = tail.finish().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("WARN"), "a warning was logged: {stderr}");
    assert!(!stderr.contains('\x1b'), "{stderr:?}");
}

/// `tail --payload-only` prints each payload alone, its bytes as they arrived (JSON text as it
/// came, text that is not JSON as it is, not base64), a line each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_payload_only_prints_each_payload_as_it_arrived() {
    logs();
    let mut tail = Running::start(&[
        "tail",
        "tcp://127.0.0.1:0",
        "payments",
        "--bind",
        "--payload-only",
        "--count",
        "2",
        "--timeout",
        "20s",
    ]);
    let address = tail.listening().await;
    let mut push = PyPeer::connect("PUSH", &address, json!({})).await;
    push.send(&[b"payments", b"x-tenant: acme", br#"{"id":1,"id":2}"#])
        .await;
    push.send(&[b"payments", b"", b"not json"]).await;
    assert_eq!(
        tail.text_line(STEP).await.as_deref(),
        Some(r#"{"id":1,"id":2}"#)
    );
    assert_eq!(tail.text_line(STEP).await.as_deref(), Some("not json"));
    let (status, stderr) = tail.finish().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
}

/// `--json`: a failure is one JSON object on stderr, its message and status (clap's own usage
/// errors too), and `send`'s summary is one on stdout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_prints_a_failure_as_one_object_on_stderr_and_the_send_summary_on_stdout() {
    logs();
    let error_of = |ran: &Ran| -> Value {
        let lines: Vec<&str> = ran.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "one line on stderr: {ran:?}");
        serde_json::from_str(lines[0]).unwrap_or_else(|err| panic!("{err}: {ran:?}"))
    };
    let endpoint = free_port().await;
    let ran = run(&[
        "send",
        &endpoint,
        "payments",
        "{}",
        "--timeout",
        "300ms",
        "--json",
    ])
    .await;
    assert_eq!(ran.code(), Some(6), "{ran:?}");
    let error = error_of(&ran);
    assert_eq!(error["status"], 6, "{ran:?}");
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .starts_with("connection refused at "),
        "{ran:?}"
    );
    let ran = run(&[
        "send", &endpoint, "payments", "{}", "--count", "0", "--json",
    ])
    .await;
    assert_eq!(ran.code(), Some(2), "{ran:?}");
    let error = error_of(&ran);
    assert_eq!(error["status"], 2, "{ran:?}");
    assert!(
        error["error"].as_str().unwrap().contains("0 is not in 1.."),
        "{ran:?}"
    );

    let mut pull = PyPeer::bind("PULL", "tcp://127.0.0.1:*", json!({})).await;
    let ran = run(&[
        "send",
        &pull.endpoint.clone(),
        "payments",
        "{}",
        "--count",
        "3",
        "--json",
    ])
    .await;
    assert_eq!(ran.code(), Some(0), "{ran:?}");
    let summary = &ran.json_lines()[..];
    assert_eq!(summary.len(), 1, "{ran:?}");
    assert_eq!(
        (&summary[0]["sent"], &summary[0]["of"]),
        (&json!(3), &json!(3)),
        "{ran:?}"
    );
    for n in 1..=3 {
        pull.expect(&format!("message {n}")).await;
    }
}

/// `zmqs completions bash` is a script bash loads, which completes the commands and their
/// flags: run in a real bash, as a user's shell would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_for_bash_complete_the_commands_and_their_flags() {
    logs();
    let script = format!(
        "source <({ZMQS} completions bash) && \
         COMP_WORDS=(zmqs se) COMP_CWORD=1 && _zmqs zmqs se zmqs && echo \"[${{COMPREPLY[*]}}]\" && \
         COMP_WORDS=(zmqs send --curve-s) COMP_CWORD=2 && _zmqs zmqs --curve-s send && \
         echo \"[${{COMPREPLY[*]}}]\""
    );
    let out = tokio::process::Command::new("bash")
        .args(["-c", &script])
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        said,
        "[send]\n[--curve-server]\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ran = run(&["completions", "nosuchshell"]).await;
    ran.failed_with(2, "invalid value 'nosuchshell'");
}

/// `--timeout` is the longest wait for the next thing, in `tail` as in `send` and `ask`: a tail
/// whose messages come 1 s apart runs past a 2.5 s timeout, and ends 2.5 s after the last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_timeout_is_the_longest_wait_for_the_next_message_not_the_whole_run() {
    logs();
    let mut tail = Running::start(&[
        "tail",
        "tcp://127.0.0.1:0",
        "payments",
        "--bind",
        "--count",
        "5",
        "--timeout",
        "2500ms",
    ]);
    let address = tail.listening().await;
    let mut push = PyPeer::connect("PUSH", &address, json!({})).await;
    let started = std::time::Instant::now();
    for id in 1..=4 {
        if id > 1 {
            // The spacing under test: each gap short of the timeout, all four past it.
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        push.send_json(json!({ "id": id })).await;
        assert_eq!(
            tail.expect_line(&format!("message {id}")).await["payload"],
            json!({ "id": id })
        );
    }
    assert!(started.elapsed() > Duration::from_millis(2500));
    let (status, stderr) = tail.finish().await;
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("4 of 5 messages arrived, then none within 2.5s"),
        "{stderr}"
    );
}

/// `ZMQS_ENDPOINT` gives the endpoint where the command line leaves it out: the words move up
/// one (`zmqs send payments '{}'`); an endpoint given still wins, and a word too many or a NAME
/// left out is a usage error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_comes_from_zmqs_endpoint_where_the_command_line_leaves_it_out() {
    logs();
    let mut pull = PyPeer::bind("PULL", "tcp://127.0.0.1:*", json!({})).await;
    let with_env = |args: &[&str], endpoint: &str| {
        let mut command = zmqs(args);
        command.env("ZMQS_ENDPOINT", endpoint);
        command
    };
    let args = ["send", "payments", r#"{"id":1}"#];
    let ran = run_command(
        with_env(&args, &pull.endpoint.clone()),
        &args,
        b"",
        STEP * 2,
    )
    .await;
    assert_eq!(ran.code(), Some(0), "{ran:?}");
    let received = pull.expect("the message sent to ZMQS_ENDPOINT").await;
    assert_eq!(received.payload(), json!({"id": 1}));
    // An endpoint on the command line wins over the variable's.
    let args = ["send", &pull.endpoint.clone(), "payments", r#"{"id":2}"#];
    let elsewhere = free_port().await;
    let ran = run_command(with_env(&args, &elsewhere), &args, b"", STEP * 2).await;
    assert_eq!(ran.code(), Some(0), "{ran:?}");
    assert_eq!(pull.expect("the second").await.payload(), json!({"id": 2}));

    let router = PyPeer::echo_router("tcp://127.0.0.1:*").await;
    let args = ["ask", "quotes", r#"{"id":3}"#];
    let ran = run_command(
        with_env(&args, &router.endpoint.clone()),
        &args,
        b"",
        STEP * 2,
    )
    .await;
    assert_eq!(ran.code(), Some(0), "{ran:?}");
    assert_eq!(ran.json_lines()[0]["payload"], json!({"id": 3}));

    let args = ["send", "payments", "{}", "extra"];
    let ran = run_command(with_env(&args, &elsewhere), &args, b"", STEP * 2).await;
    ran.failed_with(2, "one word too many");
    let args = ["tail", &elsewhere];
    let ran = run(&args).await;
    ran.failed_with(2, "a NAME is needed after the endpoint");
}

/// A tail with no deadline that dials a socket it cannot talk to (a fan-out's PUB, without
/// `--fanout`) says why on stderr while it waits, rather than wait in silence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_without_a_deadline_says_why_it_has_no_peer_while_it_waits() {
    logs();
    let publisher = PyPeer::bind("PUB", "tcp://127.0.0.1:*", json!({})).await;
    let tail = Running::start(&["tail", &publisher.endpoint.clone(), "prices"]);
    let said = until(STEP, "the tail to say why it has no peer", || {
        let stderr = tail.stderr();
        stderr
            .lines()
            .find(|line| line.starts_with("zmqs: no peer yet, still waiting: "))
            .map(str::to_owned)
    })
    .await;
    assert!(said.ends_with("is a PUB, and this command's PULL does not talk to one: it publishes a fan-out: add --fanout to read it"), "{said}");
    tail.interrupt();
    let (status, stderr) = tail.finish().await;
    assert_eq!(status.code(), Some(130), "it waited on: {stderr}");
}
