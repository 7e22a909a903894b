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
    link::{Link, Socket, Waits},
};

/// Send messages to a queue (PUSH), or to a fan-out topic with --fanout (PUB)
///
/// The payload is the PAYLOAD argument, a --file, or stdin (PAYLOAD `-`, or neither given).
#[derive(Args)]
#[command(after_help = EXIT_STATUSES)]
pub struct Send {
    /// The endpoint: tcp://host:port or ipc://path [env: ZMQS_ENDPOINT, where this word is
    /// left out]
    endpoint: String,

    /// The message's name: the queue's, or the fan-out's topic
    name: Option<String>,

    /// The payload; `-` reads stdin
    payload: Option<String>,

    /// Read the payload from this file
    #[arg(long, short, value_name = "PATH", conflicts_with = "payload")]
    file: Option<PathBuf>,

    /// One message per line of the payload (empty lines skipped)
    #[arg(long)]
    lines: bool,

    /// Send the payload's bytes as they are; without it a payload must be JSON (each line's,
    /// with --lines), as the crate's services read it
    #[arg(long)]
    raw: bool,

    /// A header, as name=value; repeat it for more
    #[arg(long = "header", short = 'H', value_name = "NAME=VALUE")]
    headers: Vec<String>,

    /// Send to a fan-out (PUB) rather than a queue (PUSH)
    #[arg(long)]
    fanout: bool,

    /// Send the messages this many times (1 or more)
    #[arg(long, short = 'n', default_value_t = 1, value_parser = crate::at_least_one::<u64>())]
    count: u64,

    /// At most this many messages a second, 0.001 or more [default: as fast as the peer takes
    /// them]
    #[arg(long, value_parser = crate::rate)]
    rate: Option<f64>,

    /// How long to wait for a peer, and for each send
    #[arg(long, default_value = "10s", value_parser = crate::duration)]
    timeout: Duration,

    /// A fan-out drops what it sends before a subscriber's subscription arrives: wait this
    /// long after a peer connects before the first message
    #[arg(long, default_value = "300ms", value_parser = crate::duration)]
    settle: Duration,

    /// At the end, wait at most this long for what the socket still queues to leave (the
    /// broker's `linger`); what has not left by then is lost
    #[arg(long, default_value = "500ms", value_parser = crate::duration)]
    linger: Duration,

    /// No progress lines on stderr
    #[arg(long, short)]
    quiet: bool,

    #[command(flatten)]
    socket: Socket,
}

