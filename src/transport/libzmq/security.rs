//! CURVE on a libzmq socket: the keys each socket speaks with ([`curve_keys`]), set as libzmq
//! options, on a libzmq built with CURVE.

use super::zap;
use crate::{
    curve::Clients,
    error::ZmqError,
    transport::curve_keys::{self, Keys, Plan},
};

/// How a socket of a broker with `keys` on `address` speaks, bound or dialing
/// ([`curve_keys::plan`]).
///
/// # Errors
///
/// Those of [`curve_keys::plan`]; [`ZmqError::CurveUnavailable`] for CURVE on a libzmq built
/// without it.
pub(super) fn plan(keys: &Keys, binds: bool, address: &str) -> Result<Plan, ZmqError> {
    let plan = curve_keys::plan(keys, binds, address)?;
    if !matches!(plan, Plan::Clear) {
        curve_available(address)?;
    }
    Ok(plan)
}

/// Refuses CURVE on a libzmq built without it, naming the package that has it and the version
/// this process runs on, rather than failing with a bare "invalid argument" from the first CURVE
/// option.
fn curve_available(address: &str) -> Result<(), ZmqError> {
    if zmq::has("curve") == Some(true) {
        Ok(())
    } else {
        Err(unavailable(address))
    }
}

fn unavailable(address: &str) -> ZmqError {
    let (major, minor, patch) = zmq::version();
    ZmqError::CurveUnavailable {
        endpoint: address.to_owned(),
        version: format!("{major}.{minor}.{patch}"),
    }
}

/// Sets `socket` up as `plan` says; a server with a list of clients has it registered with the
/// authentication handler while the answer lives.
pub(super) fn apply(
    socket: &zmq::Socket,
    plan: &Plan,
    address: &str,
) -> Result<Option<zap::Registered>, zmq::Error> {
    match plan {
        Plan::Clear => Ok(None),
        Plan::Serve { keys, clients } => {
            socket.set_curve_server(true)?;
            socket.set_curve_secretkey(keys.secret())?;
            let Clients::Listed(allowed) = clients else {
                return Ok(None);
            };
            let registered = zap::register(allowed.clone(), address)?;
            socket.set_zap_domain(&registered.domain)?;
            Ok(Some(registered))
        }
        Plan::Dial(client) => {
            socket.set_curve_serverkey(client.server.bytes())?;
            socket.set_curve_publickey(client.keys.public().bytes())?;
            socket.set_curve_secretkey(client.keys.secret())?;
            Ok(None)
        }
    }
}
