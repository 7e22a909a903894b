//! CURVE keys as the sockets of every backend that speaks it choose them, and who a listener
//! admits.
//!
//! A bound socket serves as its endpoint says. A dialing socket speaks, the first that applies:
//!
//! 1. the keys its broker gives the address it dials (`destination`);
//! 2. its endpoint's client keys, where that address is its endpoint;
//! 3. this process's own key pair ([`own_keys`]) to the server key of a CURVE listener of
//!    this process at that address: a broker's copies to its own listener, or to a queue that
//!    another broker of the process binds;
//! 4. on a broker that speaks CURVE, nothing: the socket is refused
//!    ([`ZmqError::CurveDestination`]) rather than send in clear; on one that does not, clear.
//!
//! A listener with an allow-list admits its keys and this process's own ([`admits`]); a refused
//! client is logged once a burst of its attempts per endpoint and key, naming the endpoint, the
//! peer's address and the key's fingerprint; past [`KEYS_NAMED`] keys, one line covers the rest.
//! Each endpoint's lines also spend its budget ([`Refusals`]): keys that change at every attempt
//! write a bounded number of lines, the rest counted and told by the next line written.

use std::sync::{
    LazyLock, Mutex, PoisonError,
    atomic::{AtomicU64, Ordering},
};

use crate::{
    curve::{AllowList, ClientKeys, Clients, Curve, CurveKeyPair, CurvePublicKey, Security},
    error::ZmqError,
    routing::{LocalHost, reaches},
    throttle::{Line, Say},
};

#[cfg(doc)]
use crate::throttle::Refusals;

/// How many refused keys an endpoint names in its warnings at once.
pub(crate) const KEYS_NAMED: usize = 1_024;

/// This process's own key pair: made once, never leaves the process.
static OWN: LazyLock<Option<CurveKeyPair>> = LazyLock::new(|| CurveKeyPair::generate().ok());

/// The key pair this process's sockets dial its own CURVE listeners with, which every allow-list
/// of the process admits.
///
/// # Errors
///
/// [`ZmqError::CurveKey`] when the operating system gave no random bytes to make it.
pub(crate) fn own_keys() -> Result<&'static CurveKeyPair, ZmqError> {
    OWN.as_ref().ok_or_else(|| ZmqError::CurveKey {
        what: "this process's own key pair".to_owned(),
        why: "the operating system gave no random bytes".to_owned(),
    })
}

/// Whether a listener with the allow-list `allowed` admits a client with `key`: a listed key, or
/// this process's own.
pub(crate) fn admits(allowed: &AllowList, key: &CurvePublicKey) -> bool {
    allowed.admits(key) || OWN.as_ref().map(CurveKeyPair::public) == Some(*key)
}

/// Warns of a refused client once a burst of its attempts, and once a minute while they go on;
/// keys past the most named share one line. `withheld` lines the endpoint's budget kept back
/// before this one are told with it. Called with no lock held that a handshake needs: a slow log
/// must hold up no other handshake.
pub(crate) fn warn_refused(endpoint: &str, peer: &str, key: &CurvePublicKey, line: Line) {
    let rule = "curve-allow-list";
    let withheld = line.withheld;
    match (line.say, line.crowded) {
        (Say::First { .. }, false) => tracing::warn!(
            endpoint = %endpoint,
            peer = %peer,
            key = %key.fingerprint(),
            rule,
            withheld,
            "refused a client whose CURVE key is not on the endpoint's allow-list; its further \
             attempts are refused and told once a minute while they go on (withheld: the \
             endpoint's lines past its budget since its last line)"
        ),
        (Say::First { .. }, true) => tracing::warn!(
            endpoint = %endpoint,
            peer = %peer,
            rule,
            keys = KEYS_NAMED,
            withheld,
            "refusing clients of more keys than are named one by one: the rest are counted, and \
             told once a minute while they go on"
        ),
        (Say::Again { untold, since }, crowded) => tracing::warn!(
            endpoint = %endpoint,
            key = %if crowded { "(unnamed)".to_owned() } else { key.fingerprint().to_string() },
            rule,
            refused = untold,
            since = ?since.elapsed(),
            withheld,
            "still refusing clients whose CURVE key is not on the endpoint's allow-list"
        ),
        (Say::Nothing, _) => {}
    }
}

