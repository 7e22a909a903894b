//! `zmqs keys`: CURVE key pairs as certificate files pyzmq reads, and fingerprints as the crate
//! logs them.

use std::path::{Component, Path, PathBuf};

use clap::{Args, Subcommand};

use crate::{EXIT_STATUSES, Failure, link::Built};

/// Make CURVE key pairs and read their fingerprints (libzmq backend)
#[derive(Subcommand)]
pub enum Keys {
    New(New),
    Fingerprint(Fingerprint),
}

/// Make a key pair: NAME.key (public, to hand out) and NAME.key_secret (mode 0600), as pyzmq's
/// `zmq.auth.create_certificates` writes them
///
/// Prints the public key and its fingerprint.
#[derive(Args)]
#[command(after_help = EXIT_STATUSES)]
pub struct New {
    /// The files' name: NAME.key and NAME.key_secret, in --dir (a name, not a path)
    #[arg(value_parser = key_name)]
    name: String,

    /// The directory to write them in (made if missing)
    #[arg(long, short, default_value = ".")]
    dir: PathBuf,

    /// Replace existing files of that name (a key is otherwise never overwritten)
    #[arg(long)]
    force: bool,
}

/// Print a public key's fingerprint as the crate's logs show it (its first 8 Z85 characters)
#[derive(Args)]
#[command(after_help = EXIT_STATUSES)]
pub struct Fingerprint {
    /// The key: 40 Z85 characters, or a certificate file (public or secret)
    // Z85 has `-` among its characters, so a key may start with one.
    #[arg(allow_hyphen_values = true)]
    key: String,
}

impl Keys {
    pub fn run(self) -> Result<(), Failure> {
        match self {
            Self::New(new) => {
                Built::THIS.libzmq_for("making CURVE keys")?;
                new.run()
            }
            Self::Fingerprint(fingerprint) => {
                Built::THIS.libzmq_for("reading CURVE keys")?;
                fingerprint.run()
            }
        }
    }
}

/// `keys new`'s NAME: the stem of two files in `--dir`. A path would put the files (and what
/// `--force` removes) outside it, so a separator, a leading dot (`..`, a hidden file) or a
/// root is refused.
fn key_name(text: &str) -> Result<String, String> {
    let mut components = Path::new(text).components();
    let one_name = matches!(
        (components.next(), components.next()),
        (Some(Component::Normal(_)), None)
    );
    if text.is_empty() {
        Err("a key needs a name".into())
    } else if !one_name || text.contains(std::path::is_separator) || text.contains('\0') {
        Err(format!(
            "`{text}` is a path, and a key's name is a file name: give the directory as --dir"
        ))
    } else if text.starts_with('.') {
        Err(format!(
            "`{text}` starts with a dot: a key's name is a plain file name in --dir"
        ))
    } else {
        Ok(text.to_owned())
    }
}

#[cfg(feature = "libzmq")]
impl New {
    fn run(self) -> Result<(), Failure> {
        // The line printed at the end names the files in JSON, which carries text alone:
        // refused before anything is written.
        if self.dir.to_str().is_none() {
            return Err(Failure::Usage(format!(
                "--dir {} is not UTF-8: choose a directory whose path is",
                self.dir.display()
            )));
        }
        let pair = ruststream_zmq::CurveKeyPair::generate()?;
        std::fs::create_dir_all(&self.dir).map_err(|err| {
            Failure::Failed(format!("making {} failed: {err}", self.dir.display()))
        })?;
        if self.force {
            for suffix in ["key", "key_secret"] {
                let path = self.dir.join(format!("{}.{suffix}", self.name));
                match std::fs::remove_file(&path) {
                    Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                        return Err(Failure::Failed(format!(
                            "removing {} failed: {err}",
                            path.display()
                        )));
                    }
                    _ => {}
                }
            }
        } else if let Some(taken) = ["key_secret", "key"]
            .map(|suffix| self.dir.join(format!("{}.{suffix}", self.name)))
            .into_iter()
            .find(|path| path.symlink_metadata().is_ok())
        {
            return Err(Failure::Failed(format!(
                "{} exists, and a key is never overwritten: add --force to replace the pair, \
                 or give another name",
                taken.display()
            )));
        }
        let (public, secret) = pair.create_certificates(&self.dir, &self.name)?;
        let key = pair.public();
        println!(
            "{}",
            serde_json::json!({
                "public_key": key.to_z85(),
                "fingerprint": key.fingerprint(),
                "public_file": public,
                "secret_file": secret,
            })
        );
        Ok(())
    }
}

#[cfg(feature = "libzmq")]
impl Fingerprint {
    fn run(self) -> Result<(), Failure> {
        println!(
            "{}",
            crate::link::curve::public_key(&self.key)?.fingerprint()
        );
        Ok(())
    }
}

#[cfg(not(feature = "libzmq"))]
impl New {
    fn run(self) -> Result<(), Failure> {
        let _ = (self.name, self.dir, self.force);
        unreachable!("`Keys::run` refuses keys in a build without libzmq")
    }
}

#[cfg(not(feature = "libzmq"))]
impl Fingerprint {
    fn run(self) -> Result<(), Failure> {
        let _ = self.key;
        unreachable!("`Keys::run` refuses keys in a build without libzmq")
    }
}

#[cfg(test)]
mod tests {
    use super::key_name;

    #[test]
    fn a_key_name_is_one_plain_file_name() {
        for name in ["server", "worker-1", "a..b", "Ünïcode", "x.y"] {
            assert_eq!(key_name(name).as_deref(), Ok(name));
        }
        for (name, says) in [
            ("", "a key needs a name"),
            ("../escaped", "is a path"),
            ("/abs", "is a path"),
            ("keys/server", "is a path"),
            ("server/", "is a path"),
            ("..", "is a path"),
            (".", "is a path"),
            ("a\0b", "is a path"),
            (".hidden", "starts with a dot"),
        ] {
            let err = key_name(name).expect_err(name);
            assert!(err.contains(says), "{name:?}: {err}");
        }
    }
}
