//! Who may connect to a CURVE endpoint with an allow-list: libzmq asks, for each client's
//! handshake, an authentication handler of the process (ZAP, ZeroMQ RFC 27) on
//! `inproc://zeromq.zap.01`. One thread answers those requests for every such endpoint of the
//! process, each known by the ZAP domain its sockets carry. Every endpoint admits, beside its
//! list, this process's own key pair ([`own_keys`](crate::transport::curve_keys::own_keys)), which the process's dialing sockets use
//! toward its own listeners.
//!
//! The handler must never stop while a listener relies on it: libzmq admits every client that
//! knows a server's key while no handler is bound (ZeroMQ's "Stonehouse" fallback; the option
//! that would refuse instead, `ZMQ_ZAP_ENFORCE_DOMAIN`, is a draft one that stable libzmq builds
//! lack). A signal that interrupts its wait is resumed. Anything else that stops it (its socket
//! fails, its thread panics) aborts the process, after an ERROR naming the endpoints that relied
//! on it, without ever unbinding the handler: there is no moment when a client off a list is
//! admitted.
//!
//! A refused client is logged as [`curve_keys`](crate::transport::curve_keys) says. libzmq
//! also reports the failed handshake to the socket's monitor, but it misses most refusals of
//! clients that leave at once (a flood of new keys showed a quarter of them): so the handler
//! counts each refusal itself, on the broker's [`ZmqMonitor`], and the watcher leaves a
//! listener's failed authentications out. The handler writes no log line itself: it answers
//! every handshake of the process, so it hands each warning to a thread of its own
//! ([`WARNINGS`] at most waiting; past that a warning is counted, and told by the endpoint's next
//! line), and a slow log holds up no handshake.

use std::{
    collections::HashMap,
    panic::{AssertUnwindSafe, catch_unwind},
    sync::{
        LazyLock, Mutex, OnceLock, PoisonError,
        atomic::{AtomicU64, Ordering},
        mpsc::SyncSender,
    },
};

use tokio::time::Instant;

use super::{CONTEXT, resumed};
use crate::{
    curve::{AllowList, CurvePublicKey},
    monitor::ZmqMonitor,
    throttle::{Line, Refusals},
    transport::curve_keys::{KEYS_NAMED, admits, warn_refused},
};

/// Where libzmq sends its authentication requests.
const HANDLER: &str = "inproc://zeromq.zap.01";

/// The endpoints with an allow-list, by ZAP domain.
static DOMAINS: LazyLock<Mutex<HashMap<String, Domain>>> = LazyLock::new(Default::default);

/// Numbers the domains.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Whether the handler's thread runs (or why it could not start).
static HANDLER_STARTED: OnceLock<Result<(), zmq::Error>> = OnceLock::new();

/// One endpoint's allow-list, and the refusals under way: one warning a burst, within the
/// endpoint's budget.
struct Domain {
    allowed: AllowList,
    endpoint: String,
    refused: Refusals<CurvePublicKey>,
    /// The figures of the broker whose listener this is, once it listens.
    monitor: Option<ZmqMonitor>,
}

/// How many warnings wait for the thread that writes them, at most.
const WARNINGS: usize = 64;

/// A refused client's warning, on its way to the thread that writes it.
struct Warning {
    endpoint: String,
    peer: String,
    key: CurvePublicKey,
    line: Line,
}

/// Where the handler hands its warnings; `None` when their thread could not start.
static WRITER: LazyLock<Option<SyncSender<Warning>>> = LazyLock::new(|| {
    let (sender, warnings) = std::sync::mpsc::sync_channel::<Warning>(WARNINGS);
    std::thread::Builder::new()
        .name("zmq-zap-log".to_owned())
        .spawn(move || {
            for Warning {
                endpoint,
                peer,
                key,
                line,
            } in warnings
            {
                // A log layer that panics loses its line, never the lines after it.
                let _ = catch_unwind(AssertUnwindSafe(|| {
                    warn_refused(&endpoint, &peer, &key, line);
                }));
            }
        })
        .ok()
        .map(|_| sender)
});

