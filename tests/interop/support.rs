//! What the interop tests share: libzmq peers (pyzmq in a child process, driven by JSON lines),
//! a tap on a subscription, and the helpers of every test binary (`tests/common/`): waiting with
//! deadlines, tests in a process of their own, log capture, a relay, this process's memory.

use std::{collections::VecDeque, process::Stdio, time::Duration};

use futures::StreamExt;
use ruststream::{IncomingMessage, Subscriber};
use ruststream_zmq::ZmqMessage;
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines},
    process::{Child, ChildStdin, ChildStdout, Command},
    sync::mpsc,
    time::timeout,
};

#[path = "../common/child.rs"]
pub mod child;
#[path = "../common/logs.rs"]
pub mod logs;
#[path = "../common/memory.rs"]
mod memory;
#[path = "../common/poll.rs"]
pub mod poll;
#[path = "../common/relay.rs"]
pub mod relay;
#[path = "../common/stderr.rs"]
pub mod stderr;

pub use child::{ChildTest, is_child, test_name};
/// This process's memory, now and at its peak.
pub use memory::Memory;
// The `zmqs` tests and libzmq's signal tests wait with a deadline of their own.
#[cfg(any(feature = "zeromq", feature = "libzmq"))]
pub use poll::Deadline;
pub use poll::{until, until_async};

/// How long one step of a test may wait: a peer starting, a command's answer, a message.
pub const STEP: Duration = Duration::from_secs(10);

/// How long a peer process lives at most, whatever the test does: the bound on every child.
const PEER_LIFETIME_S: u64 = 60;

/// The peer script, beside this file.
const PEER_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop/peer.py");

/// The interpreter that has pyzmq. These tests exist to talk to libzmq: without it they fail,
/// never pass quietly.
pub fn python() -> String {
    match std::env::var("RUSTSTREAM_ZMQ_PYTHON") {
        Ok(path) if !path.trim().is_empty() => path,
        _ => panic!(
            "RUSTSTREAM_ZMQ_PYTHON is not set, so there is no libzmq peer to test against: run \
             scripts/test.sh (it creates .venv with pyzmq and exports the variable), or once: \
             `python3 -m venv .venv && .venv/bin/pip install pyzmq` and \
             `export RUSTSTREAM_ZMQ_PYTHON=$PWD/.venv/bin/python`"
        ),
    }
}

/// Bytes as the peer's JSON carries them: each byte is the character of the same code point.
pub fn latin1(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| char::from(b)).collect()
}

fn from_latin1(text: &str) -> Vec<u8> {
    text.chars()
        .map(|c| u8::try_from(u32::from(c)).expect("the peer sent a frame that is not latin-1"))
        .collect()
}

/// One message a peer read: its frames, and the wire format as the peer parsed it.
#[derive(Debug)]
pub struct Received {
    pub frames: Vec<Vec<u8>>,
    pub wire: Value,
}

impl Received {
    /// The headers frame exactly as it came off the wire, of a `[name][headers][payload]`
    /// message: what the crate's publishers write, compared byte for byte, never parsed.
    pub fn headers_frame(&self) -> &[u8] {
        assert_eq!(
            self.frames.len(),
            3,
            "[name][headers][payload] expected: {self:?}"
        );
        &self.frames[1]
    }

    pub fn payload(&self) -> Value {
        serde_json::from_slice(self.frames.last().expect("no frames")).expect("a JSON payload")
    }
}

/// A libzmq socket in a Python process. Killed when dropped; ends by itself after a minute.
pub struct PyPeer {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: stderr::Collected,
    /// What an echoing ROUTER printed about its answers while a command waited for its line.
    answered: VecDeque<Value>,
    /// The endpoint it binds (port resolved) or dials.
    pub endpoint: String,
    label: String,
}

impl PyPeer {
    /// A peer whose `socket` (PUSH, PULL, PUB, SUB, DEALER, REQ, ROUTER) binds `address`
    /// (`tcp://127.0.0.1:*` picks a port), with `zmq.<NAME>` options such as `HEARTBEAT_IVL`.
    pub async fn bind(socket: &str, address: &str, options: Value) -> Self {
        Self::start(json!({"socket": socket, "bind": address, "options": options})).await
    }

    /// A peer whose `socket` dials `address`.
    pub async fn connect(socket: &str, address: &str, options: Value) -> Self {
        Self::start(json!({"socket": socket, "connect": address, "options": options})).await
    }

    /// A ROUTER that binds `address` and answers every request by itself, echoing the payload
    /// and the `correlation-id`.
    pub async fn echo_router(address: &str) -> Self {
        Self::start(json!({"socket": "ROUTER", "bind": address, "serve": "echo"})).await
    }

