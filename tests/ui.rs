//! Compile-fail examples: what a user who forgets or repeats a step of the retry destination sees.
//!
//! Each case in `ui-tests/` is a small program a user could write, with the error it gets in the
//! `.stderr` beside it (regenerate with `TRYBUILD=overwrite cargo test --test ui`, then read them):
//!
//! - `dialing_builder_mounted_without_out_retry`: a `QueueSubscription::<Dialing>` mounted before
//!   `.out_retry(..)`;
//! - `out_retry_on_a_bound_builder`: `.out_retry(..)` on a bound subscription, which has no such
//!   step;
//! - `out_retry_twice`: a second `.out_retry(..)`;
//! - `typed_dialing_subscriber_in_a_router_without_out_retry`: a
//!   `#[subscriber(QueueSubscription::<Dialing>)]` handler in a `Router` chain without
//!   `.out_retry(..)`;
//! - `framework_out_retry_without_to_on_a_dialing_queue`: the framework's `.out_retry(Publish)`
//!   without `.to(..)` on a dialing by-name registration in a `Router` chain;
//! - `dialing_fanout_mounted_without_out_retry`: a `FanoutSubscription::<Dialing>` mounted
//!   before `.out_retry(..)`;
//! - `responder_mounted_without_out_retry`: a `Responder` (bound, even) mounted before
//!   `.out_retry(..)`, whose error names `.out_retry(..)` (as the dialing builders' do);
//! - `publisher_before_connect`: a publisher asked of a broker that has not connected;
//! - `connected_broker_used_after_shutdown`: the connected form used after `shutdown` consumed it.
//!
//! With both backends compiled, `ui-tests/backends/` holds what does not compile across them:
//!
//! - `libzmq_settings_on_zeromq`: a libzmq-only setting (`heartbeat`) on a `zeromq` broker;
//! - `curve_on_zeromq`: a CURVE endpoint given to a `zeromq` broker;
//! - `curve_on_the_crate_roots_queue`: a CURVE endpoint given to the crate root's `ZmqQueue`
//!   (the default backend's), whose error names `libzmq::ZmqQueue` and `omq::ZmqQueue`.
//!
//! With libzmq compiled, `ui-tests/curve/` holds the CURVE steps taken wrong:
//!
//! - `curve_server_without_a_client_decision`: a bound CURVE endpoint given to a broker before it
//!   says who may connect (`allow_clients(keys)` or `allow_any_client()`);
//! - `allow_clients_without_curve`: an allow-list on an endpoint without CURVE;
//! - `allow_clients_after_the_decision`: an allow-list on an endpoint (a clone) that already said
//!   who may connect;
//! - `destination_in_clear`: a destination given to a broker without CURVE keys.

#[test]
fn misuses_of_the_retry_destination_do_not_compile() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("ui-tests/*.rs");
    if cfg!(all(feature = "zeromq", feature = "libzmq")) {
        cases.compile_fail("ui-tests/backends/*.rs");
    }
    if cfg!(feature = "libzmq") {
        cases.compile_fail("ui-tests/curve/*.rs");
    }
}
