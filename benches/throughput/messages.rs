//! The messages both sides send and read: the JSON jobs the handlers decode, and the frames a
//! raw peer sends for them (`[name][headers][payload]`).

use std::sync::LazyLock;

use ruststream::Bytes;
use ruststream_zmq::prelude::*;
use serde::{Deserialize, Serialize};

/// `[name][headers][payload]`, as a raw peer sends it.
pub type Frames = [Bytes; 3];

#[derive(Serialize, Deserialize, Outgoing)]
pub struct Job {
    pub id: u64,
}

/// The 16 KiB message: an id and a padding string.
#[derive(Serialize, Deserialize, Outgoing)]
pub struct BigJob {
    pub id: u64,
    pub pad: String,
}

static PAD: LazyLock<String> = LazyLock::new(|| "x".repeat(16 * 1024 - 20));

/// The one header every message carries.
#[derive(Deserialize)]
pub struct Tenant {
    #[serde(rename = "x-tenant")]
    pub tenant: String,
}

#[derive(Deserialize)]
pub struct Retries {
    #[serde(rename = "x-ruststream-retry-count")]
    pub retry_count: Option<u32>,
}

pub fn json(id: u64) -> Bytes {
    Bytes::from(serde_json::to_vec(&Job { id }).unwrap())
}

pub fn job_frames(id: u64) -> Frames {
    [
        Bytes::from_static(b"jobs"),
        Bytes::from_static(b"x-tenant: acme"),
        json(id),
    ]
}

pub fn tick_frames(id: u64) -> Frames {
    [
        Bytes::from_static(b"ticks"),
        Bytes::from_static(b"x-tenant: acme"),
        json(id),
    ]
}

pub fn big_frames(id: u64) -> Frames {
    let body = serde_json::to_vec(&BigJob {
        id,
        pad: PAD.clone(),
    })
    .unwrap();
    [
        Bytes::from_static(b"jobs"),
        Bytes::from_static(b"x-tenant: acme"),
        Bytes::from(body),
    ]
}

/// A raw request: `[echo][correlation-id: n][{"id":n}]`.
pub fn request(id: u64) -> Frames {
    [
        Bytes::from_static(b"echo"),
        Bytes::from(format!("correlation-id: {id}")),
        json(id),
    ]
}

/// The id an answer carries.
pub fn answered(payload: &[u8]) -> u64 {
    serde_json::from_slice::<Job>(payload)
        .expect("a JSON answer")
        .id
}
