//! Properties of the wire format (`ruststream_zmq::wire`): what the publisher writes the reader
//! reads back the same, the publisher refuses exactly the headers it could not, and no frames
//! from a peer make the reader panic.

use proptest::{collection::vec, prelude::*};
use ruststream::{Bytes, HeaderMap, Str};
use ruststream_zmq::{
    WireLimits, ZmqError,
    wire::{Refusal, decode, encode},
};

/// The publisher's rules for a header: no CR or LF in a name or value, no `:` in a name, no
/// leading or trailing white space; and a name is not empty, a value is UTF-8 (the lines are
/// UTF-8 text).
fn header_is_writable(name: &str, value: &[u8]) -> bool {
    let Ok(value) = std::str::from_utf8(value) else {
        return false;
    };
    let untrimmed =
        |s: &str| s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace);
    !name.is_empty()
        && !name.contains([':', '\r', '\n'])
        && !value.contains(['\r', '\n'])
        && !untrimmed(name)
        && !untrimmed(value)
}

/// Header names from an alphabet that has the characters the rules are about, mostly safe ones.
fn any_header_name() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => "[a-zA-Z0-9_.-]{1,12}",
        2 => "[a-zA-Z0-9 :\r\n\t\u{a0}\u{e9}\u{4e2d}-]{0,8}",
        1 => any::<String>(),
    ]
}

fn any_header_value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => "[ -~\u{e9}\u{4e2d}]{0,16}".prop_map(String::into_bytes),
        2 => "[a-z :\r\n\t\u{a0}\u{85}]{0,8}".prop_map(String::into_bytes),
        1 => vec(any::<u8>(), 0..8),
    ]
}

fn valid_header() -> impl Strategy<Value = (String, Vec<u8>)> {
    (any_header_name(), any_header_value())
        .prop_filter("a header the publisher refuses", |(name, value)| {
            header_is_writable(name, value)
        })
}

fn header_map(headers: &[(String, Vec<u8>)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.insert(name.clone(), Bytes::copy_from_slice(value));
    }
    map
}

fn any_limits() -> impl Strategy<Value = WireLimits> {
    (0..200usize, 0..100usize, 0..8usize, 0..6usize).prop_map(|(message, header, lines, frames)| {
        WireLimits::default()
            .max_message_bytes(message)
            .max_header_bytes(header)
            .max_header_lines(lines)
            .max_frames(frames)
    })
}

/// Frames a peer might send: bytes biased toward the ones the parser looks at.
fn any_frames() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let byte = prop_oneof![
        3 => any::<u8>(),
        1 => Just(b':'),
        1 => Just(b'\n'),
        1 => Just(b'\r'),
        1 => Just(b' '),
        2 => b'a'..=b'z',
    ];
    vec(vec(byte, 0..40), 0..6)
}

/// The lines of a headers frame as the reader counts them against
/// [`WireLimits::max_header_lines`]: every `\n` ends a line, and a last line needs no terminator,
/// so a frame that does not end in `\n` has one more; a terminated last line opens no new one.
/// An empty frame has no lines. (`"a"` and `"a\n"` are one line each, `"\n"` is one empty line,
/// `"a\nb"` and `"a\nb\n"` are two.)
fn header_lines(frame: &[u8]) -> usize {
    let newlines = frame.iter().filter(|&&b| b == b'\n').count();
    let unterminated = !frame.is_empty() && !frame.ends_with(b"\n");
    newlines + usize::from(unterminated)
}

fn frames_of(raw: &[Vec<u8>]) -> Vec<Bytes> {
    raw.iter().map(|f| Bytes::copy_from_slice(f)).collect()
}

