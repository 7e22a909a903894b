//! What `tail` and `ask` print: one JSON object a line, for people and for `jq` alike.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use ruststream::IncomingMessage;
use ruststream_zmq::ZmqMessage;
use serde_json::{Map, Value, json};

/// A message as a JSON object: its name, its headers (a value that is not UTF-8 as base64
/// under `headers_base64`), its payload (JSON where it parses, else `payload_base64`), and
/// when it arrived.
pub fn message(message: &ZmqMessage, arrived: SystemTime) -> Map<String, Value> {
    let mut line = Map::new();
    line.insert("name".into(), json!(message.name()));
    let mut headers = Map::new();
    let mut binary = Map::new();
    for (name, value) in IncomingMessage::headers(message).iter() {
        match std::str::from_utf8(value) {
            Ok(text) => headers.insert(name.to_owned(), json!(text)),
            Err(_) => binary.insert(name.to_owned(), json!(base64(value))),
        };
    }
    line.insert("headers".into(), Value::Object(headers));
    if !binary.is_empty() {
        line.insert("headers_base64".into(), Value::Object(binary));
    }
    let payload = IncomingMessage::payload(message);
    match serde_json::from_slice::<Value>(payload) {
        Ok(value) => line.insert("payload".into(), value),
        Err(_) => line.insert("payload_base64".into(), json!(base64(payload))),
    };
    line.insert("arrived".into(), json!(rfc3339(arrived)));
    line
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