    /// A peer started from a whole spec (the `zeromq` client's heartbeat pins, and the CURVE
    /// servers with an authenticator).
    pub async fn start_spec(spec: Value) -> Self {
        Self::start(spec).await
    }

    async fn start(mut spec: Value) -> Self {
        spec["lifetime_s"] = json!(PEER_LIFETIME_S);
        let label = format!(
            "{} {}",
            spec["socket"].as_str().unwrap_or("?"),
            spec.get("bind")
                .map(|a| format!("binding {a}"))
                .or_else(|| spec.get("connect").map(|a| format!("dialing {a}")))
                .unwrap_or_default()
        );
        let mut child = Command::new(python())
            .arg(PEER_SCRIPT)
            .arg(spec.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|err| panic!("starting the Python peer ({}): {err}", python()));
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let stderr = stderr::Collected::start(child.stderr.take().unwrap());
        let mut peer = Self {
            child,
            stdin,
            stdout,
            stderr,
            answered: VecDeque::new(),
            endpoint: String::new(),
            label,
        };
        let ready = peer.line(STEP).await;
        let Some(endpoint) = ready.as_ref().and_then(|r| r["ready"].as_str()) else {
            panic!("{}", peer.failure(&format!("did not start: {ready:?}")));
        };
        peer.endpoint = endpoint.to_owned();
        peer
    }

    fn failure(&self, what: &str) -> String {
        format!(
            "the Python peer ({}) {what}; its stderr:\n{}",
            self.label,
            self.stderr.so_far()
        )
    }

    /// The next line the peer printed, or `None` after `within`.
    pub async fn line(&mut self, within: Duration) -> Option<Value> {
        match timeout(within, self.stdout.next_line()).await {
            Err(_) => None,
            Ok(Ok(Some(line))) => Some(serde_json::from_str(&line).unwrap_or_else(|err| {
                panic!("{}", self.failure(&format!("printed {line:?}: {err}")))
            })),
            Ok(_) => {
                // Its stderr whole, before reporting it.
                self.stderr.closed(STEP).await;
                panic!("{}", self.failure("ended"))
            }
        }
    }

    /// Runs one command and answers the peer's line about it.
    pub async fn call(&mut self, command: Value) -> Value {
        let mut line = command.to_string();
        line.push('\n');
        if let Err(err) = self.stdin.write_all(line.as_bytes()).await {
            panic!("{}", self.failure(&format!("took no command: {err}")));
        }
        let _ = self.stdin.flush().await;
        // A recv waits up to its own timeout on the peer's side before it answers.
        let within = STEP + Duration::from_millis(command["timeout_ms"].as_u64().unwrap_or(0));
        loop {
            match self.line(within).await {
                Some(answered) if answered.get("answered").is_some() => {
                    self.answered.push_back(answered);
                }
                Some(answer) => return answer,
                None => panic!(
                    "{}",
                    self.failure(&format!("did not answer {command} within {within:?}"))
                ),
            }
        }
    }

    /// The next request an echoing ROUTER answered, as it read it, or `None` after `within`.
    pub async fn answered(&mut self, within: Duration) -> Option<Value> {
        if let Some(answered) = self.answered.pop_front() {
            return Some(answered["answered"].clone());
        }
        self.line(within).await.map(|line| line["answered"].clone())
    }

    /// Sends one multipart message; a frame is bytes, or `{"repeat": s, "times": n}` built by
    /// the peer.
    pub async fn send_frames(&mut self, frames: Vec<Value>) {
        let answer = self.call(json!({"op": "send", "frames": frames})).await;
        assert!(
            answer["sent"].is_u64(),
            "{}",
            self.failure(&format!("could not send: {answer}"))
        );
    }

    /// Sends one multipart message of these frames.
    pub async fn send(&mut self, frames: &[&[u8]]) {
        self.send_frames(frames.iter().map(|f| json!(latin1(f))).collect())
            .await;
    }

    /// Sends `value` as pyzmq's `send_json` does: one frame.
    pub async fn send_json(&mut self, value: Value) {
        let answer = self.call(json!({"op": "send_json", "value": value})).await;
        assert_eq!(answer["sent"], 1, "{}", self.failure("could not send_json"));
    }

    /// The next message the peer's socket reads, or `None` after `within`.
    pub async fn recv(&mut self, within: Duration) -> Option<Received> {
        let answer = self
            .call(json!({"op": "recv", "timeout_ms": within.as_millis() as u64}))
            .await;
        if answer["timeout"] == true {
            return None;
        }
        let frames = answer["frames"]
            .as_array()
            .unwrap_or_else(|| panic!("{}", self.failure(&format!("answered {answer}"))))
            .iter()
            .map(|f| from_latin1(f.as_str().unwrap()))
            .collect();
        Some(Received {
            frames,
            wire: answer["wire"].clone(),
        })
    }

