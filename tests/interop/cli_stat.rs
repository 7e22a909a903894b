//! `zmqs stat` against a service of this crate that serves its registry on a route of its own:
//! what a peer did to the broker is what `stat` prints, once as JSON and refreshed as a table.

use axum::{Router, routing::get};
use ruststream::{Broker, Subscribe};
use serde_json::{Value, json};

use super::{
    cli::{Running, run},
    prelude::*,
};
use crate::support::{PyPeer, STEP, Tap, logs, until_async};

/// Serves `registry` as Prometheus text at `/metrics` on the loopback; answers the route.
async fn serve(registry: prometheus::Registry) -> String {
    let route = Router::new().route(
        "/metrics",
        get(move || {
            let registry = registry.clone();
            async move {
                let mut text = Vec::new();
                prometheus::Encoder::encode(
                    &prometheus::TextEncoder::new(),
                    &registry.gather(),
                    &mut text,
                )
                .unwrap();
                String::from_utf8(text).unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, route).await });
    format!("http://{address}/metrics")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stat_prints_what_peers_did_to_a_running_broker_once_as_json_then_as_a_watched_table() {
    logs();
    let connected = ZmqQueue::new(ZmqEndpoint::bind("tcp://127.0.0.1:0"))
        .connect()
        .await
        .unwrap();
    let mut tap = Tap::new(connected.subscribe("payments").await.unwrap());
    let registry = prometheus::Registry::new();
    connected
        .monitor()
        .register_metrics(&registry, "payments")
        .unwrap();
    let route = serve(registry).await;

    // Two good payments and one with a header line that has no colon.
    let address = connected.monitor().bound_address().unwrap();
    let mut push = PyPeer::connect("PUSH", &address, json!({})).await;
    push.send(&[b"payments", b"", br#"{"id":1}"#]).await;
    push.send(&[b"payments", b"no colon here", br#"{"id":2}"#])
        .await;
    push.send(&[b"payments", b"", br#"{"id":3}"#]).await;
    tap.expect("the first payment").await;
    tap.expect("the third payment").await;

    // The refusal is counted as the intake reads it: poll until `stat` shows it.
    let brokers = until_async(STEP, "stat to show the refusal", async || {
        let ran = run(&["stat", &route, "--json"]).await;
        assert_eq!(ran.code(), Some(0), "{ran:?}");
        let printed: Value = serde_json::from_str(ran.stdout.trim()).unwrap();
        assert_eq!(printed["route"], json!(route));
        let brokers = printed["brokers"].as_array().unwrap().clone();
        (brokers[0]["refused"] == json!(1.0)).then_some(brokers)
    })
    .await;
    assert_eq!(brokers.len(), 1, "{brokers:?}");
    let payments = &brokers[0];
    assert_eq!(payments["broker"], json!("payments"));
    assert_eq!(payments["endpoint"], json!("tcp://127.0.0.1:0"));
    assert_eq!(payments["refused_by_rule"], json!({"header-colon": 1.0}));
    assert_eq!(payments["peers_connected"], json!(1.0), "the Python PUSH");
    assert_eq!(payments["send_failures"], json!(0.0));

    // Watched: a table each refresh, then Ctrl-C ends it with 130 and the count of refreshes.
    let mut watch = Running::start(&["stat", &route, "--every", "200ms"]);
    let mut rows = 0;
    while rows < 2 {
        let line = watch
            .text_line(STEP)
            .await
            .unwrap_or_else(|| panic!("stat printed no table; stderr:\n{}", watch.stderr()));
        if let Some(row) = line.strip_prefix("payments") {
            let cells: Vec<&str> = row.split_whitespace().collect();
            // endpoint, peers, sent, sent/s, failed, refused, ...
            assert_eq!(cells[0], "tcp://127.0.0.1:0", "{line}");
            assert_eq!(cells[1], "1", "peers: {line}");
            assert_eq!(cells[5], "1", "refused: {line}");
            rows += 1;
        }
    }
    watch.interrupt();
    let (status, stderr) = watch.finish().await;
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("zmqs: interrupted after "), "{stderr}");
    push.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stat_names_what_is_wrong_with_a_route_that_serves_no_figures() {
    logs();
    // Nothing listens: the route is named, with what to check.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    run(&["stat", &closed.to_string(), "--json"])
        .await
        .failed_with(1, "is the service serving its registry there");

    // A registry with no broker's monitor in it.
    let route = serve(prometheus::Registry::new()).await;
    run(&["stat", &route, "--json"])
        .await
        .failed_with(1, "ZmqMonitor::register_metrics");

    // Not a route zmqs reads.
    run(&["stat", "https://127.0.0.1:1/metrics"])
        .await
        .failed_with(2, "http:// only");
}