/// The CURVE keys of a libzmq broker: its endpoint's, and those it gives destinations.
#[derive(Debug, Clone, Default)]
pub(crate) struct Keys {
    /// The endpoint's address as configured, and its CURVE, when it has it.
    endpoint: Option<(String, Security)>,
    /// The keys toward the endpoints of `name@endpoint` destinations, by address.
    destinations: Vec<(String, ClientKeys)>,
}

impl Keys {
    /// The endpoint at `address` speaks CURVE with `security`.
    pub(crate) fn secure_endpoint(&mut self, address: &str, Curve(security): Curve) {
        self.endpoint = Some((address.to_owned(), security));
    }

    /// The keys the broker's sockets dial `address` with: a dialing endpoint's CURVE.
    pub(crate) fn destination(&mut self, address: &str, Curve(security): Curve) {
        // A dialing endpoint's CURVE is a client's: nothing else reaches here.
        if let Security::Client(keys) = security {
            self.destinations.retain(|(known, _)| known != address);
            self.destinations.push((address.to_owned(), keys));
        }
    }

    /// Whether the broker's endpoint speaks CURVE.
    pub(crate) fn speaks_curve(&self) -> bool {
        self.endpoint.is_some()
    }
}

/// How one socket speaks.
pub(crate) enum Plan {
    Clear,
    /// As a CURVE server with these keys, admitting these clients.
    Serve {
        keys: CurveKeyPair,
        clients: Clients,
    },
    /// As a CURVE client with these keys, of the server with this public key.
    Dial(ClientKeys),
}

/// How a socket of a broker with `keys` on `address` speaks, bound or dialing.
///
/// # Errors
///
/// [`ZmqError::CurveDestination`] for a dialing socket of a CURVE broker with no keys for the
/// address; [`ZmqError::CurveKey`] when this process could not make its own key pair.
pub(crate) fn plan(keys: &Keys, binds: bool, address: &str) -> Result<Plan, ZmqError> {
    let plan = if binds {
        serving(keys, address)?
    } else {
        dialing(keys, address)?
    };
    Ok(plan)
}

fn serving(keys: &Keys, address: &str) -> Result<Plan, ZmqError> {
    match &keys.endpoint {
        None => Ok(Plan::Clear),
        Some((_, Security::Server { keys, clients })) => Ok(Plan::Serve {
            keys: keys.clone(),
            clients: clients.clone(),
        }),
        // A dialing endpoint's sockets dial; never listening in clear instead.
        Some((_, Security::Client(_))) => Err(ZmqError::Bind {
            endpoint: address.to_owned(),
            source: "a dialing CURVE endpoint has no server key pair to listen with".into(),
        }),
    }
}

fn dialing(keys: &Keys, address: &str) -> Result<Plan, ZmqError> {
    if let Some((_, given)) = keys.destinations.iter().find(|(known, _)| known == address) {
        return Ok(Plan::Dial(given.clone()));
    }
    if let Some((endpoint, Security::Client(client))) = &keys.endpoint
        && endpoint == address
    {
        return Ok(Plan::Dial(client.clone()));
    }
    if let Some(server) = listener_at(address) {
        let own = own_keys()?;
        return Ok(Plan::Dial(ClientKeys {
            keys: own.clone(),
            server,
        }));
    }
    if keys.speaks_curve() {
        return Err(ZmqError::CurveDestination {
            endpoint: address.to_owned(),
        });
    }
    Ok(Plan::Clear)
}

/// A CURVE listener of this process, found by the address it really listens on.
struct CurveListener {
    id: u64,
    address: String,
    server: CurvePublicKey,
}

/// This process's CURVE listeners, which its own dialing sockets reach with its own key pair.
static LISTENERS: LazyLock<Mutex<Vec<CurveListener>>> = LazyLock::new(Default::default);

/// Numbers the listeners.
static NEXT: AtomicU64 = AtomicU64::new(0);

fn listeners() -> std::sync::MutexGuard<'static, Vec<CurveListener>> {
    LISTENERS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A CURVE listener known to this process's dialing sockets while it lives.
pub(crate) struct KnownListener(u64);

impl Drop for KnownListener {
    fn drop(&mut self) {
        listeners().retain(|listener| listener.id != self.0);
    }
}

