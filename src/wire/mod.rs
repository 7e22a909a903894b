//! The wire contract: one multipart message per delivery, `[name][headers][payload]`.
//!
//! Decoding is a pure function of the frames and the [`WireLimits`]; it never panics and answers
//! every malformed or oversized message with a [`Refusal`] naming the rule it broke. The header
//! limits are checked before any header map is built, because the framework's map scans on every
//! insert and a frame of many lines would otherwise cost its square.

use std::fmt;

use ruststream::{Bytes, HeaderMap, Str};

use crate::error::ZmqError;

mod reply;

pub use reply::{
    CORRELATION_ID, REPLY_NAME, REPLY_PREFIX, REPLY_TO, REQ_MARK, Requester, decode_request,
    encode_reply, parse_reply_address, parse_requester, reply_address, reply_address_of,
};
pub(crate) use reply::{NOT_A_REPLY, reply_frames};

/// One message as the sockets carry it: its frames, in order.
pub type Frames = Vec<Bytes>;

/// What a broker accepts from a peer. Every message over a limit is refused with a warning and
/// counted; the next good message is delivered as usual.
///
/// The `zeromq` client reads each frame whole before these limits can act, and reserves the
/// length a peer announces: keep the service behind a network boundary that only trusted peers
/// cross ([`guide::security`](crate::guide::security)).
///
/// # Examples
///
/// ```
/// use ruststream_zmq::WireLimits;
///
/// let limits = WireLimits::default().max_message_bytes(1 << 20).max_header_lines(32);
/// assert_eq!(limits.message_bytes(), 1 << 20);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireLimits {
    message_bytes: usize,
    header_bytes: usize,
    header_lines: usize,
    frames: usize,
}

impl Default for WireLimits {
    /// 64 KiB a message, 64 KiB and 128 lines of headers, 8 frames: what one peer can make the
    /// service hold stays in tens of MiB ([`guide::security`](crate::guide::security)).
    fn default() -> Self {
        Self {
            message_bytes: 64 << 10,
            header_bytes: 64 << 10,
            header_lines: 128,
            frames: 8,
        }
    }
}

impl WireLimits {
    /// Caps the bytes of all frames of one message together.
    ///
    /// ```
    /// use ruststream_zmq::WireLimits;
    ///
    /// let limits = WireLimits::default().max_message_bytes(1 << 20);
    /// assert_eq!(limits.message_bytes(), 1 << 20);
    /// ```
    #[must_use]
    pub const fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.message_bytes = bytes;
        self
    }

    /// Caps the bytes of the headers frame.
    ///
    /// ```
    /// use ruststream_zmq::WireLimits;
    ///
    /// let limits = WireLimits::default().max_header_bytes(4 << 10);
    /// assert_eq!(limits.header_bytes(), 4 << 10);
    /// ```
    #[must_use]
    pub const fn max_header_bytes(mut self, bytes: usize) -> Self {
        self.header_bytes = bytes;
        self
    }

    /// Caps the lines of the headers frame.
    ///
    /// ```
    /// use ruststream_zmq::WireLimits;
    ///
    /// let limits = WireLimits::default().max_header_lines(32);
    /// assert_eq!(limits.header_lines(), 32);
    /// ```
    #[must_use]
    pub const fn max_header_lines(mut self, lines: usize) -> Self {
        self.header_lines = lines;
        self
    }

    /// Caps the frames of one message, counted before anything else is read.
    ///
    /// ```
    /// use ruststream_zmq::WireLimits;
    ///
    /// let limits = WireLimits::default().max_frames(3);
    /// assert_eq!(limits.frames(), 3);
    /// ```
    #[must_use]
    pub const fn max_frames(mut self, frames: usize) -> Self {
        self.frames = frames;
        self
    }

    /// The cap on the bytes of one message.
    #[must_use]
    pub const fn message_bytes(&self) -> usize {
        self.message_bytes
    }

    /// The cap on the bytes of the headers frame.
    #[must_use]
    pub const fn header_bytes(&self) -> usize {
        self.header_bytes
    }

    /// The cap on the lines of the headers frame.
    #[must_use]
    pub const fn header_lines(&self) -> usize {
        self.header_lines
    }

    /// The cap on the frames of one message.
    #[must_use]
    pub const fn frames(&self) -> usize {
        self.frames
    }
}

