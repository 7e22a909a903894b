//! Type-level facts of the queue, pinned at compile time: which subscriptions address their own
//! retry copies and which need the mount site to name a place, what a dialing builder is before
//! and after `out_retry`, and which handles cross threads. A change that breaks one fails
//! `cargo build`, before any test runs.
//!
//! That a bound builder has no `out_retry` step is not a fact a trait can state; the compile-fail
//! case `ui-tests/out_retry_on_a_bound_builder.rs` pins it.
//!
//! The fan-out's and the responder's facts belong here beside the queue's, in the same form, once
//! those patterns settle.

use ruststream::{
    AddressedCopies, NamedCopies, RedeliveryAddressed, Subscribe, SubscriptionSource,
};
use static_assertions::{assert_impl_all, assert_not_impl_any, assert_type_eq_all};

use crate::{
    Bound, ConnectedZmqQueue, Dialing, QueueSubscription, Ready, Side, WantsRetryDestination,
    ZmqEndpoint, ZmqMessage, ZmqMonitor, ZmqPublisher, ZmqQueue, ZmqSubscriber,
};

// Where a queue subscription's copies go, as the broker declares it: a bound subscription's name
// is its address (its own listener); a dialing one reads from a peer that only sends.
assert_type_eq_all!(<Bound as Side>::Copies, AddressedCopies);
assert_type_eq_all!(<Dialing as Side>::Copies, NamedCopies);
assert_type_eq_all!(
    <ConnectedZmqQueue<Bound> as Subscribe>::Copies,
    AddressedCopies
);
assert_type_eq_all!(
    <ConnectedZmqQueue<Dialing> as Subscribe>::Copies,
    NamedCopies
);

// The state a builder starts in: complete on a bound endpoint, wanting a retry destination on a
// dialing one.
assert_type_eq_all!(QueueSubscription<Bound>, QueueSubscription<Bound, Ready>);
assert_type_eq_all!(
    QueueSubscription<Dialing>,
    QueueSubscription<Dialing, WantsRetryDestination>
);

// A complete builder is a subscription whose copies are addressed: to its own listener on a bound
// endpoint, to the place `out_retry` named on a dialing one.
assert_impl_all!(
    QueueSubscription<Bound, Ready>: SubscriptionSource<ConnectedZmqQueue<Bound>>,
    RedeliveryAddressed<ConnectedZmqQueue<Bound>>
);
assert_impl_all!(
    QueueSubscription<Dialing, Ready>: SubscriptionSource<ConnectedZmqQueue<Dialing>>,
    RedeliveryAddressed<ConnectedZmqQueue<Dialing>>
);
assert_type_eq_all!(
    <QueueSubscription<Bound, Ready> as SubscriptionSource<ConnectedZmqQueue<Bound>>>::Copies,
    AddressedCopies
);
assert_type_eq_all!(
    <QueueSubscription<Dialing, Ready> as SubscriptionSource<ConnectedZmqQueue<Dialing>>>::Copies,
    AddressedCopies
);

// A dialing builder that has not been told where its copies go is no subscription at all, and
// has no address to give the runtime.
assert_not_impl_any!(
    QueueSubscription<Dialing, WantsRetryDestination>: SubscriptionSource<ConnectedZmqQueue<Dialing>>,
    RedeliveryAddressed<ConnectedZmqQueue<Dialing>>
);

// A builder of one side does not mount on a broker of the other.
assert_not_impl_any!(
    QueueSubscription<Bound, Ready>: SubscriptionSource<ConnectedZmqQueue<Dialing>>
);
assert_not_impl_any!(
    QueueSubscription<Dialing, Ready>: SubscriptionSource<ConnectedZmqQueue<Bound>>
);

// What crosses threads: the brokers, their connected forms and handles, the publisher, a
// delivery, the endpoint and the builders are shared; a subscriber is moved into its task.
assert_impl_all!(ZmqQueue<Bound>: Send, Sync);
assert_impl_all!(ZmqQueue<Dialing>: Send, Sync);
assert_impl_all!(ConnectedZmqQueue<Bound>: Send, Sync);
assert_impl_all!(ConnectedZmqQueue<Dialing>: Send, Sync);
assert_impl_all!(ZmqPublisher: Send, Sync, Clone);
assert_impl_all!(ZmqMessage: Send, Sync);
assert_impl_all!(ZmqMonitor: Send, Sync, Clone);
assert_impl_all!(ZmqEndpoint<Bound>: Send, Sync);
assert_impl_all!(ZmqEndpoint<Dialing>: Send, Sync);
assert_impl_all!(QueueSubscription<Bound, Ready>: Send, Sync);
assert_impl_all!(QueueSubscription<Dialing, WantsRetryDestination>: Send, Sync);
assert_impl_all!(QueueSubscription<Dialing, Ready>: Send, Sync);
assert_impl_all!(ZmqSubscriber: Send);