/// Makes a socket bound at `resolved` as `plan` says known to this process's dialing sockets, if
/// it serves CURVE; one that admits any client warns so, once, naming its endpoint.
pub(crate) fn listening(plan: &Plan, resolved: &str) -> Option<KnownListener> {
    let Plan::Serve { keys, clients } = plan else {
        return None;
    };
    if let Clients::Any = clients {
        tracing::warn!(
            endpoint = %resolved,
            server = %keys.public().fingerprint(),
            "this CURVE listener admits any client that holds its server's public key \
             (`allow_any_client`): that key is the only secret between a client and the service; \
             list the clients with `allow_clients(keys)` to admit those alone"
        );
    }
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    listeners().push(CurveListener {
        id,
        address: resolved.to_owned(),
        server: keys.public(),
    });
    Some(KnownListener(id))
}

/// The server key of this process's CURVE listener that a socket dialing `address` reaches:
/// the same address, or the loopback (or wildcard) form of a listener on every interface.
fn listener_at(address: &str) -> Option<CurvePublicKey> {
    // No host names: the forms every host has are the ones a process's own copies use.
    let host = LocalHost::default();
    listeners()
        .iter()
        .find(|listener| listener.address == address || reaches(&listener.address, address, &host))
        .map(|listener| listener.server)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Dialing, ZmqEndpoint};

    fn client_of(server: CurvePublicKey) -> Curve {
        let (_, curve) = ZmqEndpoint::<Dialing>::dial("tcp://127.0.0.1:1")
            .curve(CurveKeyPair::generate().unwrap(), server)
            .into_parts();
        curve
    }

    fn dials_with(plan: &Plan) -> Option<(CurvePublicKey, CurvePublicKey)> {
        match plan {
            Plan::Dial(client) => Some((client.keys.public(), client.server)),
            _ => None,
        }
    }

    #[test]
    fn a_dialing_socket_takes_its_destinations_keys_then_its_endpoints_then_refuses() {
        let (vent, sink) = (
            CurveKeyPair::generate().unwrap().public(),
            CurveKeyPair::generate().unwrap().public(),
        );
        let mut config = Keys::default();
        config.secure_endpoint("tcp://10.0.0.1:5550", client_of(vent));
        let to_sink = client_of(sink);
        let sink_client = match &to_sink.0 {
            Security::Client(client) => client.keys.public(),
            Security::Server { .. } => unreachable!(),
        };
        config.destination("tcp://10.0.0.2:5570", to_sink);
        let keys = &config;
        let endpoint = dials_with(&plan(keys, false, "tcp://10.0.0.1:5550").unwrap()).unwrap();
        assert_eq!(endpoint.1, vent);
        assert_eq!(
            dials_with(&plan(keys, false, "tcp://10.0.0.2:5570").unwrap()),
            Some((sink_client, sink))
        );
        let err = plan(keys, false, "tcp://10.0.0.3:5580")
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("tcp://10.0.0.3:5580"), "{err}");
        assert!(err.contains(".destination(ZmqEndpoint::dial("), "{err}");
        assert!(matches!(
            plan(&Keys::default(), false, "tcp://10.0.0.3:5580"),
            Ok(Plan::Clear)
        ));
    }

    #[test]
    fn a_socket_dialing_a_curve_listener_of_this_process_uses_the_processs_own_keys() {
        let server = CurveKeyPair::generate().unwrap();
        let serving = Plan::Serve {
            keys: server.clone(),
            clients: Clients::Any,
        };
        let listening = listening(&serving, "tcp://0.0.0.0:47123");
        let mut dialing = Keys::default();
        dialing.secure_endpoint(
            "tcp://10.0.0.1:5550",
            client_of(CurveKeyPair::generate().unwrap().public()),
        );
        let own = own_keys().unwrap().public();
        for form in [
            "tcp://0.0.0.0:47123",
            "tcp://127.0.0.1:47123",
            "tcp://localhost:47123",
        ] {
            let planned = plan(&dialing, false, form).unwrap();
            assert_eq!(dials_with(&planned), Some((own, server.public())), "{form}");
        }
        drop(listening);
        assert!(plan(&dialing, false, "tcp://127.0.0.1:47123").is_err());
    }
}