/// Hands the warning of a client refused on `domain` to its writer, never waiting for it; one it
/// cannot take is counted on the domain, for its next line to tell.
fn tell(domain: &str, warning: Warning) {
    let taken = WRITER
        .as_ref()
        .is_some_and(|writer| writer.try_send(warning).is_ok());
    if !taken && let Some(known) = domains().get_mut(domain) {
        known.refused.unwritten();
    }
}

/// A registered allow-list; dropping it forgets the domain.
pub(crate) struct Registered {
    pub(crate) domain: String,
}

impl Registered {
    /// Names the endpoint by the address the socket really listens on, once it is bound; its
    /// refusals count on `monitor`.
    pub(crate) fn listening_on(&self, endpoint: &str, monitor: &ZmqMonitor) {
        if let Some(known) = domains().get_mut(&self.domain) {
            endpoint.clone_into(&mut known.endpoint);
            known.monitor = Some(monitor.clone());
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        domains().remove(&self.domain);
    }
}

fn domains() -> std::sync::MutexGuard<'static, HashMap<String, Domain>> {
    DOMAINS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Registers the allow-list of the server socket on `endpoint`, starting the handler on first
/// use; the socket carries the domain answered.
pub(crate) fn register(allowed: AllowList, endpoint: &str) -> Result<Registered, zmq::Error> {
    (*HANDLER_STARTED.get_or_init(start))?;
    let domain = format!("ruststream-zmq-{}", NEXT.fetch_add(1, Ordering::Relaxed));
    domains().insert(
        domain.clone(),
        Domain {
            allowed,
            endpoint: endpoint.to_owned(),
            refused: Refusals::new(KEYS_NAMED, Instant::now()),
            monitor: None,
        },
    );
    Ok(Registered { domain })
}

/// Binds the handler and starts its thread, which serves for the life of the process.
fn start() -> Result<(), zmq::Error> {
    let handler = bind_handler()?;
    std::thread::Builder::new()
        .name("zmq-zap".to_owned())
        .spawn(move || guard(&handler))
        .map(drop)
        .map_err(|_| zmq::Error::EMFILE)
}

/// Serves on `handler` until it cannot, then aborts the process: the handler stays bound (it is
/// only borrowed here, and dropped with the process), so libzmq never finds it gone.
fn guard(handler: &zmq::Socket) -> ! {
    let why = match catch_unwind(AssertUnwindSafe(|| serve(handler))) {
        Ok(failure) => format!("its socket failed: {failure}"),
        Err(panic) => format!(
            "its thread panicked: {}",
            panic
                .downcast_ref::<&str>()
                .map(|text| (*text).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".to_owned())
        ),
    };
    enforcement_lost(&why)
}

/// Says which endpoints' allow-lists can no longer be enforced, then aborts the process, before
/// any of them admits a client the list does not name.
fn enforcement_lost(why: &str) -> ! {
    let mut endpoints: Vec<String> = domains().values().map(|d| d.endpoint.clone()).collect();
    endpoints.sort();
    let endpoints = endpoints.join(", ");
    // The log may be what failed (a tracing layer that panics): the process aborts whatever it
    // does, and says so on stderr if the log could not.
    let logged = catch_unwind(|| {
        tracing::error!(
            endpoints = %endpoints,
            why,
            "the CURVE authentication handler stopped, and with no handler libzmq admits every \
             client that knows a server's key: aborting the process, so that no listener admits a \
             client off its allow-list; restart it"
        );
    });
    if logged.is_err() {
        eprintln!(
            "ruststream-zmq: the CURVE authentication handler stopped ({why}); aborting the \
             process, so that no listener admits a client off its allow-list (endpoints: \
             {endpoints}); restart it"
        );
    }
    std::process::abort()
}

fn bind_handler() -> Result<zmq::Socket, zmq::Error> {
    let handler = CONTEXT.socket(zmq::REP)?;
    handler.bind(HANDLER)?;
    Ok(handler)
}

/// Answers requests until the socket fails; answers why. A signal delivered to this thread
/// interrupts its wait, and that is no failure ([`resumed`]).
fn serve(handler: &zmq::Socket) -> zmq::Error {
    loop {
        let request = match resumed(|| handler.recv_multipart(0)) {
            Ok(request) => request,
            Err(err) => return err,
        };
        // A unit test's stand-ins for a socket that fails, or a panic, with a request unanswered.
        #[cfg(test)]
        match tests::FAULT.swap(tests::NO_FAULT, Ordering::SeqCst) {
            tests::SOCKET_FAILS => return zmq::Error::EFAULT,
            tests::PANICS => panic!("a panic a unit test injected"),
            _ => {}
        }
        let reply = answer(&request);
        // Frame by frame, so that an interrupted send repeats only the frame it did not send; as
        // `&[u8]`, copied (the binding's `Vec<u8>` conversion is unsound in `zmq` 0.9.2).
        let last = reply.len() - 1;
        for (index, frame) in reply.iter().enumerate() {
            let flags = if index == last { 0 } else { zmq::SNDMORE };
            if let Err(err) = resumed(|| handler.send(&frame[..], flags)) {
                return err;
            }
        }
    }
}

/// What the handler answers one request: `[version][request id][status][text][user][metadata]`.
fn answer(request: &[Vec<u8>]) -> Vec<Vec<u8>> {
    // `[version][request id][domain][address][identity][mechanism][credentials...]`
    let [
        version,
        id,
        domain,
        address,
        _identity,
        mechanism,
        credentials @ ..,
    ] = request
    else {
        return reply(b"1.0", b"", Verdict::Malformed);
    };
    let domain = String::from_utf8_lossy(domain);
    let key = credentials
        .first()
        .filter(|_| mechanism.as_slice() == b"CURVE")
        .and_then(|key| CurvePublicKey::from_bytes(key));
    // The lock is held for the decision alone: the warning is written elsewhere, after.
    let (verdict, warning) = {
        let mut domains = domains();
        let verdict = verdict(
            domains.get(domain.as_ref()).map(|d| &d.allowed),
            key.as_ref(),
        );
        let warning = match (verdict, domains.get_mut(domain.as_ref()), key) {
            (Verdict::Refused, Some(known), key) => {
                if let Some(monitor) = &known.monitor {
                    monitor.count_peer_refused();
                }
                let line =
                    key.and_then(|key| Some((key, known.refused.note(key, Instant::now())?)));
                line.map(|(key, line)| Warning {
                    endpoint: known.endpoint.clone(),
                    peer: String::from_utf8_lossy(address).into_owned(),
                    key,
                    line,
                })
            }
            _ => None,
        };
        (verdict, warning)
    };
    if let Some(warning) = warning {
        tell(&domain, warning);
    }
    reply(version, id, verdict)
}

/// Whether a handshake goes ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Admitted,
    /// Not on the allow-list, or not a CURVE client.
    Refused,
    /// A request that does not follow RFC 27.
    Malformed,
}

/// The decision, over the endpoint's allow-list and the client's key (none when it did not
/// speak CURVE). libzmq asks about every CURVE server of the process once a handler runs, and
/// one with no allow-list (no domain of ours) admits any client that knows its key. A list
/// admits its keys and this process's own.
fn verdict(allowed: Option<&AllowList>, key: Option<&CurvePublicKey>) -> Verdict {
    match (allowed, key) {
        (None, _) => Verdict::Admitted,
        (Some(allowed), Some(key)) if admits(allowed, key) => Verdict::Admitted,
        (Some(_), _) => Verdict::Refused,
    }
}

fn reply(version: &[u8], id: &[u8], verdict: Verdict) -> Vec<Vec<u8>> {
    let (status, text): (&[u8], &[u8]) = match verdict {
        Verdict::Admitted => (b"200", b"OK"),
        Verdict::Refused => (b"400", b"not on the allow-list"),
        Verdict::Malformed => (b"500", b"malformed request"),
    };
    vec![
        version.to_vec(),
        id.to_vec(),
        status.to_vec(),
        text.to_vec(),
        Vec::new(),
        Vec::new(),
    ]
}

// The test suite's one runner of a test in a process of its own, shared with the test binaries
// (`tests/common/`), for the tests below: the faults they inject abort the process.
#[cfg(test)]
#[path = "../../../tests/common/child.rs"]
mod child;
#[cfg(test)]
#[path = "../../../tests/common/stderr.rs"]
mod stderr;

#[cfg(test)]
mod tests {
    use std::{os::unix::process::ExitStatusExt, sync::atomic::AtomicU8, time::Duration};

