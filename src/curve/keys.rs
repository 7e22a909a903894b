//! CURVE keys (features `libzmq` and `omq`): read from Z85 text (40 characters for 32 bytes), from a
//! certificate file as pyzmq's `zmq.auth.create_certificates` and czmq write them, or from
//! environment variables. A key pair whose public half is not the one its secret half makes is
//! refused when it is read, and so is a key file another user could read or change
//! (`curve::files` says which owners and modes pass). A secret key never appears in
//! `Debug` output, errors or logs; a public key is shown by its fingerprint (its first 8 Z85
//! characters).
//!
//! The secret's bytes live in one place, shared by the clones of a pair and zeroed when the last
//! drops; the certificate and environment text it was read from is zeroed too. Copies this crate
//! does not own are beyond that: the one libzmq keeps in each socket, omq's own (which omq zeroes
//! on drop), and the stack of the X25519 arithmetic.
//!
//! A secret key comes from the operating system's random source (`getrandom`), the public key
//! it makes from `curve25519-dalek`, and Z85 from the `z85` crate, which refuses any character
//! outside its alphabet.

use std::{
    fmt,
    path::{Path, PathBuf},
    sync::Arc,
};

use curve25519_dalek::MontgomeryPoint;
use zeroize::{ZeroizeOnDrop, Zeroizing};

use super::files::{Certificate, Trust, public_certificates_in};
use crate::error::ZmqError;

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
    ///
    /// ```
    /// use ruststream_zmq::CurvePublicKey;
    ///
    /// let server = CurvePublicKey::from_z85("rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7").unwrap();
    /// assert_eq!(server.to_z85(), "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7");
    /// ```
    pub fn from_z85(text: &str) -> Result<Self, ZmqError> {
        let mut bytes = [0u8; 32];
        decode(text.trim(), "a public key", &mut bytes)?;
        Ok(Self(bytes))
    }

    /// The key as 40 Z85 characters, as pyzmq and libzmq write it.
    #[must_use]
    pub fn to_z85(&self) -> String {
        encode(&self.0)
    }

    /// The public key of a certificate file, public (`name.key`) or secret (`name.key_secret`),
    /// as `zmq.auth.create_certificates` (pyzmq) and czmq write them: a client to admit, or the
    /// server to expect.
    ///
    /// Whoever may change the file chooses who is admitted, so on Unix it must be owned by this
    /// process's effective user or root and writable by neither its group nor others, as `sshd`
    /// asks of `authorized_keys`. Links are followed, and errors name the file they lead to.
    ///
    /// # Errors
    ///
    /// [`ZmqError::CurveKey`] naming the file (and where its links lead) when it cannot be
    /// read, is owned by another user, may be written by its group or others (with the
    /// `chown`/`chmod` that fixes it), or has no `public-key = "..."` line of 40 Z85 characters.
    ///
    /// ```
    /// use ruststream_zmq::CurvePublicKey;
    ///
    /// # let path = std::env::temp_dir().join(format!("public-{}.key", std::process::id()));
    /// # std::fs::write(&path, "curve\n    public-key = \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\"\n").unwrap();
    /// let server = CurvePublicKey::from_file(&path)?;
    /// assert_eq!(server.fingerprint(), "rq:rM>}U");
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), ruststream_zmq::ZmqError>(())
    /// ```
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ZmqError> {
        let certificate = Certificate::read(path.as_ref(), Trust::Public)?;
        Self::from_z85(certificate.public()?).map_err(|err| certificate.failed(err.to_string()))
    }

    /// Every public certificate (`*.key`) in a directory, by name, as pyzmq's
    /// `zmq.auth.load_certificates` reads one: the clients to admit
    /// ([`allow_clients`](crate::ZmqEndpoint::allow_clients)).
    ///
    /// Whoever may add a file to the directory adds a client, so on Unix the directory, and each
    /// file as [`from_file`](Self::from_file) says, must be owned by this process's effective
    /// user or root and writable by neither its group nor others: a shared `/tmp` is refused.
    ///
    /// # Errors
    ///
    /// [`ZmqError::CurveKey`] naming the directory or the file (and where its links lead) when
    /// it cannot be read, is owned by another user, may be written by its group or others (with
    /// the `chown`/`chmod` that fixes it), holds no `*.key` file, or a file is not a public key.
    ///
    /// ```
    /// use ruststream_zmq::{CurveKeyPair, CurvePublicKey, ZmqEndpoint};
    ///
    /// # let dir = std::env::temp_dir().join(format!("clients-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// # #[cfg(unix)]
    /// # std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    /// # CurveKeyPair::generate()?.create_certificates(&dir, "worker")?;
    /// let clients = CurvePublicKey::from_dir(&dir)?;
    /// let endpoint = ZmqEndpoint::bind("tcp://0.0.0.0:5555")
    ///     .curve(CurveKeyPair::generate()?)
    ///     .allow_clients(clients);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # let _ = endpoint;
    /// # Ok::<(), ruststream_zmq::ZmqError>(())
    /// ```
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Vec<Self>, ZmqError> {
        public_certificates_in(dir.as_ref())?
            .iter()
            .map(Self::from_file)
            .collect()
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
/// the backend's socket: `Debug` shows the public key only. A clone shares the one copy of the
/// secret, which is zeroed when the last clone drops.
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
    secret: Arc<SecretKey>,
}

