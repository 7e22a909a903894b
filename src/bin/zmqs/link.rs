//! The options every socket command shares (side, backend, CURVE), and the broker they make:
//! the crate's own, on the backend asked for.

use std::time::Duration;

use clap::{Args, ValueEnum};
use ruststream::{Broker, ConnectedBroker, Subscribe};
use ruststream_zmq::{
    Bound, ConnectedZmq, Dialing, Pattern, ZmqBroker, ZmqEndpoint, ZmqError, ZmqMonitor,
    ZmqPublisher,
};
use tokio::time::Instant;

use crate::Failure;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendName {
    /// The pure-Rust client (the crate's default).
    Zeromq,
    /// The system's libzmq: CURVE, heartbeats.
    Libzmq,
}

/// Where the socket is and how it talks.
#[derive(Args)]
pub struct Socket {
    /// Listen on the endpoint (a peer dials in) instead of dialing it
    #[arg(long)]
    pub bind: bool,

    /// The socket backend [default: zeromq, or libzmq with a CURVE option]
    #[arg(long, value_enum)]
    pub backend: Option<BackendName>,

    #[command(flatten)]
    pub curve: CurveArgs,
}

/// The crate's CURVE options (libzmq backend).
#[derive(Args)]
#[command(next_help_heading = "CURVE (libzmq backend)")]
pub struct CurveArgs {
    /// This side's key pair: a secret certificate file (`zmqs keys new`, or pyzmq's
    /// `create_certificates`). Listening: the server's; dialing: the client's [env:
    /// ZMQS_CURVE_KEYS] [default: a fresh pair]
    #[arg(long, value_name = "FILE")]
    pub curve_keys: Option<String>,

    /// Dialing: the server's public key, as 40 Z85 characters or a certificate file [env:
    /// ZMQS_CURVE_SERVER]
    // Z85 has `-` among its characters, so a key may start with one.
    #[arg(long, value_name = "KEY|FILE", allow_hyphen_values = true)]
    pub curve_server: Option<String>,

    /// Listening: a client key to admit (Z85, a certificate file, or a directory of `.key`
    /// files); repeat it for more
    #[arg(long, value_name = "KEY|FILE|DIR", allow_hyphen_values = true)]
    pub curve_allow: Vec<String>,

    /// Listening: admit any client that holds the server's public key
    #[arg(long)]
    pub curve_allow_any: bool,
}

/// The environment variable that gives the endpoint where the command line leaves it out.
pub const ENDPOINT_VAR: &str = "ZMQS_ENDPOINT";

/// A socket command's words: ENDPOINT NAME (and PAYLOAD, where `payload` is given). Where the
/// first word is not an endpoint (it has no `://`) and `ZMQS_ENDPOINT` is set, the endpoint is
/// the variable's and the words move up one: `zmqs send payments '{}'`.
pub fn endpoint_from_env(
    endpoint: &mut String,
    name: &mut Option<String>,
    payload: Option<&mut Option<String>>,
) -> Result<(), Failure> {
    let var = std::env::var(ENDPOINT_VAR)
        .ok()
        .filter(|value| !value.is_empty());
    if let (false, Some(from_env)) = (endpoint.contains("://"), var) {
        let first = std::mem::replace(endpoint, from_env);
        let second = name.replace(first);
        let spare = match payload {
            Some(payload) => std::mem::replace(payload, second),
            None => second,
        };
        if spare.is_some() {
            return Err(Failure::Usage(format!(
                "{ENDPOINT_VAR} gives the endpoint, so the words are NAME and what follows it: \
                 one word too many"
            )));
        }
    }
    if name.is_none() {
        return Err(Failure::Usage(format!(
            "a NAME is needed after the endpoint (or set {ENDPOINT_VAR} and give the NAME first)"
        )));
    }
    Ok(())
}

/// The environment variables that give a CURVE key file the command line left out.
pub const KEYS_VAR: &str = "ZMQS_CURVE_KEYS";
pub const SERVER_VAR: &str = "ZMQS_CURVE_SERVER";

impl Socket {
    /// Fills the key files the command line left out from the environment: `ZMQS_CURVE_KEYS`
    /// (this side's pair, either side) and `ZMQS_CURVE_SERVER` (the server's key, dialing
    /// only: a listener names no server, so an exported one does not make `--bind` wrong).
    /// An empty variable is unset.
    pub fn fill_from_env(&mut self) {
        let var = |name| std::env::var(name).ok().filter(|value| !value.is_empty());
        if self.curve.curve_keys.is_none() {
            self.curve.curve_keys = var(KEYS_VAR);
        }
        if self.curve.curve_server.is_none() && !self.bind {
            self.curve.curve_server = var(SERVER_VAR);
        }
    }
}