    /// The next message, failing the test naming `what` if none comes within a step.
    pub async fn expect(&mut self, what: &str) -> Received {
        match self.recv(STEP).await {
            Some(received) => received,
            None => panic!("{}", self.failure(&format!("received no {what}"))),
        }
    }

    /// What the peer's socket monitor reported so far (`CONNECTED`, `DISCONNECTED`, ...).
    pub async fn events(&mut self) -> Vec<String> {
        let answer = self.call(json!({"op": "events"})).await;
        answer["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap().to_owned())
            .collect()
    }

    /// Stops the process where it stands (SIGSTOP): its socket reads nothing, its connections
    /// stay open.
    pub fn pause(&self) {
        self.signal("SIGSTOP");
    }

    /// Lets a stopped process go on (SIGCONT).
    pub fn resume(&self) {
        self.signal("SIGCONT");
    }

    fn signal(&self, name: &str) {
        let pid = self.child.id().expect("the Python peer is running");
        let sent = std::process::Command::new(python())
            .args([
                "-c",
                "import os, signal, sys; os.kill(int(sys.argv[1]), getattr(signal, sys.argv[2]))",
                &pid.to_string(),
                name,
            ])
            .status()
            .expect("running Python to send a signal");
        assert!(sent.success(), "{name} to the Python peer {pid} failed");
    }

    /// Kills the process (SIGKILL: a crash, nothing flushed) and waits until it is gone.
    pub async fn kill(mut self) {
        let _ = self.child.start_kill();
        let _ = timeout(STEP, self.child.wait()).await;
    }
}

/// A subscription read directly, below any handler: each message as the transport delivers it.
pub struct Tap {
    rx: mpsc::UnboundedReceiver<ZmqMessage>,
}

impl Tap {
    pub fn new<S>(mut subscriber: S) -> Self
    where
        S: Subscriber<Message = ZmqMessage> + Send + 'static,
    {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(subscriber.stream());
            while let Some(Ok(message)) = stream.next().await {
                if tx.send(message).is_err() {
                    break;
                }
            }
        });
        Self { rx }
    }

    /// The next message, or `None` after `within`.
    pub async fn next(&mut self, within: Duration) -> Option<ZmqMessage> {
        timeout(within, self.rx.recv()).await.ok().flatten()
    }

    /// The next message, failing the test naming `what` if none comes within a step.
    pub async fn expect(&mut self, what: &str) -> ZmqMessage {
        self.next(STEP)
            .await
            .unwrap_or_else(|| panic!("no {what} arrived within {STEP:?}"))
    }
}

/// A message's payload as JSON.
pub fn json_of(message: &ZmqMessage) -> Value {
    serde_json::from_slice(message.payload()).expect("a JSON payload")
}

/// A header of a delivered message.
pub fn header<'m>(message: &'m ZmqMessage, name: &str) -> Option<&'m str> {
    message.headers().get_str(name)
}

/// Shows the logs in the test's output when `RUST_LOG` is set, for a run that needs looking into.
pub fn logs() {
    logs::to_test_output();
}

