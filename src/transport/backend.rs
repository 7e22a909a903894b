//! The contract a socket backend meets: the three sockets it provides, what each can do, the
//! options it opens them with, and the types they all speak in. It imports nothing of the
//! transport but what sockets read ([`reading_end`](super::reading_end)); each backend
//! implements it once, and the transport above picks among them.

use std::{pin::Pin, sync::Arc, time::Duration};

use futures::future::BoxFuture;
use tokio::{
    sync::{mpsc, oneshot, watch},
    time::Instant,
};

use super::reading_end::{ReadingEnd, Received};
use crate::{
    error::{SendFailure, SocketFault, ZmqError},
    monitor::{Flush, ZmqMonitor},
    pattern::Role,
    settings::Settings,
    wire::Frames,
};

/// How long closing a socket, or ending a socket's task, may take.
pub(crate) const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// A task a socket runs.
pub(crate) type BoxTask = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A socket backend: the sockets a broker opens, and how its settings reach them.
pub(crate) trait SocketBackend: Send + Sync + 'static {
    /// The backend's name, as the logs say it.
    const NAME: &'static str;
    /// Whether a bound socket listens on the network (the in-process bus does not).
    const NETWORK: bool = true;
    /// What only this backend's brokers set (libzmq: its socket options and CURVE).
    type Config: Clone + Default + Send + Sync + 'static;
    /// What the backend opens every socket with, from the broker's settings and its own.
    type Options: Clone + Send + Sync + 'static;
    /// A socket that receives (PULL, SUB).
    type ReadSocket: ReadSocket<Options = Self::Options>;
    /// A socket that sends (PUSH, PUB).
    type WriteSocket: WriteSocket<Options = Self::Options>;
    /// A socket that sends and receives (ROUTER, DEALER).
    type DuplexSocket: DuplexSocket<Options = Self::Options>;

    /// The options a broker with `settings` and `config` opens its sockets with.
    fn options(settings: &Settings, config: Self::Config) -> Self::Options;

    /// Whether sockets opened with `options` speak CURVE; a backend without it never does.
    fn curve(options: &Self::Options) -> bool {
        let _ = options;
        false
    }
}

/// What every socket is opened with: its role, its address, where its figures go, and the
/// backend's options.
pub(crate) struct Opening<O> {
    pub(crate) role: Role,
    pub(crate) address: String,
    pub(crate) monitor: ZmqMonitor,
    pub(crate) options: O,
}

/// A socket that receives: bound once, or dialing and reconnecting whenever its peer goes away.
pub(crate) trait ReadSocket: Sized + Send + 'static {
    /// What the socket is opened with.
    type Options;

    /// Binds the address; answers the socket and the address it really listens on (port 0
    /// resolved). A SUB subscribes to `topics`.
    fn bind(
        at: Opening<Self::Options>,
        topics: Vec<String>,
    ) -> impl Future<Output = Result<(Self, String), ZmqError>> + Send;

    /// A socket that dials the address, connecting in the background or on its first read, so
    /// a peer that is not up yet does not hold up startup.
    fn dial(
        at: Opening<Self::Options>,
        topics: Vec<String>,
    ) -> impl Future<Output = Result<Self, ZmqError>> + Send;

    /// The next message; a dialing socket also keeps its connection.
    fn recv(&mut self) -> impl Future<Output = Received> + Send;

    /// Closes the socket and all its connections.
    fn close(self) -> impl Future<Output = ()> + Send;

    /// Hands the socket to the subscription, to read in its own task, where the backend allows
    /// it: its reading end, and a task that keeps its peers and closes it, ending at `shutdown`
    /// or once `subscriber` is gone. A backend whose sockets are read by their own tasks keeps
    /// them.
    fn hand_over(
        self,
        subscriber: mpsc::Sender<Received>,
        shutdown: watch::Receiver<bool>,
    ) -> HandOver<Self> {
        let _ = (subscriber, shutdown);
        HandOver::Kept(self)
    }
}

