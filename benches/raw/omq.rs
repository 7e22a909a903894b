//! Raw omq sockets (`omq-tokio` 0.33), the baseline of the `omq` backend: each socket is read
//! by one tokio task on the bench's runtime, and its actor runs there too, as a service using
//! omq directly would run it. Nothing of the crate is used here. Its options are omq's defaults
//! (queues of 1,000 messages, linger 0: every run closes a sender only once all it sent was
//! read) but where a scenario sets the queue.
//!
//! Its sockets are the bench's `RawPusher`, `RawReader`, `RawPublisher` and `RawAsker`, so that
//! a raw scenario is written once for every client (`throughput/raw_side.rs`, `Stack`).

use std::{ops::Range, sync::Arc, time::Duration};

use omq_tokio::{Message, Options, Socket, SocketType};
use ruststream::Bytes;
use tokio::{sync::mpsc, task::JoinHandle};

use crate::{
    messages::Frames,
    meter::Latencies,
    raw_side::{RawAsker, RawPublisher, RawPusher, RawReader, Work},
};

/// The client the raw rows measure.
pub const CLIENT: &str = "raw omq sockets (`omq-tokio` 0.33), one tokio task each";

/// What `--raw-hop router` and `--raw-hop dealer` give the raw side.
pub const HOP_ROUTER: &str = "the ROUTER's requests handed to a second task";
pub const HOP_DEALER: &str = "the DEALER's answers read by a task of their own";

/// The channel a `--raw-hop` hand-off goes through, as deep as the requests in flight.
const HOP: usize = 64;

/// A socket of `kind` with omq's defaults, `queue` messages a peer where given.
fn socket(kind: SocketType, queue: Option<usize>) -> Socket {
    let mut options = Options::default();
    if let Some(queue) = queue {
        let queue = u32::try_from(queue).expect("a queue omq takes");
        options = options.send_hwm(queue).recv_hwm(queue);
    }
    Socket::new(kind, options)
}

async fn bind(socket: &Socket) -> String {
    socket
        .bind("tcp://127.0.0.1:0")
        .await
        .expect("binds")
        .to_string()
}

async fn send(socket: &Socket, frames: Frames) {
    socket
        .send(Message::multipart(frames))
        .await
        .expect("sends");
}

/// Sends what `make` builds for `ids` through `socket` (a clone of the one `this` holds), from
/// a task of its own; answers `this` once all were handed to it.
fn send_all<T: Send + 'static>(
    this: T,
    socket: Socket,
    ids: Range<u64>,
    make: fn(u64) -> Frames,
) -> JoinHandle<T> {
    tokio::spawn(async move {
        for id in ids {
            send(&socket, make(id)).await;
        }
        this
    })
}

/// The three frames of `[name][headers][payload]`, read in place.
fn three(message: &Message) -> Option<[&[u8]; 3]> {
    (message.len() == 3).then(|| [0, 1, 2].map(|at| message.part_slice(at).unwrap_or_default()))
}

/// A PUSH dialing a bound PULL.
pub struct Pusher(Socket);

impl RawPusher for Pusher {
    async fn dial(address: &str) -> Self {
        let socket = socket(SocketType::Push, None);
        socket.connect(address).await.expect("the PUSH dials");
        Self(socket)
    }

    async fn send(&mut self, frames: Frames) {
        send(&self.0, frames).await;
    }

    fn send_all(self, ids: Range<u64>, make: fn(u64) -> Frames) -> JoinHandle<Self> {
        let socket = self.0.clone();
        send_all(self, socket, ids, make)
    }

    async fn close(self) {
        let _ = self.0.close().await;
    }
}

/// A socket read by one task that hands every message to its work (or, behind a ROUTER with
/// `--raw-hop router`, to a second task that answers).
pub struct Reader {
    address: String,
    socket: Socket,
    tasks: Vec<JoinHandle<()>>,
}

impl Reader {
    /// `socket` read by a task that does `each` with every message until it closes.
    fn spawn(
        socket: Socket,
        address: String,
        mut each: impl FnMut(Message) + Send + 'static,
    ) -> Self {
        let reading = socket.clone();
        let task = tokio::spawn(async move {
            while let Ok(message) = reading.recv().await {
                each(message);
            }
        });
        Self {
            address,
            socket,
            tasks: vec![task],
        }
    }
}

impl RawReader for Reader {
    fn address(&self) -> &str {
        &self.address
    }

    async fn pull(work: Work) -> Self {
        let socket = socket(SocketType::Pull, None);
        let address = bind(&socket).await;
        Self::spawn(socket, address, move |message| {
            if let Some([name, headers, payload]) = three(&message) {
                work(name, headers, payload);
            }
        })
    }

    /// With `--raw-hop router`, the requests are answered by a second task.
    async fn router(answer: fn(&[u8], &[u8]) -> (Bytes, Bytes)) -> Self {
        let socket = socket(SocketType::Router, None);
        let address = bind(&socket).await;
        let tasks = if crate::raw_side::raw_hops().router {
            let (requests, reading) = hand_on(socket.clone());
            let answering = tokio::spawn(answer_all(socket.clone(), requests, answer));
            vec![reading, answering]
        } else {
            let answering = socket.clone();
            vec![tokio::spawn(async move {
                while let Ok(request) = answering.recv().await {
                    if !answer_one(&answering, &request, answer).await {
                        break;
                    }
                }
            })]
        };
        Self {
            address,
            socket,
            tasks,
        }
    }