impl Send {
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
        if self.file.is_some() && self.payload.is_some() {
            return Err(Failure::Usage(
                "a PAYLOAD and --file say two things: give one".into(),
            ));
        }
        // The command line is checked before stdin is read.
        let headers = headers(&self.headers)?;
        // The crate's own encoder says whether the name and headers can be sent, before any
        // socket is opened.
        wire::encode(self.name(), &headers, Bytes::new())
            .map_err(|err| Failure::Usage(err.to_string()))?;
        if self.name().contains('@') {
            return Err(Failure::Usage(format!(
                "`{}` names another endpoint: give the endpoint as the first argument",
                self.name()
            )));
        }
        let payloads = self.payloads()?;
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
        let waits = Waits {
            send: self.timeout,
            linger: self.linger,
        };
        let link = Link::<P>::connect(&self.endpoint, &self.socket, waits).await?;
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
                        ZmqError::Connect { .. } => {
                            let failure = Failure::TimedOut(format!(
                                "no peer answered at {} within {:?}",
                                self.endpoint, self.timeout
                            ));
                            crate::diagnose::explained(failure, &self.endpoint, self.dialer()).await
                        }
                        err => err.into(),
                    });
                }
            }
        }
        if let Err(failure) = link.await_peer(self.timeout).await {
            return Err(link.explain(failure, self.dialer()).await);
        }
        if self.fanout {
            tokio::time::sleep(self.settle).await;
        }
        let publisher = link.publisher();
        let total = self.count.saturating_mul(payloads.len() as u64);
        let sent = std::cell::Cell::new(0u64);
        let sending = self.send_all(&publisher, payloads, headers, total, &sent);
        tokio::select! {
            biased;
            done = sending => done,
            () = crate::interrupted() => Err(Failure::Interrupted(format!(
                "interrupted after {} of {total} messages",
                sent.get()
            ))),
        }
    }

    /// Sends every message, counting in `counted` those that went.
    async fn send_all(
        &self,
        publisher: &ruststream_zmq::ZmqPublisher,
        payloads: &[Bytes],
        headers: &HeaderMap,
        total: u64,
        counted: &std::cell::Cell<u64>,
    ) -> Result<(), Failure> {
        let started = Instant::now();
        let mut progress = Progress::new(self.quiet, total, started);
        let mut sent = 0u64;
        for _ in 0..self.count {
            for payload in payloads {
                if let Some(rate) = self.rate {
                    match due(sent, rate).and_then(|due| started.checked_add(due)) {
                        Some(at) => tokio::time::sleep_until(at.into()).await,
                        // Due past what the clock holds: after more messages than a run sends.
                        None => std::future::pending().await,
                    }
                }
                let message = OutgoingMessage::assembled(
                    self.name(),
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
                counted.set(sent);
                if let Some(line) = progress.tick(sent, Instant::now()) {
                    eprintln!("{line}");
                }
            }
        }
        if crate::json() {
            let seconds = started.elapsed().as_secs_f64();
            println!(
                "{}",
                serde_json::json!({
                    "sent": sent,
                    "of": total,
                    "seconds": (seconds * 1e3).round() / 1e3,
                    "per_second": (sent as f64 / seconds).round(),
                })
            );
        } else if let Some(line) = progress.done(sent, Instant::now()) {
            eprintln!("{line}");
        }
        Ok(())
    }

    /// What this command dials with, for the probe of a silent endpoint.
    fn dialer(&self) -> crate::diagnose::Dialer {
        crate::diagnose::Dialer {
            socket: if self.fanout { "PUB" } else { "PUSH" },
            curve: self.socket.curve.curve_server.is_some(),
        }
    }

    fn payloads(&self) -> Result<Vec<Bytes>, Failure> {
        let read = read_payload(self.file.as_deref(), self.payload.as_deref())?;
        if !self.lines {
            if !self.raw {
                json_payload(&read, "the payload")?;
            }
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
        if !self.raw {
            for (n, line) in lines.iter().enumerate() {
                json_payload(line, &format!("message {} of --lines", n + 1))?;
            }
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
            use std::io::IsTerminal;
            if std::io::stdin().is_terminal() {
                eprintln!(
                    "zmqs: reading the payload from the terminal: type it, then Ctrl-D on a line \
                     of its own (or give it as an argument, --file, or through a pipe)"
                );
            }
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .map_err(|err| Failure::Failed(format!("reading stdin failed: {err}")))?;
            Ok(bytes)
        }
    }
}

/// Refuses a payload that is not JSON: a service of the crate decodes JSON, and drops what is
/// not (`send` would exit 0 and `ask` wait out its timeout).
pub fn json_payload(payload: &[u8], what: &str) -> Result<(), Failure> {
    match serde_json::from_slice::<&serde_json::value::RawValue>(payload) {
        Ok(_) => Ok(()),
        Err(err) => Err(Failure::Usage(format!(
            "{what} is not JSON ({err}): the services of this crate read JSON; --raw sends \
             the bytes as they are"
        ))),
    }
}

/// `-H name=value` options as a header map: each name a token (as HTTP's: no space, no
/// separator), none the crate or the framework sets, none given twice.
pub fn headers(given: &[String]) -> Result<HeaderMap, Failure> {
    let mut headers = HeaderMap::new();
    for each in given {
        let Some((name, value)) = each.split_once('=') else {
            return Err(Failure::Usage(format!(
                "header `{each}` has no `=`: write -H name=value"
            )));
        };
        let name = name.trim();
        header_name(name).map_err(Failure::Usage)?;
        if headers.get(name).is_some() {
            return Err(Failure::Usage(format!(
                "header `{name}` is given twice: a message carries one value a name"
            )));
        }
        headers.insert(name.to_owned(), Bytes::from(value.to_owned()));
    }
    Ok(headers)
}

/// Whether `-H` may set a header of this name.
fn header_name(name: &str) -> Result<(), String> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(token) {
        return Err(format!(
            "header name `{name}` is not a token: letters, digits and !#$%&'*+-.^_`|~ only, \
             no space"
        ));
    }
    let lower = name.to_ascii_lowercase();
    let owner = if lower.starts_with("x-ruststream-") {
        // The framework's namespace: `x-ruststream-retry-count` counts a message's attempts,
        // and a forged one moves a service past its retry cap.
        "the framework's: it counts a message's attempts (retries, the dead letter)"
    } else if lower == wire::REPLY_TO {
        "the crate's: a responder sets it to the requester's address"
    } else if lower == wire::CORRELATION_ID {
        "the crate's: it matches an answer to its request"
    } else {
        return Ok(());
    };
    Err(format!("header `{name}` is {owner}; -H cannot set it"))
}

/// When the message after `sent` others is due under `--rate rate`, from the first one's
/// start: the n-th at n / rate seconds, so a send that took long does not push back the rest.
fn due(sent: u64, rate: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(sent as f64 / rate).ok()
}

