//! `zmqs keys` and the CURVE options of `zmqs send` and `tail` (libzmq backend): certificates
//! pyzmq reads, fingerprints as the crate logs them, an allow-list from a directory of public
//! certificates that admits a listed client and keeps another out, and the backend a CURVE
//! option chooses when the command line names none.
//!
//! In libzmq's module alone: CURVE is libzmq's, and the choice of backend is the binary's, the
//! same whichever module runs it.

use std::{path::Path, time::Duration};

use serde_json::json;

use super::cli::{Running, run, run_as_typed};
use crate::support::{PyPeer, STEP, latin1, logs, python, until_async};

/// A directory of this test's own, empty.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("zmqs-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// pyzmq's `zmq.auth.load_certificate` of `path`: (public, secret or "").
fn pyzmq_reads(path: &Path) -> (String, String) {
    let out = std::process::Command::new(python())
        .args([
            "-c",
            "import sys, zmq.auth; p, s = zmq.auth.load_certificate(sys.argv[1]); \
             print(p.decode(), (s or b'').decode())",
            path.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut words = text.split_whitespace().map(str::to_owned);
    let public = words
        .next()
        .unwrap_or_else(|| panic!("pyzmq could not read {}: {out:?}", path.display()));
    (public, words.next().unwrap_or_default())
}

/// `zmqs keys new name --dir dir`: the public key it printed.
async fn new_keys(dir: &Path, name: &str) -> String {
    let ran = run(&["keys", "new", name, "--dir", dir.to_str().unwrap()]).await;
    assert_eq!(ran.code(), Some(0), "{ran:?}");
    ran.json_lines()[0]["public_key"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_writes_certificates_pyzmq_reads_and_prints_fingerprints_as_the_crate_logs() {
    let dir = scratch("keys");
    let public = new_keys(&dir, "server").await;
    let (public_file, secret_file) = (dir.join("server.key"), dir.join("server.key_secret"));

    let (read_public, no_secret) = pyzmq_reads(&public_file);
    assert_eq!(
        (read_public.as_str(), no_secret.as_str()),
        (public.as_str(), "")
    );
    let (read_public, secret) = pyzmq_reads(&secret_file);
    assert_eq!(read_public, public);
    let made = std::process::Command::new(python())
        .args([
            "-c",
            "import sys, zmq; print(zmq.curve_public(sys.argv[1].encode()).decode())",
            &secret,
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&made.stdout).trim(),
        public,
        "the halves belong together"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&secret_file)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    for key in [
        public_file.to_str().unwrap(),
        secret_file.to_str().unwrap(),
        &public,
    ] {
        let ran = run(&["keys", "fingerprint", key]).await;
        assert_eq!(ran.code(), Some(0), "{ran:?}");
        assert_eq!(ran.stdout.trim(), &public[..8]);
    }

    // A key is never overwritten unless asked.
    let again = run(&["keys", "new", "server", "--dir", dir.to_str().unwrap()]).await;
    assert_eq!(again.code(), Some(1), "{again:?}");
    assert!(again.stderr.contains("server.key_secret"), "{again:?}");
    assert_eq!(pyzmq_reads(&public_file).0, public);
    let forced = run(&[
        "keys",
        "new",
        "server",
        "--dir",
        dir.to_str().unwrap(),
        "--force",
    ])
    .await;
    assert_eq!(forced.code(), Some(0), "{forced:?}");
    assert_ne!(pyzmq_reads(&public_file).0, public);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Z85 has `-` among its characters: a key that starts with one is read as a key, not as an
/// option, wherever a command takes a key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_starts_with_a_hyphen_is_read_as_a_key() {
    logs();
    const KEY: &str = "-000000000000000000000000000000000000000";
    let ran = run(&["keys", "fingerprint", KEY]).await;
    assert_eq!(ran.code(), Some(0), "{ran:?}");
    assert_eq!(ran.stdout.trim(), &KEY[..8]);
    // Past the command line, each runs until its timeout: nothing listens on port 1, nobody
    // sends to the listener.
    let ran = run(&[
        "send",
        "tcp://127.0.0.1:1",
        "payments",
        "{}",
        "--curve-server",
        KEY,
        "--timeout",
        "300ms",
    ])
    .await;
    ran.failed_with(6, "connection refused at tcp://127.0.0.1:1");
    let dir = scratch("hyphen");
    new_keys(&dir, "server").await;
    let secret = dir.join("server.key_secret");
    let ran = run(&[
        "tail",
        "tcp://127.0.0.1:0",
        "payments",
        "--bind",
        "--curve-keys",
        secret.to_str().unwrap(),
        "--curve-allow",
        KEY,
        "--count",
        "1",
        "--timeout",
        "300ms",
    ])
    .await;
    std::fs::remove_dir_all(&dir).unwrap();
    ran.failed_with(3, "0 of 1 messages arrived within 300ms");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curve_admits_the_listed_client_and_keeps_another_out() {
    logs();
    let dir = scratch("curve");
    let clients = dir.join("clients");
    std::fs::create_dir_all(&clients).unwrap();
    new_keys(&dir, "server").await;
    new_keys(&clients, "worker").await;
    let stranger = scratch("curve-stranger");
    new_keys(&stranger, "stranger").await;
    let path = |p: &Path| p.to_str().unwrap().to_owned();
    let (server_secret, server_public) = (
        path(&dir.join("server.key_secret")),
        path(&dir.join("server.key")),
    );

    let mut tail = Running::start(&[
        "tail",
        "tcp://127.0.0.1:0",
        "payments",
        "--bind",
        "--timeout",
        "30s",
        "--curve-keys",
        &server_secret,
        "--curve-allow",
        &path(&clients),
    ]);
    let address = tail.listening().await;

    // Off the list: refused at the handshake, so the send finds no peer.
    let refused = run(&[
        "send",
        &address,
        "payments",
        r#"{"from":"stranger"}"#,
        "--timeout",
        "500ms",
        "--curve-server",
        &server_public,
        "--curve-keys",
        &path(&stranger.join("stranger.key_secret")),
    ])
    .await;
    refused.failed_with(8, "speaks CURVE and refused this side's handshake");

    let sent = run(&[
        "send",
        &address,
        "payments",
        r#"{"from":"worker"}"#,
        "--curve-server",
        &server_public,
        "--curve-keys",
        &path(&clients.join("worker.key_secret")),
    ])
    .await;
    assert_eq!(sent.code(), Some(0), "{sent:?}");
    let line = tail.expect_line("the worker's message").await;
    assert_eq!(line["payload"], json!({"from": "worker"}));
    assert!(
        tail.line(Duration::from_millis(200)).await.is_none(),
        "the stranger's never came"
    );

    // A pyzmq CURVE client with the worker's certificate.
    let (worker_public, worker_secret) = pyzmq_reads(&clients.join("worker.key_secret"));
    let (server_key, _) = pyzmq_reads(&dir.join("server.key"));
    let mut push = PyPeer::connect(
        "PUSH",
        &address,
        json!({"CURVE_SERVERKEY": server_key, "CURVE_PUBLICKEY": worker_public, "CURVE_SECRETKEY": worker_secret}),
    )
    .await;
    push.send(&[b"payments", b"", br#"{"from":"python"}"#])
        .await;
    assert_eq!(
        tail.expect_line("pyzmq's message").await["payload"],
        json!({"from": "python"})
    );
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&stranger).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curve_options_the_command_line_cannot_honour_are_refused_with_status_2() {
    let ran = run(&[
        "tail",
        "tcp://127.0.0.1:0",
        "payments",
        "--bind",
        "--curve-allow-any",
    ])
    .await;
    ran.failed_with(2, "--curve-keys");
    let ran = run(&[
        "send",
        "tcp://127.0.0.1:1",
        "payments",
        "{}",
        "--curve-allow-any",
    ])
    .await;
    ran.failed_with(2, "for a listener");
}

/// As `guide::cli` shows it, with no `--backend`: a CURVE option chooses libzmq, and the
/// listener speaks CURVE alone. A plain pyzmq client fails its handshake and gets nothing
/// through; a CURVE client with an admitted key gets through, pyzmq's and `zmqs send`'s (whose
/// `--curve-server` chooses libzmq on the dialing side).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_curve_option_without_backend_chooses_libzmq_and_listens_with_curve_alone() {
    logs();
    let dir = scratch("typed");
    new_keys(&dir, "server").await;
    new_keys(&dir, "worker").await;
    let path = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let mut tail = Running::start_as_typed(&[
        "tail",
        "tcp://127.0.0.1:0",
        "payments",
        "--bind",
        "--timeout",
        "30s",
        "--curve-keys",
        &path("server.key_secret"),
        "--curve-allow",
        &path("worker.key"),
    ]);
    let address = tail.listening().await;

    // A plain client's message: queued, or not taken at all while its handshakes fail (libzmq
    // drops the pipe of a failed one). Either way nothing may reach the tail.
    let mut plain = PyPeer::connect("PUSH", &address, json!({})).await;
    let frames = [b"payments".as_slice(), b"", br#"{"from":"plain"}"#].map(latin1);
    let tried = plain
        .call(json!({"op": "send", "frames": frames, "timeout_ms": 500}))
        .await;
    assert!(
        tried.get("sent").is_some() || tried.get("error").is_some(),
        "{tried}"
    );
    until_async(STEP, "the plain client's handshake to fail", async || {
        let events = plain.events().await;
        assert!(
            !events.iter().any(|e| e == "HANDSHAKE_SUCCEEDED"),
            "a plain client got in: {events:?}"
        );
        if events.iter().any(|e| e.starts_with("HANDSHAKE_FAILED")) {
            Ok(())
        } else {
            Err(format!("its socket's events: {events:?}"))
        }
    })
    .await;

    let (worker_public, worker_secret) = pyzmq_reads(&dir.join("worker.key_secret"));
    let (server_key, _) = pyzmq_reads(&dir.join("server.key"));
    let mut push = PyPeer::connect(
        "PUSH",
        &address,
        json!({"CURVE_SERVERKEY": server_key, "CURVE_PUBLICKEY": worker_public, "CURVE_SECRETKEY": worker_secret}),
    )
    .await;
    push.send(&[b"payments", b"", br#"{"from":"python"}"#])
        .await;
    assert_eq!(
        tail.expect_line("pyzmq's CURVE message").await["payload"],
        json!({"from": "python"})
    );
    let sent = run_as_typed(&[
        "send",
        &address,
        "payments",
        r#"{"from":"zmqs"}"#,
        "--curve-server",
        &path("server.key"),
        "--curve-keys",
        &path("worker.key_secret"),
    ])
    .await;
    assert_eq!(sent.code(), Some(0), "{sent:?}");
    assert_eq!(
        tail.expect_line("zmqs's CURVE message").await["payload"],
        json!({"from": "zmqs"})
    );
    assert!(
        tail.line(Duration::from_millis(300)).await.is_none(),
        "the plain client's message never came"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--backend zeromq` cannot speak CURVE: with a CURVE option it is a usage error (status 2),
/// on either side, before any socket opens, never a socket in clear.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_zeromq_with_a_curve_option_exits_2_saying_curve_is_libzmqs() {
    logs();
    const SAYS: &str = "zmqs: CURVE is libzmq's: drop `--backend zeromq`, or the CURVE options";
    let dir = scratch("zeromq-curve");
    new_keys(&dir, "server").await;
    let secret = dir.join("server.key_secret");
    let public = dir.join("server.key");
    // Each would run to its timeout, past the command line.
    let ran = run_as_typed(&[
        "tail",
        "tcp://127.0.0.1:0",
        "payments",
        "--bind",
        "--backend",
        "zeromq",
        "--curve-keys",
        secret.to_str().unwrap(),
        "--curve-allow-any",
        "--timeout",
        "300ms",
    ])
    .await;
    ran.failed_with(2, SAYS);
    assert!(!ran.stderr.contains("listening on"), "{ran:?}");
    let ran = run_as_typed(&[
        "send",
        "tcp://127.0.0.1:1",
        "payments",
        "{}",
        "--backend",
        "zeromq",
        "--curve-server",
        public.to_str().unwrap(),
        "--timeout",
        "300ms",
    ])
    .await;
    ran.failed_with(2, SAYS);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `keys new` takes a name, not a path: `../x`, an absolute path, `a/b`, `..` and a hidden name
/// are usage errors (status 2) that write nothing and, with `--force`, remove nothing outside
/// `--dir`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_new_refuses_a_name_that_is_a_path_with_status_2_touching_nothing_outside_dir() {
    let root = scratch("names");
    let dir = root.join("keys");
    // A pair beside `--dir` that `--force ../victim` would remove and replace.
    std::fs::write(root.join("victim.key"), "kept").unwrap();
    std::fs::write(root.join("victim.key_secret"), "kept").unwrap();
    let absolute = root.join("abs");
    let absolute = absolute.to_str().unwrap();
    for (name, says) in [
        ("../escaped", "is a path"),
        ("../victim", "is a path"),
        (absolute, "is a path"),
        ("sub/name", "is a path"),
        ("..", "is a path"),
        (".hidden", "starts with a dot"),
    ] {
        for force in [false, true] {
            let mut args = vec!["keys", "new", name, "--dir", dir.to_str().unwrap()];
            if force {
                args.push("--force");
            }
            let ran = run(&args).await;
            ran.failed_with(2, says);
        }
    }
    let mut left: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["victim.key", "victim.key_secret"],
        "nothing written, nothing removed"
    );
    for file in ["victim.key", "victim.key_secret"] {
        assert_eq!(std::fs::read_to_string(root.join(file)).unwrap(), "kept");
    }
    std::fs::remove_dir_all(&root).unwrap();
}

/// A `--dir` that is not UTF-8 cannot be named in the JSON line `keys new` prints: a usage
/// error before anything is written, not a panic after.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_new_refuses_a_dir_that_is_not_utf8_with_status_2_before_writing() {
    use std::os::unix::ffi::OsStrExt;
    let root = scratch("not-utf8");
    let mut dir = root.as_os_str().as_bytes().to_vec();
    dir.extend_from_slice(b"/keys-\xff");
    let dir = std::ffi::OsStr::from_bytes(&dir);
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_zmqs"))
        .args(["keys", "new", "server", "--dir"])
        .arg(dir)
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is not UTF-8"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!Path::new(dir).exists(), "nothing written");
    std::fs::remove_dir_all(&root).unwrap();
}

/// A key file that is not there is named as missing, with its path, whichever option names it;
/// `keys new` over a name in use says `--force`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_key_file_is_named_missing_and_keys_new_over_a_name_in_use_names_force() {
    logs();
    let dir = scratch("missing");
    new_keys(&dir, "server").await;
    let nope = dir.join("nope.key");
    let nope = nope.to_str().unwrap();
    let secret = dir.join("server.key_secret");
    let ran = run(&[
        "send",
        "tcp://127.0.0.1:1",
        "payments",
        "{}",
        "--curve-server",
        nope,
        "--timeout",
        "300ms",
    ])
    .await;
    ran.failed_with(1, &format!("{nope}: no such file"));
    assert!(!ran.stderr.contains("40 characters of Z85"), "{ran:?}");
    let ran = run(&[
        "tail",
        "tcp://127.0.0.1:0",
        "payments",
        "--bind",
        "--curve-keys",
        secret.to_str().unwrap(),
        "--curve-allow",
        nope,
        "--timeout",
        "300ms",
    ])
    .await;
    ran.failed_with(1, &format!("{nope}: no such file"));
    let ran = run(&[
        "send",
        "tcp://127.0.0.1:1",
        "payments",
        "{}",
        "--curve-server",
        dir.join("server.key").to_str().unwrap(),
        "--curve-keys",
        nope,
        "--timeout",
        "300ms",
    ])
    .await;
    assert_eq!(ran.code(), Some(1), "{ran:?}");
    assert!(
        ran.stderr.contains(nope) && ran.stderr.to_lowercase().contains("no such file"),
        "{ran:?}"
    );

    let again = run(&["keys", "new", "server", "--dir", dir.to_str().unwrap()]).await;
    again.failed_with(1, "add --force to replace the pair");
    assert!(again.stderr.contains(secret.to_str().unwrap()), "{again:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Against a CURVE service (`zmqs tail` with an allow-list): a client in clear is told the
/// service speaks CURVE and which flag to add; a wrong server key and a key off the allow-list
/// are told the handshake was refused, naming both causes (libzmq tells a client neither apart:
/// the server closes the connection in both). A CURVE client against a service in clear is told
/// to drop the options. Status 8 for each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curve_on_one_side_or_a_refused_key_is_named_with_status_8() {
    logs();
    let dir = scratch("mistakes");
    new_keys(&dir, "server").await;
    new_keys(&dir, "worker").await;
    new_keys(&dir, "stranger").await;
    let path = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let mut tail = Running::start(&[
        "tail",
        "tcp://127.0.0.1:0",
        "payments",
        "--bind",
        "--timeout",
        "60s",
        "--curve-keys",
        &path("server.key_secret"),
        "--curve-allow",
        &path("worker.key"),
    ]);
    let address = tail.listening().await;
    let send = |extra: &[&str]| {
        let mut args = vec!["send", &address, "payments", "{}", "--timeout", "500ms"];
        args.extend_from_slice(extra);
        args.iter().map(|a| a.to_string()).collect::<Vec<_>>()
    };
    let args = send(&[]);
    let ran = run(&args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    ran.failed_with(8, "speaks CURVE: give its public key with --curve-server");
    for (server, keys) in [
        ("stranger.key", "worker.key_secret"),
        ("server.key", "stranger.key_secret"),
    ] {
        let (server, keys) = (path(server), path(keys));
        let args = send(&["--curve-server", &server, "--curve-keys", &keys]);
        let ran = run(&args.iter().map(String::as_str).collect::<Vec<_>>()).await;
        ran.failed_with(8, "speaks CURVE and refused this side's handshake");
        assert!(ran.stderr.contains("not on its allow-list"), "{ran:?}");
    }
    assert!(
        tail.line(Duration::from_millis(200)).await.is_none(),
        "nothing got through"
    );

    let pull = PyPeer::bind("PULL", "tcp://127.0.0.1:*", json!({})).await;
    let ran = run(&[
        "send",
        &pull.endpoint.clone(),
        "payments",
        "{}",
        "--timeout",
        "500ms",
        "--curve-server",
        &path("server.key"),
    ])
    .await;
    ran.failed_with(8, "speaks in clear, not CURVE: drop the CURVE options");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `ZMQS_CURVE_KEYS` and `ZMQS_CURVE_SERVER` give the key files the command line leaves out:
/// a send with neither option gets through a CURVE listener with an allow-list, and the server
/// variable does not make a listener's command line wrong (a listener names no server).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_files_come_from_the_environment_where_the_command_line_leaves_them_out() {
    logs();
    let dir = scratch("env");
    new_keys(&dir, "server").await;
    new_keys(&dir, "worker").await;
    let path = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_zmqs"));
    command
        .args([
            "tail",
            "tcp://127.0.0.1:0",
            "payments",
            "--bind",
            "--timeout",
            "30s",
        ])
        .args(["--curve-allow", &path("worker.key")])
        .env("ZMQS_CURVE_KEYS", path("server.key_secret"))
        .env("ZMQS_CURVE_SERVER", path("server.key"));
    let mut tail = Running::spawn_command(command);
    let address = tail.listening().await;
    let sent = tokio::process::Command::new(env!("CARGO_BIN_EXE_zmqs"))
        .args(["send", &address, "payments", r#"{"from":"env"}"#])
        .env("ZMQS_CURVE_KEYS", path("worker.key_secret"))
        .env("ZMQS_CURVE_SERVER", path("server.key"))
        .output()
        .await
        .unwrap();
    assert_eq!(
        sent.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    assert_eq!(
        tail.expect_line("the message sent with keys from the environment")
            .await["payload"],
        json!({"from": "env"})
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
