//! CURVE keys and what an endpoint does with them (`libzmq` feature): the server's key pair on a
//! bound endpoint, with an optional allow-list of client keys; a client's key pair and the
//! server's public key on a dialing one.
//!
//! Keys are read from Z85 text (40 characters for 32 bytes), from a certificate file as pyzmq's
//! `zmq.auth.create_certificates` and czmq write them, or from an environment variable. A
//! secret key never appears in `Debug` output, errors or logs; a public key is shown by its
//! fingerprint (its first 8 Z85 characters).
//!
//! Imports: `endpoint` and `error` (leaves). Key generation and the Z85 codec are libzmq's.

use std::{
    collections::HashSet,
    fmt,
    path::Path,
    sync::{Arc, Mutex, PoisonError},
};

use crate::{
    endpoint::{Bound, Dialing, Mechanism, ZmqEndpoint, sealed_mechanism},
    error::ZmqError,
};

/// A CURVE public key: 32 bytes, written as 40 characters of Z85.
///
/// # Examples
///
/// ```
/// use ruststream_zmq::CurvePublicKey;
///
/// let key = CurvePublicKey::from_z85("rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7").unwrap();
/// assert_eq!(key.fingerprint(), "rq:rM>}U");
/// assert!(CurvePublicKey::from_z85("too short").is_err());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CurvePublicKey([u8; 32]);

impl CurvePublicKey {
    /// Reads a public key from its 40 Z85 characters (white space around them is ignored).
    ///
    /// # Errors
    ///
    /// [`ZmqError::CurveKey`] when the text is not 40 characters of Z85.
    pub fn from_z85(text: &str) -> Result<Self, ZmqError> {
        decode(text.trim(), "a public key").map(Self)
    }

    /// The key as 40 Z85 characters, as pyzmq and libzmq write it.
    #[must_use]
    pub fn to_z85(&self) -> String {
        encode(&self.0)
    }

    /// The first 8 Z85 characters: enough to tell keys apart in a log.
    #[must_use]
    pub fn fingerprint(&self) -> String {
        self.to_z85()[..8].to_owned()
    }

    pub(crate) fn bytes(&self) -> &[u8; 32] {
        &self.0
    }

    pub(crate) fn from_bytes(bytes: &[u8]) -> Option<Self> {
        bytes.try_into().ok().map(Self)
    }
}

impl fmt::Debug for CurvePublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CurvePublicKey({})", self.to_z85())
    }
}

impl fmt::Display for CurvePublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_z85())
    }
}

/// A CURVE key pair. Its secret half never leaves it but into libzmq: `Debug` shows the public
/// key only.
///
/// # Examples
///
/// ```
/// use ruststream_zmq::CurveKeyPair;
///
/// let pair = CurveKeyPair::generate().unwrap();
/// let text = format!("{pair:?}");
/// assert!(text.contains(&pair.public().to_z85()));
/// assert!(text.contains("secret: <hidden>"));
/// ```
#[derive(Clone)]
pub struct CurveKeyPair {
    public: CurvePublicKey,
    secret: [u8; 32],
}

impl CurveKeyPair {
    /// A fresh key pair from libzmq's generator.
    ///
    /// # Errors
    ///
    /// [`ZmqError::CurveKey`] when this libzmq was built without CURVE.
    pub fn generate() -> Result<Self, ZmqError> {
        let pair = zmq::CurveKeyPair::new().map_err(|err| ZmqError::CurveKey {
            what: "a new key pair".to_owned(),
            why: format!(
                "libzmq could not make one ({err}): it may be built without CURVE (libsodium); \
                 Debian and Ubuntu build it with: `apt-get install libzmq3-dev pkg-config`"
            ),
        })?;
        Ok(Self {
            public: CurvePublicKey(pair.public_key),
            secret: pair.secret_key,
        })
    }

    /// A key pair from the Z85 text of both halves.
    ///
    /// # Errors
    ///
    /// [`ZmqError::CurveKey`] when either is not 40 characters of Z85 (the secret is never
    /// quoted in the error).
    pub fn from_z85(public: &str, secret: &str) -> Result<Self, ZmqError> {
        Ok(Self {
            public: CurvePublicKey::from_z85(public)?,
            secret: decode(secret.trim(), "a secret key")?,
        })
    }

