//! Raw libzmq sockets (through the `zmq` 0.9 binding), the baseline of the `libzmq` backend:
//! each socket is driven by a plain std thread with blocking calls, the fastest way to use
//! libzmq and the fairest "raw" figure (no async runtime between the socket and the work).
//! Nothing of the crate is used here.
//!
//! Its sockets are the bench's `RawPusher`, `RawReader`, `RawPublisher` and `RawAsker`, so that
//! a raw scenario is written once for both clients (`throughput/raw_side.rs`, `Stack`).

use std::{
    io::{Read, Write},
    ops::Range,
    os::{fd::AsRawFd, unix::net::UnixStream},
    sync::{
        Arc, LazyLock,
        atomic::{AtomicBool, AtomicUsize, Ordering},
        mpsc as std_mpsc,
    },
    thread,
    time::Duration,
};

use ruststream::Bytes;
use tokio::{sync::mpsc, task::JoinHandle};

use crate::{
    messages::Frames,
    meter::Latencies,
    raw_side::{RawAsker, RawPublisher, RawPusher, RawReader, Work},
};

/// The client the raw rows measure.
pub const CLIENT: &str = "raw libzmq sockets (`zmq` 0.9), one std thread each, blocking calls";

/// What `--raw-hop router` and `--raw-hop dealer` give the raw side: the thread-per-socket
/// design a backend could take ([`SocketThread`]).
pub const HOP_ROUTER: &str =
    "the ROUTER's requests answered by a task, through its thread and a wake-up pipe";
pub const HOP_DEALER: &str =
    "the DEALER asked and read by a task, through its thread and a wake-up pipe";

