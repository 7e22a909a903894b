//! A TCP relay between a peer and a service, keeping every byte that crosses it: to show what
//! travels on the wire (in clear or not, which ZMTP commands).

#![allow(
    dead_code,
    reason = "each test binary reads the wire through some of these"
)]

use std::sync::{Arc, Mutex, PoisonError};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{
        TcpListener, TcpStream,
        tcp::{OwnedReadHalf, OwnedWriteHalf},
    },
};

/// What crossed one connection of the relay, each way.
#[derive(Debug, Clone, Default)]
pub struct Crossed {
    /// What the dialing peer sent toward the target.
    pub to_target: Vec<u8>,
    /// What the target sent back.
    pub from_target: Vec<u8>,
}

/// A relay listening on loopback, passing each connection on to its target.
pub struct Relay {
    /// The address to dial instead of the target (`tcp://127.0.0.1:<port>`).
    pub address: String,
    connections: Arc<Mutex<Vec<Arc<Mutex<Crossed>>>>>,
}

impl Relay {
    /// A relay to `target` (`tcp://host:port` or `host:port`). A connection the target refuses
    /// is closed at once.
    pub async fn to(target: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let address = format!("tcp://{}", listener.local_addr().expect("its address"));
        let target = target.trim_start_matches("tcp://").to_owned();
        let connections = Arc::new(Mutex::new(Vec::new()));
        let accepted = Arc::clone(&connections);
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let Ok(outbound) = TcpStream::connect(&target).await else {
                    continue;
                };
                let crossed = Arc::new(Mutex::new(Crossed::default()));
                accepted
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(Arc::clone(&crossed));
                let (from_peer, to_peer) = inbound.into_split();
                let (from_target, to_target) = outbound.into_split();
                tokio::spawn(pass_on(from_peer, to_target, Arc::clone(&crossed), true));
                tokio::spawn(pass_on(from_target, to_peer, crossed, false));
            }
        });
        Self {
            address,
            connections,
        }
    }

    /// What crossed each connection so far, in the order the relay accepted them.
    pub fn connections(&self) -> Vec<Crossed> {
        self.connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|crossed| {
                crossed
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone()
            })
            .collect()
    }

    /// Whether `text` crossed the relay in clear, either way on any connection, and how many
    /// bytes crossed in all.
    pub fn saw(&self, text: &str) -> (bool, usize) {
        let mut found = false;
        let mut crossed = 0;
        for connection in self.connections() {
            for bytes in [connection.to_target, connection.from_target] {
                found |= bytes
                    .windows(text.len())
                    .any(|window| window == text.as_bytes());
                crossed += bytes.len();
            }
        }
        (found, crossed)
    }
}

async fn pass_on(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    crossed: Arc<Mutex<Crossed>>,
    toward_target: bool,
) {
    let mut buffer = vec![0; 1 << 16];
    while let Ok(n @ 1..) = from.read(&mut buffer).await {
        // Kept before it is passed on: once the far side has it, the relay has seen it.
        {
            let mut crossed = crossed.lock().unwrap_or_else(PoisonError::into_inner);
            let kept = if toward_target {
                &mut crossed.to_target
            } else {
                &mut crossed.from_target
            };
            kept.extend_from_slice(&buffer[..n]);
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            break;
        }
    }
}
