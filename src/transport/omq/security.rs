//! CURVE on an omq socket: the keys [`curve_keys`] chooses, as omq's options, and the
//! allow-list as omq's authenticator, which sees each client's key before its handshake ends.

use std::sync::{Arc, Mutex, PoisonError};

use omq_tokio::{
    CurveKeypair, CurvePublicKey as OmqPublicKey, CurveSecretKey, CurveServerOptions,
    MechanismPeerInfo, Options, proto::greeting::MechanismName,
};
use tokio::time::Instant;

use crate::{
    curve::{AllowList, Clients, CurveKeyPair, CurvePublicKey},
    throttle::Refusals,
    transport::curve_keys::{KEYS_NAMED, Plan, admits, warn_refused},
};

/// Who an allow-list admits, and the refusals under way: one warning a burst, within the
/// endpoint's budget.
pub(super) struct Admission {
    allowed: AllowList,
    /// The endpoint, as the warnings name it: its address as configured until it is bound.
    endpoint: Mutex<String>,
    refused: Mutex<Refusals<CurvePublicKey>>,
}

impl Admission {
    /// Names the endpoint by the address the socket really listens on.
    pub(super) fn listening_on(&self, resolved: &str) {
        resolved.clone_into(&mut self.endpoint.lock().unwrap_or_else(PoisonError::into_inner));
    }

    /// Whether the client `peer` goes on with its handshake; a refused one is warned of once a
    /// burst, within the endpoint's budget. Runs on tokio's blocking pool, as omq calls it, one
    /// call a handshake; the warning is written with no lock held (each guard below ends with its
    /// statement), so a slow log holds up only this handshake.
    fn admit(&self, peer: &MechanismPeerInfo) -> bool {
        let key = CurvePublicKey::from_bytes(&peer.public_key);
        let Some(key) = key.filter(|_| peer.mechanism == MechanismName::CURVE) else {
            return false;
        };
        if admits(&self.allowed, &key) {
            return true;
        }
        let line = self
            .refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .note(key, Instant::now());
        let Some(line) = line else {
            return false;
        };
        let endpoint = self
            .endpoint
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let address = peer.peer_address.as_deref().unwrap_or("(unknown)");
        warn_refused(&endpoint, address, &key, line);
        false
    }
}

/// `options` set up as `plan` says, for a socket on `address`; answers the allow-list a server
/// with one checks its clients against.
pub(super) fn apply(
    options: Options,
    plan: &Plan,
    address: &str,
) -> (Options, Option<Arc<Admission>>) {
    match plan {
        Plan::Clear => (options, None),
        Plan::Serve { keys, clients } => {
            let Clients::Listed(allowed) = clients else {
                return (options.curve_server(pair(keys)), None);
            };
            let admission = Arc::new(Admission {
                allowed: allowed.clone(),
                endpoint: Mutex::new(address.to_owned()),
                refused: Mutex::new(Refusals::new(KEYS_NAMED, Instant::now())),
            });
            let admitting = Arc::clone(&admission);
            let server = CurveServerOptions::new().authenticator(move |peer| admitting.admit(peer));
            (
                options.curve_server_with_options(pair(keys), server),
                Some(admission),
            )
        }
        Plan::Dial(client) => {
            let server = OmqPublicKey::from_bytes(*client.server.bytes());
            (options.curve_client(pair(&client.keys), server), None)
        }
    }
}

/// The crate's key pair as omq's.
fn pair(keys: &CurveKeyPair) -> CurveKeypair {
    CurveKeypair {
        public: OmqPublicKey::from_bytes(*keys.public().bytes()),
        secret: CurveSecretKey::from_bytes(*keys.secret()),
    }
}
