//! CURVE keys and what an endpoint does with them (`libzmq` feature): the server's key pair on a
//! bound endpoint, with the clients it admits (a list of keys, or any); a client's key pair and
//! the server's public key on a dialing one.
//!
//! Keys are read from Z85 text (40 characters for 32 bytes), from a certificate file as pyzmq's
//! `zmq.auth.create_certificates` and czmq write them, or from environment variables. A key pair
//! whose public half is not the one its secret half makes is refused when it is read, and so is
//! a secret certificate that other users than its owner may read. A secret key never appears in
//! `Debug` output, errors or logs; a public key is shown by its fingerprint (its first 8 Z85
//! characters).
//!
//! Imports: `endpoint` and `error` (leaves). Key generation and the Z85 codec are libzmq's; the
//! public key a secret key makes is computed by `curve25519-dalek`.

use std::{collections::HashSet, fmt, path::Path, sync::Arc};

use curve25519_dalek::MontgomeryPoint;

use crate::{
    endpoint::{Bound, Dialing, ZmqEndpoint, sealed_mechanism},
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

    /// The public key `secret` makes: X25519 of the clamped secret and the curve's base point,
    /// as libsodium's `crypto_scalarmult_base` (and so libzmq's `zmq_curve_public`) computes it.
    fn of(secret: &[u8; 32]) -> Self {
        Self(MontgomeryPoint::mul_base_clamped(*secret).to_bytes())
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

/// A CURVE key pair whose halves belong together. Its secret half never leaves it but into
/// libzmq: `Debug` shows the public key only.
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
    /// [`ZmqError::CurveKey`] when either is not 40 characters of Z85, or when `public` is not
    /// the public key `secret` makes (the secret is never quoted in the error).
    ///
    /// ```
    /// use ruststream_zmq::CurveKeyPair;
    ///
    /// // libzmq's documented test keys: the server's pair, and a client's public key.
    /// let server = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
    /// let secret = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6";
    /// assert!(CurveKeyPair::from_z85(server, secret).is_ok());
    /// let client = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID";
    /// let mixed = CurveKeyPair::from_z85(client, secret).unwrap_err().to_string();
    /// assert!(mixed.contains("do not belong together"), "{mixed}");
    /// ```
    pub fn from_z85(public: &str, secret: &str) -> Result<Self, ZmqError> {
        Self::checked(
            CurvePublicKey::from_z85(public)?,
            decode(secret.trim(), "a secret key")?,
            "a key pair",
        )
    }

    /// The pair, once `public` is the public key `secret` makes; `what` names where they came
    /// from in the error.
    fn checked(public: CurvePublicKey, secret: [u8; 32], what: &str) -> Result<Self, ZmqError> {
        let made = CurvePublicKey::of(&secret);
        if made != public {
            return Err(ZmqError::CurveKey {
                what: what.to_owned(),
                why: format!(
                    "its halves do not belong together: the public key given is {}, and the \
                     secret key's public key is {}; give the public key of the same pair (pyzmq: \
                     `zmq.curve_public(secret)`)",
                    public.fingerprint(),
                    made.fingerprint()
                ),
            });
        }
        Ok(Self { public, secret })
    }

    /// A key pair from a secret certificate file, as `zmq.auth.create_certificates` (pyzmq)
    /// and `zcert_save_secret` (czmq) write it: `public-key = "..."` and `secret-key = "..."`
    /// lines under `curve`.
    ///
    /// On Unix the file must be readable by its owner only, as `ssh` asks of a private key:
    /// pyzmq writes it with the process's umask (often `0644`), so `chmod 600` it once.
    ///
    /// # Errors
    ///
    /// [`ZmqError::CurveKey`] naming the file when it cannot be read, when other users than its
    /// owner may read or write it (with the `chmod` that fixes it), when it lacks either key, or
    /// when its keys do not belong together.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ZmqError> {
        let path = path.as_ref();
        let what = format!("the certificate {}", path.display());
        let failed = |why: String| ZmqError::CurveKey {
            what: what.clone(),
            why,
        };
        let text = std::fs::read_to_string(path).map_err(|err| failed(err.to_string()))?;
        let public = certificate_value(&text, "public-key")
            .ok_or_else(|| failed("it has no `public-key = \"...\"` line".to_owned()))?;
        let secret = certificate_value(&text, "secret-key").ok_or_else(|| {
            failed("it has no `secret-key = \"...\"` line: is it the public certificate?".into())
        })?;
        owner_only(path).map_err(failed)?;
        let public = CurvePublicKey::from_z85(public)?;
        Self::checked(public, decode(secret.trim(), "a secret key")?, &what)
    }

    /// A key pair from two environment variables holding the Z85 text of each half.
    ///
    /// The variables stay in the environment, and every process this one starts inherits them,
    /// secret key included: prefer [`from_file`](Self::from_file) where the service runs other
    /// programs, or start them with the variable removed (`Command::env_remove`).
    ///
    /// # Errors
    ///
    /// [`ZmqError::CurveKey`] naming the variable that is unset or not a key, or when the two
    /// halves do not belong together.
    pub fn from_env(public_var: &str, secret_var: &str) -> Result<Self, ZmqError> {
        let read = |var: &str| {
            std::env::var(var).map_err(|_| ZmqError::CurveKey {
                what: format!("the environment variable {var}"),
                why: "it is not set (or not UTF-8)".to_owned(),
            })
        };
        let public = CurvePublicKey::from_z85(&read(public_var)?)?;
        let secret = decode(read(secret_var)?.trim(), "a secret key")?;
        Self::checked(
            public,
            secret,
            &format!("the environment variables {public_var} and {secret_var}"),
        )
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

/// Refuses a secret key file that other users than its owner may read or write (any of the
/// group and other permission bits, as `ssh` refuses a private key), saying how to fix it.
#[cfg(unix)]
fn owner_only(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .map_err(|err| err.to_string())?
        .permissions()
        .mode();
    if mode & 0o077 == 0 {
        return Ok(());
    }
    Err(format!(
        "it holds a secret key and other users than its owner may read or write it (mode {:04o}): \
         run `chmod 600 {}`",
        mode & 0o7777,
        path.display()
    ))
}

/// Elsewhere the file's access is the platform's own business.
#[cfg(not(unix))]
fn owner_only(_path: &Path) -> Result<(), String> {
    Ok(())
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

/// CURVE on an endpoint, finished (libzmq backend): every connection encrypted, the server known
/// by its public key, and on a bound endpoint the clients it admits said. Made by
/// `ZmqEndpoint::<Dialing>::curve`, or on a bound endpoint by `allow_clients` or
/// `allow_any_client` after `curve`; only a broker on libzmq takes an endpoint that has it.
#[derive(Clone)]
pub struct Curve(pub(crate) Security);

impl sealed_mechanism::Sealed for Curve {
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

impl sealed_mechanism::Sealed for WantsClients {
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
    /// Serves CURVE on this endpoint with the server's key pair (`libzmq` feature): every
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
    /// Admits only these client keys (`libzmq` feature), and this process's own sockets. A
    /// client with another key is refused at its handshake: counted in
    /// [`ZmqMonitor::peers_refused`](crate::ZmqMonitor::peers_refused), and logged once a burst
    /// per key with the key's fingerprint. An empty list admits this process's sockets alone: a
    /// queue that only this process sends to (its own retry queue, say).
    ///
    /// The list is the endpoint's, fixed here: a clone of the endpoint has the same list, and
    /// nothing changes it afterwards.
    #[must_use]
    pub fn allow_clients(
        self,
        clients: impl IntoIterator<Item = CurvePublicKey>,
    ) -> ZmqEndpoint<Bound, Curve> {
        let listed = AllowList(Arc::new(clients.into_iter().collect()));
        self.decided(Clients::Listed(listed))
    }

    /// Admits any client that holds the server's public key (`libzmq` feature): the key is the
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
    /// Speaks CURVE to this endpoint's server (`libzmq` feature): this process's `client` key
    /// pair, and the public key of the `server` it expects. A server with another key is never
    /// connected to. These keys are the endpoint's alone: a `name@endpoint` destination
    /// elsewhere takes keys of its own (the libzmq brokers' `destination`), and a copy to a
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
    #[cfg(test)]
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
    /// The client key pair of libzmq's documentation.
    const CLIENT_PUBLIC: &str = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID";
    const CLIENT_SECRET: &str = "D:)Q[IlAW!ahhC2ac:9*A}h:p?([4%wOTJ%JR%cs";

    /// A secret certificate as pyzmq writes it, at a path of this test's own, with `mode`.
    fn certificate(name: &str, public: &str, mode: u32) -> std::path::PathBuf {
        let text = format!(
            "#   ZeroMQ CURVE **Secret** Certificate\n\nmetadata\ncurve\n    public-key = \
             \"{public}\"\n    secret-key = \"{SECRET}\"\n"
        );
        let path = std::env::temp_dir().join(format!(
            "curve-test-{}-{name}.key_secret",
            std::process::id()
        ));
        std::fs::write(&path, text).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        path
    }

    #[test]
    fn a_key_reads_back_as_the_text_it_was_read_from() {
        let pair = CurveKeyPair::from_z85(PUBLIC, SECRET).unwrap();
        assert_eq!(pair.public().to_z85(), PUBLIC);
        assert_eq!(encode(pair.secret()), SECRET);
    }

    #[test]
    fn a_public_key_is_the_one_libzmq_makes_of_its_secret() {
        for (public, secret) in [(PUBLIC, SECRET), (CLIENT_PUBLIC, CLIENT_SECRET)] {
            let made = CurvePublicKey::of(&decode(secret, "a secret key").unwrap());
            assert_eq!(made.to_z85(), public);
        }
        for _ in 0..20 {
            let pair = zmq::CurveKeyPair::new().unwrap();
            assert_eq!(CurvePublicKey::of(&pair.secret_key).0, pair.public_key);
        }
    }

    #[test]
    fn halves_of_two_pairs_are_refused_naming_both_fingerprints_and_no_secret() {
        let err = CurveKeyPair::from_z85(CLIENT_PUBLIC, SECRET)
            .unwrap_err()
            .to_string();
        assert!(err.contains("do not belong together"), "{err}");
        assert!(
            err.contains(&CLIENT_PUBLIC[..8]) && err.contains(&PUBLIC[..8]),
            "{err}"
        );
        assert!(
            !err.contains(SECRET) && !err.contains(&SECRET[..8]),
            "{err}"
        );
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
        let path = certificate("ok", PUBLIC, 0o600);
        let pair = CurveKeyPair::from_file(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(pair.public().to_z85(), PUBLIC);
        assert_eq!(
            pair.secret(),
            CurveKeyPair::from_z85(PUBLIC, SECRET).unwrap().secret()
        );
    }

    #[test]
    fn a_certificate_whose_keys_do_not_belong_together_is_refused_naming_it() {
        let path = certificate("mixed", CLIENT_PUBLIC, 0o600);
        let err = CurveKeyPair::from_file(&path).unwrap_err().to_string();
        std::fs::remove_file(&path).unwrap();
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains("do not belong together"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_secret_certificate_others_may_read_is_refused_with_the_chmod_that_fixes_it() {
        for mode in [0o644, 0o640, 0o604, 0o620] {
            let path = certificate(&format!("{mode:o}"), PUBLIC, mode);
            let err = CurveKeyPair::from_file(&path).unwrap_err().to_string();
            std::fs::remove_file(&path).unwrap();
            assert!(err.contains(&path.display().to_string()), "{err}");
            assert!(err.contains(&format!("mode 0{mode:o}")), "{err}");
            assert!(
                err.contains(&format!("`chmod 600 {}`", path.display())),
                "{err}"
            );
        }
        for mode in [0o600, 0o400] {
            let path = certificate(&format!("{mode:o}"), PUBLIC, mode);
            let read = CurveKeyPair::from_file(&path);
            std::fs::remove_file(&path).unwrap();
            assert!(read.is_ok(), "mode {mode:o}: {read:?}");
        }
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
