//! What the AsyncAPI document says of ZeroMQ beyond a server's host (feature `asyncapi`): one
//! `x-zeromq` extension on each server and on each channel, built from the pattern's facts, the
//! side and the channel's name alone (the document is built before anything connects).
//!
//! The specification's protocol keys are a closed list without ZeroMQ (a ZMTP binding has been
//! asked for since 2020 and does not exist), so the framework's `Binding::extension` carries
//! them. The key is `x-zeromq`, the name the framework's own documentation gives this
//! extension; the field names are those of `ruststream-zeromq`'s extension where they mean the
//! same (`transport`, `role`, `socketPair`, `nameFrame`); `endpoint` is the whole address here
//! (`tcp://*:5555`), as a peer's socket takes it.

use ruststream::asyncapi::{Binding, Bindings};
use serde::Serialize;

use crate::{
    pattern::{PatternFacts, Role},
    routing::Destination,
    wire::{CORRELATION_ID, REPLY_NAME},
};

/// The extension key, at the server and at the channel level.
pub(crate) const EXTENSION: &str = "x-zeromq";

/// Where a client finds the address of a responder's answer: the `reply-to` header the ROUTER
/// stamps on each request (`zmq-reply:<hex of the requester's identity>`).
pub(crate) const REPLY_ADDRESS_LOCATION: &str = "$message.header#/reply-to";

/// The three frames of a message on every channel, as a peer writes and reads them (a ROUTER's
/// identity frame is the socket's, not the message's).
const FRAMES: [&str; 3] = ["name", "headers", "payload"];

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ServerBody<'a> {
    transport: &'static str,
    endpoint: &'a str,
    role: &'static str,
    socket_pair: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ChannelBody<'a> {
    socket_pair: &'static str,
    /// The socket this service reads or writes the channel with.
    socket: &'static str,
    /// `bind` or `connect`: what that socket does with its endpoint.
    role: &'static str,
    /// The endpoint of a channel that is not the server's own (an `name@endpoint` destination).
    #[serde(skip_serializing_if = "Option::is_none")]
    endpoint: Option<&'a str>,
    frames: [&'static str; 3],
    /// What frame 0 holds.
    name_frame: &'a str,
    /// `prefix` where the socket takes every name that starts with `nameFrame` (a SUB).
    #[serde(skip_serializing_if = "Option::is_none")]
    name_match: Option<&'static str>,
    /// On an answer: the form of the address it goes to.
    #[serde(skip_serializing_if = "Option::is_none")]
    reply_address: Option<&'static str>,
    /// On an answer: the header that carries the request's correlation id back.
    #[serde(skip_serializing_if = "Option::is_none")]
    correlation_header: Option<&'static str>,
}

impl<'a> ChannelBody<'a> {
    fn new(facts: PatternFacts, socket: Role, binds: bool, name_frame: &'a str) -> ChannelBody<'a> {
        ChannelBody {
            socket_pair: socket_pair(facts),
            socket: socket.name(),
            role: role(binds),
            endpoint: None,
            frames: FRAMES,
            name_frame,
            name_match: None,
            reply_address: None,
            correlation_header: None,
        }
    }
}

/// The pair of sockets a pattern's peers open, sender first, as libzmq names them.
const fn socket_pair(facts: PatternFacts) -> &'static str {
    match facts.reads_with {
        Role::Pull | Role::Push => "PUSH/PULL",
        Role::Sub | Role::Pub => "PUB/SUB",
        Role::Router | Role::Dealer => "DEALER/ROUTER",
    }
}

/// The libzmq verb for a side: `zmq_bind` or `zmq_connect`.
const fn role(binds: bool) -> &'static str {
    if binds { "bind" } else { "connect" }
}

/// The server binding of a broker on `address`, whose server `host` is `host` (the address
/// without its scheme or any user information): the transport, the endpoint as the sockets take
/// it, the side this service takes and the socket pair.
pub(crate) fn server(address: &str, host: &str, binds: bool, facts: PatternFacts) -> Bindings {
    let transport = if address.starts_with("ipc://") {
        "ipc"
    } else {
        "tcp"
    };
    wrap(&ServerBody {
        transport,
        endpoint: &format!("{transport}://{host}"),
        role: role(binds),
        socket_pair: socket_pair(facts),
    })
}

/// The channel a subscription named `name` reads: its socket, and on a fan-out the prefix match.
pub(crate) fn receiving(facts: PatternFacts, binds: bool, name: &str) -> Bindings {
    let mut body = ChannelBody::new(facts, facts.reads_with, binds, name);
    if facts.filters_by_prefix() {
        body.name_match = Some("prefix");
    }
    wrap(&body)
}

/// The channel a broker's publisher sends `channel` to: its own socket, a PUSH dialing the
/// endpoint an `name@endpoint` destination names, or a responder's answer to the requester.
pub(crate) fn sending(facts: PatternFacts, binds: bool, channel: &str) -> Bindings {
    let Ok(destination) = Destination::parse(channel) else {
        return Bindings::new();
    };
    if let Some(endpoint) = destination.endpoint {
        // Copies and dead letters are work done once: a named place is a queue.
        let mut body = ChannelBody::new(PatternFacts::QUEUE, Role::Push, false, destination.name);
        body.endpoint = Some(endpoint);
        return wrap(&body);
    }
    if facts.answers_requests {
        // The answer leaves through the responder's ROUTER, to the identity of the request.
        let mut body = ChannelBody::new(facts, facts.reads_with, binds, REPLY_NAME);
        body.reply_address = Some(REPLY_FORM);
        body.correlation_header = Some(CORRELATION_ID);
        return wrap(&body);
    }
    wrap(&ChannelBody::new(
        facts,
        facts.writes_with,
        binds,
        destination.name,
    ))
}

/// The form of a reply address; a REQ peer's reads `zmq-reply:req:<hex>`.
const REPLY_FORM: &str = "zmq-reply:<hex of the requester's identity>";

/// The channel a requester (DEALER) sends `channel` to; its answers come back on the same
/// connection under `reply`, with the request's correlation id.
pub(crate) fn requesting(binds: bool, channel: &str) -> Bindings {
    let mut body = ChannelBody::new(PatternFacts::RPC, Role::Dealer, binds, channel);
    body.correlation_header = Some(CORRELATION_ID);
    wrap(&body)
}

/// A binding that fails to build is one the document goes without: a description never holds
/// up a service. The bodies here are plain objects with a lawful key, so none fails.
fn wrap<T: Serialize>(body: &T) -> Bindings {
    Binding::extension(EXTENSION, body)
        .map_or_else(|_| Bindings::new(), |b| Bindings::new().with(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::REPLY_PREFIX;

    #[test]
    fn the_reply_form_starts_with_the_prefix_the_responder_writes() {
        assert!(REPLY_FORM.starts_with(REPLY_PREFIX));
    }

    #[test]
    fn every_body_builds_into_a_binding() {
        for facts in [PatternFacts::QUEUE, PatternFacts::FANOUT, PatternFacts::RPC] {
            for binds in [true, false] {
                assert!(!server("tcp://*:5555", "*:5555", binds, facts).is_empty());
                assert!(!receiving(facts, binds, "orders").is_empty());
                assert!(!sending(facts, binds, "orders.dead@tcp://127.0.0.1:1").is_empty());
                assert!(!sending(facts, binds, "reply").is_empty());
            }
            assert!(!requesting(false, "quotes").is_empty());
        }
    }
}