/// A socket that sends, owned by one writer's task.
pub(crate) trait WriteSocket: Sized + Send + 'static {
    /// What the socket is opened with.
    type Options;
    /// Whether the socket learns of lost peers only when asked ([`look`](Self::look)); a
    /// backend that watches its sockets by itself needs no asking.
    const LOOKS: bool = false;

    /// Binds the address; answers the socket and the address it really listens on.
    fn bind(
        at: Opening<Self::Options>,
    ) -> impl Future<Output = Result<(Self, String), ZmqError>> + Send;

    /// A socket that dials the address; it connects in the background or on its first send.
    fn dial(at: Opening<Self::Options>) -> impl Future<Output = Result<Self, ZmqError>> + Send;

    /// Sends one message, waiting until `deadline` for a peer with room; then fails, naming the
    /// endpoint and why.
    fn send(
        &mut self,
        frames: Frames,
        deadline: Instant,
    ) -> impl Future<Output = Result<(), ZmqError>> + Send;

    /// Waits until the socket has a peer again.
    fn reach(&mut self) -> impl Future<Output = ()> + Send;

    /// Takes in what the socket's monitor reported since the last look; called only where
    /// [`LOOKS`](Self::LOOKS).
    fn look(&mut self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Closes the socket and all its connections, once what it queued left, for at most
    /// `linger`: answers whether it all did.
    fn close(self, linger: Duration) -> impl Future<Output = Flush> + Send;
}

/// A socket that both sends and receives (ROUTER, DEALER), run by a task of its own so that a
/// reply can leave while requests wait to be handled. The task's loop is the same for every
/// backend (`transport::duplex::run`); a backend drives its socket through it.
pub(crate) trait DuplexSocket: Sized + Send + 'static {
    /// What the socket is opened with.
    type Options;
    /// What the socket's task drives.
    type Driver: DuplexDriver;

    /// Binds the address; answers the socket and the address it really listens on.
    fn bind(
        at: Opening<Self::Options>,
    ) -> impl Future<Output = Result<(Self, String), ZmqError>> + Send;

    /// A socket that dials the address, connecting in its task.
    fn dial(at: Opening<Self::Options>) -> impl Future<Output = Result<Self, ZmqError>> + Send;

    /// Readies the socket for its task: what the task drives, the sends that skip the task, and
    /// the socket's reading end where the backend lets the subscription read it itself (asked
    /// only with `reads_itself`, when what the socket reads goes into a channel).
    fn drive(self, reads_itself: bool) -> Driving<Self::Driver>;
}

/// A duplex socket readied for its task ([`DuplexSocket::drive`]).
pub(crate) struct Driving<D> {
    /// What the task drives.
    pub(crate) driver: D,
    /// The endpoint, as errors name it.
    pub(crate) endpoint: String,
    /// Sends that leave from the tasks that send them, where the socket can be shared.
    pub(crate) direct: Option<Arc<dyn DirectSend>>,
    /// The socket's reading end, when the subscription reads it itself; the task then only
    /// keeps the socket's peers and sends.
    pub(crate) reader: Option<ReadingEnd>,
}

/// A duplex socket as its task drives it, one event at a time.
pub(crate) trait DuplexDriver: Send + 'static {
    /// Readies the socket for the next event: a dialing socket that lost its peer connects
    /// again here, the task waiting for nothing else but shutdown.
    fn ready(&mut self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Whether the socket takes a send now; one that holds a send until there is room takes
    /// no other meanwhile.
    fn takes_sends(&self) -> bool {
        true
    }

    /// Sends a message handed to the task, whose deadline has not passed, and settles it; or
    /// holds it until there is room, settling it by its deadline.
    fn take(&mut self, send: HandedSend) -> impl Future<Output = ()> + Send;

    /// Waits for the socket's next event: a message read (only with `read`), room for a send it
    /// holds, a peer that came or went. Answers the message read, if that was the event.
    fn next(&mut self, read: bool) -> impl Future<Output = Option<Received>> + Send;

    /// A message the socket already holds, read without waiting.
    fn read_queued(&mut self) -> Option<Received> {
        None
    }

    /// Closes the socket once what it queued left, for at most `linger`; a send it still holds
    /// fails.
    fn close(self, linger: Duration) -> impl Future<Output = Flush> + Send;
}