/// A message read off the wire, before the framework sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inbound {
    /// Frame 0: the name the sender published under.
    pub name: Str,
    /// Frame 1, parsed; values are slices of the frame.
    pub headers: HeaderMap,
    /// The codec's bytes, untouched.
    pub payload: Bytes,
}

/// Why a message from a peer was refused: the rule, and the sizes that broke it.
///
/// Each variant's fields are what was seen (`frames`, `bytes`, `lines`, `line`) and the limit it
/// broke (`limit`, `most`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[allow(missing_docs)]
pub enum Refusal {
    /// A message with no frames at all.
    NoFrames,
    /// More frames than [`WireLimits::max_frames`].
    TooManyFrames { frames: usize, limit: usize },
    /// More frames than the format has (three on the one-way patterns).
    UnknownShape { frames: usize, most: usize },
    /// A lone frame where the pattern needs a name (the fan-out filters on it).
    LoneFrame,
    /// More bytes than [`WireLimits::max_message_bytes`].
    MessageTooLarge { bytes: usize, limit: usize },
    /// A headers frame over [`WireLimits::max_header_bytes`].
    HeadersTooLarge { bytes: usize, limit: usize },
    /// A headers frame of more lines than [`WireLimits::max_header_lines`].
    TooManyHeaderLines { lines: usize, limit: usize },
    /// A name frame that is not UTF-8.
    NameNotUtf8 { bytes: usize },
    /// A headers frame that is not UTF-8.
    HeadersNotUtf8 { bytes: usize },
    /// A header line with no `:` between name and value.
    HeaderLineWithoutColon { line: usize },
    /// A header line the publisher could not send again (an empty name, a CR inside).
    InvalidHeader { line: usize, why: &'static str },
    /// A request with no identity frame in front (the ROUTER always adds one).
    NoIdentity,
}

impl Refusal {
    /// How many rules there are: [`rule`](Self::rule) names one of them.
    pub(crate) const RULES: usize = 12;

    /// A short, stable word for the rule, used as a log field.
    #[must_use]
    pub const fn rule(&self) -> &'static str {
        match self {
            Self::NoFrames => "no-frames",
            Self::TooManyFrames { .. } => "max-frames",
            Self::UnknownShape { .. } => "frame-count",
            Self::LoneFrame => "lone-frame",
            Self::MessageTooLarge { .. } => "max-message-bytes",
            Self::HeadersTooLarge { .. } => "max-header-bytes",
            Self::TooManyHeaderLines { .. } => "max-header-lines",
            Self::NameNotUtf8 { .. } => "name-utf8",
            Self::HeadersNotUtf8 { .. } => "headers-utf8",
            Self::HeaderLineWithoutColon { .. } => "header-colon",
            Self::InvalidHeader { .. } => "header-invalid",
            Self::NoIdentity => "identity",
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoFrames => f.write_str("a message with no frames"),
            Self::TooManyFrames { frames, limit } => {
                write!(f, "{frames} frames, over the limit of {limit}")
            }
            Self::UnknownShape { frames, most } => write!(
                f,
                "{frames} frames, where the format has at most {most} ([name][headers][payload])"
            ),
            Self::LoneFrame => f.write_str(
                "a lone frame, where the fan-out needs [name][payload] or [name][headers][payload]",
            ),
            Self::MessageTooLarge { bytes, limit } => {
                write!(f, "{bytes} bytes, over the limit of {limit} per message")
            }
            Self::HeadersTooLarge { bytes, limit } => {
                write!(
                    f,
                    "a headers frame of {bytes} bytes, over the limit of {limit}"
                )
            }
            Self::TooManyHeaderLines { lines, limit } => {
                write!(
                    f,
                    "a headers frame of {lines} lines, over the limit of {limit}"
                )
            }
            Self::NameNotUtf8 { bytes } => {
                write!(f, "a name frame of {bytes} bytes that is not UTF-8")
            }
            Self::HeadersNotUtf8 { bytes } => {
                write!(f, "a headers frame of {bytes} bytes that is not UTF-8")
            }
            Self::HeaderLineWithoutColon { line } => {
                write!(f, "header line {line} has no `:` between name and value")
            }
            Self::InvalidHeader { line, why } => {
                write!(f, "header line {line} is not valid: {why}")
            }
            Self::NoIdentity => f.write_str("a request without the identity frame a ROUTER adds"),
        }
    }
}