impl CurveArgs {
    fn any(&self) -> bool {
        self.curve_keys.is_some()
            || self.curve_server.is_some()
            || !self.curve_allow.is_empty()
            || self.curve_allow_any
    }
}

/// The backends this zmqs was built with.
#[derive(Clone, Copy, Debug)]
pub struct Built {
    pub zeromq: bool,
    pub libzmq: bool,
}

impl Built {
    /// This binary's: its features.
    pub const THIS: Self = Self {
        zeromq: cfg!(feature = "zeromq"),
        libzmq: cfg!(feature = "libzmq"),
    };

    /// The backend a socket command runs on: the one `asked` for, else libzmq where a CURVE
    /// option is given (`curve`) or the pure-Rust client is not built in, else that client. A
    /// pure function of the command line and the build, so a build the tests never make (one
    /// without libzmq) is tested too: status 2 for `--backend zeromq` with CURVE, status 4 for a
    /// backend this build lacks.
    pub fn backend(self, asked: Option<BackendName>, curve: bool) -> Result<BackendName, Failure> {
        if asked == Some(BackendName::Zeromq) && curve {
            return Err(Failure::Usage(
                "CURVE is libzmq's: drop `--backend zeromq`, or the CURVE options".into(),
            ));
        }
        let chosen = asked.unwrap_or(if curve || !self.zeromq {
            BackendName::Libzmq
        } else {
            BackendName::Zeromq
        });
        match chosen {
            // Without either backend the crate does not compile: libzmq chosen here without
            // CURVE was asked for.
            BackendName::Libzmq if !self.libzmq => {
                Err(not_built(if curve { "CURVE" } else { "--backend libzmq" }))
            }
            BackendName::Zeromq if !self.zeromq => Err(Failure::NotBuilt(
                "--backend zeromq needs the `zeromq` feature, and this zmqs was built without it"
                    .into(),
            )),
            chosen => Ok(chosen),
        }
    }

    /// Whether `what` (a `keys` command) can run: it needs libzmq.
    pub fn libzmq_for(self, what: &str) -> Result<(), Failure> {
        if self.libzmq {
            Ok(())
        } else {
            Err(not_built(what))
        }
    }
}

/// What a build without libzmq answers to CURVE, to `keys` and to `--backend libzmq`.
fn not_built(what: &str) -> Failure {
    Failure::NotBuilt(format!(
        "{what} needs libzmq, and this zmqs was built without it: reinstall with \
         `cargo install ruststream-zmq --features cli,libzmq` (libzmq's headers: \
         `apt-get install libzmq3-dev pkg-config`)"
    ))
}

/// A connected broker of pattern `P`, on the side the command line says.
pub enum Link<P: Pattern> {
    Bound(ConnectedZmq<P, Bound>),
    Dialing(ConnectedZmq<P, Dialing>),
}

impl<P: Pattern> Link<P> {
    /// The broker on `endpoint`: the crate's, on the backend and with the CURVE keys asked for.
    pub async fn connect(endpoint: &str, socket: &Socket, waits: Waits) -> Result<Self, Failure> {
        let libzmq =
            Built::THIS.backend(socket.backend, socket.curve.any())? == BackendName::Libzmq;
        if socket.bind {
            if socket.curve.curve_server.is_some() {
                return Err(Failure::Usage(
                    "--curve-server is for dialing; a listener serves with --curve-keys".into(),
                ));
            }
            connect_bound(endpoint, socket, libzmq, waits)
                .await
                .map(Self::Bound)
        } else {
            if !socket.curve.curve_allow.is_empty() || socket.curve.curve_allow_any {
                return Err(Failure::Usage(
                    "--curve-allow and --curve-allow-any are for a listener (--bind)".into(),
                ));
            }
            connect_dialing(endpoint, socket, libzmq, waits)
                .await
                .map(Self::Dialing)
        }
    }

    pub fn publisher(&self) -> ZmqPublisher {
        match self {
            Self::Bound(connected) => connected.publisher(),
            Self::Dialing(connected) => connected.publisher(),
        }
    }

    pub fn monitor(&self) -> ZmqMonitor {
        match self {
            Self::Bound(connected) => connected.monitor(),
            Self::Dialing(connected) => connected.monitor(),
        }
    }