/// The channel a `--raw-hop` thread hands what it reads through, as deep as the requests in
/// flight.
const HOP: usize = 64;

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
    /// With `--raw-hop router`: the task that answers.
    answering: Option<JoinHandle<()>>,
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
            answering: None,
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

    /// With `--raw-hop router`, the requests are answered by a task ([`SocketThread`]).
    async fn router(answer: fn(&[u8], &[u8]) -> (Bytes, Bytes)) -> Self {
        let socket = socket(zmq::ROUTER);
        let address = bind(&socket);
        if crate::raw_side::raw_hops().router {
            return router_with_a_hop(socket, address, answer);
        }
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
        if let Some(answering) = self.answering.take() {
            answering.abort();
        }
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

/// A DEALER that asks a ROUTER, keeping up to `window` requests in flight: from one std thread,
/// or with `--raw-hop dealer` from a task, through the socket's thread ([`SocketThread`]).
pub enum Asker {
    Blocking(zmq::Socket),
    Threaded(SocketThread, mpsc::Receiver<Vec<Vec<u8>>>),
}

impl RawAsker for Asker {
    async fn dial(address: &str) -> Self {
        let socket = socket(zmq::DEALER);
        socket.connect(address).expect("the DEALER dials");
        let socket = tokio::task::spawn_blocking(move || {
            send_frames(&socket, &crate::messages::request(u64::MAX));
            socket.recv_multipart(0).expect("the first answer");
            socket
        })
        .await
        .expect("the DEALER connects");
        if !crate::raw_side::raw_hops().dealer {
            return Self::Blocking(socket);
        }
        let (thread, answers) = SocketThread::start(socket);
        Self::Threaded(thread, answers)
    }

    fn run(self, ids: Range<u64>, window: u64) -> JoinHandle<(Self, Arc<Vec<Duration>>)> {
        match self {
            Self::Blocking(socket) => tokio::task::spawn_blocking(move || {
                let latencies = ask(
                    ids,
                    window,
                    |frames| send_frames(&socket, &frames),
                    || socket.recv_multipart(0).expect("an answer"),
                );
                (Self::Blocking(socket), latencies)
            }),
            Self::Threaded(thread, mut answers) => tokio::spawn(async move {
                let mut latencies = Latencies::new(&ids);
                let mut next = ids.start;
                while !latencies.all() {
                    while next < ids.end && latencies.in_flight(next) < window {
                        latencies.sent(next);
                        thread.send(crate::messages::request(next).to_vec());
                        next += 1;
                    }
                    let answer = answers.recv().await.expect("an answer");
                    latencies.answered(&answer[answer.len() - 1]);
                }
                (Self::Threaded(thread, answers), latencies.done())
            }),
        }
    }

    async fn close(self) {
        if let Self::Threaded(thread, _) = self {
            thread.stop().await;
        }
    }
}

/// Asks `ids`, `window` at a time, with blocking calls; answers each request's round trip.
fn ask(
    ids: Range<u64>,
    window: u64,
    send: impl Fn(Frames),
    recv: impl Fn() -> Vec<Vec<u8>>,
) -> Arc<Vec<Duration>> {
    let mut latencies = Latencies::new(&ids);
    let mut next = ids.start;
    while !latencies.all() {
        while next < ids.end && latencies.in_flight(next) < window {
            latencies.sent(next);
            send(crate::messages::request(next));
            next += 1;
        }
        let answer = recv();
        latencies.answered(&answer[answer.len() - 1]);
    }
    latencies.done()
}

/// `--raw-hop router`: the ROUTER's thread hands each request to a task, which answers through
/// the thread.
fn router_with_a_hop(
    socket: zmq::Socket,
    address: String,
    answer: fn(&[u8], &[u8]) -> (Bytes, Bytes),
) -> Reader {
    let (thread, mut requests) = SocketThread::start(socket);
    let stop = Arc::clone(&thread.shared.stop);
    let answering = tokio::spawn(async move {
        while let Some(frames) = requests.recv().await {
            if let [identity, _name, headers, payload] = frames.as_slice() {
                let (headers, payload) = answer(headers, payload);
                thread.send(vec![
                    Bytes::copy_from_slice(identity),
                    Bytes::from_static(b"reply"),
                    headers,
                    payload,
                ]);
            }
        }
        thread.stop().await;
    });
    Reader {
        address,
        stop,
        thread: None,
        answering: Some(answering),
    }
}

/// The thread-per-socket design, at its least: one std thread owns the socket and blocks in
/// `zmq_poll` on it and on a wake-up pipe; tasks hand it what to send through a queue, waking it
/// only while it sleeps, and take what it reads from a channel of [`HOP`]. No `ZMQ_EVENTS`
/// query after each send, and one wake-up for as many messages as wait.
pub struct SocketThread {
    outbox: std_mpsc::Sender<Vec<Bytes>>,
    wake: UnixStream,
    shared: Arc<ThreadShared>,
    thread: Option<thread::JoinHandle<()>>,
}

struct ThreadShared {
    /// Messages handed to the thread and not yet taken from its queue.
    queued: AtomicUsize,
    /// Whether the thread is, or is about to be, blocked in `zmq_poll`.
    sleeping: AtomicBool,
    stop: Arc<AtomicBool>,
}

impl SocketThread {
    fn start(socket: zmq::Socket) -> (Self, mpsc::Receiver<Vec<Vec<u8>>>) {
        let (outbox, queue) = std_mpsc::channel();
        let (wake, woken) = UnixStream::pair().expect("a wake-up pipe");
        woken.set_nonblocking(true).expect("a non-blocking pipe");
        let (read, reads) = mpsc::channel(HOP);
        let shared = Arc::new(ThreadShared {
            queued: AtomicUsize::new(0),
            sleeping: AtomicBool::new(false),
            stop: Arc::new(AtomicBool::new(false)),
        });
        let driving = Arc::clone(&shared);
        let thread = thread::spawn(move || drive(&socket, &queue, &woken, &read, &driving));
        let this = Self {
            outbox,
            wake,
            shared,
            thread: Some(thread),
        };
        (this, reads)
    }

    fn send(&self, frames: Vec<Bytes>) {
        self.shared.queued.fetch_add(1, Ordering::SeqCst);
        self.outbox.send(frames).expect("the socket's thread runs");
        if self.shared.sleeping.swap(false, Ordering::SeqCst) {
            let _ = (&self.wake).write(&[1]);
        }
    }

    async fn stop(mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _ = (&self.wake).write(&[1]);
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

/// The socket's thread: sends what is queued, hands on what is waiting, then sleeps until the
/// socket or the pipe wakes it.
fn drive(
    socket: &zmq::Socket,
    queue: &std_mpsc::Receiver<Vec<Bytes>>,
    woken: &UnixStream,
    read: &mpsc::Sender<Vec<Vec<u8>>>,
    shared: &ThreadShared,
) {
    let mut drained = [0_u8; 64];
    while !shared.stop.load(Ordering::SeqCst) {
        while let Ok(frames) = queue.try_recv() {
            shared.queued.fetch_sub(1, Ordering::SeqCst);
            send_frames(socket, &frames);
        }
        let mut any = false;
        loop {
            match socket.recv_multipart(zmq::DONTWAIT) {
                Ok(frames) => {
                    if read.blocking_send(frames).is_err() {
                        return;
                    }
                    any = true;
                }
                Err(zmq::Error::EINTR) => {}
                Err(zmq::Error::EAGAIN) => break,
                Err(_) => return,
            }
        }
        if any {
            continue;
        }
        shared.sleeping.store(true, Ordering::SeqCst);
        if shared.queued.load(Ordering::SeqCst) == 0 {
            let mut items = [
                socket.as_poll_item(zmq::POLLIN),
                zmq::PollItem::from_fd(woken.as_raw_fd(), zmq::POLLIN),
            ];
            let _ = zmq::poll(&mut items, 50);
        }
        shared.sleeping.store(false, Ordering::SeqCst);
        while matches!((&*woken).read(&mut drained), Ok(n) if n > 0) {}
    }
}
