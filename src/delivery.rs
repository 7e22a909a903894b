//! The subscribers a subscription hands the framework: one at a time or in batches, and a
//! responder's requests one at a time.

use std::time::Duration;

use futures::Stream;
use ruststream::{BatchSubscriber, BufferedSubscriber, Subscriber};

use crate::{error::ZmqError, intake::Inbox, message::ZmqMessage};

/// The deliveries of one subscription, one at a time or in batches.
pub struct ZmqSubscriber {
    buffered: BufferedSubscriber<Inbox>,
}

impl ZmqSubscriber {
    pub(crate) fn new(inbox: Inbox, max_wait: Duration) -> Self {
        Self {
            buffered: BufferedSubscriber::new(inbox).max_wait(max_wait),
        }
    }
}

impl Subscriber for ZmqSubscriber {
    type Message = ZmqMessage;
    type Error = ZmqError;

    fn stream(&mut self) -> impl Stream<Item = Result<ZmqMessage, ZmqError>> + Send + '_ {
        self.buffered.stream()
    }
}

impl BatchSubscriber for ZmqSubscriber {
    type Batch = Vec<ZmqMessage>;

    fn batches(
        &mut self,
        size: std::num::NonZeroUsize,
    ) -> impl Stream<Item = Result<Vec<ZmqMessage>, ZmqError>> + Send + '_ {
        self.buffered.batches(size)
    }
}

/// The requests of one responder, one at a time.
///
/// It offers no batches: a ROUTER answers each peer at its own address, and the replies of a
/// batch would share one context.
pub struct ZmqResponderSubscriber {
    inbox: Inbox,
}

impl ZmqResponderSubscriber {
    pub(crate) fn new(inbox: Inbox) -> Self {
        Self { inbox }
    }
}

impl Subscriber for ZmqResponderSubscriber {
    type Message = ZmqMessage;
    type Error = ZmqError;

    fn stream(&mut self) -> impl Stream<Item = Result<ZmqMessage, ZmqError>> + Send + '_ {
        self.inbox.stream()
    }
}
