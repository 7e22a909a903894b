//! The codec's unit tests: decoding, limits, refusals, reply addresses, round trips.

use super::*;

fn frames(parts: &[&[u8]]) -> Frames {
    parts.iter().map(|p| Bytes::copy_from_slice(p)).collect()
}

fn name() -> Str {
    Str::from("payments")
}

#[test]
fn three_frames_carry_name_headers_and_payload() {
    let msg = decode(
        &frames(&[b"orders", b"a: 1\r\nB:two\n", b"{}"]),
        &WireLimits::default(),
        None,
    )
    .unwrap();
    assert_eq!(&*msg.name, "orders");
    assert_eq!(msg.headers.get_str("a"), Some("1"));
    assert_eq!(msg.headers.get_str("b"), Some("two"));
    assert_eq!(&msg.payload[..], b"{}");
}

#[test]
fn two_frames_have_no_headers() {
    let msg = decode(&frames(&[b"orders", b"x"]), &WireLimits::default(), None).unwrap();
    assert!(msg.headers.is_empty());
    assert_eq!(&msg.payload[..], b"x");
}

#[test]
fn a_lone_frame_is_the_payload_only_where_the_pattern_names_it() {
    let msg = decode(&frames(&[b"{}"]), &WireLimits::default(), Some(&name())).unwrap();
    assert_eq!(&*msg.name, "payments");
    assert_eq!(
        decode(&frames(&[b"{}"]), &WireLimits::default(), None),
        Err(Refusal::LoneFrame)
    );
}

#[test]
fn malformed_messages_are_refused_by_rule() {
    let limits = WireLimits::default();
    assert_eq!(decode(&[], &limits, None), Err(Refusal::NoFrames));
    assert!(matches!(
        decode(&frames(&[b"a", b"b", b"c", b"d"]), &limits, None),
        Err(Refusal::UnknownShape { frames: 4, .. })
    ));
    assert!(matches!(
        decode(&frames(&[b"\xff", b"b"]), &limits, None),
        Err(Refusal::NameNotUtf8 { .. })
    ));
    assert!(matches!(
        decode(&frames(&[b"a", b"\xff: x", b"c"]), &limits, None),
        Err(Refusal::HeadersNotUtf8 { .. })
    ));
    assert_eq!(
        decode(&frames(&[b"a", b"ok: 1\nbroken", b"c"]), &limits, None),
        Err(Refusal::HeaderLineWithoutColon { line: 2 })
    );
}

#[test]
fn limits_are_checked_before_headers_are_parsed() {
    let limits = WireLimits::default()
        .max_header_lines(4)
        .max_header_bytes(64)
        .max_frames(3)
        .max_message_bytes(100);
    let many = "a: 1\n".repeat(5);
    assert!(matches!(
        decode(&frames(&[b"n", many.as_bytes(), b"p"]), &limits, None),
        Err(Refusal::TooManyHeaderLines { lines: 5, limit: 4 })
    ));
    let long = format!("a: {}", "x".repeat(70));
    assert!(matches!(
        decode(&frames(&[b"n", long.as_bytes(), b"p"]), &limits, None),
        Err(Refusal::HeadersTooLarge {
            bytes: 73,
            limit: 64
        })
    ));
    assert!(matches!(
        decode(&frames(&[b"n", b"", &[0; 101]]), &limits, None),
        Err(Refusal::MessageTooLarge { .. })
    ));
    assert!(matches!(
        decode(&frames(&[b"n", b"", b"p", b"q"]), &limits, None),
        Err(Refusal::TooManyFrames {
            frames: 4,
            limit: 3
        })
    ));
}

#[test]
fn a_request_carries_its_identity_and_keeps_a_req_delimiter() {
    let limits = WireLimits::default();
    let (who, msg) = decode_request(
        &frames(&[b"\x01\xff", b"", b"quotes", b"reply-to: forged", b"{}"]),
        &limits,
        &name(),
    )
    .unwrap();
    assert!(who.delimited);
    // A REQ peer's address says its answer carries the delimiter back.
    assert_eq!(msg.headers.get_str("reply-to"), Some("zmq-reply:req:01ff"));
    assert_eq!(parse_requester("zmq-reply:req:01ff").unwrap(), who);
    assert_eq!(&*msg.name, "quotes");
    let (who, msg) = decode_request(&frames(&[b"id", b"{}"]), &limits, &name()).unwrap();
    assert!(!who.delimited);
    assert_eq!(msg.headers.get_str("reply-to"), Some("zmq-reply:6964"));
    assert_eq!(parse_requester("zmq-reply:6964").unwrap(), who);
    assert_eq!(&*msg.name, "payments");
    assert_eq!(
        decode_request(&[], &limits, &name()),
        Err(Refusal::NoIdentity)
    );
}