/// Interrupts what every thread of this process waits in. Installs a SIGUSR1 handler first
/// (tokio's, as a service has one for its child processes and shutdown), then signals each
/// thread that does not block SIGUSR1, one at a time, and waits until that thread has taken its
/// signal into the handler. Every such thread rather than those of a given name: a library's
/// thread carries its parent's name until it sets its own. Answers the names of the threads that
/// handled their signal; a thread that ends first is not among them, nor one that has the
/// signal masked at its turn (even for a moment: a thread not yet started, one spawning a
/// process), and a signal a living thread never takes fails the test.
#[cfg(feature = "libzmq")]
pub async fn interrupt_every_thread() -> Vec<String> {
    use std::path::Path;
    use tokio::signal::unix::{SignalKind, signal};
    let mut handled = signal(SignalKind::user_defined1()).expect("a SIGUSR1 handler");
    let bit = 1u64 << (libc::SIGUSR1 - 1);
    // A signal mask of the thread's status: `SigBlk` (blocked), `SigPnd` (sent to that thread
    // and not yet taken); `None` once the thread is gone.
    let mask = |task: &Path, field: &str| -> Option<u64> {
        let status = std::fs::read_to_string(task.join("status")).ok()?;
        let mask = status.lines().find_map(|l| l.strip_prefix(field))?;
        u64::from_str_radix(mask.trim(), 16).ok()
    };
    // Whether the thread still runs and is not exiting (PF_EXITING, the ninth field of `stat`):
    // an exiting thread takes no more signals, and its pending ones are discarded with it.
    let alive = |task: &Path| -> bool {
        const PF_EXITING: u64 = 0x4;
        std::fs::read_to_string(task.join("stat"))
            .ok()
            .and_then(|stat| {
                let fields = stat.rsplit_once(')')?.1;
                fields.split_whitespace().nth(6)?.parse::<u64>().ok()
            })
            .is_some_and(|flags| flags & PF_EXITING == 0)
    };
    let threads: Vec<i32> = std::fs::read_dir("/proc/self/task")
        .expect("this process's threads")
        .filter_map(|task| task.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    let mut reached = Vec::new();
    let mut blocking = Vec::new();
    for thread in threads {
        let task = Path::new("/proc/self/task").join(thread.to_string());
        let name = || {
            std::fs::read_to_string(task.join("comm"))
                .map(|name| name.trim().to_owned())
                .ok()
        };
        // Nothing interrupts a thread that blocks the signal (libzmq's own do).
        if mask(&task, "SigBlk:").is_none_or(|blocked| blocked & bit != 0) {
            blocking.extend(name());
            continue;
        }
        // SAFETY: tgkill only sends a signal to a thread of this process, which handles it.
        let sent =
            unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), thread, libc::SIGUSR1) };
        if sent != 0 {
            // The thread ended between the listing and the signal.
            continue;
        }
        // The thread's own pending bit, rather than tokio's wakeup: tokio folds signals that
        // arrive together into one, and another test may be signalling threads at the same time.
        let deadline = Deadline::after(
            STEP * 3,
            format!("the SIGUSR1 sent to thread {thread} ({:?}) handled", name()),
        );
        let taken = loop {
            let pending = mask(&task, "SigPnd:");
            let blocked = mask(&task, "SigBlk:");
            let named = name();
            // Read last: a thread not exiting now was not exiting when its masks were read, so
            // a clear bit then means the handler took the signal, not that it was discarded.
            if !alive(&task) {
                break None;
            }
            match (pending, blocked) {
                (Some(pending), _) if pending & bit == 0 => break named,
                // Blocked since the listing: a thread starting up that was yet to set its mask.
                (_, Some(blocked)) if blocked & bit != 0 => {
                    blocking.extend(named);
                    break None;
                }
                _ => {}
            }
            deadline.check();
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        if let Some(name) = taken {
            // The handler tells tokio's driver: whatever else this wakeup is for, it comes after
            // this thread's handler ran, so tokio got that signal too.
            timeout(STEP * 3, handled.recv())
                .await
                .unwrap_or_else(|_| panic!("tokio never saw the SIGUSR1 thread {thread} took"));
            reached.push(name);
        }
    }
    println!("SIGUSR1 handled by {reached:?}; blocked by {blocking:?}");
    reached
}

/// Every log line of this process from the first call on (INFO and up, no colours), for a test
/// that asserts what the crate logs. One subscriber serves a whole process, so such a test runs
/// in a child process of its own ([`alone`]), where no other test installs one.
pub fn captured_logs() -> &'static logs::Captured {
    logs::process_wide("info")
}

/// The captured log lines that contain each of `parts`.
pub fn log_lines(parts: &[&str]) -> Vec<String> {
    captured_logs().lines(parts)
}

/// Waits until a captured log line contains each of `parts`; answers every such line.
#[cfg(curve)]
pub async fn logged(parts: &[&str]) -> Vec<String> {
    captured_logs().logged(parts, STEP).await
}

/// How long a child process that runs one test may take.
pub const CHILD_TIME: Duration = Duration::from_secs(90);

/// Runs the test `test` (its name as libtest gives it) in a child process of its own and
/// requires that it passed; the child, marked by [`is_child`], does the test's work.
pub async fn alone(test: &str) {
    child::alone(test, CHILD_TIME).await;
}

/// [`alone`] for a child that measures itself: prints its line holding `figures`, and requires
/// that it printed one.
pub async fn alone_with_figures(test: &str, figures: &str) {
    child::alone_with_figures(test, figures, CHILD_TIME).await;
}

/// Signals every thread until one named `thread` has handled it: a thread with every signal
/// masked at its turn (one being created, or spawning a process) is passed over, so a round can
/// miss it. Answers the names the last round reached.
#[cfg(feature = "libzmq")]
pub async fn interrupt_until_handled_by(thread: &str) -> Vec<String> {
    let deadline = Deadline::after(STEP * 3, format!("a signal handled by a {thread} thread"));
    let mut rounds = 1;
    loop {
        let handled = interrupt_every_thread().await;
        if handled.iter().any(|name| name == thread) {
            return handled;
        }
        assert!(
            !deadline.passed(),
            "no {thread} thread handled the signal in {rounds} rounds; the last reached \
             {handled:?}"
        );
        rounds += 1;
    }
}