proptest! {
    #[test]
    fn encode_then_decode_is_the_identity_for_every_valid_message(
        name in "\\PC{0,24}",
        headers in vec(valid_header(), 0..8),
        payload in vec(any::<u8>(), 0..256),
    ) {
        let headers = header_map(&headers);
        let frames = encode(&name, &headers, Bytes::from(payload.clone())).unwrap();
        prop_assert_eq!(frames.len(), 3);
        let back = decode(&frames, &WireLimits::default(), None).unwrap();
        prop_assert_eq!(&*back.name, name.as_str());
        prop_assert_eq!(back.headers, headers);
        prop_assert_eq!(&back.payload[..], &payload[..]);
    }

    #[test]
    fn the_publisher_refuses_exactly_the_headers_it_could_not_read_back(
        headers in vec((any_header_name(), any_header_value()), 1..4),
    ) {
        let map = header_map(&headers);
        // The map lowercases names and keeps the last value of a name, so judge what it holds.
        let writable = map
            .iter()
            .all(|(name, value)| header_is_writable(name, value));
        match encode("payments", &map, Bytes::new()) {
            Ok(frames) => {
                prop_assert!(writable, "{map:?} was written");
                let back = decode(&frames, &WireLimits::default(), None).unwrap();
                prop_assert_eq!(back.headers, map);
            }
            Err(ZmqError::InvalidHeader { header, .. }) => {
                prop_assert!(!writable, "{map:?} was refused");
                let offending = map.iter().any(|(name, value)| {
                    name == header && !header_is_writable(name, value)
                });
                prop_assert!(offending, "the error names `{header}`, which breaks no rule");
            }
            Err(other) => prop_assert!(false, "{other}"),
        }
    }

    #[test]
    fn a_headers_frame_with_crlf_lines_reads_the_same_as_with_lf(
        headers in vec(valid_header(), 1..6),
    ) {
        let map = header_map(&headers);
        let frames = encode("payments", &map, Bytes::new()).unwrap();
        let crlf = String::from_utf8(frames[1].to_vec()).unwrap().replace('\n', "\r\n");
        let frames = vec![frames[0].clone(), Bytes::from(crlf), frames[2].clone()];
        let back = decode(&frames, &WireLimits::default(), None).unwrap();
        prop_assert_eq!(back.headers, map);
    }

    #[test]
    fn decode_never_panics_and_what_it_accepts_is_within_the_limits(
        raw in any_frames(),
        limits in any_limits(),
        lone in proptest::option::of("[a-z]{1,8}"),
    ) {
        let frames = frames_of(&raw);
        let lone = lone.map(Str::from);
        let total: usize = raw.iter().map(Vec::len).sum();
        match decode(&frames, &limits, lone.as_ref()) {
            Ok(inbound) => {
                prop_assert!((1..=3).contains(&frames.len()));
                prop_assert!(frames.len() <= limits.frames());
                prop_assert!(total <= limits.message_bytes());
                prop_assert_eq!(&inbound.payload, frames.last().unwrap());
                if frames.len() == 1 {
                    prop_assert_eq!(Some(&inbound.name), lone.as_ref());
                } else {
                    prop_assert_eq!(inbound.name.as_bytes(), &frames[0][..]);
                }
                if frames.len() == 3 {
                    let headers = &frames[1];
                    prop_assert!(headers.len() <= limits.header_bytes());
                    let lines = header_lines(headers);
                    prop_assert!(lines <= limits.header_lines(), "{} lines accepted", lines);
                    prop_assert!(inbound.headers.len() <= lines);
                }
            }
            Err(refusal) => {
                if let Refusal::TooManyHeaderLines { lines, limit } = &refusal {
                    prop_assert_eq!(frames.len(), 3);
                    prop_assert_eq!(*lines, header_lines(&frames[1]));
                    prop_assert_eq!(*limit, limits.header_lines());
                    prop_assert!(lines > limit);
                }
                // The checks that need no parsing come first, in this order.
                if frames.len() > limits.frames() {
                    prop_assert_eq!(
                        refusal,
                        Refusal::TooManyFrames { frames: frames.len(), limit: limits.frames() }
                    );
                } else if total > limits.message_bytes() {
                    prop_assert_eq!(
                        refusal,
                        Refusal::MessageTooLarge { bytes: total, limit: limits.message_bytes() }
                    );
                } else if frames.len() == 3
                    && frames[1].len() <= limits.header_bytes()
                    && header_lines(&frames[1]) > limits.header_lines()
                {
                    // The headers are read first: their size, then their lines.
                    prop_assert_eq!(
                        refusal,
                        Refusal::TooManyHeaderLines {
                            lines: header_lines(&frames[1]),
                            limit: limits.header_lines(),
                        }
                    );
                } else {
                    prop_assert!(!refusal.rule().is_empty());
                    prop_assert!(!refusal.to_string().is_empty());
                }
            }
        }
    }

    #[test]
    fn the_reader_takes_exactly_as_many_header_lines_as_the_limit_allows(
        blank_or_header in vec(prop_oneof![1 => Just(None), 3 => "[a-z]{1,6}: [a-z0-9]{1,6}".prop_map(Some)], 0..7),
        last in "[a-z]{1,6}: [a-z0-9]{1,6}",
        terminated in any::<bool>(),
        crlf in any::<bool>(),
    ) {
        // `n` lines, the last one not blank, so the frame spells exactly `n` whether or not the
        // last one is terminated.
        let mut lines: Vec<String> = blank_or_header.into_iter().map(Option::unwrap_or_default).collect();
        lines.push(last);
        let n = lines.len();
        let sep = if crlf { "\r\n" } else { "\n" };
        let mut text = lines.join(sep);
        if terminated {
            text.push_str(sep);
        }
        prop_assert_eq!(header_lines(text.as_bytes()), n);
        let frames = frames_of(&[b"payments".to_vec(), text.into_bytes(), b"body".to_vec()]);
        let at_limit = WireLimits::default().max_header_lines(n);
        prop_assert!(decode(&frames, &at_limit, None).is_ok(), "{} lines within a limit of {}", n, n);
        let under = WireLimits::default().max_header_lines(n - 1);
        prop_assert_eq!(
            decode(&frames, &under, None),
            Err(Refusal::TooManyHeaderLines { lines: n, limit: n - 1 })
        );
    }

    #[test]
    fn a_message_of_more_than_three_frames_is_refused_by_shape(
        raw in vec(vec(any::<u8>(), 0..8), 4..8),
    ) {
        let frames = frames_of(&raw);
        let limits = WireLimits::default().max_frames(16);
        prop_assert_eq!(
            decode(&frames, &limits, None),
            Err(Refusal::UnknownShape { frames: frames.len(), most: 3 })
        );
    }

    #[test]
    fn a_lone_frame_is_the_payload_on_a_queue_and_refused_without_a_name(
        payload in vec(any::<u8>(), 0..64),
    ) {
        let frames = vec![Bytes::from(payload.clone())];
        let named = decode(&frames, &WireLimits::default(), Some(&Str::from("payments"))).unwrap();
        prop_assert_eq!(&*named.name, "payments");
        prop_assert!(named.headers.is_empty());
        prop_assert_eq!(&named.payload[..], &payload[..]);
        prop_assert_eq!(decode(&frames, &WireLimits::default(), None), Err(Refusal::LoneFrame));
    }
}

