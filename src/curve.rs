//! CURVE on an endpoint (features `libzmq` and `omq`): the server's key pair on a bound endpoint, with the
//! clients it admits (a list of keys, or any, said before a broker takes it); a client's key pair
//! and the server's public key on a dialing one. The keys themselves are [`keys`]'s.

mod files;
mod keys;

use std::{collections::HashSet, fmt, sync::Arc};

pub use self::keys::{CurveKeyPair, CurvePublicKey};
use crate::endpoint::{Bound, Dialing, ZmqEndpoint, sealed_mechanism};

/// CURVE on an endpoint, finished (libzmq and omq backends): every connection encrypted, the server known
/// by its public key, and on a bound endpoint the clients it admits said. Made by
/// `ZmqEndpoint::<Dialing>::curve`, or on a bound endpoint by `allow_clients` or
/// `allow_any_client` after `curve`; only a broker on libzmq or omq takes an endpoint that has it.
#[derive(Clone)]
pub struct Curve(pub(crate) Security);

impl sealed_mechanism::SealedMechanism for Curve {
    fn describe(&self) -> Option<String> {
        Some(self.0.describe())
    }
}

impl crate::endpoint::Mechanism for Curve {}

impl fmt::Debug for Curve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Curve").field(&self.0.describe()).finish()
    }
}

/// A bound endpoint with CURVE that has yet to say who may connect: no broker takes it until it
/// does. Call [`allow_clients`](ZmqEndpoint::allow_clients) (those client keys only) or
/// [`allow_any_client`](ZmqEndpoint::allow_any_client) (any holder of the server's public key)
/// on it, once; either moves it to [`Curve`].
///
/// ```
/// use ruststream_zmq::{CurveKeyPair, ZmqEndpoint};
///
/// let server = CurveKeyPair::generate().unwrap();
/// let client = CurveKeyPair::generate().unwrap();
/// let endpoint = ZmqEndpoint::bind("tcp://0.0.0.0:5555").curve(server); // WantsClients
/// let endpoint = endpoint.allow_clients([client.public()]); // Curve: a broker takes it
/// # let _ = endpoint;
/// ```
#[derive(Clone)]
pub struct WantsClients {
    server: CurveKeyPair,
}

impl sealed_mechanism::SealedMechanism for WantsClients {
    fn describe(&self) -> Option<String> {
        Some(format!(
            "server {}, clients not said yet",
            self.server.public().fingerprint()
        ))
    }
}

impl fmt::Debug for WantsClients {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("WantsClients")
            .field(&self.server.public().fingerprint())
            .finish()
    }
}

impl ZmqEndpoint<Bound> {
    /// Serves CURVE on this endpoint with the server's key pair (features `libzmq`, `omq`): every
    /// connection is encrypted, and a client must know `server.public()`. Then say who may
    /// connect ([`WantsClients`]): [`allow_clients`](ZmqEndpoint::allow_clients) or
    /// [`allow_any_client`](ZmqEndpoint::allow_any_client).
    ///
    /// The broker's own sockets that dial this endpoint (copies to its own listener), and every
    /// other socket of this process that dials it, use the process's own key pair, which every
    /// CURVE listener of the process admits whatever its list says.
    ///
    /// # Examples
    ///
    /// ```
    /// use ruststream_zmq::{CurveKeyPair, ZmqEndpoint};
    ///
    /// let server = CurveKeyPair::generate().unwrap();
    /// let client = CurveKeyPair::generate().unwrap();
    /// let endpoint = ZmqEndpoint::bind("tcp://0.0.0.0:5555")
    ///     .curve(server)
    ///     .allow_clients([client.public()]);
    /// assert!(format!("{endpoint:?}").contains("curve: \"server, clients allowed: 1\""));
    /// ```
    #[must_use]
    pub fn curve(self, server: CurveKeyPair) -> ZmqEndpoint<Bound, WantsClients> {
        self.secured(WantsClients { server })
    }
}

impl ZmqEndpoint<Bound, WantsClients> {
    /// Admits only these client keys (features `libzmq`, `omq`), and this process's own sockets. A
    /// client with another key is refused at its handshake: counted in
    /// [`ZmqMonitor::peers_refused`](crate::ZmqMonitor::peers_refused), and logged once a burst
    /// per key with the key's fingerprint, within a budget of lines per endpoint
    /// ([security](crate::guide::security)). An empty list admits this process's sockets alone: a
    /// queue that only this process sends to (its own retry queue, say).
    ///
    /// The list is the endpoint's, fixed here: a clone of the endpoint has the same list, and
    /// nothing changes it afterwards.
    ///
    /// ```
    /// use ruststream_zmq::{CurveKeyPair, ZmqEndpoint};
    ///
    /// let server = CurveKeyPair::generate().unwrap();
    /// let worker = CurveKeyPair::generate().unwrap();
    /// let endpoint = ZmqEndpoint::bind("tcp://0.0.0.0:5555")
    ///     .curve(server)
    ///     .allow_clients([worker.public()]);
    /// # let _ = endpoint;
    /// ```
    #[must_use]
    pub fn allow_clients(
        self,
        clients: impl IntoIterator<Item = CurvePublicKey>,
    ) -> ZmqEndpoint<Bound, Curve> {
        let listed = AllowList(Arc::new(clients.into_iter().collect()));
        self.decided(Clients::Listed(listed))
    }