    /// A key pair from a secret certificate file, as `zmq.auth.create_certificates` (pyzmq)
    /// and `zcert_save_secret` (czmq) write it: `public-key = "..."` and `secret-key = "..."`
    /// lines under `curve`.
    ///
    /// # Errors
    ///
    /// [`ZmqError::CurveKey`] naming the file when it cannot be read or lacks either key.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ZmqError> {
        let path = path.as_ref();
        let failed = |why: String| ZmqError::CurveKey {
            what: format!("the certificate {}", path.display()),
            why,
        };
        let text = std::fs::read_to_string(path).map_err(|err| failed(err.to_string()))?;
        let public = certificate_value(&text, "public-key")
            .ok_or_else(|| failed("it has no `public-key = \"...\"` line".to_owned()))?;
        let secret = certificate_value(&text, "secret-key").ok_or_else(|| {
            failed("it has no `secret-key = \"...\"` line: is it the public certificate?".into())
        })?;
        Self::from_z85(public, secret)
    }

    /// A key pair from two environment variables holding the Z85 text of each half.
    ///
    /// # Errors
    ///
    /// [`ZmqError::CurveKey`] naming the variable that is unset or not a key.
    pub fn from_env(public_var: &str, secret_var: &str) -> Result<Self, ZmqError> {
        let read = |var: &str| {
            std::env::var(var).map_err(|_| ZmqError::CurveKey {
                what: format!("the environment variable {var}"),
                why: "it is not set (or not UTF-8)".to_owned(),
            })
        };
        Self::from_z85(&read(public_var)?, &read(secret_var)?)
    }

    /// The public half, to give to the other side.
    #[must_use]
    pub fn public(&self) -> CurvePublicKey {
        self.public
    }

    pub(crate) fn secret(&self) -> &[u8; 32] {
        &self.secret
    }
}

impl fmt::Debug for CurveKeyPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CurveKeyPair")
            .field("public", &self.public.to_z85())
            .field("secret", &format_args!("<hidden>"))
            .finish()
    }
}

/// The value of a `name = "value"` line of a certificate.
fn certificate_value<'t>(text: &'t str, name: &str) -> Option<&'t str> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == name).then(|| value.trim().trim_matches('"'))
    })
}

fn decode(text: &str, what: &str) -> Result<[u8; 32], ZmqError> {
    let refused = || ZmqError::CurveKey {
        what: what.to_owned(),
        why: format!(
            "a CURVE key is 40 characters of Z85; this text has {}",
            text.chars().count()
        ),
    };
    if text.len() != 40 {
        return Err(refused());
    }
    zmq::z85_decode(text)
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or_else(refused)
}

fn encode(bytes: &[u8; 32]) -> String {
    // 32 bytes are a multiple of 4, the one thing the encoder can refuse.
    zmq::z85_encode(bytes).unwrap_or_default()
}

/// CURVE on an endpoint (libzmq backend): every connection encrypted, the server known by its
/// public key. Made by `ZmqEndpoint::curve`; only a broker on libzmq takes an endpoint
/// that has it.
#[derive(Clone)]
pub struct Curve(pub(crate) Security);

impl sealed_mechanism::Sealed for Curve {}

impl Mechanism for Curve {
    fn describe(&self) -> Option<String> {
        Some(self.0.describe())
    }
}

impl fmt::Debug for Curve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Curve").field(&self.0.describe()).finish()
    }
}

impl ZmqEndpoint<Bound> {
    /// Serves CURVE on this endpoint with the server's key pair (`libzmq` feature): every
    /// connection is encrypted, and a client must know `server.public()`. Any client that does
    /// is admitted, unless [`allow_clients`](ZmqEndpoint::allow_clients) lists the ones that
    /// are.
    ///
    /// The broker's own sockets that dial this endpoint (copies to its own listener) use a key
    /// pair of their own, admitted by the allow-list.
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
    pub fn curve(self, server: CurveKeyPair) -> ZmqEndpoint<Bound, Curve> {
        self.secured(Curve(Security::Server {
            keys: server,
            allowed: None,
        }))
    }
}

impl ZmqEndpoint<Bound, Curve> {
    /// Admits only these client keys (`libzmq` feature). A client with another key is refused
    /// at its handshake: counted in
    /// [`ZmqMonitor::peers_refused`](crate::ZmqMonitor::peers_refused), and logged once per key
    /// and burst of attempts, with the key's fingerprint.
    #[must_use]
    pub fn allow_clients(mut self, clients: impl IntoIterator<Item = CurvePublicKey>) -> Self {
        if let Curve(Security::Server { allowed, .. }) = self.mechanism_mut() {
            let listed = allowed.get_or_insert_with(AllowList::default);
            for client in clients {
                listed.add(client);
            }
        }
        self
    }
}