    pub async fn subscribe(&self, name: &str) -> Result<P::Subscriber, ZmqError> {
        match self {
            Self::Bound(connected) => connected.subscribe(name).await,
            Self::Dialing(connected) => connected.subscribe(name).await,
        }
    }

    /// Closes the sockets; what is queued has had its chance by now.
    pub async fn close(self) {
        let _ = match self {
            Self::Bound(connected) => connected.shutdown().await.map(drop),
            Self::Dialing(connected) => connected.shutdown().await.map(drop),
        };
    }

    /// Says on stderr where a listener listens (port resolved), once it does.
    pub async fn announce(&self, within: Duration) {
        if let Self::Bound(_) = self {
            let deadline = Instant::now() + within;
            let monitor = self.monitor();
            while monitor.bound_address().is_none() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            if let Some(address) = monitor.bound_address() {
                eprintln!("zmqs: listening on {address}");
            }
        }
    }

    /// `failure`, explained where this side dials and never had a peer: the probe of
    /// [`diagnose`](crate::diagnose) says why.
    pub async fn explain(&self, failure: Failure, dialer: crate::diagnose::Dialer) -> Failure {
        let monitor = self.monitor();
        match self {
            Self::Dialing(_) if monitor.peers_connected() == 0 => {
                crate::diagnose::explained(failure, monitor.endpoint(), dialer).await
            }
            _ => failure,
        }
    }

    /// Where this side dials and still has no peer `after` it started, says on stderr why (the
    /// probe of [`diagnose`](crate::diagnose)) once, and waits on: for a command with no
    /// deadline, which would otherwise wait in silence. Never returns.
    pub async fn warn_while_alone(
        &self,
        after: Duration,
        dialer: crate::diagnose::Dialer,
    ) -> std::convert::Infallible {
        let monitor = self.monitor();
        if let Self::Dialing(_) = self {
            tokio::time::sleep(after).await;
            // Asked only while alone, and said only if still alone once the probe answered.
            if monitor.peers_connected() == 0
                && let Some(cause) = crate::diagnose::why(monitor.endpoint(), dialer).await
                && monitor.peers_connected() == 0
            {
                eprintln!("zmqs: no peer yet, still waiting: {}", cause.message());
            }
        }
        std::future::pending().await
    }

