//! `zmqs send`: messages to a queue or a fan-out topic, through the crate's publisher.

use std::{
    io::Read,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use clap::Args;
use ruststream::{Bytes, BytesMut, HeaderMap, OutgoingMessage, Publisher};
use ruststream_zmq::{FanoutKind, OneWay, QueueKind, ZmqError, wire};

use crate::{
    EXIT_STATUSES, Failure,
    link::{Link, Socket},
};

/// Send messages to a queue (PUSH), or to a fan-out topic with --fanout (PUB)
///
/// The payload is the PAYLOAD argument, a --file, or stdin (PAYLOAD `-`, or neither given).
#[derive(Args)]
#[command(after_help = EXIT_STATUSES)]
pub struct Send {
    /// The endpoint: tcp://host:port or ipc://path
    endpoint: String,

    /// The message's name: the queue's, or the fan-out's topic
    name: String,

    /// The payload; `-` reads stdin
    payload: Option<String>,

    /// Read the payload from this file
    #[arg(long, short, value_name = "PATH", conflicts_with = "payload")]
    file: Option<PathBuf>,

    /// One message per line of the payload (empty lines skipped)
    #[arg(long)]
    lines: bool,

    /// A header, as name=value; repeat it for more
    #[arg(long = "header", short = 'H', value_name = "NAME=VALUE")]
    headers: Vec<String>,

    /// Send to a fan-out (PUB) rather than a queue (PUSH)
    #[arg(long)]
    fanout: bool,

    /// Send the messages this many times
    #[arg(long, short = 'n', default_value_t = 1)]
    count: u64,

    /// At most this many messages a second [default: as fast as the peer takes them]
    #[arg(long)]
    rate: Option<f64>,

    /// How long to wait for a peer, and for each send
    #[arg(long, default_value = "10s", value_parser = crate::duration)]
    timeout: Duration,

    /// A fan-out drops what it sends before a subscriber's subscription arrives: wait this
    /// long after a peer connects before the first message
    #[arg(long, default_value = "300ms", value_parser = crate::duration)]
    settle: Duration,

    /// ZeroMQ acknowledges nothing: after the last message, hold the connection this long so
    /// that what is still in flight reaches the peer before the process exits
    #[arg(long, default_value = "500ms", value_parser = crate::duration)]
    linger: Duration,

    /// No progress lines on stderr
    #[arg(long, short)]
    quiet: bool,

    #[command(flatten)]
    socket: Socket,
}

impl Send {
    pub async fn run(self) -> Result<(), Failure> {
        let payloads = self.payloads()?;
        let headers = headers(&self.headers)?;
        // The crate's own encoder says whether the name and headers can be sent, before any
        // socket is opened.
        wire::encode(&self.name, &headers, Bytes::new())
            .map_err(|err| Failure::Usage(err.to_string()))?;
        if self.name.contains('@') {
            return Err(Failure::Usage(format!(
                "`{}` names another endpoint: give the endpoint as the first argument",
                self.name
            )));
        }
        if self
            .rate
            .is_some_and(|rate| !(rate > 0.0 && rate.is_finite()))
        {
            return Err(Failure::Usage(
                "--rate is a number of messages a second above 0".into(),
            ));
        }
        if self.fanout {
            self.send::<FanoutKind>(&payloads, &headers).await
        } else {
            self.send::<QueueKind>(&payloads, &headers).await
        }
    }

    async fn send<P: OneWay>(
        &self,
        payloads: &[Bytes],
        headers: &HeaderMap,
    ) -> Result<(), Failure> {
        let link = Link::<P>::connect(&self.endpoint, &self.socket, self.timeout).await?;
        let sent = self.send_on(&link, payloads, headers).await;
        link.close().await;
        sent
    }

    async fn send_on<P: OneWay>(
        &self,
        link: &Link<P>,
        payloads: &[Bytes],
        headers: &HeaderMap,
    ) -> Result<(), Failure> {
        match link {
            Link::Bound(connected) => {
                let address = connected.bind_publisher().await?;
                eprintln!("zmqs: listening on {address}");
            }
            Link::Dialing(connected) => {
                if let Err(err) = connected.dial_publisher().await {
                    return Err(match err {
                        ZmqError::Connect { .. } => Failure::TimedOut(format!(
                            "no peer answered at {} within {:?}",
                            self.endpoint, self.timeout
                        )),
                        err => err.into(),
                    });
                }
            }
        }
        link.await_peer(self.timeout).await?;
        if self.fanout {
            tokio::time::sleep(self.settle).await;
        }
        let publisher = link.publisher();
        let total = self.count.saturating_mul(payloads.len() as u64);
        let started = Instant::now();
        let mut progress = Progress::new(self.quiet, total);
        let mut sent = 0u64;
        for _ in 0..self.count {
            for payload in payloads {
                if let Some(rate) = self.rate {
                    let due = started + Duration::from_secs_f64(sent as f64 / rate);
                    tokio::time::sleep_until(due.into()).await;
                }
                let message = OutgoingMessage::assembled(
                    self.name.as_str(),
                    BytesMut::from(&payload[..]),
                    headers.clone(),
                );
                let attempt = Instant::now();
                if let Err(err) = publisher.publish(message, None).await {
                    let said = format!("after {sent} of {total} messages: {err}");
                    return Err(if attempt.elapsed() >= self.timeout {
                        Failure::TimedOut(said)
                    } else {
                        Failure::Failed(said)
                    });
                }
                sent += 1;
                progress.tick(sent);
            }
        }
        progress.done(sent, started.elapsed());
        // The socket's queue and the peer's read of a closing connection are out of sight: the
        // sockets' own close does not wait for them in a process that exits right after.
        tokio::time::sleep(self.linger).await;
        Ok(())
    }

    fn payloads(&self) -> Result<Vec<Bytes>, Failure> {
        let read = read_payload(self.file.as_deref(), self.payload.as_deref())?;
        if !self.lines {
            return Ok(vec![Bytes::from(read)]);
        }
        let lines: Vec<Bytes> = read
            .split(|&b| b == b'\n')
            .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
            .filter(|line| !line.is_empty())
            .map(Bytes::copy_from_slice)
            .collect();
        if lines.is_empty() {
            return Err(Failure::Usage("--lines: the payload has no lines".into()));
        }
        Ok(lines)
    }
}

/// The payload: a file's, the argument's, or stdin's (an argument of `-`, or none).
pub fn read_payload(file: Option<&Path>, argument: Option<&str>) -> Result<Vec<u8>, Failure> {
    match (file, argument) {
        (Some(path), _) => std::fs::read(path)
            .map_err(|err| Failure::Failed(format!("reading {} failed: {err}", path.display()))),
        (None, Some(text)) if text != "-" => Ok(text.as_bytes().to_vec()),
        _ => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .map_err(|err| Failure::Failed(format!("reading stdin failed: {err}")))?;
            Ok(bytes)
        }
    }
}

