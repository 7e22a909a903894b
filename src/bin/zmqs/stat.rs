//! `zmqs stat`: watches a running service's socket figures, read from the Prometheus route it
//! serves its registry on (docs/metrics.md), so a service exposes nothing it did not choose to.

use std::{collections::BTreeMap, io::Write, time::Duration};

use clap::Args;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::{Request, Uri, body::Bytes, header::HOST};
use hyper_util::rt::TokioIo;
use tokio::{net::TcpStream, time::timeout};

use crate::{EXIT_STATUSES, Failure};

/// The most a scrape may be: far past any registry of a service's brokers, and a bound on
/// what a server that streams without end can make `zmqs` hold.
const LARGEST_SCRAPE: usize = 4 << 20;

/// The prefix of the series this crate's `ZmqMonitor` writes.
const SERIES: &str = "ruststream_zmq_";

/// Watch a running service's socket figures, per broker and endpoint, refreshed each second
///
/// Reads the Prometheus route the service serves its registry on, where each broker's monitor
/// is registered with `ZmqMonitor::register_metrics` (the `metrics` feature). The figures are
/// totals since the service started; `sent/s` is the rate since the last refresh.
#[derive(Args)]
#[command(after_help = EXIT_STATUSES)]
pub struct Stat {
    /// The route: http://host:port/path, or host:port for http://host:port/metrics
    url: String,

    /// Print the figures once, as one JSON object, and exit
    #[arg(long)]
    json: bool,

    /// Time between refreshes
    #[arg(long, default_value = "1s", value_parser = interval)]
    every: Duration,
}

impl Stat {
    pub async fn run(self) -> Result<(), Failure> {
        let uri = route(&self.url)?;
        if self.json {
            let figures = figures(&scrape(&uri, self.every).await?, &uri)?;
            println!("{}", json(&uri, &figures));
            return Ok(());
        }
        let mut previous: Option<BTreeMap<Key, Figures>> = None;
        let mut shown = 0u64;
        let watch = async {
            loop {
                let figures = figures(&scrape(&uri, self.every).await?, &uri)?;
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(
                    table(&figures, previous.as_ref(), self.every.as_secs_f64()).as_bytes(),
                );
                let _ = out.flush();
                shown += 1;
                previous = Some(figures);
                tokio::time::sleep(self.every).await;
            }
        };
        tokio::select! {
            failed = watch => failed,
            () = crate::interrupted() => Err(Failure::Interrupted(format!(
                "interrupted after {shown} refresh{} of {uri}",
                if shown == 1 { "" } else { "es" }
            ))),
        }
    }
}

/// `--every`: at least 100 ms, so a watch is never a flood of scrapes.
fn interval(text: &str) -> Result<Duration, String> {
    let every = crate::duration(text)?;
    if every < Duration::from_millis(100) {
        return Err(format!(
            "`{text}` is too short: refresh at most every 100ms"
        ));
    }
    Ok(every)
}

/// The route as a URI; a bare `host:port` means its `/metrics`.
fn route(url: &str) -> Result<Uri, Failure> {
    let text = if url.contains("://") {
        url.to_owned()
    } else {
        format!("http://{url}/metrics")
    };
    let uri: Uri = text.parse().map_err(|err| {
        Failure::Usage(format!(
            "`{url}` is not a route: write http://host:port/metrics ({err})"
        ))
    })?;
    match (uri.scheme_str(), uri.authority()) {
        (Some("http"), Some(_)) => Ok(uri),
        (Some(scheme), _) if scheme != "http" => Err(Failure::Usage(format!(
            "`{url}`: zmqs reads a route over http:// only; serve the registry on the loopback \
             and point zmqs there"
        ))),
        _ => Err(Failure::Usage(format!(
            "`{url}` names no host: write http://host:port/metrics"
        ))),
    }
}

