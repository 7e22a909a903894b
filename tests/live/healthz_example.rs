//! `examples/healthz.rs`, run as a process under a low file-descriptor limit: its `503` tells a
//! caller nothing of the endpoints (the log does), and a flood of idle connections neither takes
//! the descriptors its ZeroMQ sockets need nor keeps a real probe from its answer.
//!
//! Run once, not per backend: the example runs on the default backend, as users copy it, and
//! what is tested here is its HTTP side, which is the same whatever carries the messages.

use std::{
    process::Stdio,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    process::{Child, Command},
    time::Instant,
};

use crate::{
    on_zeromq::Feeder,
    support::{example_binary, free_port, poll, stderr::Collected},
};

/// The example's descriptor limit here: the one the flood exhausted.
const FD_LIMIT: usize = 128;
/// The example's `MAX_CONNECTIONS`.
const MAX_CONNECTIONS: usize = 64;
/// Idle connections in the flood: more than the limit.
const FLOOD: usize = 200;

/// The example under `ulimit -n 128`, serving on `health` and dialing `upstream`; its stderr is
/// read as it comes. Killed when dropped.
fn start(health: &str, upstream: &str) -> (Child, Collected) {
    let mut child = Command::new("sh")
        .args(["-c", &format!("ulimit -n {FD_LIMIT} && exec \"$0\"")])
        .arg(example_binary("healthz"))
        .env("HEALTHZ_ADDR", health)
        .env("UPSTREAM", upstream)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the example starts");
    let stderr = Collected::start(child.stderr.take().expect("a piped stderr"));
    (child, stderr)
}

/// One `GET /healthz` on a connection of its own: the status and the body, or what went wrong.
async fn probe(health: &str) -> Result<(u16, String), String> {
    let mut connection = TcpStream::connect(health)
        .await
        .map_err(|err| format!("connect: {err}"))?;
    connection
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: probe\r\nconnection: close\r\n\r\n")
        .await
        .map_err(|err| format!("write: {err}"))?;
    let mut response = Vec::new();
    connection
        .read_to_end(&mut response)
        .await
        .map_err(|err| format!("read: {err}"))?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no complete response: {response:?}"))?;
    let status = head
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("no status line: {head:?}"))?;
    Ok((status, body.to_owned()))
}

/// Probes until the answer has `status`, failing after `within`; each probe may wait its turn
/// behind connections the server has not accepted yet, so it too is bounded by the deadline.
async fn answered(health: &str, status: u16, within: Duration) -> String {
    let deadline = Instant::now() + within;
    let mut last = String::from("no probe answered");
    loop {
        match tokio::time::timeout_at(deadline, probe(health)).await {
            Ok(Ok((got, body))) if got == status => return body,
            Ok(Ok((got, body))) => last = format!("{got} {body:?}"),
            Ok(Err(err)) => last = err,
            Err(_) => {}
        }
        assert!(
            Instant::now() < deadline,
            "no {status} on http://{health}/healthz within {within:?}; last: {last}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The descriptors `pid` has open.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_examples_503_names_no_endpoint_and_its_log_does() {
    let health = format!("127.0.0.1:{}", free_port());
    let upstream_port = free_port();
    let upstream = format!("tcp://127.0.0.1:{upstream_port}");
    let (_child, stderr) = start(&health, &upstream);

    // Nothing listens upstream, so the example is up but not ready.
    let body = answered(&health, 503, Duration::from_secs(20)).await;
    for address in ["127.0.0.1", &upstream_port.to_string(), "tcp:"] {
        assert!(
            !body.contains(address),
            "the 503 body names `{address}`: {body:?}"
        );
    }
    // The reason, with the endpoint, is the operator's: in the log.
    poll::until(
        Duration::from_secs(10),
        format_args!("a `not ready` log line naming {upstream}"),
        || {
            stderr
                .so_far()
                .lines()
                .any(|line| line.contains("not ready") && line.contains(&upstream))
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_example_answers_a_probe_past_200_idle_connections_under_128_fds() {
    let health = format!("127.0.0.1:{}", free_port());
    let upstream = format!("tcp://127.0.0.1:{}", free_port());
    let (child, stderr) = start(&health, &upstream);
    let pid = child.id().expect("the example runs");
    answered(&health, 503, Duration::from_secs(20)).await;
    let before = open_fds(pid);

    // The most descriptors the example holds from here on, read every few milliseconds.
    let most = Arc::new(AtomicUsize::new(before));
    let done = Arc::new(AtomicBool::new(false));
    let watcher = std::thread::spawn({
        let (most, done) = (Arc::clone(&most), Arc::clone(&done));
        move || {
            while !done.load(Ordering::Relaxed) {
                most.fetch_max(open_fds(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    });

    // Held to the end of the test; none ever sends a byte. Each connects on its own: past the
    // connections served and the 128 the kernel queues (tokio's backlog, as std's), a connect
    // waits for the server to take some, its SYN sent again.
    let idle = Arc::new(Mutex::new(Vec::with_capacity(FLOOD)));
    for _ in 0..FLOOD {
        let (idle, health) = (Arc::clone(&idle), health.clone());
        tokio::spawn(async move {
            if let Ok(connection) = TcpStream::connect(&health).await {
                idle.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(connection);
            }
        });
    }
    let made = || idle.lock().unwrap_or_else(PoisonError::into_inner).len();
    poll::until(
        Duration::from_secs(20),
        "the flood filling the connections served and the kernel's queue",
        || made() >= MAX_CONNECTIONS + 100,
    )
    .await;
    // The upstream comes up only now: its connection needs a descriptor while the flood is on.
    let (peer, _) = Feeder::bind(&upstream).await;
    let flooded = Instant::now();
    let body = answered(&health, 200, Duration::from_secs(20)).await;
    assert_eq!(body, "ready\n");
    let waited = flooded.elapsed();
    // Every idle connection was made, the last ones once the server had let earlier ones go.
    poll::until(
        Duration::from_secs(20),
        "all 200 idle connections made",
        || made() == FLOOD,
    )
    .await;

    done.store(true, Ordering::Relaxed);
    watcher.join().expect("the watcher ran");
    let most = most.load(Ordering::Relaxed);
    println!("descriptors: {before} before the flood, at most {most}; ready after {waited:?}");
    // The cap filled (give or take the few descriptors that come and go: a probe's, a dial's),
    // so the flood reached the server...
    assert!(
        most + 4 >= before + MAX_CONNECTIONS,
        "the example held at most {most} descriptors ({before} before the flood): the flood \
         never filled its {MAX_CONNECTIONS} connections"
    );
    // ...and left room below the limit for the ZeroMQ sockets.
    assert!(
        most <= before + MAX_CONNECTIONS + 8,
        "the example held {most} descriptors under a limit of {FD_LIMIT} ({before} before the \
         flood, {MAX_CONNECTIONS} connections allowed); its log:\n{}",
        stderr.so_far()
    );
    peer.close().await;
}