/// `-H name=value` options as a header map.
pub fn headers(given: &[String]) -> Result<HeaderMap, Failure> {
    let mut headers = HeaderMap::new();
    for each in given {
        let Some((name, value)) = each.split_once('=') else {
            return Err(Failure::Usage(format!(
                "header `{each}` has no `=`: write -H name=value"
            )));
        };
        headers.insert(name.trim().to_owned(), Bytes::from(value.to_owned()));
    }
    Ok(headers)
}

/// A line on stderr each second of a run longer than one, and a summary at the end of such a
/// run: how far it is, and how fast.
struct Progress {
    quiet: bool,
    total: u64,
    started: Instant,
    next: Instant,
}

impl Progress {
    const EVERY: Duration = Duration::from_secs(1);

    fn new(quiet: bool, total: u64) -> Self {
        let started = Instant::now();
        Self {
            quiet,
            total,
            started,
            next: started + Self::EVERY,
        }
    }

    fn tick(&mut self, sent: u64) {
        if self.quiet {
            return;
        }
        let now = Instant::now();
        if now >= self.next {
            self.next = now + Self::EVERY;
            let elapsed = now - self.started;
            eprintln!(
                "zmqs: sent {sent} of {} ({:.0}/s)",
                self.total,
                sent as f64 / elapsed.as_secs_f64()
            );
        }
    }

    fn done(&self, sent: u64, elapsed: Duration) {
        if !self.quiet && elapsed >= Self::EVERY {
            eprintln!(
                "zmqs: sent {sent} in {:.1} s ({:.0}/s)",
                elapsed.as_secs_f64(),
                sent as f64 / elapsed.as_secs_f64()
            );
        }
    }
}