    /// Admits any client that holds the server's public key (features `libzmq`, `omq`): the key is the
    /// only secret between a client and the service. Each listener warns once as it binds,
    /// naming its endpoint, so that a service exposed so is said aloud.
    ///
    /// ```
    /// use ruststream_zmq::{CurveKeyPair, ZmqEndpoint};
    ///
    /// let endpoint = ZmqEndpoint::bind("tcp://0.0.0.0:5555")
    ///     .curve(CurveKeyPair::generate().unwrap())
    ///     .allow_any_client();
    /// assert!(format!("{endpoint:?}").contains("curve: \"server, any client\""));
    /// ```
    #[must_use]
    pub fn allow_any_client(self) -> ZmqEndpoint<Bound, Curve> {
        self.decided(Clients::Any)
    }

    fn decided(self, clients: Clients) -> ZmqEndpoint<Bound, Curve> {
        let (plain, WantsClients { server }) = self.into_parts();
        plain.secured(Curve(Security::Server {
            keys: server,
            clients,
        }))
    }
}

impl ZmqEndpoint<Dialing> {
    /// Speaks CURVE to this endpoint's server (features `libzmq`, `omq`): this process's `client` key
    /// pair, and the public key of the `server` it expects. A server with another key is never
    /// connected to. These keys are the endpoint's alone: a `name@endpoint` destination
    /// elsewhere takes keys of its own (the `destination` of the libzmq and omq brokers), and a copy to a
    /// CURVE listener of this process goes with the process's own key pair.
    ///
    /// # Examples
    ///
    /// ```
    /// use ruststream_zmq::{CurveKeyPair, CurvePublicKey, ZmqEndpoint};
    ///
    /// let server = CurvePublicKey::from_z85("rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7").unwrap();
    /// let endpoint = ZmqEndpoint::dial("tcp://10.0.0.5:5555")
    ///     .curve(CurveKeyPair::generate().unwrap(), server);
    /// assert!(format!("{endpoint:?}").contains("curve: \"client of rq:rM>}U\""));
    /// ```
    #[must_use]
    pub fn curve(
        self,
        client: CurveKeyPair,
        server: CurvePublicKey,
    ) -> ZmqEndpoint<Dialing, Curve> {
        self.secured(Curve(Security::Client(ClientKeys {
            keys: client,
            server,
        })))
    }
}

/// How an endpoint's sockets secure their connections.
#[derive(Debug, Clone)]
pub enum Security {
    /// A bound endpoint: the server's key pair, and the clients it admits.
    Server {
        keys: CurveKeyPair,
        clients: Clients,
    },
    /// A dialing endpoint: this client's keys and the server's public key.
    Client(ClientKeys),
}

impl Security {
    /// What a log or `Debug` may say of it: the side, the server's fingerprint, how many
    /// clients are listed.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Server {
                clients: Clients::Any,
                ..
            } => "server, any client".to_owned(),
            Self::Server {
                clients: Clients::Listed(allowed),
                ..
            } => format!("server, clients allowed: {}", allowed.len()),
            Self::Client(client) => format!("client of {}", client.server.fingerprint()),
        }
    }
}

/// Who a CURVE server admits, beside this process's own sockets.
#[derive(Debug, Clone)]
pub enum Clients {
    /// The keys listed.
    Listed(AllowList),
    /// Any client that holds the server's public key.
    Any,
}

/// A client's key pair, and the public key of the server it expects.
#[derive(Debug, Clone)]
pub struct ClientKeys {
    pub(crate) keys: CurveKeyPair,
    pub(crate) server: CurvePublicKey,
}

/// The client keys a bound endpoint admits: fixed when the endpoint is made, so that clones
/// share it only to read.
#[derive(Debug, Clone, Default)]
pub struct AllowList(Arc<HashSet<CurvePublicKey>>);

impl AllowList {
    #[cfg(all(test, feature = "libzmq"))]
    pub(crate) fn new(keys: impl IntoIterator<Item = CurvePublicKey>) -> Self {
        Self(Arc::new(keys.into_iter().collect()))
    }

    pub(crate) fn admits(&self, key: &CurvePublicKey) -> bool {
        self.0.contains(key)
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PUBLIC: &str = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
    const SECRET: &str = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6";

    #[test]
    fn the_secret_never_shows_in_debug_output() {
        let pair = CurveKeyPair::from_z85(PUBLIC, SECRET).unwrap();
        let shown = format!(
            "{pair:?} {:?} {:?}",
            Security::Client(ClientKeys {
                keys: pair.clone(),
                server: pair.public()
            }),
            ZmqEndpoint::bind("tcp://127.0.0.1:0").curve(pair.clone()),
        );
        assert!(!shown.contains(SECRET), "{shown}");
        assert!(shown.contains(PUBLIC));
    }

    #[test]
    fn a_clone_of_an_endpoint_has_the_list_it_was_made_with() {
        let listed = CurvePublicKey::from_z85(PUBLIC).unwrap();
        let other = CurveKeyPair::generate().unwrap().public();
        let endpoint = ZmqEndpoint::bind("tcp://127.0.0.1:0")
            .curve(CurveKeyPair::generate().unwrap())
            .allow_clients([listed]);
        let clone = endpoint.clone();
        for each in [endpoint, clone] {
            let (_, Curve(Security::Server { clients, .. })) = each.into_parts() else {
                panic!("a bound endpoint serves");
            };
            let Clients::Listed(allowed) = clients else {
                panic!("a list was given");
            };
            assert!(allowed.admits(&listed));
            assert!(!allowed.admits(&other));
            assert_eq!(allowed.len(), 1);
        }
    }
}