    use super::{child, *};
    use crate::curve::CurveKeyPair;

    /// The fault the handler meets at its next request, set by a test in its child process.
    pub(super) static FAULT: AtomicU8 = AtomicU8::new(NO_FAULT);
    pub(super) const NO_FAULT: u8 = 0;
    pub(super) const SOCKET_FAILS: u8 = 1;
    pub(super) const PANICS: u8 = 2;

    fn request(domain: &str, mechanism: &[u8], key: &[u8]) -> Vec<Vec<u8>> {
        vec![
            b"1.0".to_vec(),
            b"7".to_vec(),
            domain.as_bytes().to_vec(),
            b"127.0.0.1".to_vec(),
            Vec::new(),
            mechanism.to_vec(),
            key.to_vec(),
        ]
    }

    #[test]
    fn a_listed_key_is_admitted_and_any_other_refused() {
        let listed = CurveKeyPair::generate().unwrap().public();
        let other = CurveKeyPair::generate().unwrap().public();
        let allowed = AllowList::new([listed]);
        assert_eq!(verdict(Some(&allowed), Some(&listed)), Verdict::Admitted);
        assert_eq!(verdict(Some(&allowed), Some(&other)), Verdict::Refused);
        assert_eq!(verdict(Some(&allowed), None), Verdict::Refused);
        assert_eq!(
            verdict(None, Some(&listed)),
            Verdict::Admitted,
            "a server with no list"
        );
        let own = crate::transport::curve_keys::own_keys().unwrap().public();
        assert_eq!(
            verdict(Some(&AllowList::new([])), Some(&own)),
            Verdict::Admitted,
            "this process's own key, on every list"
        );
    }

