//! `clients [N]`: short-lived REQ and DEALER requesters of the `zeromq` client, one request
//! each, against the crate's responder on each backend; printed on their own, not in a table.

use std::time::Instant;

use futures::StreamExt;
use ruststream::Bytes;

use crate::{backend::Stack, crate_requests::echo_responder, messages::Job, meter::status_kib};

/// One short-lived requester: a REQ (even `n`) or DEALER socket that dials the responder, asks
/// once, reads its answer and closes. Answers whether the answer carried the request's id.
async fn ask_once(address: &str, n: u64) -> bool {
    use zeromq::{DealerSocket, ReqSocket, Socket, SocketRecv, SocketSend, ZmqMessage};
    let request = |frames: Vec<Vec<u8>>| {
        ZmqMessage::try_from(frames.into_iter().map(Into::into).collect::<Vec<Bytes>>()).unwrap()
    };
    let body = serde_json::to_vec(&Job { id: n }).unwrap();
    let frames = vec![b"echo".to_vec(), Vec::new(), body];
    let answer = if n.is_multiple_of(2) {
        let mut socket = ReqSocket::new();
        socket.connect(address).await.unwrap();
        socket.send(request(frames)).await.unwrap();
        let answer = socket.recv().await.unwrap();
        let _ = socket.close().await;
        answer
    } else {
        let mut socket = DealerSocket::new();
        socket.connect(address).await.unwrap();
        socket.send(request(frames)).await.unwrap();
        let answer = socket.recv().await.unwrap();
        let _ = socket.close().await;
        answer
    };
    let Some(payload) = answer.into_vec().pop() else {
        return false;
    };
    serde_json::from_slice::<Job>(&payload).is_ok_and(|job| job.id == n)
}

/// `clients` short-lived REQ and DEALER requesters, `in_flight` at a time, against one
/// responder on backend `B`: every one is answered, and the responder keeps nothing per
/// requester (its resident set after the first tenth and at the end).
pub async fn short_lived_requesters<B: Stack>(clients: u64, in_flight: usize) {
    let path =
        std::env::temp_dir().join(format!("ruststream-zmq-bench-{}.sock", std::process::id()));
    let (running, address) = echo_responder::<B>(&format!("ipc://{}", path.display())).await;
    let started = Instant::now();
    let mut answered = 0_u64;
    let mut early = None;
    let mut asks = futures::stream::iter(0..clients)
        .map(|n| {
            let address = address.clone();
            async move { ask_once(&address, n).await }
        })
        .buffer_unordered(in_flight);
    while let Some(right) = asks.next().await {
        answered += u64::from(right);
        if answered == clients / 10 {
            early = status_kib("VmRSS:");
        }
    }
    let took = started.elapsed();
    println!(
        "short-lived requesters, responder on `{}`: {clients} REQ and DEALER clients, {in_flight} \
         at a time, {answered} answered rightly in {took:?}; resident set {} KiB after the first \
         tenth, {} KiB at the end",
        B::NAME,
        early.map_or("?".to_owned(), |kib| kib.to_string()),
        status_kib("VmRSS:").map_or("?".to_owned(), |kib| kib.to_string()),
    );
    running.shutdown().await.unwrap();
    let _ = std::fs::remove_file(path);
}