/// A secret key's 32 bytes: never copied by this crate (not `Clone`; pairs share it through an
/// `Arc`), and overwritten with zeros when dropped.
struct SecretKey(Zeroizing<[u8; 32]>);

impl ZeroizeOnDrop for SecretKey {}

impl SecretKey {
    /// A secret of zeros, in the place it will stay: filled there, never moved, so that no
    /// stack copy outlives it.
    fn zeros() -> Arc<Self> {
        Arc::new(Self([0u8; 32].into()))
    }

    /// The bytes of a secret just made, before anything shares it.
    fn fill(key: &mut Arc<Self>) -> &mut [u8; 32] {
        &mut Arc::get_mut(key)
            .expect("a secret is filled before it is shared")
            .0
    }

    fn bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl CurveKeyPair {
    /// A fresh key pair: a secret of 32 bytes from the operating system's random source, and
    /// the public key it makes.
    ///
    /// # Errors
    ///
    /// [`ZmqError::CurveKey`] when the operating system gives no random bytes.
    ///
    /// ```
    /// use ruststream_zmq::CurveKeyPair;
    ///
    /// let pair = CurveKeyPair::generate().unwrap();
    /// assert_eq!(pair.public().to_z85().len(), 40);
    /// ```
    pub fn generate() -> Result<Self, ZmqError> {
        let mut secret = SecretKey::zeros();
        getrandom::fill(SecretKey::fill(&mut secret)).map_err(|err| ZmqError::CurveKey {
            what: "a new key pair".to_owned(),
            why: format!("the operating system gave no random bytes ({err})"),
        })?;
        Ok(Self {
            public: CurvePublicKey::of(secret.bytes()),
            secret,
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
        Self::checked(CurvePublicKey::from_z85(public)?, secret, "a key pair")
    }

    /// The pair, once `secret` is a key in Z85 and `public` is the public key it makes; `what`
    /// names where they came from in the error.
    fn checked(public: CurvePublicKey, secret: &str, what: &str) -> Result<Self, ZmqError> {
        let mut key = SecretKey::zeros();
        decode(secret.trim(), "a secret key", SecretKey::fill(&mut key))?;
        let made = CurvePublicKey::of(key.bytes());
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
        Ok(Self {
            public,
            secret: key,
        })
    }

    /// A key pair from a secret certificate file, as `zmq.auth.create_certificates` (pyzmq)
    /// and `zcert_save_secret` (czmq) write it: `public-key = "..."` and `secret-key = "..."`
    /// lines under `curve`.
    ///
    /// On Unix the file must be owned by this process's effective user or root and readable by
    /// its owner only, as `ssh` asks of a private key: pyzmq writes it with the process's umask
    /// (often `0644`), so `chmod 600` it once. Links are followed first, and the owner and mode
    /// are read from the file opened, the one read. A secret an orchestrator mounts readable by
    /// others (Kubernetes, Docker) takes
    /// [`from_file_allowing_readable`](Self::from_file_allowing_readable).
    ///
    /// # Errors
    ///
    /// [`ZmqError::CurveKey`] naming the file (and where its links lead) when it cannot be
    /// read, when another user than this process's or root owns it (with the `chown` that fixes
    /// it), when other users than its owner may read or write it (with the `chmod` that fixes
    /// it), when it lacks either key, or when its keys do not belong together.
    ///
    /// ```
    /// use ruststream_zmq::CurveKeyPair;
    ///
    /// // A certificate as pyzmq's `zmq.auth.create_certificates` writes it, then `chmod 600`.
    /// # let dir = std::env::temp_dir().join(format!("from-file-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// # let path = dir.join("server.key_secret");
    /// # std::fs::write(&path, "curve\n    public-key = \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\"\n    \
    /// #     secret-key = \"JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6\"\n").unwrap();
    /// # #[cfg(unix)]
    /// # std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    /// let server = CurveKeyPair::from_file(&path)?;
    /// assert_eq!(server.public().fingerprint(), "rq:rM>}U");
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), ruststream_zmq::ZmqError>(())
    /// ```
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ZmqError> {
        Self::from_certificate(path.as_ref(), Trust::Secret)
    }

    /// [`from_file`](Self::from_file) for a secret an orchestrator mounted read-only, which
    /// its group or every user may read: a Kubernetes secret volume (`0644` through a link, or
    /// `0440`/`0640` with `fsGroup`), a Docker secret (`0444`). Off unless called: anyone who
    /// may read such a file holds the service's secret, so give it only where the mount, the
    /// container or the pod keeps other users out.
    ///
    /// The rest is as strict as `from_file`: the owner must be this process's effective user
    /// or root, and a file its group or others may *write* is refused, since whoever writes it
    /// chooses the key.
    ///
    /// # Errors
    ///
    /// Those of [`from_file`](Self::from_file), but for other users reading it.
    ///
    /// ```
    /// use ruststream_zmq::CurveKeyPair;
    ///
    /// # let dir = std::env::temp_dir().join(format!("mounted-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// # let path = dir.join("server.key_secret");
    /// # std::fs::write(&path, "curve\n    public-key = \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\"\n    \
    /// #     secret-key = \"JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6\"\n").unwrap();
    /// # #[cfg(unix)]
    /// # std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o444)).unwrap();
    /// // A Docker secret: /run/secrets/server.key_secret, mode 0444.
    /// assert!(CurveKeyPair::from_file(&path).is_err() || cfg!(not(unix)));
    /// let server = CurveKeyPair::from_file_allowing_readable(&path)?;
    /// assert_eq!(server.public().fingerprint(), "rq:rM>}U");
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), ruststream_zmq::ZmqError>(())
    /// ```
    pub fn from_file_allowing_readable(path: impl AsRef<Path>) -> Result<Self, ZmqError> {
        Self::from_certificate(path.as_ref(), Trust::SecretReadable)
    }

    fn from_certificate(path: &Path, trust: Trust) -> Result<Self, ZmqError> {
        let certificate = Certificate::read(path, trust)?;
        let public = certificate.public()?;
        let secret = certificate
            .value("secret-key")
            .ok_or_else(|| certificate.no_secret())?;
        let public = CurvePublicKey::from_z85(public)?;
        Self::checked(public, secret, &certificate.what)
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
    ///
    /// ```
    /// use ruststream_zmq::CurveKeyPair;
    ///
    /// # // SAFETY: a doc test, one thread.
    /// # unsafe {
    /// #     std::env::set_var("SERVER_PUBLIC", "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7");
    /// #     std::env::set_var("SERVER_SECRET", "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6");
    /// # }
    /// let server = CurveKeyPair::from_env("SERVER_PUBLIC", "SERVER_SECRET")?;
    /// assert_eq!(server.public().fingerprint(), "rq:rM>}U");
    /// # Ok::<(), ruststream_zmq::ZmqError>(())
    /// ```
    pub fn from_env(public_var: &str, secret_var: &str) -> Result<Self, ZmqError> {
        let read = |var: &str| {
            std::env::var(var)
                .map(Zeroizing::new)
                .map_err(|_| ZmqError::CurveKey {
                    what: format!("the environment variable {var}"),
                    why: "it is not set (or not UTF-8)".to_owned(),
                })
        };
        let public = CurvePublicKey::from_z85(&read(public_var)?)?;
        Self::checked(
            public,
            &read(secret_var)?,
            &format!("the environment variables {public_var} and {secret_var}"),
        )
    }

    /// Writes the pair as pyzmq's `zmq.auth.create_certificates(dir, name)` does: `name.key`,
    /// the public certificate to hand out, and `name.key_secret`, readable by its owner only
    /// (mode `0600` on Unix, from its creation). Answers the two paths, public first.
    /// [`from_file`](Self::from_file) and pyzmq's `zmq.auth.load_certificate` read them back.
    ///
    /// # Errors
    ///
    /// [`ZmqError::CurveKey`] naming the file when either exists already (a key is never
    /// overwritten) or cannot be written.
    ///
    /// ```
    /// use ruststream_zmq::CurveKeyPair;
    ///
    /// # let dir = std::env::temp_dir().join(format!("certificates-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let pair = CurveKeyPair::generate()?;
    /// let (public, secret) = pair.create_certificates(&dir, "server")?;
    /// assert_eq!(CurveKeyPair::from_file(&secret)?.public(), pair.public());
    /// assert!(pair.create_certificates(&dir, "server").is_err(), "never overwritten");
    /// # let _ = public;
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), ruststream_zmq::ZmqError>(())
    /// ```
    pub fn create_certificates(
        &self,
        dir: impl AsRef<Path>,
        name: &str,
    ) -> Result<(PathBuf, PathBuf), ZmqError> {
        let public_path = dir.as_ref().join(format!("{name}.key"));
        let secret_path = dir.as_ref().join(format!("{name}.key_secret"));
        let public = format!(
            "{CERTIFICATE_BANNER}#   ZeroMQ CURVE Public Certificate\n#   Exchange securely, or use \
             a secure mechanism to verify the contents\n#   of this file after \
             exchange.\n\nmetadata\ncurve\n    public-key = \"{}\"\n",
            self.public.to_z85()
        );
        // Written into a buffer sized first, so that no copy of the secret's text is left
        // behind by a buffer that grew, and zeroed once written.
        let mut secret = Zeroizing::new(String::with_capacity(512));
        {
            use std::fmt::Write;
            let z85 = Zeroizing::new(encode(self.secret.bytes()));
            write!(
                secret,
                "{CERTIFICATE_BANNER}#   ZeroMQ CURVE **Secret** Certificate\n#   DO NOT PROVIDE \
                 THIS FILE TO OTHER USERS nor change its permissions.\n\nmetadata\ncurve\n    \
                 public-key = \"{}\"\n    secret-key = \"{}\"\n",
                self.public.to_z85(),
                z85.as_str()
            )
            .expect("writing to a String cannot fail");
        }
        // The secret first: a public certificate is never left without its pair.
        write_new(&secret_path, &secret, 0o600)?;
        write_new(&public_path, &public, 0o644)?;
        Ok((public_path, secret_path))
    }

    /// The public half, to give to the other side.
    #[must_use]
    pub fn public(&self) -> CurvePublicKey {
        self.public
    }

    pub(crate) fn secret(&self) -> &[u8; 32] {
        self.secret.bytes()
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

/// The first line of a certificate this crate writes.
const CERTIFICATE_BANNER: &str = "#   ****  Generated by ruststream-zmq  ****\n";

/// Creates `path` with `text`, failing if it exists; on Unix with `mode` from its creation, so
/// that a secret key is never readable by others, not even for a moment.
fn write_new(path: &Path, text: &str, mode: u32) -> Result<(), ZmqError> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    options
        .open(path)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .map_err(|err| ZmqError::CurveKey {
            what: certificate_named(path),
            why: format!("it could not be written: {err}"),
        })
}

/// How errors name the certificate at `path`.
fn certificate_named(path: &Path) -> String {
    format!("the certificate {}", path.display())
}

/// Decodes a key's 40 Z85 characters into `into`, the place the key stays.
fn decode(text: &str, what: &str, into: &mut [u8; 32]) -> Result<(), ZmqError> {
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
    // The position, never the character: the text may be a secret key.
    if let Some(at) = text.bytes().position(|byte| !Z85_ALPHABET.contains(&byte)) {
        return Err(ZmqError::CurveKey {
            what: what.to_owned(),
            why: format!(
                "a CURVE key is 40 characters of Z85; character {} of this text is outside its \
                 alphabet",
                at + 1
            ),
        });
    }
    // Zeroed on drop: a secret key's bytes pass through it.
    let bytes = z85::decode(text).map(Zeroizing::new);
    match bytes {
        Ok(bytes) if bytes.len() == 32 => {
            into.copy_from_slice(&bytes);
            Ok(())
        }
        _ => Err(ZmqError::CurveKey {
            what: what.to_owned(),
            why: "a CURVE key is 40 characters of Z85 that decode to 32 bytes; this text does \
                  not (a `#` pads a shorter value, or a group of 5 exceeds 32 bits)"
                .to_owned(),
        }),
    }
}

/// Z85's 85 characters (ZeroMQ RFC 32).
const Z85_ALPHABET: &[u8; 85] =
    b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

fn encode(bytes: &[u8; 32]) -> String {
    z85::encode(bytes)
}

#[cfg(test)]
mod tests;
