//! Misuse: using a connected broker after `shutdown`, which consumes it. (A publisher or a clone
//! taken before is a runtime matter: it answers `ZmqError::ShutDown`.)

use ruststream::{Broker, ConnectedBroker};
use ruststream_zmq::prelude::*;

async fn run() -> Result<(), ZmqError> {
    let connected = ZmqQueue::new(ZmqEndpoint::dial("tcp://127.0.0.1:5555")).connect().await?;
    connected.shutdown().await?;
    let _publisher = connected.publisher();
    Ok(())
}

fn main() {
    let _ = run;
}