/// Reads a one-way message: `[name][headers][payload]`, `[name][payload]`, or a lone payload
/// where `lone_name` says which name it takes (the queue: the subscription's own).
///
/// # Errors
///
/// A [`Refusal`] naming the rule the frames break.
pub fn decode(
    frames: &[Bytes],
    limits: &WireLimits,
    lone_name: Option<&Str>,
) -> Result<Inbound, Refusal> {
    decode_with_room(frames, limits, lone_name, 0)
}

/// [`decode`], with room in the header map for `room` more headers, so that a header stamped
/// after decoding (a request's `reply-to`) does not move the map.
fn decode_with_room(
    frames: &[Bytes],
    limits: &WireLimits,
    lone_name: Option<&Str>,
    room: usize,
) -> Result<Inbound, Refusal> {
    check_sizes(frames, limits)?;
    match frames {
        [] => Err(Refusal::NoFrames),
        [payload] => match lone_name {
            Some(name) => Ok(Inbound {
                name: name.clone(),
                headers: HeaderMap::with_capacity(room),
                payload: payload.clone(),
            }),
            None => Err(Refusal::LoneFrame),
        },
        [name, payload] => Ok(Inbound {
            name: utf8_name(name)?,
            headers: HeaderMap::with_capacity(room),
            payload: payload.clone(),
        }),
        [name, headers, payload] => {
            // Decode the headers first: they carry the limits that matter most.
            let headers = decode_headers(headers, limits, room)?;
            Ok(Inbound {
                name: utf8_name(name)?,
                headers,
                payload: payload.clone(),
            })
        }
        _ => Err(Refusal::UnknownShape {
            frames: frames.len(),
            most: 3,
        }),
    }
}

/// The checks that need no parsing: the frame count and the total size.
pub(crate) fn check_sizes(frames: &[Bytes], limits: &WireLimits) -> Result<(), Refusal> {
    if frames.len() > limits.frames {
        return Err(Refusal::TooManyFrames {
            frames: frames.len(),
            limit: limits.frames,
        });
    }
    let bytes = frames
        .iter()
        .map(Bytes::len)
        .fold(0usize, usize::saturating_add);
    if bytes > limits.message_bytes {
        return Err(Refusal::MessageTooLarge {
            bytes,
            limit: limits.message_bytes,
        });
    }
    Ok(())
}

fn utf8_name(frame: &Bytes) -> Result<Str, Refusal> {
    Str::from_inner(frame.clone()).map_err(|_| Refusal::NameNotUtf8 { bytes: frame.len() })
}

/// Parses `name: value` lines (`\n`, or `\r\n`) into a header map whose values borrow the frame,
/// with room for `room` more. Sizes and line counts are checked before the first insert.
pub(crate) fn decode_headers(
    frame: &Bytes,
    limits: &WireLimits,
    room: usize,
) -> Result<HeaderMap, Refusal> {
    if frame.len() > limits.header_bytes {
        return Err(Refusal::HeadersTooLarge {
            bytes: frame.len(),
            limit: limits.header_bytes,
        });
    }
    if frame.is_empty() {
        return Ok(HeaderMap::with_capacity(room));
    }
    // A last line needs no terminator, and a terminated last line opens no new one.
    let newlines = frame.iter().filter(|&&b| b == b'\n').count();
    let lines = newlines + usize::from(!frame.ends_with(b"\n"));
    if lines > limits.header_lines {
        return Err(Refusal::TooManyHeaderLines {
            lines,
            limit: limits.header_lines,
        });
    }
    let text = Str::from_inner(frame.clone())
        .map_err(|_| Refusal::HeadersNotUtf8 { bytes: frame.len() })?;
    let mut headers = HeaderMap::with_capacity(lines + room);
    let mut start = 0;
    for (index, line) in text.split('\n').enumerate() {
        let end = start + line.len();
        let line_start = start;
        start = end + 1;
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        let colon = line
            .find(':')
            .ok_or(Refusal::HeaderLineWithoutColon { line: index + 1 })?;
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        let name_at = line_start + (name.len() - name.trim_start().len());
        let name = text.slice(name_at..name_at + name.trim().len());
        let value_at = line_start + colon + 1 + (value.len() - value.trim_start().len());
        let value = value.trim();
        // What the publisher could not send back is refused here, so a retry copy of any
        // delivery that got in can leave again.
        check_read_header(&name, value).map_err(|why| Refusal::InvalidHeader {
            line: index + 1,
            why,
        })?;
        headers.insert(name, frame.slice(value_at..value_at + value.len()));
    }
    Ok(headers)
}

