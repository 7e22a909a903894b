//! CURVE on a libzmq socket, as its endpoint says.

use super::{Config, Libzmq, Options, zap};
use crate::{
    curve::{Curve, CurveKeyPair, CurvePublicKey, Security},
    error::ZmqError,
    transport::Speaks,
};

impl Speaks<Curve> for Libzmq {
    fn secured(config: Config, Curve(security): Curve) -> Config {
        Config {
            security: Some(security),
            ..config
        }
    }
}

/// Refuses CURVE on a libzmq built without it, naming the package that has it and the version
/// this process runs on, rather than failing with a bare "invalid argument" from the first CURVE
/// option.
pub(super) fn curve_available(options: &Options, address: &str) -> Result<(), ZmqError> {
    if options.security.is_none() || zmq::has("curve") == Some(true) {
        return Ok(());
    }
    let (major, minor, patch) = zmq::version();
    Err(ZmqError::CurveUnavailable {
        endpoint: address.to_owned(),
        version: format!("{major}.{minor}.{patch}"),
    })
}

/// Sets CURVE up on `socket`, as the endpoint's `security` says: a bound socket serves with the
/// endpoint's keys (its allow-list registered with the authentication handler); a dialing one
/// is a client of the endpoint's server, with the endpoint's client keys or, on a bound
/// endpoint (the broker dialing its own listener), a key pair of its own that the list admits.
pub(super) fn secure(
    socket: &zmq::Socket,
    security: Option<&Security>,
    binds: bool,
    address: &str,
) -> Result<Option<zap::Registered>, zmq::Error> {
    let client = |keys: &CurveKeyPair, server: &CurvePublicKey| {
        socket.set_curve_serverkey(server.bytes())?;
        socket.set_curve_publickey(keys.public().bytes())?;
        socket.set_curve_secretkey(keys.secret())?;
        Ok(None)
    };
    match security {
        None => Ok(None),
        Some(Security::Server { keys, allowed }) if binds => {
            socket.set_curve_server(true)?;
            socket.set_curve_secretkey(keys.secret())?;
            let Some(allowed) = allowed else {
                return Ok(None);
            };
            let registered = zap::register(allowed.clone(), address)?;
            socket.set_zap_domain(&registered.domain)?;
            Ok(Some(registered))
        }
        Some(Security::Server { keys, allowed }) => {
            let own = CurveKeyPair::generate().map_err(|_| zmq::Error::ENOTSUP)?;
            if let Some(allowed) = allowed {
                allowed.add(own.public());
            }
            client(&own, &keys.public())
        }
        Some(Security::Client { keys, server }) => client(keys, server),
    }
}