impl ZmqEndpoint<Dialing> {
    /// Speaks CURVE to this endpoint's server (`libzmq` feature): this process's `client` key
    /// pair, and the public key of the `server` it expects. A server with another key is never
    /// connected to; every socket the broker dials (copies to `name@endpoint` destinations too)
    /// expects that server key.
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
        self.secured(Curve(Security::Client {
            keys: client,
            server,
        }))
    }
}

/// How an endpoint's sockets secure their connections.
#[derive(Debug, Clone)]
pub enum Security {
    /// A bound endpoint: the server's key pair, and the clients it admits (any, when `None`).
    Server {
        keys: CurveKeyPair,
        allowed: Option<AllowList>,
    },
    /// A dialing endpoint: this client's key pair and the server's public key.
    Client {
        keys: CurveKeyPair,
        server: CurvePublicKey,
    },
}

impl Security {
    /// What a log or `Debug` may say of it: the side, the server's fingerprint, how many
    /// clients are listed.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Server { allowed: None, .. } => "server, any client".to_owned(),
            Self::Server {
                allowed: Some(allowed),
                ..
            } => format!("server, clients allowed: {}", allowed.len()),
            Self::Client { server, .. } => format!("client of {}", server.fingerprint()),
        }
    }
}

/// The client keys a bound endpoint admits. Shared: the broker's own sockets that dial its
/// endpoint (copies to its own listener) add keys of their own.
#[derive(Debug, Clone, Default)]
pub struct AllowList(Arc<Mutex<HashSet<CurvePublicKey>>>);

impl AllowList {
    #[cfg(test)]
    pub(crate) fn new(keys: impl IntoIterator<Item = CurvePublicKey>) -> Self {
        Self(Arc::new(Mutex::new(keys.into_iter().collect())))
    }

    pub(crate) fn admits(&self, key: &CurvePublicKey) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(key)
    }

    pub(crate) fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    pub(crate) fn add(&self, key: CurvePublicKey) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PUBLIC: &str = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
    const SECRET: &str = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6";

    #[test]
    fn a_key_reads_back_as_the_text_it_was_read_from() {
        let pair = CurveKeyPair::from_z85(PUBLIC, SECRET).unwrap();
        assert_eq!(pair.public().to_z85(), PUBLIC);
        assert_eq!(encode(pair.secret()), SECRET);
    }

    #[test]
    fn a_bad_key_is_refused_without_quoting_it() {
        let err = CurveKeyPair::from_z85(PUBLIC, "not-a-secret-key-at-all").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("40 characters"), "{text}");
        assert!(!text.contains("not-a-secret"), "{text}");
    }

    #[test]
    fn a_certificate_file_as_pyzmq_writes_it_is_read() {
        let text = format!(
            "#   ZeroMQ CURVE **Secret** Certificate\n\nmetadata\ncurve\n    public-key = \
             \"{PUBLIC}\"\n    secret-key = \"{SECRET}\"\n"
        );
        let path =
            std::env::temp_dir().join(format!("curve-test-{}.key_secret", std::process::id()));
        std::fs::write(&path, text).unwrap();
        let pair = CurveKeyPair::from_file(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(pair.public().to_z85(), PUBLIC);
        assert_eq!(
            pair.secret(),
            CurveKeyPair::from_z85(PUBLIC, SECRET).unwrap().secret()
        );
    }

    #[test]
    fn a_public_certificate_is_not_taken_for_a_key_pair() {
        let path = std::env::temp_dir().join(format!("curve-test-{}.key", std::process::id()));
        std::fs::write(&path, format!("curve\n    public-key = \"{PUBLIC}\"\n")).unwrap();
        let err = CurveKeyPair::from_file(&path).unwrap_err().to_string();
        std::fs::remove_file(&path).unwrap();
        assert!(err.contains("secret-key"), "{err}");
    }

    #[test]
    fn the_secret_never_shows_in_debug_output() {
        let pair = CurveKeyPair::from_z85(PUBLIC, SECRET).unwrap();
        let shown = format!(
            "{pair:?} {:?}",
            Security::Client {
                keys: pair.clone(),
                server: pair.public()
            }
        );
        assert!(!shown.contains(SECRET), "{shown}");
        assert!(shown.contains(PUBLIC));
    }

    #[test]
    fn an_allow_list_admits_the_keys_it_holds_and_those_added_later() {
        let listed = CurvePublicKey::from_z85(PUBLIC).unwrap();
        let other = CurveKeyPair::generate().unwrap().public();
        let allowed = AllowList::new([listed]);
        assert!(allowed.admits(&listed));
        assert!(!allowed.admits(&other));
        allowed.add(other);
        assert!(allowed.admits(&other));
    }
}
