//! Raw sockets of the pure-Rust `zeromq` 0.7 client, the baseline of the `zeromq` backend: each
//! socket is driven by one tokio task on the bench's runtime, as a service using the client
//! directly would drive it. Nothing of the crate is used here.
//!
//! Its sockets are the bench's `RawPusher`, `RawReader`, `RawPublisher` and `RawAsker`, so that
//! a raw scenario is written once for both clients (`throughput/raw_side.rs`, `Stack`).

use std::{ops::Range, sync::Arc, time::Duration};

use ruststream::Bytes;
use tokio::{sync::mpsc, task::JoinHandle};
use zeromq::{
    DealerSendHalf, DealerSocket, PubSocket, PullSocket, PushSocket, RouterSocket, Socket,
    SocketRecv, SocketSend, SubSocket, ZmqMessage,
};

use crate::{
    messages::Frames,
    meter::Latencies,
    raw_side::{RawAsker, RawPublisher, RawPusher, RawReader, Work},
};

/// The client the raw rows measure.
pub const CLIENT: &str = "raw `zeromq` 0.7 sockets, one tokio task each";

/// What `--raw-hop router` and `--raw-hop dealer` give the raw side.
pub const HOP_ROUTER: &str = "the ROUTER's requests handed to a second task";
pub const HOP_DEALER: &str = "the DEALER's answers read by a task of their own";

/// The channel a `--raw-hop` hand-off goes through, as deep as the requests in flight.
const HOP: usize = 64;

fn message<const N: usize>(frames: [Bytes; N]) -> ZmqMessage {
    ZmqMessage::try_from(frames.to_vec()).expect("frames")
}

/// A PUSH dialing a bound PULL.
pub struct Pusher(PushSocket);

impl RawPusher for Pusher {
    async fn dial(address: &str) -> Self {
        let mut socket = PushSocket::new();
        socket.connect(address).await.expect("the PUSH dials");
        Self(socket)
    }

    async fn send(&mut self, frames: Frames) {
        self.0.send(message(frames)).await.expect("the PUSH sends");
    }

    /// From a task of its own.
    fn send_all(mut self, ids: Range<u64>, make: fn(u64) -> Frames) -> JoinHandle<Self> {
        tokio::spawn(async move {
            for id in ids {
                self.0
                    .send(message(make(id)))
                    .await
                    .expect("the PUSH sends");
            }
            self
        })
    }

    async fn close(self) {
        let _ = self.0.close().await;
    }
}

/// A socket read by one task that hands every message to its work.
pub struct Reader {
    address: String,
    task: JoinHandle<()>,
}

impl RawReader for Reader {
    fn address(&self) -> &str {
        &self.address
    }

    async fn pull(work: Work) -> Self {
        let mut socket = PullSocket::new();
        let address = socket
            .bind("tcp://127.0.0.1:0")
            .await
            .expect("the PULL binds")
            .to_string();
        let task = tokio::spawn(async move {
            while let Ok(message) = socket.recv().await {
                let frames = message.into_vec();
                if let [name, headers, payload] = frames.as_slice() {
                    work(name, headers, payload);
                }
            }
        });
        Self { address, task }
    }

    /// With `--raw-hop router`, the requests are answered by a second task.
    async fn router(answer: fn(&[u8], &[u8]) -> (Bytes, Bytes)) -> Self {
        let mut socket = RouterSocket::new();
        let address = socket
            .bind("tcp://127.0.0.1:0")
            .await
            .expect("the ROUTER binds")
            .to_string();
        if crate::raw_side::raw_hops().router {
            return Self {
                address,
                task: router_with_a_hop(socket, answer),
            };
        }
        let task = tokio::spawn(async move {
            while let Ok(request) = socket.recv().await {
                let Some(reply) = reply(request.into_vec(), answer) else {
                    continue;
                };
                if socket.send(reply).await.is_err() {
                    break;
                }
            }
        });
        Self { address, task }
    }

    /// `_queue`: the per-peer queue, fixed in this client (100,000).
    async fn sub(address: &str, prefix: &str, work: Work, _queue: usize) -> Self {
        let mut socket = SubSocket::new();
        socket.connect(address).await.expect("the SUB dials");
        socket.subscribe(prefix).await.expect("the SUB subscribes");
        let task = tokio::spawn(async move {
            while let Ok(message) = socket.recv().await {
                let frames = message.into_vec();
                if let [name, headers, payload] = frames.as_slice() {
                    work(name, headers, payload);
                }
            }
        });
        Self {
            address: address.to_owned(),
            task,
        }
    }