/// A line for stderr each second of a run longer than one, and a summary at the end of such a
/// run: how far it is, and how fast. Given the times, so a test can give them.
struct Progress {
    quiet: bool,
    total: u64,
    started: Instant,
    next: Instant,
}

impl Progress {
    const EVERY: Duration = Duration::from_secs(1);

    fn new(quiet: bool, total: u64, started: Instant) -> Self {
        Self {
            quiet,
            total,
            started,
            next: started + Self::EVERY,
        }
    }

    /// The progress line once `sent` have gone at `now`, where a second has passed since the
    /// last (or the start).
    fn tick(&mut self, sent: u64, now: Instant) -> Option<String> {
        if self.quiet || now < self.next {
            return None;
        }
        self.next = now + Self::EVERY;
        let elapsed = now - self.started;
        Some(format!(
            "zmqs: sent {sent} of {} ({:.0}/s)",
            self.total,
            sent as f64 / elapsed.as_secs_f64()
        ))
    }

    /// The summary of a run that ended at `now` having sent `sent`, where it lasted a second.
    fn done(&self, sent: u64, now: Instant) -> Option<String> {
        let elapsed = now - self.started;
        (!self.quiet && elapsed >= Self::EVERY).then(|| {
            format!(
                "zmqs: sent {sent} in {:.1} s ({:.0}/s)",
                elapsed.as_secs_f64(),
                sent as f64 / elapsed.as_secs_f64()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{Progress, due, read_payload};
    use crate::Failure;

    #[test]
    fn rate_spaces_the_messages_from_the_first_ones_start() {
        let ms = |n: u64| Duration::from_millis(n);
        for (sent, rate, expected) in [
            (0, 20.0, ms(0)),
            (1, 20.0, ms(50)),
            (2, 20.0, ms(100)),
            (29, 20.0, ms(1450)),
            (1, 0.5, ms(2000)),
            (3, 0.5, ms(6000)),
            (1000, 1000.0, ms(1000)),
            (2, 8.0, ms(250)),
        ] {
            assert_eq!(
                due(sent, rate),
                Some(expected),
                "message {sent} at {rate}/s"
            );
        }
        assert_eq!(due(u64::MAX, 0.001), None, "past what a `Duration` holds");
    }

    #[test]
    fn progress_says_a_line_a_second_and_a_summary_for_a_run_past_one() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut progress = Progress::new(false, 30, start);
        assert_eq!(progress.tick(1, at(0)), None);
        assert_eq!(progress.tick(19, at(999)), None);
        assert_eq!(
            progress.tick(20, at(1000)).as_deref(),
            Some("zmqs: sent 20 of 30 (20/s)")
        );
        // The next a second after that one, not after the start's second.
        assert_eq!(progress.tick(21, at(1500)), None);
        assert_eq!(progress.tick(23, at(1999)), None);
        assert_eq!(
            progress.tick(25, at(2500)).as_deref(),
            Some("zmqs: sent 25 of 30 (10/s)")
        );
        assert_eq!(progress.tick(30, at(3000)), None);
        assert_eq!(
            progress.done(30, at(3000)).as_deref(),
            Some("zmqs: sent 30 in 3.0 s (10/s)")
        );

        // A run shorter than a second says nothing.
        let mut short = Progress::new(false, 5, start);
        assert_eq!(short.tick(5, at(999)), None);
        assert_eq!(short.done(5, at(999)), None);
        assert_eq!(
            short.done(5, at(1000)).as_deref(),
            Some("zmqs: sent 5 in 1.0 s (5/s)")
        );

        // `--quiet` says nothing at all.
        let mut quiet = Progress::new(true, 30, start);
        assert_eq!(quiet.tick(20, at(1000)), None);
        assert_eq!(quiet.tick(30, at(5000)), None);
        assert_eq!(quiet.done(30, at(5000)), None);
    }

    /// A scratch file of this test's own.
    fn scratch(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("zmqs-unit-{}-{name}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn file_gives_its_bytes_as_they_are_over_the_argument() {
        let bytes = [b'{', 0, 0x9f, 0xff, b'\r', b'\n', b' '];
        let path = scratch("payload", &bytes);
        let read = read_payload(Some(&path), Some("the argument"));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(read.unwrap(), bytes);
        assert_eq!(read_payload(None, Some("{}")).unwrap(), b"{}");

        let missing =
            std::env::temp_dir().join(format!("zmqs-unit-{}-missing", std::process::id()));
        match read_payload(Some(&missing), None) {
            Err(Failure::Failed(why)) => {
                assert!(
                    why.starts_with(&format!("reading {} failed: ", missing.display())),
                    "{why}"
                );
            }
            other => panic!("a missing file: {other:?}"),
        }
    }
}
