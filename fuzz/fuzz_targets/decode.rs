//! The wire decoders against arbitrary frames: `wire::decode` (one-way, with and without a name
//! for a lone frame) and `wire::decode_request` (a ROUTER's requests), each under several
//! `WireLimits`.
//!
//! The input is split into frames: a length byte (0..=254, or 255 then a big-endian u16) and
//! that many bytes, until the input ends; the first byte picks the limits. Checked:
//! - no panic;
//! - what decodes under a limit decodes the same with no limits, and respects the limit;
//! - what decodes re-encodes (`wire::encode`), and the frames decode back to the same message
//!   (name, headers, payload; for a request, the same requester too).
#![no_main]

use libfuzzer_sys::fuzz_target;
use ruststream::{Bytes, Str};
use ruststream_zmq::{
    WireLimits,
    wire::{self, Inbound},
};

fn limits(pick: u8) -> WireLimits {
    match pick % 5 {
        0 => WireLimits::default(),
        1 => WireLimits::default()
            .max_message_bytes(64)
            .max_header_bytes(32)
            .max_header_lines(3)
            .max_frames(4),
        2 => WireLimits::default()
            .max_message_bytes(4096)
            .max_header_bytes(1024)
            .max_header_lines(16)
            .max_frames(6),
        3 => WireLimits::default()
            .max_message_bytes(0)
            .max_header_bytes(0)
            .max_header_lines(0)
            .max_frames(0),
        _ => unlimited(),
    }
}

fn unlimited() -> WireLimits {
    WireLimits::default()
        .max_message_bytes(usize::MAX)
        .max_header_bytes(usize::MAX)
        .max_header_lines(usize::MAX)
        .max_frames(usize::MAX)
}

fn split(mut data: &[u8]) -> Vec<Bytes> {
    let mut frames = Vec::new();
    while let Some((&len, rest)) = data.split_first() {
        let (len, rest) = match len {
            255 if rest.len() >= 2 => (
                usize::from(u16::from_be_bytes([rest[0], rest[1]])),
                &rest[2..],
            ),
            255 => (rest.len(), rest),
            len => (usize::from(len), rest),
        };
        let len = len.min(rest.len());
        frames.push(Bytes::copy_from_slice(&rest[..len]));
        data = &rest[len..];
    }
    frames
}

/// Re-encodes `message`: whatever the decoder admits, the publisher can send again (a retry
/// copy or an answer carries it).
fn reencode(message: &Inbound) -> Option<Vec<Bytes>> {
    match wire::encode(&message.name, &message.headers, message.payload.clone()) {
        Ok(frames) => Some(frames),
        Err(err) => panic!("{message:?} decoded but does not re-encode: {err}"),
    }
}

fn check_within(frames: &[Bytes], limits: &WireLimits) {
    assert!(frames.len() <= limits.frames());
    let bytes: usize = frames.iter().map(Bytes::len).sum();
    assert!(bytes <= limits.message_bytes());
}

fn one_way(frames: &[Bytes], limits: &WireLimits, lone: Option<&Str>) {
    let decoded = wire::decode(frames, limits, lone);
    let free = wire::decode(frames, &unlimited(), lone);
    if let Ok(message) = &decoded {
        check_within(frames, limits);
        assert_eq!(
            free.as_ref().ok(),
            Some(message),
            "a limit changed what decoded"
        );
        if let [_, headers, _] = frames {
            assert!(headers.len() <= limits.header_bytes());
        }
        if let Some(again) = reencode(message) {
            assert_eq!(again.len(), 3);
            let back = wire::decode(&again, &unlimited(), None)
                .unwrap_or_else(|refusal| panic!("{message:?} re-encoded as {again:?}: {refusal}"));
            assert_eq!(&back, message);
        }
    } else if let Ok(message) = &free {
        // Refused only by a limit: with none it decodes, and the refusal named a limit.
        let rule = decoded.unwrap_err().rule();
        assert!(
            rule.starts_with("max-"),
            "refused by {rule} only under a limit: {message:?}"
        );
    }
}

fn request(frames: &[Bytes], limits: &WireLimits, lone: &Str) {
    let Ok((requester, message)) = wire::decode_request(frames, limits, lone) else {
        return;
    };
    check_within(frames, limits);
    assert_eq!(
        message.headers.get_str(wire::REPLY_TO).map(str::to_owned),
        Some(wire::reply_address(&requester.identity))
    );
    assert_eq!(
        wire::parse_reply_address(&wire::reply_address(&requester.identity)).ok(),
        (!requester.identity.is_empty() && requester.identity.len() <= 255)
            .then(|| requester.identity.to_vec()),
    );
    let Some(body) = reencode(&message) else {
        return;
    };
    let mut again = vec![requester.identity.clone()];
    if requester.delimited {
        again.push(Bytes::new());
    }
    again.extend(body);
    let (requester_back, back) = wire::decode_request(&again, &unlimited(), lone)
        .unwrap_or_else(|refusal| panic!("{message:?} re-encoded as {again:?}: {refusal}"));
    assert_eq!(requester_back, requester);
    assert_eq!(back, message);
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let frames = split(rest);
    let limits = limits(pick);
    let lone = Str::from_static("lone");
    one_way(&frames, &limits, None);
    one_way(&frames, &limits, Some(&lone));
    request(&frames, &limits, &lone);
});