    /// In a child process: a CURVE listener whose list names another key, the handler meeting
    /// `fault` at the next request, and an unlisted client that knows the server's key sending
    /// to it; prints what arrives.
    fn unlisted_client_meets(fault: u8) {
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .init();
        let server = CurveKeyPair::generate().unwrap();
        let listed = CurveKeyPair::generate().unwrap().public();
        let pull = CONTEXT.socket(zmq::PULL).unwrap();
        pull.set_curve_server(true).unwrap();
        pull.set_curve_secretkey(server.secret()).unwrap();
        let registered = register(AllowList::new([listed]), "tcp://127.0.0.1:0").unwrap();
        pull.set_zap_domain(&registered.domain).unwrap();
        pull.bind("tcp://127.0.0.1:*").unwrap();
        let address = pull.get_last_endpoint().unwrap().unwrap();
        registered.listening_on(&address, &ZmqMonitor::default());
        println!("listening on {address}");
        FAULT.store(fault, Ordering::SeqCst);
        pull.set_rcvtimeo(100).unwrap();
        // A new unlisted client every 100 ms, each with a job: one that came after the handler
        // was gone would be admitted.
        let mut clients = Vec::new();
        for n in 0..50 {
            let stranger = CurveKeyPair::generate().unwrap();
            let push = CONTEXT.socket(zmq::PUSH).unwrap();
            push.set_linger(0).unwrap();
            push.set_curve_serverkey(server.public().bytes()).unwrap();
            push.set_curve_publickey(stranger.public().bytes()).unwrap();
            push.set_curve_secretkey(stranger.secret()).unwrap();
            push.connect(&address).unwrap();
            push.send(format!("job {n}").as_bytes(), 0).unwrap();
            clients.push(push);
            if let Ok(message) = pull.recv_bytes(0) {
                println!("received {}", String::from_utf8_lossy(&message));
            }
        }
        println!("still running");
    }