/// One GET of the route, within `wait` and [`LARGEST_SCRAPE`].
async fn scrape(uri: &Uri, wait: Duration) -> Result<String, Failure> {
    let wait = wait.max(Duration::from_secs(2));
    let authority = uri.authority().map_or("", |authority| authority.as_str());
    let failed = |why: String| {
        Failure::Failed(format!(
            "no figures from {uri}: {why}; is the service serving its registry there \
             (docs/metrics.md)?"
        ))
    };
    let get = async {
        let host = uri.host().unwrap_or_default();
        let port = uri.port_u16().unwrap_or(80);
        let stream = TcpStream::connect((host.trim_matches(['[', ']']), port))
            .await
            .map_err(|err| failed(err.to_string()))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|err| failed(err.to_string()))?;
        tokio::spawn(connection);
        let path = uri.path_and_query().map_or("/", |path| path.as_str());
        let request = Request::get(path)
            .header(HOST, authority)
            .body(Empty::<Bytes>::new())
            .map_err(|err| failed(err.to_string()))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|err| failed(err.to_string()))?;
        if !response.status().is_success() {
            return Err(failed(format!("it answered {}", response.status())));
        }
        let body = Limited::new(response.into_body(), LARGEST_SCRAPE)
            .collect()
            .await
            .map_err(|err| failed(format!("{err} (at most {LARGEST_SCRAPE} bytes are read)")))?
            .to_bytes();
        String::from_utf8(body.to_vec()).map_err(|_| failed("the answer is not UTF-8".into()))
    };
    match timeout(wait, get).await {
        Ok(done) => done,
        Err(_) => Err(Failure::TimedOut(format!(
            "{uri} did not answer within {}s",
            wait.as_secs_f64()
        ))),
    }
}

/// A broker's socket figures, as its monitor reports them.
type Key = (String, String);

#[derive(Debug, Default, Clone, PartialEq)]
struct Figures {
    peers_connected: f64,
    sent: f64,
    send_failures: f64,
    refused: BTreeMap<String, f64>,
    peers_refused: f64,
    peers_lost: f64,
    reconnects: f64,
    answers_dropped_not_reading: f64,
}

