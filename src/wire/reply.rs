//! Request-reply on the wire: the headers a responder stamps and reads, the reply address that
//! names a requester (`zmq-reply:<hex of its identity>`), and an answer's frames.

use ruststream::{Bytes, HeaderMap, Str};

use super::{Frames, Inbound, Refusal, WireLimits, check_sizes, decode_with_room, encode_headers};
use crate::error::ZmqError;

/// The header a responder stamps on every request: where its answer goes.
pub const REPLY_TO: &str = "reply-to";
/// The header that matches an answer to its request.
pub const CORRELATION_ID: &str = "correlation-id";
/// The prefix of a reply address: `zmq-reply:<hex of the peer's identity>`, or
/// `zmq-reply:req:<hex>` for a REQ peer, whose answer carries the empty delimiter back.
pub const REPLY_PREFIX: &str = "zmq-reply:";
/// What [`ToRequester`](crate::ToRequester) answers to when a request's `reply-to` is not a
/// reply address: an address that is refused, so that an answer never goes where a peer wrote.
pub(crate) const NOT_A_REPLY: &str = "zmq-reply:!";
/// What follows [`REPLY_PREFIX`] in the reply address of a REQ peer.
pub const REQ_MARK: &str = "req:";
/// The name an answer carries on frame 0.
pub const REPLY_NAME: &str = "reply";

/// Who sent a request to a ROUTER: the identity it put in front, and whether a REQ peer's empty
/// delimiter followed (it is kept for the answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requester {
    /// The peer's identity frame.
    pub identity: Bytes,
    /// Whether the request carried the REQ delimiter.
    pub delimited: bool,
}

/// Reads a request off a ROUTER: `[identity]`, a REQ peer's empty delimiter, then a one-way
/// message (a lone frame is the payload, named `lone_name`). The answer's address is stamped on
/// the headers as `reply-to`, overwriting any the peer sent.
///
/// # Errors
///
/// A [`Refusal`] naming the rule the frames break.
pub fn decode_request(
    frames: &[Bytes],
    limits: &WireLimits,
    lone_name: &Str,
) -> Result<(Requester, Inbound), Refusal> {
    check_sizes(frames, limits)?;
    let [identity, rest @ ..] = frames else {
        return Err(Refusal::NoIdentity);
    };
    let (delimited, body) = match rest {
        [delimiter, body @ ..] if delimiter.is_empty() && !body.is_empty() => (true, body),
        body => (false, body),
    };
    let mut inbound = decode_with_room(body, limits, Some(lone_name), 1)?;
    let requester = Requester {
        identity: identity.clone(),
        delimited,
    };
    inbound
        .headers
        .insert(REPLY_TO, reply_address_of(&requester));
    Ok((requester, inbound))
}

/// `zmq-reply:<hex of identity>`: the reply address of a DEALER peer.
#[must_use]
pub fn reply_address(identity: &[u8]) -> String {
    reply_address_of(&Requester {
        identity: Bytes::copy_from_slice(identity),
        delimited: false,
    })
}

/// The reply address of `requester`: it carries all an answer needs (the identity, and whether
/// the REQ delimiter is due), so a responder remembers nothing per requester.
#[must_use]
pub fn reply_address_of(requester: &Requester) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let identity = &requester.identity;
    let mark = if requester.delimited { REQ_MARK } else { "" };
    // Exactly as long as it will be: a header value takes the string's buffer as it is when it
    // has no room to spare, and needs an allocation of its own when it has.
    let mut address = String::with_capacity(REPLY_PREFIX.len() + mark.len() + identity.len() * 2);
    address.push_str(REPLY_PREFIX);
    address.push_str(mark);
    for byte in identity {
        address.push(char::from(HEX[usize::from(byte >> 4)]));
        address.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    address
}

/// The identity a reply address names.
///
/// # Errors
///
/// As [`parse_requester`].
pub fn parse_reply_address(address: &str) -> Result<Vec<u8>, ZmqError> {
    parse_requester(address).map(|requester| requester.identity.to_vec())
}

/// The requester a reply address names: its identity, and whether it is a REQ peer.
///
/// # Errors
///
/// [`ZmqError::ReplyAddress`] naming the address: no `zmq-reply:` prefix, not ASCII, not hex, or
/// empty.
pub fn parse_requester(address: &str) -> Result<Requester, ZmqError> {
    let invalid = |why: &'static str| ZmqError::ReplyAddress {
        address: address.to_owned(),
        why,
    };
    let rest = address
        .strip_prefix(REPLY_PREFIX)
        .ok_or_else(|| invalid("it does not start with `zmq-reply:`"))?;
    if address == NOT_A_REPLY {
        return Err(invalid(
            "the request's `reply-to` was not a `zmq-reply:` address; a peer wrote it, and an \
             answer goes only to a requester of this responder, never where a peer says",
        ));
    }
    let (delimited, hex) = match rest.strip_prefix(REQ_MARK) {
        Some(hex) => (true, hex),
        None => (false, rest),
    };
    if !hex.is_ascii() {
        return Err(invalid("the identity is not ASCII hex"));
    }
    if hex.is_empty() || hex.len() % 2 != 0 || hex.len() > 510 {
        return Err(invalid(
            "the identity must be 1 to 255 bytes written as pairs of hex digits",
        ));
    }
    // Sized up front: collecting a `Result` iterator starts from nothing and grows.
    let mut identity = Vec::with_capacity(hex.len() / 2);
    for pair in hex.as_bytes().chunks_exact(2) {
        let (Some(high), Some(low)) = (hex_digit(pair[0]), hex_digit(pair[1])) else {
            return Err(invalid("the identity is not hex"));
        };
        identity.push(high << 4 | low);
    }
    Ok(Requester {
        identity: identity.into(),
        delimited,
    })
}

/// The value of one hex digit, either case. Read by hand: `u8::from_str_radix` also takes a sign
/// (`+a` as 0x0a), and checking every pair through it cost a tenth of a microsecond an answer.
fn hex_digit(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

/// Writes an answer for a ROUTER: `[identity][(empty)][reply][headers][payload]`.
///
/// # Errors
///
/// [`ZmqError::InvalidHeader`] for a header the format cannot carry.
pub fn encode_reply(
    requester: &Requester,
    headers: &HeaderMap,
    payload: Bytes,
) -> Result<Frames, ZmqError> {
    reply_frames(requester.clone(), headers, payload)
}

/// [`encode_reply`], taking the requester: its identity frame moves into the answer (a clone
/// of a freshly parsed one allocates), and the answer's name is the static `reply`.
pub(crate) fn reply_frames(
    requester: Requester,
    headers: &HeaderMap,
    payload: Bytes,
) -> Result<Frames, ZmqError> {
    let mut frames = Vec::with_capacity(if requester.delimited { 5 } else { 4 });
    frames.push(requester.identity);
    if requester.delimited {
        frames.push(Bytes::new());
    }
    frames.push(Bytes::from_static(REPLY_NAME.as_bytes()));
    frames.push(encode_headers(headers)?);
    frames.push(payload);
    Ok(frames)
}
