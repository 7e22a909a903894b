//! `zmqs ask`: requests to a responder through the crate's requester, with the round trip.

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use clap::Args;
use futures::StreamExt;
use ruststream::{Bytes, BytesMut, HeaderMap, OutgoingMessage, RequestReply};
use ruststream_zmq::{RpcKind, ZmqRequester, wire};
use serde_json::json;
use tokio::time::Instant;

use crate::{
    EXIT_STATUSES, Failure, lines,
    link::{Link, Socket, Waits},
};

/// Ask a responder (ROUTER) and print its answer with the round trip
///
/// One request prints the answer as a JSON line (as `tail` does) with "round_trip_ms". With
/// --count above 1 it prints one summary line instead: answered, failed, p50_ms, p99_ms,
/// per_second.
#[derive(Args)]
#[command(after_help = EXIT_STATUSES)]
pub struct Ask {
    /// The responder's endpoint: tcp://host:port or ipc://path [env: ZMQS_ENDPOINT, where
    /// this word is left out]
    endpoint: String,

    /// The request's name
    name: Option<String>,

    /// The payload; `-` or nothing reads stdin
    payload: Option<String>,

    /// A header, as name=value; repeat it for more
    #[arg(long = "header", short = 'H', value_name = "NAME=VALUE")]
    headers: Vec<String>,

    /// Send the payload's bytes as they are; without it a payload must be JSON, as the
    /// crate's responders read it
    #[arg(long)]
    raw: bool,

    /// How many requests to send (1 or more)
    #[arg(long, short = 'n', default_value_t = 1, value_parser = crate::at_least_one::<u64>())]
    count: u64,

    /// How many requests wait for their answers at once (1 or more)
    #[arg(long, default_value_t = 1, value_parser = crate::at_least_one::<usize>())]
    in_flight: usize,

    /// How long each request waits for its answer
    #[arg(long, default_value = "5s", value_parser = crate::duration)]
    timeout: Duration,

    #[command(flatten)]
    socket: Socket,
}

impl Ask {
    /// The NAME, there once `run` has read the words.
    fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }

    pub async fn run(mut self) -> Result<(), Failure> {
        self.socket.fill_from_env();
        crate::link::endpoint_from_env(
            &mut self.endpoint,
            &mut self.name,
            Some(&mut self.payload),
        )?;
        let headers = crate::send::headers(&self.headers)?;
        wire::encode(self.name(), &headers, Bytes::new())
            .map_err(|err| Failure::Usage(err.to_string()))?;
        let payload = crate::send::read_payload(None, self.payload.as_deref())?;
        if !self.raw {
            crate::send::json_payload(&payload, "the payload")?;
        }
        let payload = Bytes::from(payload);
        let link = Link::<RpcKind>::connect(
            &self.endpoint,
            &self.socket,
            Waits {
                send: self.timeout,
                linger: Duration::ZERO,
            },
        )
        .await?;
        let requester = match &link {
            Link::Bound(connected) => connected.requester(),
            Link::Dialing(connected) => connected.requester(),
        };
        let asking = async {
            if self.count == 1 {
                self.one(&requester, payload, headers).await
            } else {
                self.many(&requester, payload, headers).await
            }
        };
        // A requester's socket opens, and a bound one listens, with its first request: say
        // where while the requests wait for a peer to dial in.
        let mut asking = std::pin::pin!(asking);
        let asked = tokio::select! {
            asked = &mut asking => asked,
            () = link.announce(Duration::from_secs(5)) => asking.await,
        };
        let dialer = crate::diagnose::Dialer {
            socket: "DEALER",
            curve: self.socket.curve.curve_server.is_some(),
        };
        let asked = match asked {
            Err(failure) => Err(link.explain(failure, dialer).await),
            asked => asked,
        };
        link.close().await;
        asked
    }

    async fn one(
        &self,
        requester: &ZmqRequester,
        payload: Bytes,
        headers: HeaderMap,
    ) -> Result<(), Failure> {
        let started = Instant::now();
        let answer = ask(requester, self.name(), &payload, headers, self.timeout).await?;
        let round_trip = started.elapsed();
        let mut line = lines::message(&answer, SystemTime::now());
        line.insert("round_trip_ms", &json!(millis(round_trip)));
        println!("{line}");
        Ok(())
    }

    async fn many(
        &self,
        requester: &ZmqRequester,
        payload: Bytes,
        headers: HeaderMap,
    ) -> Result<(), Failure> {
        let headers = Arc::new(headers);
        let started = Instant::now();
        let answers = futures::stream::iter(0..self.count)
            .map(|_| {
                let headers = HeaderMap::clone(&headers);
                let payload = payload.clone();
                async move {
                    let asked = Instant::now();
                    ask(requester, self.name(), &payload, headers, self.timeout)
                        .await
                        .map(|_| asked.elapsed())
                }
            })
            .buffer_unordered(self.in_flight);
        let mut answers = std::pin::pin!(answers);
        let mut results: Vec<Result<Duration, Failure>> = Vec::new();
        let interrupted = crate::interrupted();
        let mut interrupted = std::pin::pin!(interrupted);
        // Ctrl-C ends the run with the summary of what was answered by then.
        let stopped = loop {
            tokio::select! {
                biased;
                _ = &mut interrupted => break true,
                next = answers.next() => match next {
                    Some(result) => results.push(result),
                    None => break false,
                },
            }
        };
        let elapsed = started.elapsed();
        let mut round_trips: Vec<Duration> = results
            .iter()
            .filter_map(|result| result.as_ref().ok().copied())
            .collect();
        round_trips.sort_unstable();
        let failed = results.len() - round_trips.len();
        let percentile = |p: f64| {
            let at = ((round_trips.len() as f64 * p).ceil() as usize).clamp(1, round_trips.len());
            millis(round_trips[at - 1])
        };
        let mut summary = if round_trips.is_empty() {
            json!({"requests": self.count, "in_flight": self.in_flight, "answered": 0, "failed": failed})
        } else {
            json!({
                "requests": self.count,
                "in_flight": self.in_flight,
                "answered": round_trips.len(),
                "failed": failed,
                "p50_ms": percentile(0.50),
                "p99_ms": percentile(0.99),
                "per_second": (round_trips.len() as f64 / elapsed.as_secs_f64()).round(),
            })
        };
        if stopped {
            summary["unfinished"] = json!(self.count - results.len() as u64);
        }
        println!("{summary}");
        if stopped {
            return Err(Failure::Interrupted(format!(
                "interrupted after {} of {} requests were answered",
                round_trips.len(),
                self.count
            )));
        }
        match results.iter_mut().find_map(|result| result.as_ref().err()) {
            None => Ok(()),
            Some(Failure::TimedOut(why)) => Err(Failure::TimedOut(format!(
                "{failed} of {} requests failed; the first: {why}",
                self.count
            ))),
            Some(first) => Err(Failure::Failed(format!(
                "{failed} of {} requests failed; the first: {}",
                self.count,
                first.message()
            ))),
        }
    }
}

async fn ask(
    requester: &ZmqRequester,
    name: &str,
    payload: &[u8],
    headers: HeaderMap,
    timeout: Duration,
) -> Result<ruststream_zmq::ZmqMessage, Failure> {
    let request = OutgoingMessage::assembled(name, BytesMut::from(payload), headers);
    requester
        .request(request, timeout)
        .await
        .map_err(|err| match err {
            ruststream_zmq::ZmqError::RequestTimeout { .. } => Failure::TimedOut(err.to_string()),
            err => Failure::Failed(err.to_string()),
        })
}

/// Milliseconds, to the microsecond.
fn millis(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1e6).round() / 1e3
}
