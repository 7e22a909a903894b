//! The fleet across hosts: `scripts/fleet.sh --short` builds six hosts out of network namespaces
//! and runs `examples/fleet.rs` on them, through a killed worker, a cut link, a restarted sink and
//! retry copies; this test holds its counts to the at-most-once promise.
//!
//! Built with the `libzmq` feature, the fleet runs on libzmq with CURVE and heartbeats on: the
//! ventilator must notice the cut worker gone within the heartbeat's timeout, and the only loss
//! the cut may add is what it sent on the cut connection before it noticed.
//!
//! It needs root (namespaces). Where they cannot be made, it says so on stderr and passes
//! without running: that is the only way it skips.

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::Command,
};

use serde_json::Value;

/// Jobs per scale-out run and the stream of the fault run, as `--short` sets them.
const SCALE_JOBS: u64 = 400;
const FAULT_JOBS: u64 = 4_000;
/// The fault run's rate: losses stay within one second of the stream.
const RATE: u64 = 200;
/// The live workers when the link is cut (one was killed before): each gets a third of it.
#[cfg(feature = "libzmq")]
const LIVE_AT_THE_CUT: u64 = 3;
/// The fleet's heartbeat on libzmq (`examples/fleet.rs`): every 500 ms, cut after 2 s of
/// silence. The monitor is read every 20 ms; one more second covers a loaded machine.
#[cfg(feature = "libzmq")]
const NOTICED_WITHIN_MS: u64 = 500 + 2_000 + 1_000;

/// Why namespaces cannot be made here, if they cannot.
fn namespaces_unavailable() -> Option<String> {
    let uid = Command::new("id").arg("-u").output();
    match uid {
        Ok(out) if String::from_utf8_lossy(&out.stdout).trim() == "0" => {}
        Ok(out) => {
            return Some(format!(
                "not root (uid {})",
                String::from_utf8_lossy(&out.stdout).trim()
            ));
        }
        Err(err) => return Some(format!("`id -u` did not run: {err}")),
    }
    let probe = format!("rsfprobe{}", std::process::id());
    match Command::new("ip").args(["netns", "add", &probe]).output() {
        Ok(out) if out.status.success() => {
            let _ = Command::new("ip").args(["netns", "del", &probe]).status();
            None
        }
        Ok(out) => Some(format!(
            "`ip netns add` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(err) => Some(format!("`ip` did not run: {err}")),
    }
}

/// Says so past the test harness's capture, so a skip is never silent.
fn skip(reason: &str) {
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED the fleet across hosts (scripts/fleet.sh): network namespaces cannot be made here: {reason}"
    );
}

/// The example binary, next to this test's executable (`target/<profile>/examples/fleet`), built
/// by the same cargo with this test's profile and features: `cargo test --all-targets` builds
/// the examples only as test harnesses (`examples/fleet-<hash>`), and `cargo test --test live`
/// not at all. The library is built already, so this compiles the example alone, once.
fn fleet_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test runs from target/<profile>/deps");
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev",
        Some(other) => other,
        None => panic!("no profile directory above {}", exe.display()),
    };
    let target_dir = profile_dir.parent().expect("the target directory");
    let mut features = Vec::new();
    if cfg!(feature = "testing") {
        features.push("testing");
    }
    if cfg!(feature = "asyncapi") {
        features.push("asyncapi");
    }
    if cfg!(feature = "metrics") {
        features.push("metrics");
    }
    if cfg!(feature = "libzmq") {
        features.push("libzmq");
    }
    let out = Command::new(env!("CARGO"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "build",
            "--quiet",
            "--example",
            "fleet",
            "--profile",
            profile,
        ])
        .arg("--target-dir")
        .arg(target_dir)
        .args(["--features", &features.join(",")])
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo could not build the fleet example: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let binary = profile_dir.join("examples").join("fleet");
    assert!(binary.exists(), "no {} after the build", binary.display());
    binary
}

fn number(value: &Value, path: &str) -> u64 {
    value
        .pointer(path)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("the summary has no number at {path}: {value:#}"))
}

