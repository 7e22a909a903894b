//! Why a dialing command found no peer, asked of the endpoint itself once the wait is over: the
//! name resolves or not, a TCP connection is refused or taken, and what answers speaks ZMTP with
//! a mechanism (NULL or CURVE) and, in clear, a socket type. ZeroMQ sockets retry in silence, so
//! this is the only place the cause is seen; each has its own exit status (docs/cli.md).

use std::time::Duration;

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::Failure;

/// How long each step of the probe waits: a peer that answers, answers at once.
const STEP: Duration = Duration::from_secs(2);

/// What the dialing command is: its socket type (ZMTP's name) and whether it speaks CURVE.
#[derive(Clone, Copy)]
pub struct Dialer {
    pub socket: &'static str,
    pub curve: bool,
}

/// The cause of the silence at `endpoint`, as a failure with its own status, or `None` where the
/// probe finds the peer one this command could talk to (or cannot tell: `ipc://`, a CURVE
/// peer's handshake, which needs the keys to read).
pub async fn why(endpoint: &str, dialer: Dialer) -> Option<Failure> {
    let address = endpoint.strip_prefix("tcp://")?;
    let (host, _) = address.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let resolved = match tokio::time::timeout(STEP, tokio::net::lookup_host(address)).await {
        Ok(Ok(mut addresses)) => addresses.next(),
        Ok(Err(_)) => None,
        // A resolver that does not answer is not a name that does not resolve.
        Err(_) => return None,
    };
    let Some(resolved) = resolved else {
        return Some(Failure::NotResolved(format!(
            "the name `{host}` does not resolve: check the host name in {endpoint}, or give an \
             IP address"
        )));
    };
    let mut stream = match tokio::time::timeout(STEP, TcpStream::connect(resolved)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(err)) if err.kind() == std::io::ErrorKind::ConnectionRefused => {
            return Some(Failure::Refused(format!(
                "connection refused at {endpoint} ({resolved}): nothing listens there; is the \
                 service up, and is this its port?"
            )));
        }
        _ => return None,
    };
    let theirs = match greet(&mut stream, dialer.curve).await? {
        Ok(mechanism) => mechanism,
        Err(()) => {
            return Some(Failure::Mismatch(format!(
                "what listens at {endpoint} does not speak ZeroMQ (ZMTP 3): is this the \
                 service's port?"
            )));
        }
    };
    match (theirs.as_str(), dialer.curve) {
        ("CURVE", false) => Some(Failure::Security(format!(
            "the service at {endpoint} speaks CURVE: give its public key with --curve-server \
             KEY|FILE (and this side's pair with --curve-keys FILE, where it admits listed \
             clients only)"
        ))),
        ("NULL", true) => Some(Failure::Security(format!(
            "the service at {endpoint} speaks in clear, not CURVE: drop the CURVE options"
        ))),
        ("CURVE", true) => Some(Failure::Security(format!(
            "the service at {endpoint} speaks CURVE and refused this side's handshake: the \
             server key given (--curve-server) is not its key, or this side's key \
             (--curve-keys; `zmqs keys fingerprint` names it as the service's log does) is not \
             on its allow-list"
        ))),
        ("NULL", false) => {
            let peer = socket_type(&mut stream, dialer.socket).await?;
            let fix = fix(dialer.socket, &peer)?;
            Some(Failure::Mismatch(format!(
                "the socket at {endpoint} is a {peer}, and this command's {} does not talk to \
                 one: {fix}",
                dialer.socket
            )))
        }
        (other, _) => Some(Failure::Security(format!(
            "the service at {endpoint} speaks the {other} mechanism, which zmqs does not"
        ))),
    }
}

/// `failure`, or the cause the probe found where it is a timeout of a dialing command that
/// never had a peer.
pub async fn explained(failure: Failure, endpoint: &str, dialer: Dialer) -> Failure {
    match failure {
        Failure::TimedOut(said) => match why(endpoint, dialer).await {
            Some(cause) => cause,
            None => Failure::TimedOut(said),
        },
        other => other,
    }
}

/// Exchanges ZMTP 3.0 greetings; answers the peer's mechanism, or `None` where what answered
/// said nothing. Ours goes in two parts, as libzmq's does: a peer sends its mechanism once it
/// has our version, and closes as soon as it reads a mechanism it does not speak.
async fn greet(stream: &mut TcpStream, curve: bool) -> Option<Result<String, ()>> {
    let mut greeting = vec![0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 3, 0];
    let mut mechanism = if curve {
        b"CURVE".to_vec()
    } else {
        b"NULL".to_vec()
    };
    mechanism.resize(20, 0);
    greeting.extend(mechanism);
    greeting.resize(64, 0);
    let mut theirs = [0u8; 64];
    let exchanged = tokio::time::timeout(STEP, async {
        stream.write_all(&greeting[..11]).await?;
        stream.read_exact(&mut theirs).await?;
        stream.write_all(&greeting[11..]).await
    })
    .await;
    match exchanged {
        // Silence: a listener that is not ZeroMQ, or one too busy to say; nothing to name.
        Err(_) => return None,
        Ok(Err(_)) => return Some(Err(())),
        Ok(Ok(())) => {}
    }
    if theirs[0] != 0xff || theirs[9] & 1 != 1 {
        return Some(Err(()));
    }
    let mechanism = &theirs[12..32];
    let end = mechanism.iter().position(|&b| b == 0).unwrap_or(20);
    Some(Ok(String::from_utf8_lossy(&mechanism[..end]).into_owned()))
}

