//! `zmqs tail`: prints what a queue or a fan-out carries, one JSON line a message, read by the
//! crate's own subscription.

use std::{
    io::Write,
    time::{Duration, SystemTime},
};

use clap::Args;
use futures::StreamExt;
use ruststream::Subscriber;
use ruststream_zmq::{FanoutKind, OneWay, QueueKind, ZmqMessage, ZmqSubscriber};

use crate::{
    EXIT_STATUSES, Failure, lines,
    link::{Link, Socket, Waits},
};

/// Print each message of a queue (PULL), or of a fan-out prefix with --fanout (SUB), as a JSON
/// line
///
/// Each line: {"name", "headers", "payload" (its JSON text as it arrived) or "payload_base64",
/// "arrived"}. A message
/// whose headers are not UTF-8 is refused, with a warning on stderr, and prints no line.
#[derive(Args)]
#[command(after_help = EXIT_STATUSES)]
pub struct Tail {
    /// The endpoint: tcp://host:port or ipc://path [env: ZMQS_ENDPOINT, where this word is
    /// left out]
    endpoint: String,

    /// The queue's name, or the fan-out prefix to subscribe to (`""` for every topic)
    name: Option<String>,

    /// Read a fan-out (SUB) rather than a queue (PULL)
    #[arg(long)]
    fanout: bool,

    /// Print each payload alone, its bytes as they arrived, and a line break (a payload that
    /// holds line breaks takes several lines)
    #[arg(long)]
    payload_only: bool,

    /// Stop after this many messages (1 or more)
    #[arg(long, short = 'n', value_parser = crate::at_least_one::<u64>())]
    count: Option<u64>,

    /// Stop once this long passes with no message (the first counted from the subscription),
    /// as --timeout is in every command the longest wait for the next thing [default: never]
    #[arg(long, value_parser = crate::duration)]
    timeout: Option<Duration>,

    #[command(flatten)]
    socket: Socket,
}

/// How long a dialing tail waits for a peer before it says why there is none (and waits on).
const ALONE: Duration = Duration::from_secs(3);

impl Tail {
    /// The NAME, there once `run` has read the words.
    fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }

    pub async fn run(mut self) -> Result<(), Failure> {
        self.socket.fill_from_env();
        crate::link::endpoint_from_env(&mut self.endpoint, &mut self.name, None)?;
        if self.fanout {
            self.tail::<FanoutKind>().await
        } else {
            self.tail::<QueueKind>().await
        }
    }

    async fn tail<P>(&self) -> Result<(), Failure>
    where
        P: OneWay + ruststream_zmq::Pattern<Subscriber = ZmqSubscriber>,
    {
        let link = Link::<P>::connect(
            &self.endpoint,
            &self.socket,
            Waits {
                send: Duration::from_secs(10),
                linger: Duration::ZERO,
            },
        )
        .await?;
        let dialer = crate::diagnose::Dialer {
            socket: if self.fanout { "SUB" } else { "PULL" },
            curve: self.socket.curve.curve_server.is_some(),
        };
        let read = match link.subscribe(self.name()).await {
            Ok(subscriber) => {
                link.announce(Duration::from_secs(5)).await;
                // A tail may wait long, or for good: the cause of a silence is said meanwhile.
                tokio::select! {
                    biased;
                    read = self.read(subscriber) => read,
                    never = link.warn_while_alone(ALONE, dialer) => match never {},
                }
            }
            Err(err) => Err(err.into()),
        };
        let read = match read {
            Err(failure) => Err(link.explain(failure, dialer).await),
            read => read,
        };
        link.close().await;
        read
    }

    async fn read(&self, mut subscriber: ZmqSubscriber) -> Result<(), Failure> {
        let mut stream = std::pin::pin!(subscriber.stream());
        let mut stdout = std::io::stdout().lock();
        let mut seen = 0u64;
        let interrupted = crate::interrupted();
        tokio::pin!(interrupted);
        while self.count.is_none_or(|count| seen < count) {
            let next = async {
                match self.timeout {
                    Some(timeout) => tokio::time::timeout(timeout, stream.next()).await.ok(),
                    None => Some(stream.next().await),
                }
            };
            let message: ZmqMessage = tokio::select! {
                next = next => match next {
                    Some(Some(Ok(message))) => message,
                    Some(Some(Err(err))) => return Err(err.into()),
                    Some(None) => return Err(Failure::Failed("the subscription ended".into())),
                    None => return self.timed_out(seen),
                },
                _ = &mut interrupted => return Err(self.interrupted(seen)),
            };
            let written = if self.payload_only {
                let payload = ruststream::IncomingMessage::payload(&message);
                stdout
                    .write_all(payload)
                    .and_then(|()| stdout.write_all(b"\n"))
            } else {
                writeln!(stdout, "{}", lines::message(&message, SystemTime::now()))
            }
            .and_then(|()| stdout.flush());
            if let Err(err) = written {
                // A closed pipe (`| head`) is the reader saying it has enough.
                if err.kind() == std::io::ErrorKind::BrokenPipe {
                    return Ok(());
                }
                return Err(Failure::Failed(format!("writing stdout failed: {err}")));
            }
            seen += 1;
        }
        Ok(())
    }

    /// Ctrl-C: how many were printed, of how many asked for.
    fn interrupted(&self, seen: u64) -> Failure {
        Failure::Interrupted(match self.count {
            Some(count) => format!("interrupted after {seen} of {count} messages"),
            None if seen == 1 => "interrupted after 1 message".into(),
            None => format!("interrupted after {seen} messages"),
        })
    }

    /// `--timeout` passed: a failure when fewer than `--count` arrived, or none at all.
    fn timed_out(&self, seen: u64) -> Result<(), Failure> {
        let timeout = self.timeout.unwrap_or_default();
        match self.count {
            Some(count) if seen == 0 => Err(Failure::TimedOut(format!(
                "0 of {count} messages arrived within {timeout:?}"
            ))),
            Some(count) => Err(Failure::TimedOut(format!(
                "{seen} of {count} messages arrived, then none within {timeout:?}"
            ))),
            None if seen == 0 => Err(Failure::TimedOut(format!(
                "no message arrived within {timeout:?}"
            ))),
            None => Ok(()),
        }
    }
}
