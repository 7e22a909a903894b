//! `zmqs`: a command line for people who run services on `ruststream-zmq`. It sends, reads,
//! asks and makes CURVE keys through the crate's own brokers, publishers and requesters, so
//! what it puts on the wire is what a service of the crate puts there (docs/cli.md).

mod ask;
mod diagnose;
mod keys;
mod lines;
mod link;
mod send;
mod stat;
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
  4  not in this build: CURVE, keys and --backend libzmq need the `libzmq` feature
  5  no peer: the endpoint's host name does not resolve
  6  no peer: connection refused, nothing listens at the endpoint
  7  no peer: the socket there is of a type this command does not talk to (the message says
     which flag or command does)
  8  no peer: CURVE on one side only, or a CURVE handshake refused (a wrong server key, a key
     not on the allow-list)
130  interrupted (Ctrl-C), after saying what was done";

/// Send to, read from and ask services of ruststream-zmq; make CURVE keys.
#[derive(Parser)]
#[command(name = "zmqs", version, after_help = EXIT_STATUSES)]
struct Cli {
    #[command(subcommand)]
    command: Command,

    /// Errors as one JSON object on stderr ({"error", "status"}), and `send`'s summary as one
    /// on stdout ({"sent", "of", "seconds", "per_second"}), for scripts
    #[arg(long, global = true)]
    json: bool,
}

/// Whether `--json` was given: read where a command prints its summary.
static JSON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn json() -> bool {
    JSON.load(std::sync::atomic::Ordering::Relaxed)
}

/// A failure as `--json` prints it.
fn json_error(message: &str, status: u8) -> String {
    serde_json::json!({"error": message, "status": status}).to_string()
}

#[derive(Subcommand)]
enum Command {
    Send(send::Send),
    Tail(tail::Tail),
    Ask(ask::Ask),
    #[command(subcommand)]
    Keys(keys::Keys),
    Completions(Completions),
    Stat(stat::Stat),
}

/// Print the shell completion script for zmqs
///
/// bash: `source <(zmqs completions bash)`, or save it in
/// /etc/bash_completion.d/zmqs; zsh: save it as `_zmqs` on $fpath; fish: save it in
/// ~/.config/fish/completions/zmqs.fish.
#[derive(clap::Args)]
struct Completions {
    /// The shell
    shell: clap_complete::Shell,
}

impl Completions {
    fn print(&self) {
        let mut command = <Cli as clap::CommandFactory>::command();
        clap_complete::generate(self.shell, &mut command, "zmqs", &mut std::io::stdout());
    }
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
    /// 5: the endpoint's host name does not resolve.
    NotResolved(String),
    /// 6: nothing listens at the endpoint.
    Refused(String),
    /// 7: the peer's socket type does not talk to this command's (or it is not ZeroMQ).
    Mismatch(String),
    /// 8: CURVE on one side only, or a CURVE handshake the service refused.
    Security(String),
    /// 130 (128 + SIGINT, as a shell reports a command Ctrl-C ended): interrupted, with what
    /// was done by then.
    Interrupted(String),
}

impl Failure {
    fn status(&self) -> u8 {
        match self {
            Self::Failed(_) => 1,
            Self::Usage(_) => 2,
            Self::TimedOut(_) => 3,
            Self::NotBuilt(_) => 4,
            Self::NotResolved(_) => 5,
            Self::Refused(_) => 6,
            Self::Mismatch(_) => 7,
            Self::Security(_) => 8,
            Self::Interrupted(_) => 130,
        }
    }

    fn message(&self) -> &str {
        match self {
            Self::Failed(m)
            | Self::Usage(m)
            | Self::TimedOut(m)
            | Self::NotBuilt(m)
            | Self::NotResolved(m)
            | Self::Refused(m)
            | Self::Mismatch(m)
            | Self::Security(m)
            | Self::Interrupted(m) => m,
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

/// Ctrl-C, heard once by the process (`main` listens) and told to every part that waits on it:
/// one signal, so what a command says of its progress and `main`'s own answer are woken
/// together, and the command, polled first, is the one that answers.
static INTERRUPT: std::sync::OnceLock<(
    tokio::sync::watch::Sender<bool>,
    tokio::sync::watch::Receiver<bool>,
)> = std::sync::OnceLock::new();

/// How many of a command's own Ctrl-C listeners are waiting, and whether one answered: while
/// either holds, `main` leaves the answer (with its count) to the command, even while the
/// command closes its sockets.
static LISTENING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static ANSWERED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// One waiting listener, counted in [`LISTENING`] while it lives.
struct Listening;

impl Listening {
    fn new() -> Self {
        LISTENING.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Self
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        LISTENING.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Resolves once Ctrl-C was pressed (at once if it was already), for a command that answers it
/// with what it has done.
pub async fn interrupted() {
    let _listening = Listening::new();
    heard().await;
    ANSWERED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Resolves once Ctrl-C was pressed.
async fn heard() {
    let mut heard = INTERRUPT
        .get_or_init(|| tokio::sync::watch::channel(false))
        .1
        .clone();
    if heard.wait_for(|heard| *heard).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Resolves once Ctrl-C was pressed where no command listens for it.
async fn unanswered() {
    heard().await;
    // Woken with the command's listener, or before it: either way the command answers.
    if ANSWERED.load(std::sync::atomic::Ordering::SeqCst)
        || LISTENING.load(std::sync::atomic::Ordering::SeqCst) > 0
    {
        std::future::pending::<()>().await;
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
    // A command line clap refuses is a failure too: as JSON where `--json` was asked for.
    let asked_json = std::env::args_os().any(|arg| arg == "--json");
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) if asked_json && err.use_stderr() => {
            // What clap says before its usage lines and hints, on one line.
            let rendered = err.to_string();
            let said = rendered
                .split("\n\n")
                .next()
                .unwrap_or_default()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            let said = said.strip_prefix("error: ").unwrap_or(&said);
            eprintln!("{}", json_error(said, 2));
            return ExitCode::from(2);
        }
        Err(err) => err.exit(),
    };
    JSON.store(cli.json, std::sync::atomic::Ordering::Relaxed);
    let cli_json = cli.json;
    // The crate's own warnings (a refused message, a peer lost) on stderr; RUST_LOG widens them.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colour codes are for a terminal; in a pipe or a file they are noise.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
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
        let command = async {
            match cli.command {
                Command::Send(command) => command.run().await,
                Command::Tail(command) => command.run().await,
                Command::Ask(command) => command.run().await,
                Command::Keys(command) => command.run(),
                Command::Completions(command) => {
                    command.print();
                    Ok(())
                }
                Command::Stat(command) => command.run().await,
            }
        };
        // Ctrl-C anywhere ends with 130. A command that has counted something waits on the
        // same signal and says its count: polled first, so its answer wins.
        let (heard, _) = INTERRUPT.get_or_init(|| tokio::sync::watch::channel(false));
        tokio::spawn(async {
            if tokio::signal::ctrl_c().await.is_ok() {
                heard.send_replace(true);
            }
        });
        tokio::select! {
            biased;
            done = command => done,
            () = unanswered() => Err(Failure::Interrupted("interrupted".into())),
        }
    });
    // Sockets that still wait on a peer must not hold the exit up.
    runtime.shutdown_timeout(Duration::from_millis(500));
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            if cli_json {
                eprintln!("{}", json_error(failure.message(), failure.status()));
            } else {
                eprintln!("zmqs: {}", failure.message());
            }
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