/// Sends a READY of `ours` and reads the peer's: its `Socket-Type`.
async fn socket_type(stream: &mut TcpStream, ours: &str) -> Option<String> {
    let mut body = vec![5];
    body.extend(b"READY");
    body.push(11);
    body.extend(b"Socket-Type");
    body.extend(u32::try_from(ours.len()).ok()?.to_be_bytes());
    body.extend(ours.as_bytes());
    let mut ready = vec![0x04, u8::try_from(body.len()).ok()?];
    ready.extend(body);
    let theirs = tokio::time::timeout(STEP, async {
        stream.write_all(&ready).await?;
        let mut head = [0u8; 2];
        stream.read_exact(&mut head).await?;
        let size = if head[0] & 0x02 == 0 {
            usize::from(head[1])
        } else {
            // A long command: 8 bytes of size, the first read already.
            let mut rest = [0u8; 7];
            stream.read_exact(&mut rest).await?;
            let mut size = [0u8; 8];
            size[0] = head[1];
            size[1..].copy_from_slice(&rest);
            usize::try_from(u64::from_be_bytes(size).min(4096)).unwrap_or(4096)
        };
        let mut command = vec![0u8; size];
        stream.read_exact(&mut command).await?;
        Ok::<_, std::io::Error>(command)
    })
    .await
    .ok()?
    .ok()?;
    property(&theirs, "Socket-Type")
}

/// A property of a READY command's body.
fn property(command: &[u8], wanted: &str) -> Option<String> {
    let name_len = usize::from(*command.first()?);
    if command.get(1..=name_len)? != b"READY" {
        return None;
    }
    let mut rest = &command[1 + name_len..];
    while let Some((&len, tail)) = rest.split_first() {
        let name = tail.get(..usize::from(len))?;
        let tail = &tail[usize::from(len)..];
        let size = usize::try_from(u32::from_be_bytes(tail.get(..4)?.try_into().ok()?)).ok()?;
        let value = tail.get(4..4 + size)?;
        if name.eq_ignore_ascii_case(wanted.as_bytes()) {
            return Some(String::from_utf8_lossy(value).into_owned());
        }
        rest = &tail[4 + size..];
    }
    None
}

/// What to change where `ours` meets a `theirs` it does not talk to; `None` where they do.
fn fix(ours: &str, theirs: &str) -> Option<&'static str> {
    let fix = match (ours, theirs) {
        ("PUSH", "PULL") | ("PULL", "PUSH") | ("PUB", "SUB" | "XSUB") => return None,
        ("SUB", "PUB" | "XPUB") | ("DEALER", "ROUTER" | "DEALER" | "REP") => return None,
        ("PULL", "PUB" | "XPUB") => "it publishes a fan-out: add --fanout to read it",
        ("SUB", "PUSH") => "it is a queue's sender: drop --fanout",
        ("PUSH", "SUB" | "XSUB") => "it reads a fan-out: add --fanout",
        ("PUSH", "PUB" | "XPUB") => {
            "it publishes and takes no messages: send to the service's queue port, or read this \
             one with `zmqs tail --fanout`"
        }
        ("PUB", "PULL") => "it reads a queue: drop --fanout",
        ("PUSH" | "PUB", "ROUTER") => "it answers requests: use `zmqs ask`",
        ("PULL" | "SUB", "ROUTER") => "it answers requests: use `zmqs ask`",
        ("PULL" | "SUB", "PULL") => "it reads a queue too: use `zmqs send`",
        ("DEALER", "PULL") => "it reads a queue: use `zmqs send`",
        ("DEALER", "SUB" | "XSUB") => "it reads a fan-out: use `zmqs send --fanout`",
        ("DEALER", "PUB" | "XPUB") => "it publishes a fan-out: use `zmqs tail --fanout`",
        ("DEALER", "PUSH") => "it sends to a queue: use `zmqs tail`",
        _ => "point the command at the service's matching port",
    };
    Some(fix)
}

#[cfg(test)]
mod tests {
    use super::{fix, property};

    #[test]
    fn each_pair_that_talks_has_no_fix_and_each_that_does_not_names_one() {
        for (ours, theirs) in [
            ("PUSH", "PULL"),
            ("PULL", "PUSH"),
            ("PUB", "SUB"),
            ("SUB", "PUB"),
            ("DEALER", "ROUTER"),
        ] {
            assert_eq!(fix(ours, theirs), None, "{ours} {theirs}");
        }
        for (ours, theirs, says) in [
            ("PULL", "PUB", "add --fanout"),
            ("PUSH", "PUB", "send to the service's queue port"),
            ("PUSH", "SUB", "add --fanout"),
            ("SUB", "PUSH", "drop --fanout"),
            ("PUB", "PULL", "drop --fanout"),
            ("DEALER", "PULL", "zmqs send"),
            ("PUSH", "ROUTER", "zmqs ask"),
        ] {
            let fix = fix(ours, theirs).expect(theirs);
            assert!(fix.contains(says), "{ours} {theirs}: {fix}");
        }
    }

    #[test]
    fn a_ready_commands_socket_type_is_read_among_its_properties() {
        let mut body = vec![5];
        body.extend(b"READY");
        for (name, value) in [("Identity", ""), ("Socket-Type", "PUB")] {
            body.push(u8::try_from(name.len()).unwrap());
            body.extend(name.as_bytes());
            body.extend(u32::try_from(value.len()).unwrap().to_be_bytes());
            body.extend(value.as_bytes());
        }
        assert_eq!(property(&body, "Socket-Type").as_deref(), Some("PUB"));
        assert_eq!(property(&body, "Resource"), None);
        assert_eq!(property(&body[..body.len() - 1], "Socket-Type"), None);
        assert_eq!(property(b"\x05ERROR", "Socket-Type"), None);
    }
}
