//! Raw libzmq sockets (through the `zmq` 0.10 binding), the baseline of the `libzmq` backend:
//! each socket is driven by a plain std thread with blocking calls, the fastest way to use
//! libzmq and the fairest "raw" figure (no async runtime between the socket and the work).
//! Nothing of the crate is used here.
//!
//! Its sockets are the bench's `RawPusher`, `RawReader`, `RawPublisher` and `RawAsker`, so that
//! a raw scenario is written once for both clients (`throughput.rs`, `Stack`).

use std::{
    ops::Range,
    sync::{
        Arc, LazyLock,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use ruststream::Bytes;
use tokio::task::JoinHandle;

use crate::{Frames, RawAsker, RawPublisher, RawPusher, RawReader, Work};

/// The client the raw rows measure.
pub const CLIENT: &str = "raw libzmq sockets (`zmq` 0.10), one std thread each, blocking calls";

static CONTEXT: LazyLock<zmq::Context> = LazyLock::new(zmq::Context::new);

fn socket(kind: zmq::SocketType) -> zmq::Socket {
    let socket = CONTEXT.socket(kind).expect("a socket");
    socket.set_linger(0).expect("linger");
    socket
}

fn bind(socket: &zmq::Socket) -> String {
    socket.bind("tcp://127.0.0.1:*").expect("binds");
    socket
        .get_last_endpoint()
        .expect("an endpoint")
        .expect("a UTF-8 endpoint")
}

fn send_frames(socket: &zmq::Socket, frames: &[Bytes]) {
    socket
        .send_multipart(frames.iter().map(|frame| &frame[..]), 0)
        .expect("sends");
}

/// A PUSH dialing a bound PULL.
pub struct Pusher(zmq::Socket);

impl RawPusher for Pusher {
    async fn dial(address: &str) -> Self {
        let socket = socket(zmq::PUSH);
        socket.connect(address).expect("the PUSH dials");
        Self(socket)
    }

    async fn send(&mut self, frames: Frames) {
        let socket = &self.0;
        tokio::task::block_in_place(|| send_frames(socket, &frames));
    }

    /// From a std thread with blocking sends.
    fn send_all(self, ids: Range<u64>, make: fn(u64) -> Frames) -> JoinHandle<Self> {
        tokio::task::spawn_blocking(move || {
            for id in ids {
                send_frames(&self.0, &make(id));
            }
            self
        })
    }

    async fn close(self) {}
}

/// A socket read by one std thread that hands every message to its work.
pub struct Reader {
    address: String,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Reader {
    fn spawn(
        socket: zmq::Socket,
        address: String,
        mut each: impl FnMut(&zmq::Socket, Vec<Vec<u8>>) + Send + 'static,
    ) -> Self {
        socket.set_rcvtimeo(50).expect("a receive timeout");
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match socket.recv_multipart(0) {
                    Ok(frames) => each(&socket, frames),
                    Err(zmq::Error::EAGAIN | zmq::Error::EINTR) => {}
                    Err(_) => break,
                }
            }
        });
        Self {
            address,
            stop,
            thread: Some(thread),
        }
    }
}

impl RawReader for Reader {
    fn address(&self) -> &str {
        &self.address
    }

    async fn pull(work: Work) -> Self {
        let socket = socket(zmq::PULL);
        let address = bind(&socket);
        Self::spawn(socket, address, move |_, frames| {
            if let [name, headers, payload] = frames.as_slice() {
                work(name, headers, payload);
            }
        })
    }

    async fn router(answer: fn(&[u8], &[u8]) -> (Bytes, Bytes)) -> Self {
        let socket = socket(zmq::ROUTER);
        let address = bind(&socket);
        Self::spawn(socket, address, move |socket, frames| {
            if let [identity, _name, headers, payload] = frames.as_slice() {
                let (headers, payload) = answer(headers, payload);
                let _ = socket.send_multipart(
                    [&identity[..], &b"reply"[..], &headers[..], &payload[..]],
                    0,
                );
            }
        })
    }

    /// Queues up to `queue` messages (its high-water mark).
    async fn sub(address: &str, prefix: &str, work: Work, queue: usize) -> Self {
        let socket = socket(zmq::SUB);
        socket
            .set_rcvhwm(i32::try_from(queue).unwrap())
            .expect("a high-water mark");
        socket.connect(address).expect("the SUB dials");
        socket
            .set_subscribe(prefix.as_bytes())
            .expect("the SUB subscribes");
        Self::spawn(socket, address.to_owned(), move |_, frames| {
            if let [name, headers, payload] = frames.as_slice() {
                work(name, headers, payload);
            }
        })
    }

    async fn close(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

/// A bound PUB.
pub struct Publisher(zmq::Socket);

impl RawPublisher for Publisher {
    /// Queues up to `queue` messages for each subscriber (its high-water mark).
    async fn bind(queue: usize) -> (Self, String) {
        let socket = socket(zmq::PUB);
        socket
            .set_sndhwm(i32::try_from(queue).unwrap())
            .expect("a high-water mark");
        let address = bind(&socket);
        (Self(socket), address)
    }

    async fn send(&mut self, frames: Frames) {
        send_frames(&self.0, &frames);
    }

    fn send_all(self, ids: Range<u64>, make: fn(u64) -> Frames) -> JoinHandle<Self> {
        tokio::task::spawn_blocking(move || {
            for id in ids {
                send_frames(&self.0, &make(id));
            }
            self
        })
    }

    async fn close(self) {}
}

/// A DEALER that asks a ROUTER, keeping up to `window` requests in flight from one std thread.
pub struct Asker(zmq::Socket);

impl RawAsker for Asker {
    async fn dial(address: &str) -> Self {
        let socket = socket(zmq::DEALER);
        socket.connect(address).expect("the DEALER dials");
        tokio::task::spawn_blocking(move || {
            send_frames(&socket, &crate::request(u64::MAX));
            socket.recv_multipart(0).expect("the first answer");
            Self(socket)
        })
        .await
        .expect("the DEALER connects")
    }

    /// From a std thread with blocking calls.
    fn run(self, ids: Range<u64>, window: u64) -> JoinHandle<(Self, Arc<Vec<Duration>>)> {
        tokio::task::spawn_blocking(move || {
            let first = ids.start;
            let total = ids.end - ids.start;
            let mut sent_at = vec![None::<Instant>; usize::try_from(total).unwrap()];
            let mut latencies = Vec::with_capacity(sent_at.len());
            let mut next = ids.start;
            while (latencies.len() as u64) < total {
                while next < ids.end && next - first - (latencies.len() as u64) < window {
                    sent_at[usize::try_from(next - first).unwrap()] = Some(Instant::now());
                    send_frames(&self.0, &crate::request(next));
                    next += 1;
                }
                let answer = self.0.recv_multipart(0).expect("an answer");
                let id = crate::answered(&answer[answer.len() - 1]);
                if let Some(at) = sent_at[usize::try_from(id - first).unwrap()].take() {
                    latencies.push(at.elapsed());
                }
            }
            (self, Arc::new(latencies))
        })
    }

    async fn close(self) {}
}
