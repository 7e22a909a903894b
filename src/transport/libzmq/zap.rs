//! Who may connect to a CURVE endpoint with an allow-list: libzmq asks, for each client's
//! handshake, an authentication handler of the process (ZAP, ZeroMQ RFC 27) on
//! `inproc://zeromq.zap.01`. One thread answers those requests for every such endpoint of the
//! process, each known by the ZAP domain its sockets carry. Every endpoint admits, beside its
//! list, this process's own key pair ([`own_keys`]), which the process's dialing sockets use
//! toward its own listeners.
//!
//! A refused client is logged once a burst of its attempts per endpoint and key, naming the
//! endpoint, the peer's address and the key's fingerprint; past [`KEYS_NAMED`] keys, one line
//! covers the rest. libzmq then reports the failed handshake to the socket's monitor, which
//! counts it.

use std::{
    collections::HashMap,
    sync::{
        LazyLock, Mutex, OnceLock, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
};

use tokio::time::Instant;

use super::{CONTEXT, resumed};
use crate::{
    curve::{AllowList, CurveKeyPair, CurvePublicKey},
    throttle::{Note, Say, Throttle},
};

/// How many refused keys an endpoint names in its warnings at once.
const KEYS_NAMED: usize = 1_024;

/// Where libzmq sends its authentication requests.
const HANDLER: &str = "inproc://zeromq.zap.01";

/// The endpoints with an allow-list, by ZAP domain.
static DOMAINS: LazyLock<Mutex<HashMap<String, Domain>>> = LazyLock::new(Default::default);

/// Numbers the domains.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Whether the handler's thread runs (or why it could not start).
static HANDLER_STARTED: OnceLock<Result<(), zmq::Error>> = OnceLock::new();

/// This process's own key pair: made once, never leaves the process.
static OWN: LazyLock<Option<CurveKeyPair>> = LazyLock::new(|| CurveKeyPair::generate().ok());

/// The key pair this process's sockets dial its own CURVE listeners with, which every allow-list
/// of the process admits; `None` on a libzmq without CURVE.
pub(super) fn own_keys() -> Option<&'static CurveKeyPair> {
    OWN.as_ref()
}

/// One endpoint's allow-list, and the bursts of refusals under way (one warning each).
struct Domain {
    allowed: AllowList,
    endpoint: String,
    refused: Throttle<CurvePublicKey>,
}

/// A registered allow-list; dropping it forgets the domain.
pub(crate) struct Registered {
    pub(crate) domain: String,
}

impl Registered {
    /// Names the endpoint by the address the socket really listens on, once it is bound.
    pub(crate) fn listening_on(&self, endpoint: &str) {
        if let Some(known) = domains().get_mut(&self.domain) {
            endpoint.clone_into(&mut known.endpoint);
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
            refused: Throttle::new(KEYS_NAMED),
        },
    );
    Ok(Registered { domain })
}

/// Binds the handler and starts its thread, which serves for the life of the process.
///
/// The handler must never stop: while no handler is bound, libzmq admits every client that
/// knows a server's key (ZeroMQ's "Stonehouse" fallback; the option that would refuse instead,
/// `ZMQ_ZAP_ENFORCE_DOMAIN`, is a draft one that stable libzmq builds lack). So a wait that a
/// signal interrupts is resumed, and a handler that fails for another reason is bound again.
fn start() -> Result<(), zmq::Error> {
    let handler = bind_handler()?;
    std::thread::Builder::new()
        .name("zmq-zap".to_owned())
        .spawn(move || {
            let mut handler = handler;
            loop {
                let failure = serve(&handler);
                tracing::error!(
                    error = %failure,
                    "the CURVE authentication handler failed; binding it again"
                );
                drop(handler);
                handler = loop {
                    match bind_handler() {
                        Ok(handler) => break handler,
                        // The old socket's endpoint is released in the background.
                        Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
                    }
                };
            }
        })
        .map(drop)
        .map_err(|_| zmq::Error::EMFILE)
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
    let mut domains = domains();
    let verdict = verdict(
        domains.get(domain.as_ref()).map(|d| &d.allowed),
        key.as_ref(),
    );
    if verdict == Verdict::Refused
        && let (Some(known), Some(key)) = (domains.get_mut(domain.as_ref()), key)
    {
        let note = known.refused.note(key, Instant::now());
        warn_refused(
            &known.endpoint,
            &String::from_utf8_lossy(address),
            &key,
            note,
        );
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
    let own = own_keys().map(CurveKeyPair::public);
    match (allowed, key) {
        (None, _) => Verdict::Admitted,
        (Some(allowed), Some(key)) if allowed.admits(key) || own == Some(*key) => Verdict::Admitted,
        (Some(_), _) => Verdict::Refused,
    }
}

/// Warns of a refused client once a burst of its attempts, and once a minute while they go on;
/// keys past the most named share one line.
fn warn_refused(endpoint: &str, peer: &str, key: &CurvePublicKey, note: Note) {
    let rule = "curve-allow-list";
    match (note.say, note.crowded) {
        (Say::First { .. }, false) => tracing::warn!(
            endpoint = %endpoint,
            peer = %peer,
            key = %key.fingerprint(),
            rule,
            "refused a client whose CURVE key is not on the endpoint's allow-list; its further \
             attempts are refused and told once a minute while they go on"
        ),
        (Say::First { .. }, true) => tracing::warn!(
            endpoint = %endpoint,
            peer = %peer,
            rule,
            keys = KEYS_NAMED,
            "refusing clients of more keys than are named one by one: the rest are counted, and \
             told once a minute while they go on"
        ),
        (Say::Again { untold, since }, crowded) => tracing::warn!(
            endpoint = %endpoint,
            key = %if crowded { "(unnamed)".to_owned() } else { key.fingerprint().to_string() },
            rule,
            refused = untold,
            since = ?since.elapsed(),
            "still refusing clients whose CURVE key is not on the endpoint's allow-list"
        ),
        (Say::Nothing, _) => {}
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let own = own_keys().unwrap().public();
        assert_eq!(
            verdict(Some(&AllowList::new([])), Some(&own)),
            Verdict::Admitted,
            "this process's own key, on every list"
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
