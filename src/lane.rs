//! The key a delivery is laned by: what `workers(n, by_key)` reads through
//! [`IncomingMessage::partition_key`](ruststream::IncomingMessage::partition_key).
//!
//! ZeroMQ carries no partition of its own, so the key is what a peer says: a header (by default
//! [`PARTITION_KEY_HEADER`], as `ruststream-nats` and `ruststream-fred` read one of their own),
//! or on a responder the identity of the requester, which keeps each requester's requests in
//! the order it sent them.

use ruststream::{Bytes, HeaderMap};

/// The header a delivery's partition key is read from unless its broker or subscription names
/// another (`partition_header`): deliveries with the same value run one after another, in the
/// order they arrived, under `workers(n, by_key)`; a delivery without it has no key, and the
/// runtime rotates those over the lanes.
///
/// ```
/// use ruststream::{HeaderMap, IncomingMessage};
/// use ruststream_zmq::PARTITION_KEY_HEADER;
///
/// let mut headers = HeaderMap::new();
/// headers.insert(PARTITION_KEY_HEADER, "account-42");
/// # let _ = headers;
/// ```
pub const PARTITION_KEY_HEADER: &str = "zmq-partition-key";

/// What a subscription's deliveries are keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LaneKey {
    /// The value of this header.
    Header(&'static str),
    /// A responder's requester identity.
    Requester,
}

impl Default for LaneKey {
    fn default() -> Self {
        Self::Header(PARTITION_KEY_HEADER)
    }
}

impl LaneKey {
    /// The key of a delivery with `headers`, from `requester` on a responder.
    pub(crate) fn of<'a>(
        self,
        headers: &'a HeaderMap,
        requester: Option<&'a Bytes>,
    ) -> Option<&'a [u8]> {
        match self {
            Self::Header(name) => headers.get(name),
            Self::Requester => requester.map(|identity| &identity[..]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_key_reads_its_header_and_a_requester_key_the_identity() {
        let mut headers = HeaderMap::new();
        headers.insert(PARTITION_KEY_HEADER, "account-42");
        headers.insert("tenant", "acme");
        let requester = Bytes::from_static(b"\x00\x01\x02\x03\x04");

        assert_eq!(
            LaneKey::default().of(&headers, Some(&requester)),
            Some(&b"account-42"[..])
        );
        assert_eq!(
            LaneKey::Header("tenant").of(&headers, None),
            Some(&b"acme"[..])
        );
        assert_eq!(LaneKey::Header("region").of(&headers, None), None);
        assert_eq!(
            LaneKey::Requester.of(&headers, Some(&requester)),
            Some(&requester[..])
        );
        // A one-way delivery has no requester: no key, whatever its headers say.
        assert_eq!(LaneKey::Requester.of(&headers, None), None);
    }
}
