//! `zmqs`: a command line for people who run services on `ruststream-zmq`. It sends, reads,
//! asks and makes CURVE keys through the crate's own brokers, publishers and requesters, so
//! what it puts on the wire is what a service of the crate puts there (docs/cli.md).

mod ask;
mod keys;
mod lines;
mod link;
mod send;
mod tail;

use std::{process::ExitCode, time::Duration};

use clap::{Parser, Subcommand};

/// The exit statuses, for every command's `--help`.
const EXIT_STATUSES: &str = "\
Exit status:
  0  done
  1  failed: a bind, a connection, a send, a file, a key (the message says which)
  2  the command line is wrong
  3  timed out: no peer, no answer, or fewer messages than --count
  4  not in this build: CURVE, keys and --backend libzmq need the `libzmq` feature";

/// Send to, read from and ask services of ruststream-zmq; make CURVE keys.
#[derive(Parser)]
#[command(name = "zmqs", version, after_help = EXIT_STATUSES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Send(send::Send),
    Tail(tail::Tail),
    Ask(ask::Ask),
    #[command(subcommand)]
    Keys(keys::Keys),
}

/// Why a command stopped short, and the status a script reads.
#[derive(Debug)]
pub enum Failure {
    /// 1: something failed at run time.
    Failed(String),
    /// 2: the command line asks for something that cannot be.
    Usage(String),
    /// 3: a deadline passed.
    TimedOut(String),
    /// 4: this binary was built without what the command needs.
    NotBuilt(String),
}

impl Failure {
    fn status(&self) -> u8 {
        match self {
            Self::Failed(_) => 1,
            Self::Usage(_) => 2,
            Self::TimedOut(_) => 3,
            Self::NotBuilt(_) => 4,
        }
    }

    fn message(&self) -> &str {
        match self {
            Self::Failed(m) | Self::Usage(m) | Self::TimedOut(m) | Self::NotBuilt(m) => m,
        }
    }
}

impl From<ruststream_zmq::ZmqError> for Failure {
    fn from(err: ruststream_zmq::ZmqError) -> Self {
        use ruststream_zmq::ZmqError::{InvalidHeader, UnsupportedEndpoint};
        match err {
            // The command line gave them: an address no socket takes, a header no frame carries.
            UnsupportedEndpoint { .. } | InvalidHeader { .. } => Self::Usage(err.to_string()),
            err => Self::Failed(err.to_string()),
        }
    }
}

/// The longest duration a flag takes: a year. Far past any wait an operator means, and far
/// short of where a deadline (now + the duration) would overflow the clock.
pub const LONGEST: Duration = Duration::from_secs(365 * 24 * 3600);

/// A duration as an operator types it: `500ms`, `10s`, `2m`, or a number of seconds; at most
/// [`LONGEST`].
pub fn duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration: write 500ms, 10s or 2m"))?;
    let seconds = match unit {
        "ms" => number / 1000.0,
        "" | "s" => number,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        _ => return Err(format!("`{unit}` is not a unit: use ms, s, m or h")),
    };
    match Duration::try_from_secs_f64(seconds) {
        Ok(duration) if duration <= LONGEST => Ok(duration),
        _ => Err(format!(
            "`{text}` is longer than zmqs waits: at most 8760h (a year)"
        )),
    }
}

/// A count flag: 1 or more, as `--count 0` would wait for a peer to do nothing.
pub fn at_least_one<T>() -> clap::builder::RangedU64ValueParser<T>
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
    <T as TryFrom<u64>>::Error: std::error::Error + Send + Sync + 'static,
{
    clap::builder::RangedU64ValueParser::<T>::new().range(1..)
}

/// `--rate`: messages a second, from one every 1,000 s (0.001) up; the spacing of messages
/// it makes is then a duration the clock can add.
pub fn rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate >= 0.001 => Ok(rate),
        Ok(_) => Err(format!(
            "`{text}` is out of range: a number of messages a second, 0.001 or more"
        )),
        Err(_) => Err(format!("`{text}` is not a number of messages a second")),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The crate's own warnings (a refused message, a peer lost) on stderr; RUST_LOG widens them.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("zmqs: could not start the runtime: {err}");
            return ExitCode::from(1);
        }
    };
    let done = runtime.block_on(async {
        match cli.command {
            Command::Send(command) => command.run().await,
            Command::Tail(command) => command.run().await,
            Command::Ask(command) => command.run().await,
            Command::Keys(command) => command.run(),
        }
    });
    // Sockets that still wait on a peer must not hold the exit up.
    runtime.shutdown_timeout(Duration::from_millis(500));
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("zmqs: {}", failure.message());
            ExitCode::from(failure.status())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{LONGEST, duration, rate};

    #[test]
    fn a_duration_reads_each_unit_and_decimals() {
        for (text, expected) in [
            ("500ms", Duration::from_millis(500)),
            ("1.5ms", Duration::from_micros(1500)),
            ("10s", Duration::from_secs(10)),
            ("0.25s", Duration::from_millis(250)),
            ("2m", Duration::from_secs(120)),
            ("1.5m", Duration::from_secs(90)),
            ("1h", Duration::from_secs(3600)),
            ("0.5h", Duration::from_secs(1800)),
            ("7", Duration::from_secs(7)),
            ("2.5", Duration::from_millis(2500)),
            (" 3s ", Duration::from_secs(3)),
            ("0s", Duration::ZERO),
        ] {
            assert_eq!(duration(text), Ok(expected), "{text:?}");
        }
    }

    #[test]
    fn a_duration_that_is_not_one_says_why() {
        for (text, says) in [
            ("", "`` is not a duration"),
            ("ms", "`ms` is not a duration"),
            ("ten", "`ten` is not a duration"),
            ("-1s", "`-1s` is not a duration"),
            ("1.2.3s", "`1.2.3s` is not a duration"),
            ("10x", "`x` is not a unit"),
            ("10 s", "` s` is not a unit"),
            ("1e3", "`e3` is not a unit"),
            ("5sec", "`sec` is not a unit"),
        ] {
            let err = duration(text).expect_err(text);
            assert!(err.starts_with(says), "{text:?}: {err}");
        }
        // A number of seconds no `Duration` holds, and one it holds that no deadline does.
        for huge in ["9".repeat(30), "5000000000000000h".into(), "8761h".into()] {
            let err = duration(&huge).expect_err(&huge);
            assert!(err.ends_with("at most 8760h (a year)"), "{huge}: {err}");
        }
        assert_eq!(duration("8760h"), Ok(LONGEST));
    }

    #[test]
    fn a_rate_is_a_finite_number_from_one_message_in_1000_s_up() {
        for (text, expected) in [("0.001", 0.001), ("200", 200.0), ("1e9", 1e9)] {
            assert_eq!(rate(text), Ok(expected), "{text}");
        }
        for text in ["0", "-1", "0.0009", "1e-300", "inf", "NaN", "1e999"] {
            let err = rate(text).expect_err(text);
            assert!(err.contains("out of range"), "{text}: {err}");
        }
        assert!(rate("ten").unwrap_err().contains("not a number"));
    }
}