    /// Waits until a peer is connected, or fails naming the endpoint after `within`.
    pub async fn await_peer(&self, within: Duration) -> Result<(), Failure> {
        let deadline = Instant::now() + within;
        let monitor = self.monitor();
        while monitor.peers_connected() == 0 {
            if Instant::now() >= deadline {
                let (side, address) = match self {
                    Self::Bound(_) => (
                        "dialed in to",
                        monitor
                            .bound_address()
                            .unwrap_or_else(|| monitor.endpoint().to_owned()),
                    ),
                    Self::Dialing(_) => ("answered at", monitor.endpoint().to_owned()),
                };
                return Err(Failure::TimedOut(format!(
                    "no peer {side} {address} within {within:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(())
    }
}

/// How long a publish waits for a peer, and how long closing waits for what was published to
/// leave.
#[derive(Clone, Copy)]
pub struct Waits {
    pub send: Duration,
    pub linger: Duration,
}

async fn open<P: Pattern, S: ruststream_zmq::Side, B, M>(
    endpoint: ZmqEndpoint<S, M>,
    waits: Waits,
) -> Result<ConnectedZmq<P, S>, Failure>
where
    B: ruststream_zmq::Speaks<M>,
    M: ruststream_zmq::Mechanism,
{
    let broker: ZmqBroker<P, S, B> = ZmqBroker::new(endpoint)
        .send_timeout(waits.send)
        .linger(waits.linger);
    Ok(broker.connect().await?)
}

// `Built::backend` has refused CURVE and libzmq in a build without libzmq, and every socket
// command in a build with omq alone, which zmqs does not run on.
#[cfg(not(feature = "libzmq"))]
async fn connect_bound<P: Pattern>(
    endpoint: &str,
    _socket: &Socket,
    _libzmq: bool,
    waits: Waits,
) -> Result<ConnectedZmq<P, Bound>, Failure> {
    open::<P, Bound, ruststream_zmq::DefaultBackend, _>(ZmqEndpoint::bind(endpoint), waits).await
}

#[cfg(not(feature = "libzmq"))]
async fn connect_dialing<P: Pattern>(
    endpoint: &str,
    _socket: &Socket,
    _libzmq: bool,
    waits: Waits,
) -> Result<ConnectedZmq<P, Dialing>, Failure> {
    open::<P, Dialing, ruststream_zmq::DefaultBackend, _>(ZmqEndpoint::dial(endpoint), waits).await
}

#[cfg(feature = "libzmq")]
async fn connect_bound<P: Pattern>(
    endpoint: &str,
    socket: &Socket,
    libzmq: bool,
    waits: Waits,
) -> Result<ConnectedZmq<P, Bound>, Failure> {
    use ruststream_zmq::libzmq::Libzmq;
    let plain = ZmqEndpoint::bind(endpoint);
    let curve = &socket.curve;
    if !libzmq {
        return zeromq_only(plain, waits).await;
    }
    let Some(keys) = &curve.curve_keys else {
        if curve.any() {
            return Err(Failure::Usage(
                "a CURVE listener needs its key pair: --curve-keys FILE".into(),
            ));
        }
        return open::<P, Bound, Libzmq, _>(plain, waits).await;
    };
    let server = plain.curve(ruststream_zmq::CurveKeyPair::from_file(keys)?);
    match (curve.curve_allow_any, curve.curve_allow.is_empty()) {
        (true, true) => open::<P, Bound, Libzmq, _>(server.allow_any_client(), waits).await,
        (false, false) => {
            let clients = curve::allowed(&curve.curve_allow)?;
            open::<P, Bound, Libzmq, _>(server.allow_clients(clients), waits).await
        }
        (true, false) => Err(Failure::Usage(
            "--curve-allow and --curve-allow-any say two things: give one".into(),
        )),
        (false, true) => Err(Failure::Usage(
            "say who may connect: --curve-allow KEY|FILE|DIR, or --curve-allow-any".into(),
        )),
    }
}

#[cfg(feature = "libzmq")]
async fn connect_dialing<P: Pattern>(
    endpoint: &str,
    socket: &Socket,
    libzmq: bool,
    waits: Waits,
) -> Result<ConnectedZmq<P, Dialing>, Failure> {
    use ruststream_zmq::{CurveKeyPair, libzmq::Libzmq};
    let plain = ZmqEndpoint::dial(endpoint);
    let curve = &socket.curve;
    if !libzmq {
        return zeromq_only(plain, waits).await;
    }
    let Some(server) = &curve.curve_server else {
        if curve.any() {
            return Err(Failure::Usage(
                "a CURVE client needs the server's public key: --curve-server KEY|FILE".into(),
            ));
        }
        return open::<P, Dialing, Libzmq, _>(plain, waits).await;
    };
    let client = match &curve.curve_keys {
        Some(file) => CurveKeyPair::from_file(file)?,
        None => CurveKeyPair::generate()?,
    };
    let secured = plain.curve(client, curve::public_key(server)?);
    open::<P, Dialing, Libzmq, _>(secured, waits).await
}

/// The pure-Rust backend, where it was built in.
#[cfg(feature = "libzmq")]
async fn zeromq_only<P: Pattern, S: ruststream_zmq::Side>(
    endpoint: ZmqEndpoint<S>,
    waits: Waits,
) -> Result<ConnectedZmq<P, S>, Failure> {
    #[cfg(feature = "zeromq")]
    return open::<P, S, ruststream_zmq::zeromq::Zeromq, _>(endpoint, waits).await;
    #[cfg(not(feature = "zeromq"))]
    {
        let _ = (endpoint, waits);
        Err(Failure::NotBuilt(
            "--backend zeromq needs the `zeromq` feature, and this zmqs was built without it"
                .into(),
        ))
    }
}

/// Keys from the command line: Z85 text, certificate files, directories of them.
#[cfg(feature = "libzmq")]
pub mod curve {
    use std::path::Path;

    use ruststream_zmq::CurvePublicKey;

    use crate::Failure;

    /// A public key given as its 40 Z85 characters, or as a certificate file. Text of another
    /// length that names no file was meant as a file, most likely: said so, with the path.
    pub fn public_key(given: &str) -> Result<CurvePublicKey, Failure> {
        let path = Path::new(given);
        if path.is_file() {
            return Ok(CurvePublicKey::from_file(given)?);
        }
        if given.trim().chars().count() == 40 {
            return Ok(CurvePublicKey::from_z85(given)?);
        }
        Err(Failure::Failed(if path.exists() {
            format!("{given} is not a file: give a certificate file, or a key (40 Z85 characters)")
        } else {
            format!(
                "{given}: no such file (and not a key, which is 40 Z85 characters): give the \
                 path of a public certificate (`zmqs keys new` writes NAME.key)"
            )
        }))
    }

    /// Every client key the `--curve-allow` values name; a directory gives each `.key` file in
    /// it, as pyzmq's `load_certificates` reads one (`CurvePublicKey::from_dir`, which refuses
    /// a directory or file that other users may write).
    pub fn allowed(given: &[String]) -> Result<Vec<CurvePublicKey>, Failure> {
        let mut keys = Vec::new();
        for each in given {
            if Path::new(each).is_dir() {
                keys.extend(CurvePublicKey::from_dir(each)?);
            } else {
                keys.push(public_key(each)?);
            }
        }
        Ok(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::{BackendName, BackendName::*, Built};

    /// The build `cargo install ruststream-zmq --features cli` makes; no test binary is one.
    const WITHOUT_LIBZMQ: Built = Built {
        zeromq: true,
        libzmq: false,
    };
    const BOTH: Built = Built {
        zeromq: true,
        libzmq: true,
    };
    const WITHOUT_ZEROMQ: Built = Built {
        zeromq: false,
        libzmq: true,
    };

    /// The exit status and message a choice is refused with.
    fn refused(built: Built, asked: Option<BackendName>, curve: bool) -> (u8, String) {
        let failure = built
            .backend(asked, curve)
            .expect_err(&format!("{built:?} refuses {asked:?} with curve={curve}"));
        (failure.status(), failure.message().to_owned())
    }

    #[test]
    fn a_build_without_libzmq_exits_4_for_curve_and_backend_libzmq_saying_how_to_reinstall() {
        for (asked, curve, what) in [
            (None, true, "CURVE needs libzmq"),
            (Some(Libzmq), true, "CURVE needs libzmq"),
            (Some(Libzmq), false, "--backend libzmq needs libzmq"),
        ] {
            let (status, message) = refused(WITHOUT_LIBZMQ, asked, curve);
            assert_eq!(status, 4, "{asked:?} curve={curve}: {message}");
            assert!(message.starts_with(what), "{message}");
            assert!(
                message.contains("cargo install ruststream-zmq --features cli,libzmq"),
                "{message}"
            );
        }
        for what in ["making CURVE keys", "reading CURVE keys"] {
            let failure = WITHOUT_LIBZMQ.libzmq_for(what).expect_err("no libzmq");
            assert_eq!(failure.status(), 4, "{}", failure.message());
            assert!(
                failure
                    .message()
                    .starts_with(&format!("{what} needs libzmq")),
                "{}",
                failure.message()
            );
        }
        // What it has, it runs.
        assert_eq!(WITHOUT_LIBZMQ.backend(None, false).unwrap(), Zeromq);
        assert_eq!(WITHOUT_LIBZMQ.backend(Some(Zeromq), false).unwrap(), Zeromq);
    }

    #[test]
    fn a_build_without_zeromq_exits_4_for_backend_zeromq_and_runs_libzmq_by_default() {
        let (status, message) = refused(WITHOUT_ZEROMQ, Some(Zeromq), false);
        assert_eq!(status, 4, "{message}");
        assert!(
            message.starts_with("--backend zeromq needs the `zeromq` feature"),
            "{message}"
        );
        assert_eq!(WITHOUT_ZEROMQ.backend(None, false).unwrap(), Libzmq);
        assert_eq!(
            WITHOUT_ZEROMQ.libzmq_for("making CURVE keys").ok(),
            Some(())
        );
    }

    #[test]
    fn a_curve_option_chooses_libzmq_and_backend_zeromq_with_one_is_a_usage_error() {
        assert_eq!(BOTH.backend(None, true).unwrap(), Libzmq);
        assert_eq!(BOTH.backend(None, false).unwrap(), Zeromq);
        assert_eq!(BOTH.backend(Some(Libzmq), false).unwrap(), Libzmq);
        // The command line is wrong whatever the build holds: 2 before 4.
        for built in [BOTH, WITHOUT_LIBZMQ] {
            let (status, message) = refused(built, Some(Zeromq), true);
            assert_eq!(status, 2, "{built:?}: {message}");
            assert_eq!(
                message,
                "CURVE is libzmq's: drop `--backend zeromq`, or the CURVE options"
            );
        }
    }
}