/// Found by the property above when its line count added one for a trailing newline: a headers
/// frame of one empty, terminated line is one line, within a limit of one.
#[test]
fn a_terminated_last_header_line_opens_no_new_line() {
    let frames = frames_of(&[Vec::new(), b"\n".to_vec(), Vec::new()]);
    assert_eq!(header_lines(&frames[1]), 1);
    let limits = WireLimits::default().max_header_lines(1);
    let inbound = decode(&frames, &limits, None).expect("one line within a limit of one");
    assert!(inbound.headers.is_empty());
    assert!(inbound.payload.is_empty());
    let cases: [(&[u8], usize); 6] = [
        (b"a: 1", 1),
        (b"a: 1\n", 1),
        (b"a: 1\r\n", 1),
        (b"a: 1\nb: 2", 2),
        (b"a: 1\nb: 2\n", 2),
        (b"\n\n", 2),
    ];
    for (headers, lines) in cases {
        assert_eq!(header_lines(headers), lines, "{headers:?}");
        let frames = frames_of(&[b"payments".to_vec(), headers.to_vec(), Vec::new()]);
        let at_limit = WireLimits::default().max_header_lines(lines);
        assert!(decode(&frames, &at_limit, None).is_ok(), "{headers:?}");
        let under = WireLimits::default().max_header_lines(lines - 1);
        assert_eq!(
            decode(&frames, &under, None),
            Err(Refusal::TooManyHeaderLines {
                lines,
                limit: lines - 1
            }),
            "{headers:?}"
        );
    }
}
