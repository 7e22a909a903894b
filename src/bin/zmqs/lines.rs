//! What `tail` and `ask` print: one JSON object a line, for people and for `jq` alike.

use std::{
    collections::BTreeMap,
    fmt,
    time::{SystemTime, UNIX_EPOCH},
};

use base64::Engine;
use ruststream::{HeaderMap, IncomingMessage};
use ruststream_zmq::ZmqMessage;
use serde_json::{Map, Value, json, value::RawValue};

/// One printed JSON object, its keys in order and each value kept as JSON text: a payload's
/// text goes in as it arrived, never through a `Value` (which would merge duplicate keys and
/// round large numbers).
pub struct Line(BTreeMap<&'static str, String>);

impl Line {
    pub fn insert(&mut self, key: &'static str, value: &Value) {
        self.0.insert(key, value.to_string());
    }
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (n, (key, value)) in self.0.iter().enumerate() {
            let comma = if n == 0 { "" } else { "," };
            write!(f, "{comma}{}:{value}", json!(key))?;
        }
        f.write_str("}")
    }
}

/// A message as a JSON object: its name, its headers (a value that is not UTF-8 as base64
/// under `headers_base64`, though the crate refuses such a headers frame before a message is
/// made of it), its payload (its own JSON text where it is JSON, else `payload_base64`), and
/// when it arrived.
pub fn message(message: &ZmqMessage, arrived: SystemTime) -> Line {
    line(
        message.name(),
        IncomingMessage::headers(message),
        IncomingMessage::payload(message),
        arrived,
    )
}

/// [`message`] of its parts: a `ZmqMessage` is made by the crate alone, from what it decoded.
fn line(name: &str, headers: &HeaderMap, payload: &[u8], arrived: SystemTime) -> Line {
    let mut line = Line(BTreeMap::new());
    line.insert("name", &json!(name));
    let mut text = Map::new();
    let mut binary = Map::new();
    for (name, value) in headers.iter() {
        match std::str::from_utf8(value) {
            Ok(value) => text.insert(name.to_owned(), json!(value)),
            Err(_) => binary.insert(name.to_owned(), json!(base64(value))),
        };
    }
    line.insert("headers", &Value::Object(text));
    if !binary.is_empty() {
        line.insert("headers_base64", &Value::Object(binary));
    }
    match json_text(payload) {
        Some(text) => line.0.insert("payload", text),
        None => line
            .0
            .insert("payload_base64", json!(base64(payload)).to_string()),
    };
    line.insert("arrived", &json!(rfc3339(arrived)));
    line
}

/// The payload's JSON text, where it is one JSON value (UTF-8), byte for byte but for the
/// whitespace around it and the line breaks in it: JSON allows a line break only between
/// tokens (one inside a string is written `\n`), so dropping them keeps each message on one
/// line and leaves every token, key order, duplicate key and number as it arrived.
fn json_text(payload: &[u8]) -> Option<String> {
    // Checked by a scan that keeps the text; a number is read as digits, not as an `f64`.
    let raw: &RawValue = serde_json::from_slice(payload).ok()?;
    Some(raw.get().replace(['\r', '\n'], ""))
}

fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A time as RFC 3339 in UTC, to the microsecond: `2026-12-03T13:40:02.123456Z`.
pub fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let seconds = since.as_secs();
    let (days, of_day) = (seconds / 86_400, seconds % 86_400);
    let (year, month, day) = civil(days.try_into().unwrap_or(i64::MAX));
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60,
        since.subsec_micros()
    )
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use ruststream::{Bytes, HeaderMap};
    use serde_json::json;

    use super::{line, rfc3339};

    fn at(seconds: u64, micros: u64) -> std::time::SystemTime {
        UNIX_EPOCH + Duration::from_secs(seconds) + Duration::from_micros(micros)
    }

    /// Times `date -u -d @SECONDS` reads so, each on a side of a month's or a year's end, in
    /// leap years and in the years a century makes common.
    #[test]
    fn known_times_read_as_gnu_date_reads_them() {
        for (seconds, text) in [
            (0, "1970-01-01T00:00:00"),
            (2_678_400, "1970-02-01T00:00:00"),
            (5_097_600, "1970-03-01T00:00:00"),
            (68_169_600, "1972-02-29T00:00:00"),
            (946_684_799, "1999-12-31T23:59:59"),
            (951_782_400, "2000-02-29T00:00:00"),
            (1_234_567_890, "2009-02-13T23:31:30"),
            (1_583_020_799, "2020-02-29T23:59:59"),
            (1_700_000_000, "2023-11-14T22:13:20"),
            (1_709_251_199, "2024-02-29T23:59:59"),
            (1_709_251_200, "2024-03-01T00:00:00"),
            (4_107_542_399, "2100-02-28T23:59:59"),
            (4_107_542_400, "2100-03-01T00:00:00"),
            (253_402_300_799, "9999-12-31T23:59:59"),
        ] {
            assert_eq!(
                rfc3339(at(seconds, 0)),
                format!("{text}.000000Z"),
                "{seconds}"
            );
        }
    }

    /// Every day from 1970 to 2400 (four centuries: each leap rule, every month's length), its
    /// date counted a day at a time against a table of month lengths, not by the formula the
    /// code uses.
    #[test]
    fn every_day_for_four_centuries_has_the_date_counted_day_by_day() {
        let leap = |year: u64| {
            year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
        };
        let (mut year, mut month, mut day) = (1970u64, 1u64, 1u64);
        let mut days = 0u64;
        while year <= 2400 {
            // A second of the day that moves with the day, to read each field of the time too.
            let second = days * 7919 % 86_400;
            let expected = format!(
                "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
                second / 3600,
                second % 3600 / 60,
                second % 60,
                days % 1_000_000
            );
            assert_eq!(
                rfc3339(at(days * 86_400 + second, days % 1_000_000)),
                expected
            );
            let length = match month {
                2 if leap(year) => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            days += 1;
            day += 1;
            if day > length {
                (day, month) = (1, month + 1);
            }
            if month > 12 {
                (month, year) = (1, year + 1);
            }
        }
        assert_eq!(days, 157_420, "the days of 1970 to 2400 inclusive");
    }

    #[test]
    fn the_time_keeps_microseconds_cut_not_rounded() {
        let time = at(1_700_000_000, 123_456) + Duration::from_nanos(999);
        assert_eq!(rfc3339(time), "2023-11-14T22:13:20.123456Z");
        assert_eq!(
            rfc3339(at(1_700_000_000, 999_999)),
            "2023-11-14T22:13:20.999999Z"
        );
    }

    /// The line as JSON, to compare.
    fn value(line: &super::Line) -> serde_json::Value {
        serde_json::from_str(&line.to_string()).unwrap()
    }

    #[test]
    fn a_header_value_that_is_not_utf8_is_under_headers_base64_and_a_payload_that_is_not_json_too()
    {
        let mut headers = HeaderMap::new();
        headers.insert("x-tenant", "acme");
        headers.insert("x-raw".to_owned(), Bytes::from_static(&[0, 0x9f, 0xff]));
        let printed = line("payments", &headers, b"not json", at(0, 0));
        assert_eq!(
            value(&printed),
            json!({
                "name": "payments",
                "headers": {"x-tenant": "acme"},
                "headers_base64": {"x-raw": "AJ//"},
                "payload_base64": "bm90IGpzb24=",
                "arrived": "1970-01-01T00:00:00.000000Z",
            })
        );
        let printed = value(&line(
            "payments",
            &HeaderMap::new(),
            br#"{"id":1}"#,
            at(0, 0),
        ));
        assert_eq!(printed["payload"], json!({"id": 1}));
        assert_eq!(printed["headers"], json!({}));
        assert!(
            printed.get("headers_base64").is_none() && printed.get("payload_base64").is_none(),
            "{printed:?}"
        );
    }

    /// What a `Value` would change, the line keeps: duplicate keys, numbers past `u64` and
    /// `f64`, key order, spacing. Line breaks between tokens go, and the value's own text is
    /// what remains; what is not one JSON value in UTF-8 is base64.
    #[test]
    fn a_json_payload_is_printed_as_its_own_text() {
        let payload_of = |payload: &[u8]| {
            let printed = line("n", &HeaderMap::new(), payload, at(0, 0)).to_string();
            let (_, rest) = printed.split_once(r#""payload":"#).expect(&printed);
            rest.strip_suffix('}').unwrap().to_owned()
        };
        for (payload, printed) in [
            (&br#"{"id":1,"id":2}"#[..], r#"{"id":1,"id":2}"#),
            (
                br#"{"n":123456789012345678901234567890}"#,
                r#"{"n":123456789012345678901234567890}"#,
            ),
            (
                br#"{"x":1e400, "z":0.1000000000000000055511151231257827}"#,
                r#"{"x":1e400, "z":0.1000000000000000055511151231257827}"#,
            ),
            (br#"{"b":1,"a":2}"#, r#"{"b":1,"a":2}"#),
            (b"{\r\n  \"a\": [1,\n 2]\n}\n", r#"{  "a": [1, 2]}"#),
            (br#"  "line\nbreak"  "#, r#""line\nbreak""#),
            (b"18446744073709551616", "18446744073709551616"),
        ] {
            let text = String::from_utf8_lossy(payload);
            assert_eq!(payload_of(payload), printed, "{text}");
        }
        for not_json in [
            &b""[..],
            b"{",
            b"1 2",
            b"{\"a\":\"\xff\"}",
            b"\xef\xbb\xbf{}",
        ] {
            let printed = value(&line("n", &HeaderMap::new(), not_json, at(0, 0)));
            assert!(printed.get("payload").is_none(), "{printed}");
            assert_eq!(printed["payload_base64"], json!(super::base64(not_json)));
        }
    }
}