#[test]
fn a_fleet_across_hosts_loses_only_what_at_most_once_allows_and_duplicates_nothing() {
    if let Some(reason) = namespaces_unavailable() {
        skip(&reason);
        return;
    }
    let binary = fleet_binary();
    let dir = std::env::temp_dir().join(format!("ruststream-zmq-fleet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let summary_path = dir.join("summary.json");
    let out = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/fleet.sh"))
        .arg("--short")
        .arg("--bin")
        .arg(&binary)
        .arg("--dir")
        .arg(&dir)
        .arg("--summary")
        .arg(&summary_path)
        .env("FLEET_PREFIX", "rsft")
        .output()
        .expect("bash runs scripts/fleet.sh");
    let printed = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{printed}");
    assert!(
        out.status.success(),
        "scripts/fleet.sh --short failed ({}):\n{printed}",
        out.status
    );
    let summary: Value = serde_json::from_slice(
        &std::fs::read(&summary_path).expect("the script wrote its summary"),
    )
    .expect("the summary is JSON");
    let backend = if cfg!(feature = "libzmq") {
        "libzmq"
    } else {
        "zeromq"
    };
    assert_eq!(
        summary["backend"].as_str(),
        Some(backend),
        "the fleet ran on this build's backend"
    );

    // Scale-out: every job of each run collected once, with 1, 2 and 4 workers.
    let scale = summary["scale"].as_array().expect("scale runs");
    assert_eq!(
        scale
            .iter()
            .map(|s| s["workers"].as_u64())
            .collect::<Vec<_>>(),
        [Some(1), Some(2), Some(4)]
    );
    for run in scale {
        assert_eq!(run["sent"].as_u64(), Some(SCALE_JOBS), "{run:#}");
        assert_eq!(run["collected"].as_u64(), Some(SCALE_JOBS), "{run:#}");
        assert_eq!(run["lost"].as_u64(), Some(0), "{run:#}");
        assert_eq!(run["duplicated"].as_u64(), Some(0), "{run:#}");
    }

    // The run with faults.
    let faults = &summary["faults"];
    let sent = number(faults, "/sent");
    let lost = number(faults, "/lost");
    assert_eq!(sent, FAULT_JOBS, "{faults:#}");
    assert_eq!(
        number(faults, "/duplicated"),
        0,
        "nothing duplicated: {faults:#}"
    );
    assert_eq!(number(faults, "/collected") + lost, sent, "{faults:#}");
    let causes = faults["lost_by_cause"]
        .as_object()
        .expect("losses by cause");
    assert!(
        causes.keys().all(|cause| !cause.starts_with("unexplained")),
        "every loss has a cause at-most-once allows: {causes:#?}"
    );
    assert_eq!(
        causes.values().filter_map(Value::as_u64).sum::<u64>(),
        lost,
        "every loss counted under one cause: {causes:#?}"
    );
    // The cut connection's losses, libzmq only: the default backend keeps the connection
    // through the cut, and loses nothing to it.
    let cut_connection: u64 = causes
        .iter()
        .filter(|(cause, _)| cause.starts_with("cut connection"))
        .filter_map(|(_, n)| n.as_u64())
        .sum();
    assert!(
        lost - cut_connection <= RATE,
        "the faults cost at most a second of the stream, {lost} jobs lost: {causes:#?}"
    );
    #[cfg(not(feature = "libzmq"))]
    {
        assert_eq!(cut_connection, 0, "{causes:#?}");
        assert!(
            faults["cut_noticed_by_ventilator_ms"].is_null(),
            "without heartbeats the cut goes unnoticed while it lasts: {faults:#}"
        );
    }
    #[cfg(feature = "libzmq")]
    {
        // Heartbeats: the ventilator and the sink cut the silent worker's connection within
        // the timeout, and it connects again once its link is back.
        let noticed = number(faults, "/cut_noticed_by_ventilator_ms");
        assert!(
            noticed <= NOTICED_WITHIN_MS,
            "the ventilator noticed the cut {noticed} ms after it: {faults:#}"
        );
        assert!(number(faults, "/cut_noticed_by_sink_ms") <= NOTICED_WITHIN_MS);
        number(faults, "/cut_worker_back_at_ventilator_ms");
        number(faults, "/cut_worker_back_at_sink_ms");
        // What went down with the connection: the cut worker's share of the stream until the
        // ventilator noticed, and a second more (what was in flight when the link went down).
        let share = RATE * (noticed + 1_000) / 1_000 / LIVE_AT_THE_CUT;
        assert!(
            cut_connection <= share,
            "the cut connection lost {cut_connection} jobs, more than the cut worker's share \
             ({share}) of the stream until it was noticed: {causes:#?}"
        );
        // CURVE: every host was admitted.
        assert_eq!(number(faults, "/peers_refused"), 0, "{faults:#}");
    }
    // Retry copies: some went out, every one of a live worker came back.
    let scheduled = number(faults, "/retry_copies_scheduled");
    assert!(scheduled > 0, "w4 failed jobs and sent itself copies");
    assert_eq!(number(faults, "/retry_copies_lost_with_a_live_worker"), 0);
    assert_eq!(
        number(faults, "/retry_copies_back")
            + number(faults, "/retry_copies_died_with_the_killed_worker"),
        scheduled
    );
    // Everyone worked; the killed worker before its death, the others to the end.
    for worker in ["w1", "w2", "w3", "w4"] {
        assert!(
            number(faults, &format!("/handled/{worker}")) > 0,
            "{worker} handled jobs: {faults:#}"
        );
    }
    // Every dialing socket came back: the cut worker's results after its link, each live
    // worker's results at the restarted sink.
    assert!(
        faults["reconnect_after_cut_ms"].is_u64(),
        "the cut worker's results reached the sink after its link came back: {faults:#}"
    );
    for worker in ["w2", "w3", "w4"] {
        number(
            faults,
            &format!("/reconnect_after_sink_restart_ms/{worker}"),
        );
    }
    for expectation in summary["expectations"].as_array().expect("expectations") {
        assert_eq!(expectation[1], Value::Bool(true), "{expectation}");
    }
}
