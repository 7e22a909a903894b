//! Key files read so that another local user cannot put a key of their own in (features `libzmq`
//! and `omq`). Each path is resolved through its links first, then opened, and the owner and
//! mode are those of the open file (`fstat`), not of a second look by path: what is checked is
//! what is read. On Unix:
//!
//! - a secret certificate is a regular file owned by this process's effective user or root,
//!   which no other user may read or write (`0600`, `0400`), as `ssh` asks of a private key; or,
//!   opted into ([`Trust::SecretReadable`]), one that others may read but never write, as an
//!   orchestrator mounts it read-only;
//! - a public certificate, and a directory of them, is owned by this process's effective user or
//!   root, and writable by neither its group nor others, as `sshd` asks of `authorized_keys`:
//!   whoever may change it chooses who is admitted, and its owner may always change it.

use std::{
    fs::File,
    io::Read,
    path::{Path, PathBuf},
};

use zeroize::Zeroizing;

use crate::error::ZmqError;

/// A certificate is a few hundred bytes: anything past this is not one.
const CERTIFICATE_BYTES: u64 = 64 * 1024;

/// What a file is trusted with, and so which owner and mode it may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Trust {
    /// A secret certificate: readable and writable by its owner only.
    Secret,
    /// A secret certificate an orchestrator mounted read-only: others may read it, never write.
    SecretReadable,
    /// A public certificate: a key to admit, or the server to expect.
    Public,
}

/// A certificate file read whole, the public one or the secret one; its errors name it.
pub(super) struct Certificate {
    pub(super) what: String,
    /// Zeroed on drop: a secret certificate's text holds the secret key.
    text: Zeroizing<String>,
}

impl Certificate {
    /// The certificate at `path`, once its owner and mode are those `trust` allows.
    pub(super) fn read(path: &Path, trust: Trust) -> Result<Self, ZmqError> {
        let resolved = resolve(path, "the certificate")?;
        let what = named("the certificate", path, &resolved);
        let failed = |why: String| ZmqError::CurveKey {
            what: what.clone(),
            why,
        };
        let file = open(&resolved, false)
            .map_err(|err| failed(format!("it could not be opened: {err}")))?;
        // `File::metadata` is `fstat` of the file opened: no window between the check and the read.
        let meta = file
            .metadata()
            .map_err(|err| failed(format!("its owner and mode could not be read: {err}")))?;
        if !meta.is_file() {
            return Err(failed("it is not a regular file".to_owned()));
        }
        if meta.len() > CERTIFICATE_BYTES {
            return Err(failed(format!(
                "it is {} bytes; a certificate is a few hundred",
                meta.len()
            )));
        }
        // Sized before reading, so that the secret's text is never left in a buffer grown past.
        let mut text = Zeroizing::new(String::with_capacity(meta.len() as usize + 1));
        file.take(meta.len())
            .read_to_string(&mut text)
            .map_err(|err| failed(format!("it could not be read: {err}")))?;
        let certificate = Self { what, text };
        if let Err(why) = allowed(&meta, trust, &resolved) {
            // The public certificate given for the secret one: that is the mistake to name,
            // not the mode a public certificate rightly has.
            let secret = trust != Trust::Public;
            return Err(if secret && certificate.value("secret-key").is_none() {
                certificate.no_secret()
            } else {
                certificate.failed(why)
            });
        }
        Ok(certificate)
    }

    /// The error for a secret certificate without its secret.
    pub(super) fn no_secret(&self) -> ZmqError {
        self.failed(
            "it has no `secret-key = \"...\"` line: is it the public certificate?".to_owned(),
        )
    }

    pub(super) fn failed(&self, why: String) -> ZmqError {
        ZmqError::CurveKey {
            what: self.what.clone(),
            why,
        }
    }

    /// The value of its `name = "value"` line.
    pub(super) fn value(&self, name: &str) -> Option<&str> {
        self.text.lines().find_map(|line| {
            let (key, value) = line.split_once('=')?;
            (key.trim() == name).then(|| value.trim().trim_matches('"'))
        })
    }

    /// The Z85 text of its public key, which both certificates hold.
    pub(super) fn public(&self) -> Result<&str, ZmqError> {
        self.value("public-key")
            .ok_or_else(|| self.failed("it has no `public-key = \"...\"` line".to_owned()))
    }
}

/// The public certificates (`*.key`) in `dir`, by name, once the directory's owner and mode
/// let nobody else add one.
pub(super) fn public_certificates_in(dir: &Path) -> Result<Vec<PathBuf>, ZmqError> {
    let kind = "the directory of public certificates";
    let resolved = resolve(dir, kind)?;
    let failed = |why: String| ZmqError::CurveKey {
        what: named(kind, dir, &resolved),
        why,
    };
    let opened =
        open(&resolved, true).map_err(|err| failed(format!("it could not be opened: {err}")))?;
    let meta = opened
        .metadata()
        .map_err(|err| failed(format!("its owner and mode could not be read: {err}")))?;
    if !meta.is_dir() {
        return Err(failed("it is not a directory".to_owned()));
    }
    allowed(&meta, Trust::Public, &resolved).map_err(failed)?;
    let mut files = std::fs::read_dir(&resolved)
        .map_err(|err| failed(format!("it could not be listed: {err}")))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|file| file.extension().is_some_and(|ext| ext == "key"))
        .collect::<Vec<_>>();
    if files.is_empty() {
        return Err(failed(
            "it holds no public certificate (`*.key`) to admit".to_owned(),
        ));
    }
    files.sort();
    Ok(files)
}