    async fn close(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// A bound PUB.
pub struct Publisher(PubSocket);

impl RawPublisher for Publisher {
    /// `_queue`: the per-peer queue, fixed in this client (100,000).
    async fn bind(_queue: usize) -> (Self, String) {
        let mut socket = PubSocket::new();
        let address = socket
            .bind("tcp://127.0.0.1:0")
            .await
            .expect("the PUB binds")
            .to_string();
        (Self(socket), address)
    }

    async fn send(&mut self, frames: Frames) {
        self.0.send(message(frames)).await.expect("the PUB sends");
    }

    fn send_all(mut self, ids: Range<u64>, make: fn(u64) -> Frames) -> JoinHandle<Self> {
        tokio::spawn(async move {
            for id in ids {
                self.0.send(message(make(id))).await.expect("the PUB sends");
            }
            self
        })
    }

    async fn close(self) {
        let _ = self.0.close().await;
    }
}

/// A DEALER that asks a ROUTER, keeping up to `window` requests in flight from one task.
pub struct Asker(Asking);

/// How an asker reads its answers: from the DEALER in its own task, or, with `--raw-hop
/// dealer`, from a channel of [`HOP`] that a task reading the DEALER's receiving half fills.
enum Asking {
    Whole(DealerSocket),
    Split(DealerSendHalf, mpsc::Receiver<Vec<Bytes>>, JoinHandle<()>),
}

impl Asking {
    async fn send(&mut self, request: ZmqMessage) {
        let sent = match self {
            Self::Whole(socket) => socket.send(request).await,
            Self::Split(send, ..) => send.send(request).await,
        };
        sent.expect("the DEALER sends");
    }

    async fn recv(&mut self) -> Vec<Bytes> {
        match self {
            Self::Whole(socket) => socket.recv().await.expect("an answer").into_vec(),
            Self::Split(_, answers, _) => answers.recv().await.expect("an answer"),
        }
    }
}

impl RawAsker for Asker {
    /// With `--raw-hop dealer`, the answers are read by a task of their own.
    async fn dial(address: &str) -> Self {
        let mut socket = DealerSocket::new();
        socket.connect(address).await.expect("the DEALER dials");
        socket
            .send(message(crate::messages::request(u64::MAX)))
            .await
            .expect("the DEALER sends");
        socket.recv().await.expect("the first answer");
        if !crate::raw_side::raw_hops().dealer {
            return Self(Asking::Whole(socket));
        }
        let (send, recv) = socket.split();
        let (answers, reader) = hand_on(recv);
        Self(Asking::Split(send, answers, reader))
    }

    /// From a task of its own.
    fn run(mut self, ids: Range<u64>, window: u64) -> JoinHandle<(Self, Arc<Vec<Duration>>)> {
        tokio::spawn(async move {
            let mut latencies = Latencies::new(&ids);
            let mut next = ids.start;
            while !latencies.all() {
                while next < ids.end && latencies.in_flight(next) < window {
                    latencies.sent(next);
                    self.0.send(message(crate::messages::request(next))).await;
                    next += 1;
                }
                let answer = self.0.recv().await;
                latencies.answered(&answer[answer.len() - 1]);
            }
            (self, latencies.done())
        })
    }

    async fn close(self) {
        match self.0 {
            Asking::Whole(socket) => {
                let _ = socket.close().await;
            }
            // The halves close as they are dropped.
            Asking::Split(_, _, reader) => reader.abort(),
        }
    }
}

/// The answer to `[identity][name][headers][payload]`: `[identity][reply][headers][payload]`,
/// `answer` making the last two; none for another shape.
fn reply(mut frames: Vec<Bytes>, answer: fn(&[u8], &[u8]) -> (Bytes, Bytes)) -> Option<ZmqMessage> {
    if frames.len() != 4 {
        return None;
    }
    let (headers, payload) = answer(&frames[2], &frames[3]);
    let identity = frames.swap_remove(0);
    Some(message([
        identity,
        Bytes::from_static(b"reply"),
        headers,
        payload,
    ]))
}

/// `--raw-hop router`: one task reads the ROUTER and hands each request through a channel of
/// [`HOP`] to a second task, which answers; the task returned ends with the reading one.
fn router_with_a_hop(
    socket: RouterSocket,
    answer: fn(&[u8], &[u8]) -> (Bytes, Bytes),
) -> JoinHandle<()> {
    let (mut send, recv) = socket.split();
    let (mut requests, reader) = hand_on(recv);
    tokio::spawn(async move {
        while let Some(frames) = requests.recv().await {
            let Some(reply) = reply(frames, answer) else {
                continue;
            };
            if send.send(reply).await.is_err() {
                break;
            }
        }
    });
    reader
}

/// The hand-off of `--raw-hop`: a task that reads `recv` and hands each message on through a
/// channel of [`HOP`], until either end is gone.
fn hand_on<R: SocketRecv + Send + 'static>(
    mut recv: R,
) -> (mpsc::Receiver<Vec<Bytes>>, JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(HOP);
    let reader = tokio::spawn(async move {
        while let Ok(message) = recv.recv().await {
            if tx.send(message.into_vec()).await.is_err() {
                break;
            }
        }
    });
    (rx, reader)
}
