//! `zmqs keys`: CURVE key pairs as certificate files pyzmq reads, and fingerprints as the crate
//! logs them.

use std::path::PathBuf;

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
    /// The files' name: NAME.key and NAME.key_secret
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

#[cfg(feature = "libzmq")]
impl New {
    fn run(self) -> Result<(), Failure> {
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