/// `path` with every link followed and made absolute: the file whose owner and mode count.
fn resolve(path: &Path, kind: &str) -> Result<PathBuf, ZmqError> {
    std::fs::canonicalize(path).map_err(|err| ZmqError::CurveKey {
        what: format!("{kind} {}", path.display()),
        why: format!("it could not be found: {err}"),
    })
}

/// How errors name a file: as given, and where its links lead when that is elsewhere.
fn named(kind: &str, given: &Path, resolved: &Path) -> String {
    if given == resolved {
        format!("{kind} {}", given.display())
    } else {
        format!(
            "{kind} {} (resolved to {})",
            given.display(),
            resolved.display()
        )
    }
}

/// Opens the resolved path without following a link put there since it was resolved, and
/// without waiting on a FIFO (which is then refused as not a regular file).
#[cfg(unix)]
fn open(resolved: &Path, dir: bool) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let flags = libc::O_NOFOLLOW
        | if dir {
            libc::O_DIRECTORY
        } else {
            libc::O_NONBLOCK
        };
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(resolved)
}

#[cfg(not(unix))]
fn open(resolved: &Path, _dir: bool) -> std::io::Result<File> {
    File::open(resolved)
}

/// Whether the open file's owner and mode allow what `trust` asks of it; if not, what is wrong
/// and the command that mends it.
#[cfg(unix)]
fn allowed(meta: &std::fs::Metadata, trust: Trust, resolved: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let (owner, ours) = (meta.uid(), effective_uid());
    let at = resolved.display();
    if owner != ours && owner != 0 {
        return Err(format!(
            "it is owned by user {owner}, who may change it whatever its mode; only this process's \
             user ({ours}) or root may own a key file: run `chown {ours} {at}`"
        ));
    }
    let mode = meta.mode() & 0o7777;
    match trust {
        Trust::Secret if mode & 0o077 != 0 => Err(format!(
            "it holds a secret key and other users than its owner may read or write it (mode \
             {mode:04o}): run `chmod 600 {at}`; if an orchestrator wrote it on a read-only mount \
             (a Kubernetes or Docker secret), read it with \
             `CurveKeyPair::from_file_allowing_readable`"
        )),
        Trust::SecretReadable if mode & 0o022 != 0 => Err(format!(
            "it holds a secret key and other users than its owner may write it (mode {mode:04o}), \
             which no option accepts: run `chmod go-w {at}`"
        )),
        Trust::Public if meta.is_dir() && mode & 0o022 != 0 => Err(format!(
            "other users than its owner may add files to it (mode {mode:04o}), and so a key of \
             their own to admit: run `chmod go-w {at}`, or keep the keys in a directory of their own"
        )),
        Trust::Public if mode & 0o022 != 0 => Err(format!(
            "other users than its owner may write it (mode {mode:04o}), and so put a key of \
             their own in: run `chmod go-w {at}`"
        )),
        _ => Ok(()),
    }
}

/// Elsewhere a file's access is the platform's own business.
#[cfg(not(unix))]
fn allowed(_meta: &std::fs::Metadata, _trust: Trust, _resolved: &Path) -> Result<(), String> {
    Ok(())
}

/// The user this process acts as, whom a key file may belong to (beside root).
#[cfg(unix)]
#[expect(unsafe_code, reason = "std has no `geteuid`; libc's is a plain C call")]
pub(super) fn effective_uid() -> u32 {
    // SAFETY: `geteuid` takes no argument, touches no memory of ours and cannot fail (POSIX).
    unsafe { libc::geteuid() }
}

#[cfg(test)]
mod tests {
    use static_assertions::assert_impl_all;
    use zeroize::ZeroizeOnDrop;

    use super::*;

    // A secret certificate's text holds the secret key: zeroed when the certificate drops.
    assert_impl_all!(Zeroizing<String>: ZeroizeOnDrop);

    #[test]
    fn a_certificates_text_is_zeroed_on_drop() {
        fn zeroed_on_drop<T: ZeroizeOnDrop>(_: &T) {}
        let path = std::env::temp_dir().join(format!("curve-files-{}.key", std::process::id()));
        std::fs::write(&path, "curve\n    public-key = \"x\"\n").unwrap();
        let certificate = Certificate::read(&path, Trust::Public);
        std::fs::remove_file(&path).unwrap();
        let certificate = certificate.unwrap();
        zeroed_on_drop(&certificate.text);
        assert_eq!(certificate.value("public-key"), Some("x"));
    }
}