    /// Enforcement never lapses: the handler meeting `fault` with an unlisted client's handshake
    /// waiting ends the process (SIGABRT) with an ERROR naming the endpoint and saying `why`, and
    /// the client's message never arrives. The test `test` runs [`unlisted_client_meets`] in a
    /// child process of its own (itself again), which the fault aborts.
    fn aborts_before_an_unlisted_client_gets_in(test: &str, fault: u8, why: &str) {
        let test = child::test_name(module_path!(), test);
        if child::is_child(&test) {
            return unlisted_client_meets(fault);
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // A loaded 2-core machine: the child's own wait is 10 s at most.
        let end = runtime.block_on(async {
            child::ChildTest::spawn(&test)
                .end(Duration::from_secs(60))
                .await
        });
        let shown = end.describe();
        assert!(
            !end.stdout.contains("received"),
            "a message got in: {shown}"
        );
        assert_eq!(
            end.status.and_then(|status| status.signal()),
            Some(libc::SIGABRT),
            "{shown}"
        );
        let address = end
            .stdout
            .lines()
            .find_map(|line| Some(line.split_once("listening on ")?.1))
            .unwrap_or_else(|| panic!("no endpoint: {shown}"));
        let error = end
            .stderr
            .lines()
            .find(|line| line.contains("the CURVE authentication handler stopped"))
            .unwrap_or_else(|| panic!("no ERROR: {shown}"));
        assert!(error.contains("ERROR"), "{error}");
        assert!(error.contains(&format!("endpoints={address}")), "{error}");
        assert!(error.contains(why), "{error}");
    }

    #[test]
    fn a_handler_whose_socket_fails_aborts_before_an_unlisted_client_gets_in() {
        aborts_before_an_unlisted_client_gets_in(
            "a_handler_whose_socket_fails_aborts_before_an_unlisted_client_gets_in",
            SOCKET_FAILS,
            "its socket failed",
        );
    }

    #[test]
    fn a_handler_that_panics_aborts_before_an_unlisted_client_gets_in() {
        aborts_before_an_unlisted_client_gets_in(
            "a_handler_that_panics_aborts_before_an_unlisted_client_gets_in",
            PANICS,
            "its thread panicked: a panic a unit test injected",
        );
    }

    #[test]
    fn the_handler_answers_each_request_with_its_id_and_the_status_of_the_verdict() {
        let listed = CurveKeyPair::generate().unwrap().public();
        let registered = register(AllowList::new([listed]), "tcp://127.0.0.1:1").unwrap();
        let admitted = answer(&request(&registered.domain, b"CURVE", listed.bytes()));
        assert_eq!(admitted[1], b"7");
        assert_eq!(admitted[2], b"200");
        let stranger = CurveKeyPair::generate().unwrap().public();
        let refused = answer(&request(&registered.domain, b"CURVE", stranger.bytes()));
        assert_eq!(refused[2], b"400");
        assert_eq!(
            answer(&request(&registered.domain, b"NULL", b""))[2],
            b"400"
        );
        assert_eq!(answer(&[b"1.0".to_vec()])[2], b"500");
        let domain = registered.domain.clone();
        drop(registered);
        let stranger_elsewhere = answer(&request(&domain, b"CURVE", stranger.bytes()));
        assert_eq!(
            stranger_elsewhere[2], b"200",
            "no list any more: a server with none"
        );
    }
}