#[test]
fn a_reply_address_spells_every_identity_byte_as_two_lower_case_hex_digits() {
    let identity: Vec<u8> = (0..=255).collect();
    let hex: String = identity.iter().map(|byte| format!("{byte:02x}")).collect();
    for delimited in [false, true] {
        let address = reply_address_of(&Requester {
            identity: Bytes::from(identity.clone()),
            delimited,
        });
        let mark = if delimited { REQ_MARK } else { "" };
        assert_eq!(address, format!("{REPLY_PREFIX}{mark}{hex}"));
        assert_eq!(address.len(), address.capacity(), "no room to spare");
    }
}

#[test]
fn a_reply_address_round_trips_and_bad_ones_name_themselves() {
    assert_eq!(
        parse_reply_address(&reply_address(b"\x00ab")).unwrap(),
        b"\x00ab"
    );
    assert_eq!(parse_reply_address("zmq-reply:0aFf").unwrap(), b"\x0a\xff");
    for bad in [
        "zmq-reply:",
        "zmq-reply:abc",
        "zmq-reply:zz",
        "zmq-reply:+a",
        "zmq-reply:a+",
        "zmq-reply:\u{e9}\u{e9}",
        "elsewhere",
    ] {
        let err = parse_reply_address(bad).unwrap_err().to_string();
        assert!(err.contains(bad), "{err}");
    }
}

#[test]
fn a_header_the_publisher_could_not_send_again_is_refused() {
    let limits = WireLimits::default();
    for bad in [&b": v"[..], b"x: a\rb", b"a\rb: v"] {
        let refused = decode(&frames(&[b"n", bad, b"p"]), &limits, None);
        assert!(
            matches!(refused, Err(Refusal::InvalidHeader { line: 1, .. })),
            "{bad:?}: {refused:?}"
        );
    }
}

#[test]
fn a_frame_of_exactly_the_line_limit_is_accepted_however_its_lines_end() {
    let limits = WireLimits::default().max_header_lines(3);
    for ok in [
        "a: 1\nb: 2\nc: 3",
        "a: 1\nb: 2\nc: 3\n",
        "a: 1\r\nb: 2\r\nc: 3\r\n",
    ] {
        let decoded = decode(&frames(&[b"n", ok.as_bytes(), b"p"]), &limits, None).unwrap();
        assert_eq!(decoded.headers.len(), 3, "{ok:?}");
    }
    let over = decode(
        &frames(&[b"n", b"a: 1\nb: 2\nc: 3\nd: 4", b"p"]),
        &limits,
        None,
    );
    assert!(matches!(
        over,
        Err(Refusal::TooManyHeaderLines { lines: 4, limit: 3 })
    ));
}

#[test]
fn encode_then_decode_is_the_identity() {
    let mut headers = HeaderMap::new();
    headers.insert("correlation-id", "abc");
    headers.insert("x-ruststream-retry-count", "2");
    let out = encode("orders.eu", &headers, Bytes::from_static(b"{\"id\":1}")).unwrap();
    let back = decode(&out, &WireLimits::default(), None).unwrap();
    assert_eq!(&*back.name, "orders.eu");
    assert_eq!(back.headers, headers);
    assert_eq!(&back.payload[..], b"{\"id\":1}");
}

#[test]
fn the_publisher_refuses_headers_it_could_not_read_back() {
    for (name, value) in [
        ("a:b", "v"),
        ("a\nb", "v"),
        (" a", "v"),
        ("a", "v\r\n"),
        ("a", " v"),
        ("", "v"),
    ] {
        let mut headers = HeaderMap::new();
        headers.insert(name.to_owned(), value.to_owned());
        let err = encode("n", &headers, Bytes::new()).unwrap_err();
        assert!(
            matches!(err, ZmqError::InvalidHeader { .. }),
            "{name:?}: {value:?}"
        );
    }
}