    async fn sub(address: &str, prefix: &str, work: Work, queue: usize) -> Self {
        let socket = socket(SocketType::Sub, Some(queue));
        socket.connect(address).await.expect("the SUB dials");
        socket
            .subscribe(prefix.to_owned())
            .await
            .expect("the SUB subscribes");
        Self::spawn(socket, address.to_owned(), move |message| {
            if let Some([name, headers, payload]) = three(&message) {
                work(name, headers, payload);
            }
        })
    }

    async fn close(self) {
        // Closing ends every clone's `recv`, and with it the tasks.
        let _ = self.socket.close().await;
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// A bound PUB.
pub struct Publisher(Socket);

impl RawPublisher for Publisher {
    /// Queues up to `queue` messages for each subscriber (its high-water mark).
    async fn bind(queue: usize) -> (Self, String) {
        let socket = socket(SocketType::Pub, Some(queue));
        let address = bind(&socket).await;
        (Self(socket), address)
    }

    async fn send(&mut self, frames: Frames) {
        send(&self.0, frames).await;
    }

    fn send_all(self, ids: Range<u64>, make: fn(u64) -> Frames) -> JoinHandle<Self> {
        let socket = self.0.clone();
        send_all(self, socket, ids, make)
    }

    async fn close(self) {
        let _ = self.0.close().await;
    }
}

/// A DEALER that asks a ROUTER, keeping up to `window` requests in flight from one task; with
/// `--raw-hop dealer` its answers come through a channel of [`HOP`] that a second task fills.
pub struct Asker {
    socket: Socket,
    answers: Option<(mpsc::Receiver<Message>, JoinHandle<()>)>,
}

impl Asker {
    async fn recv(&mut self) -> Message {
        match &mut self.answers {
            None => self.socket.recv().await.expect("an answer"),
            Some((answers, _)) => answers.recv().await.expect("an answer"),
        }
    }
}

impl RawAsker for Asker {
    async fn dial(address: &str) -> Self {
        let socket = socket(SocketType::Dealer, None);
        socket.connect(address).await.expect("the DEALER dials");
        send(&socket, crate::messages::request(u64::MAX)).await;
        socket.recv().await.expect("the first answer");
        if !crate::raw_side::raw_hops().dealer {
            return Self {
                socket,
                answers: None,
            };
        }
        let (answers, reader) = hand_on(socket.clone());
        Self {
            socket,
            answers: Some((answers, reader)),
        }
    }

    /// From a task of its own.
    fn run(mut self, ids: Range<u64>, window: u64) -> JoinHandle<(Self, Arc<Vec<Duration>>)> {
        tokio::spawn(async move {
            let mut latencies = Latencies::new(&ids);
            let mut next = ids.start;
            while !latencies.all() {
                while next < ids.end && latencies.in_flight(next) < window {
                    latencies.sent(next);
                    send(&self.socket, crate::messages::request(next)).await;
                    next += 1;
                }
                let answer = self.recv().await;
                latencies.answered(answer.part_slice(answer.len() - 1).unwrap_or_default());
            }
            (self, latencies.done())
        })
    }

    async fn close(self) {
        let _ = self.socket.close().await;
        if let Some((_, reader)) = self.answers {
            let _ = reader.await;
        }
    }
}

/// The answer to `[identity][name][headers][payload]`: `[identity][reply][headers][payload]`,
/// `answer` making the last two; none for another shape.
fn reply(request: &Message, answer: fn(&[u8], &[u8]) -> (Bytes, Bytes)) -> Option<Message> {
    if request.len() != 4 {
        return None;
    }
    let (headers, payload) = answer(request.part_slice(2)?, request.part_slice(3)?);
    Some(Message::multipart([
        request.part_bytes(0)?,
        Bytes::from_static(b"reply"),
        headers,
        payload,
    ]))
}

/// `--raw-hop router`'s second task: answers each request `requests` hands it, through `socket`.
async fn answer_all(
    socket: Socket,
    mut requests: mpsc::Receiver<Message>,
    answer: fn(&[u8], &[u8]) -> (Bytes, Bytes),
) {
    while let Some(request) = requests.recv().await {
        if !answer_one(&socket, &request, answer).await {
            break;
        }
    }
}

/// Answers `request` through `socket` (a request of another shape goes unanswered); false once
/// the socket is closed.
async fn answer_one(
    socket: &Socket,
    request: &Message,
    answer: fn(&[u8], &[u8]) -> (Bytes, Bytes),
) -> bool {
    match reply(request, answer) {
        Some(reply) => socket.send(reply).await.is_ok(),
        None => true,
    }
}

/// The hand-off of `--raw-hop`: a task that reads `socket` (a clone) and hands each message on
/// through a channel of [`HOP`], until either end is gone.
fn hand_on(socket: Socket) -> (mpsc::Receiver<Message>, JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(HOP);
    let reader = tokio::spawn(async move {
        while let Ok(message) = socket.recv().await {
            if tx.send(message).await.is_err() {
                break;
            }
        }
    });
    (rx, reader)
}