/// The figures of each broker (`broker`, `endpoint`) in a scrape's text.
fn figures(text: &str, uri: &Uri) -> Result<BTreeMap<Key, Figures>, Failure> {
    let lines = text.lines().map(|line| Ok(line.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines)
        .map_err(|err| Failure::Failed(format!("{uri} is not Prometheus text: {err}")))?;
    let mut brokers: BTreeMap<Key, Figures> = BTreeMap::new();
    for sample in scrape.samples {
        let Some(series) = sample.metric.strip_prefix(SERIES) else {
            continue;
        };
        let value = match sample.value {
            prometheus_parse::Value::Counter(value)
            | prometheus_parse::Value::Gauge(value)
            | prometheus_parse::Value::Untyped(value) => value,
            _ => continue,
        };
        let label = |name: &str| sample.labels.get(name).unwrap_or_default().to_owned();
        let broker = brokers
            .entry((label("broker"), label("endpoint")))
            .or_default();
        match series {
            "peers_connected" => broker.peers_connected = value,
            "messages_sent_total" => broker.sent = value,
            "send_failures_total" => broker.send_failures = value,
            "messages_refused_total" => {
                *broker.refused.entry(label("rule")).or_default() += value;
            }
            "peers_refused_total" => broker.peers_refused = value,
            "peers_lost_total" => broker.peers_lost = value,
            "reconnects_total" => broker.reconnects = value,
            "answers_dropped_not_reading_total" => broker.answers_dropped_not_reading = value,
            _ => {}
        }
    }
    if brokers.is_empty() {
        return Err(Failure::Failed(format!(
            "{uri} answered, but with no {SERIES}* series: register each broker's monitor in \
             the registry it serves (ZmqMonitor::register_metrics, the `metrics` feature)"
        )));
    }
    Ok(brokers)
}

/// One refresh as a table; `sent/s` against the previous refresh, `seconds` before.
fn table(
    now: &BTreeMap<Key, Figures>,
    before: Option<&BTreeMap<Key, Figures>>,
    seconds: f64,
) -> String {
    let header = [
        "broker",
        "endpoint",
        "peers",
        "sent",
        "sent/s",
        "failed",
        "refused",
        "refused-peers",
        "lost",
        "reconnects",
    ];
    let mut rows = vec![header.map(str::to_owned).to_vec()];
    for (key, figures) in now {
        let rate = before
            .and_then(|before| before.get(key))
            .map_or("-".to_owned(), |earlier| {
                format!("{:.0}", ((figures.sent - earlier.sent) / seconds).max(0.0))
            });
        rows.push(vec![
            key.0.clone(),
            key.1.clone(),
            count(figures.peers_connected),
            count(figures.sent),
            rate,
            count(figures.send_failures),
            count(figures.refused.values().sum()),
            count(figures.peers_refused),
            count(figures.peers_lost),
            count(figures.reconnects),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|column| rows.iter().map(|row| row[column].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::from("\n");
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            // Names to the left, figures to the right.
            .map(|(column, (cell, width))| match column {
                0 | 1 => format!("{cell:<width$}"),
                _ => format!("{cell:>width$}"),
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

fn count(value: f64) -> String {
    format!("{value:.0}")
}

/// The figures as one JSON object: `{"route", "brokers": [{"broker", "endpoint", ...}]}`.
fn json(uri: &Uri, brokers: &BTreeMap<Key, Figures>) -> serde_json::Value {
    let brokers: Vec<serde_json::Value> = brokers
        .iter()
        .map(|((broker, endpoint), figures)| {
            serde_json::json!({
                "broker": broker,
                "endpoint": endpoint,
                "peers_connected": figures.peers_connected,
                "sent": figures.sent,
                "send_failures": figures.send_failures,
                "refused": figures.refused.values().sum::<f64>(),
                "refused_by_rule": figures.refused,
                "peers_refused": figures.peers_refused,
                "peers_lost": figures.peers_lost,
                "reconnects": figures.reconnects,
                "answers_dropped_not_reading": figures.answers_dropped_not_reading,
            })
        })
        .collect();
    serde_json::json!({ "route": uri.to_string(), "brokers": brokers })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAPE: &str = r#"# HELP ruststream_zmq_messages_sent_total sent
# TYPE ruststream_zmq_messages_sent_total counter
ruststream_zmq_messages_sent_total{broker="payments",endpoint="tcp://0.0.0.0:5555"} 40
# TYPE ruststream_zmq_peers_connected gauge
ruststream_zmq_peers_connected{broker="payments",endpoint="tcp://0.0.0.0:5555"} 2
# TYPE ruststream_zmq_messages_refused_total counter
ruststream_zmq_messages_refused_total{broker="payments",endpoint="tcp://0.0.0.0:5555",rule="header-colon",subscription="a"} 1
ruststream_zmq_messages_refused_total{broker="payments",endpoint="tcp://0.0.0.0:5555",rule="max-frames",subscription="a"} 2
# TYPE ruststream_messages_consumed_total counter
ruststream_messages_consumed_total{name="a",status="ack"} 3
"#;

    fn uri() -> Uri {
        route("127.0.0.1:9100").unwrap()
    }

    #[test]
    fn a_scrape_reads_as_each_brokers_figures_and_nothing_else() {
        let brokers = figures(SCRAPE, &uri()).unwrap();
        assert_eq!(brokers.len(), 1);
        let payments = &brokers[&("payments".into(), "tcp://0.0.0.0:5555".into())];
        assert_eq!(payments.sent, 40.0);
        assert_eq!(payments.peers_connected, 2.0);
        assert_eq!(payments.refused.values().sum::<f64>(), 3.0);
        assert_eq!(payments.refused["max-frames"], 2.0);
    }

    #[test]
    fn a_scrape_without_the_crates_series_says_what_to_register() {
        let Err(Failure::Failed(why)) = figures(
            "ruststream_messages_consumed_total{name=\"a\",status=\"ack\"} 3\n",
            &uri(),
        ) else {
            panic!("a scrape with no broker read as figures");
        };
        assert!(why.contains("ZmqMonitor::register_metrics"), "{why}");
    }

    #[test]
    fn the_rate_is_the_sent_difference_over_the_interval() {
        let now = figures(SCRAPE, &uri()).unwrap();
        let mut before = now.clone();
        before.values_mut().for_each(|figures| figures.sent = 30.0);
        let shown = table(&now, Some(&before), 2.0);
        let row = shown
            .lines()
            .find(|line| line.starts_with("payments"))
            .unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cells,
            [
                "payments",
                "tcp://0.0.0.0:5555",
                "2",
                "40",
                "5",
                "0",
                "3",
                "0",
                "0",
                "0"
            ]
        );
    }

    #[test]
    fn a_route_is_http_with_a_host_and_a_bare_address_means_its_metrics() {
        assert_eq!(uri().to_string(), "http://127.0.0.1:9100/metrics");
        assert!(route("http://[::1]:9100/m").is_ok());
        for bad in [
            "https://host/metrics",
            "ftp://host/x",
            "http:///metrics",
            "not a url",
        ] {
            assert!(matches!(route(bad), Err(Failure::Usage(_))), "{bad}");
        }
    }
}
