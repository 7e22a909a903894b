//! CURVE keys (features `libzmq` and `omq`): read from Z85 text (40 characters for 32 bytes), from a
//! certificate file as pyzmq's `zmq.auth.create_certificates` and czmq write them, or from
//! environment variables. A key pair whose public half is not the one its secret half makes is
//! refused when it is read, and so is a secret certificate that other users than its owner may
//! read. A secret key never appears in `Debug` output, errors or logs; a public key is shown by
//! its fingerprint (its first 8 Z85 characters).
//!
//! A secret key comes from the operating system's random source (`getrandom`), the public key
//! it makes from `curve25519-dalek`, and Z85 from the `z85` crate, which refuses any character
//! outside its alphabet.

use std::{
    fmt,
    path::{Path, PathBuf},
};

use curve25519_dalek::MontgomeryPoint;

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
        decode(text.trim(), "a public key").map(Self)
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
    /// # Errors
    ///
    /// [`ZmqError::CurveKey`] naming the file when it cannot be read, or has no
    /// `public-key = "..."` line of 40 Z85 characters.
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
        let certificate = Certificate::read(path.as_ref())?;
        decode(certificate.public()?.trim(), "a public key")
            .map(Self)
            .map_err(|err| certificate.failed(err.to_string()))
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
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|err| ZmqError::CurveKey {
            what: "a new key pair".to_owned(),
            why: format!("the operating system gave no random bytes ({err})"),
        })?;
        Ok(Self {
            public: CurvePublicKey::of(&secret),
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
        let path = path.as_ref();
        let certificate = Certificate::read(path)?;
        let public = certificate.public()?;
        let secret = certificate.value("secret-key").ok_or_else(|| {
            certificate.failed(
                "it has no `secret-key = \"...\"` line: is it the public certificate?".into(),
            )
        })?;
        owner_only(path).map_err(|why| certificate.failed(why))?;
        let public = CurvePublicKey::from_z85(public)?;
        Self::checked(
            public,
            decode(secret.trim(), "a secret key")?,
            &certificate.what,
        )
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
        let secret = format!(
            "{CERTIFICATE_BANNER}#   ZeroMQ CURVE **Secret** Certificate\n#   DO NOT PROVIDE THIS \
             FILE TO OTHER USERS nor change its permissions.\n\nmetadata\ncurve\n    public-key \
             = \"{}\"\n    secret-key = \"{}\"\n",
            self.public.to_z85(),
            encode(&self.secret)
        );
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

/// A certificate file read whole, the public one or the secret one; its errors name it.
struct Certificate {
    what: String,
    text: String,
}

impl Certificate {
    fn read(path: &Path) -> Result<Self, ZmqError> {
        let what = certificate_named(path);
        match std::fs::read_to_string(path) {
            Ok(text) => Ok(Self { what, text }),
            Err(err) => Err(ZmqError::CurveKey {
                what,
                why: err.to_string(),
            }),
        }
    }

    fn failed(&self, why: String) -> ZmqError {
        ZmqError::CurveKey {
            what: self.what.clone(),
            why,
        }
    }

    /// The value of its `name = "value"` line.
    fn value(&self, name: &str) -> Option<&str> {
        self.text.lines().find_map(|line| {
            let (key, value) = line.split_once('=')?;
            (key.trim() == name).then(|| value.trim().trim_matches('"'))
        })
    }

    /// The Z85 text of its public key, which both certificates hold.
    fn public(&self) -> Result<&str, ZmqError> {
        self.value("public-key")
            .ok_or_else(|| self.failed("it has no `public-key = \"...\"` line".to_owned()))
    }
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
    z85::decode(text)
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or_else(|| ZmqError::CurveKey {
            what: what.to_owned(),
            why: "a CURVE key is 40 characters of Z85; this text has characters outside its \
                  alphabet"
                .to_owned(),
        })
}

fn encode(bytes: &[u8; 32]) -> String {
    z85::encode(bytes)
}

#[cfg(test)]
mod tests;