/// A client's error, as the crate's errors carry it.
pub(crate) fn fault(err: impl std::error::Error + Send + Sync + 'static) -> SocketFault {
    Box::new(err)
}

/// What a send to `endpoint` that the client refused fails with: [`ZmqError::UnknownPeer`]
/// where the backend says the client refused a ROUTER's answer to an identity that is gone,
/// else the client's own error.
pub(crate) fn refused_send(
    endpoint: &str,
    err: impl std::error::Error + Send + Sync + 'static,
    unknown_peer: bool,
) -> ZmqError {
    if unknown_peer {
        ZmqError::UnknownPeer {
            endpoint: endpoint.to_owned(),
        }
    } else {
        ZmqError::Send {
            endpoint: endpoint.to_owned(),
            source: SendFailure::Client(fault(err)),
        }
    }
}

/// Why a send handed to a socket's task failed without being tried: its deadline passed while
/// it waited for its turn.
pub(crate) fn late_for_its_turn(endpoint: &str) -> ZmqError {
    ZmqError::Send {
        endpoint: endpoint.to_owned(),
        source: SendFailure::Late("its deadline passed before its turn came".to_owned()),
    }
}

/// What a send fails with once the socket is closed.
pub(crate) fn socket_gone() -> ZmqError {
    ZmqError::ShutDown { what: "a socket" }
}

/// Resolves once the broker's shutdown switch is on, or the broker is gone.
pub(crate) async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    // The guard `wait_for` answers is not `Send`: drop it here, not across the caller's awaits.
    let _ = shutdown.wait_for(|down| *down).await;
}

/// How handing a reader over to its subscription went.
pub(crate) enum HandOver<R> {
    /// The subscription reads the socket through this end; the task keeps its peers and closes
    /// it.
    Handed(ReadingEnd, BoxTask),
    /// The backend keeps the socket to a reader task.
    Kept(R),
}

/// Where the outcome of one send goes.
pub(crate) enum Done {
    /// To a caller waiting for it.
    Tell(oneshot::Sender<Result<(), ZmqError>>),
    /// To a function called in the socket's task, which must not wait: a request hands a
    /// failure to the wait for its answer, so the caller wakes once, for the answer or the error.
    Call(Box<dyn FnOnce(Result<(), ZmqError>) + Send>),
}

impl Done {
    /// Reports the outcome; a caller that stopped waiting misses nothing it still needs.
    pub(crate) fn settle(self, outcome: Result<(), ZmqError>) {
        match self {
            Self::Tell(caller) => {
                let _ = caller.send(outcome);
            }
            Self::Call(call) => call(outcome),
        }
    }
}

/// A send handed to a duplex socket's task, its deadline, and where its outcome goes.
pub(crate) type HandedSend = (Frames, Instant, Done);

/// A send that needs no socket task: a backend whose socket can send from any task offers one
/// (a bound ROUTER and a dialing DEALER of the `zeromq` client, every ROUTER and DEALER of
/// libzmq), and a message then leaves from the sender's own task, with no wake-up of the
/// socket's task and none back.
pub(crate) trait DirectSend: Send + Sync {
    /// Sends one message, or answers it back when only the socket's task can send it.
    fn send(&self, frames: Frames) -> Direct;
}

/// How a [`DirectSend`] went.
pub(crate) enum Direct {
    /// It left, or failed for good.
    Now(Result<(), ZmqError>),
    /// It is under way (a client whose sends are futures), and ends in one of the other two:
    /// a DEALER whose peer went away hands it to its task, which reconnects. The caller bounds
    /// the wait.
    #[cfg_attr(
        not(feature = "zeromq"),
        expect(
            dead_code,
            reason = "only the zeromq client's sends are futures; libzmq's leave or answer back"
        )
    )]
    Later(BoxFuture<'static, Direct>),
    /// The socket's task sends it: the socket has no room now, and that task waits for room.
    ToTask(Frames),
}