/// Writes a one-way message: `[name][headers][payload]`, always three frames.
///
/// # Errors
///
/// [`ZmqError::InvalidHeader`] for a header the format cannot carry, naming it.
pub fn encode(name: &str, headers: &HeaderMap, payload: Bytes) -> Result<Frames, ZmqError> {
    Ok(vec![
        Bytes::copy_from_slice(name.as_bytes()),
        encode_headers(headers)?,
        payload,
    ])
}

/// Writes the headers frame, refusing what a reader could not read back the same.
pub(crate) fn encode_headers(headers: &HeaderMap) -> Result<Bytes, ZmqError> {
    if headers.is_empty() {
        return Ok(Bytes::new());
    }
    // Exactly as long as it will be (`name: value` lines joined by `\n`): a frame takes the
    // buffer as it is when it has no room to spare, and needs an allocation of its own when
    // it has.
    let lines: usize = headers.iter().map(|(k, v)| k.len() + 2 + v.len()).sum();
    let mut out = Vec::with_capacity(lines + headers.len() - 1);
    for (name, value) in headers.iter() {
        check_header(name, value)?;
        if !out.is_empty() {
            out.push(b'\n');
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
    }
    Ok(Bytes::from(out))
}

/// The publisher's rules for one header; a pure check, so a property test can hold it.
pub(crate) fn check_header(name: &str, value: &[u8]) -> Result<(), ZmqError> {
    let invalid = |why: &'static str| ZmqError::InvalidHeader {
        header: name.to_owned(),
        why,
    };
    if name.is_empty() {
        return Err(invalid("the name is empty"));
    }
    if name.contains(':') {
        return Err(invalid("the name contains `:`"));
    }
    if has_line_break(name.as_bytes()) {
        return Err(invalid("the name contains CR or LF"));
    }
    if has_outer_space(name) {
        return Err(invalid("the name has leading or trailing white space"));
    }
    let Ok(value) = std::str::from_utf8(value) else {
        return Err(invalid("the value is not UTF-8"));
    };
    if has_line_break(value.as_bytes()) {
        return Err(invalid("the value contains CR or LF"));
    }
    if has_outer_space(value) {
        return Err(invalid("the value has leading or trailing white space"));
    }
    Ok(())
}

/// [`check_header`] for a header read off a headers frame, answering why it fails. The frame
/// is UTF-8 and split at LF, the name ends at the line's first `:`, and both halves are
/// trimmed, so of the publisher's rules only an empty name and a CR inside a half are left to
/// check: the reader pays for two scans, not seven.
fn check_read_header(name: &str, value: &str) -> Result<(), &'static str> {
    let read = if name.is_empty() {
        Err("the name is empty")
    } else if has_line_break(name.as_bytes()) {
        Err("the name contains CR or LF")
    } else if has_line_break(value.as_bytes()) {
        Err("the value contains CR or LF")
    } else {
        Ok(())
    };
    debug_assert_eq!(
        read.is_ok(),
        check_header(name, value.as_bytes()).is_ok(),
        "the reader and the publisher disagree on `{name}: {value}`"
    );
    read
}

/// Whether `text` holds a CR or an LF; bytes, not chars: both are ASCII, so no UTF-8 sequence
/// hides one, and a byte scan is what a header costs on every message.
fn has_line_break(text: &[u8]) -> bool {
    text.iter().any(|&byte| byte == b'\r' || byte == b'\n')
}

/// Whether `text` starts or ends with white space, as `str::trim` sees it, without comparing
/// the trimmed text to the whole.
fn has_outer_space(text: &str) -> bool {
    text.starts_with(char::is_whitespace) || text.ends_with(char::is_whitespace)
}

#[cfg(test)]
mod tests;
