//! A dead letter aimed at the subscription's own listener under another form of its address is
//! refused at startup, naming both addresses.

use std::convert::Infallible;

use super::prelude::*;
use crate::support::{AppState, free_port, journal, work};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_to_the_loopback_form_of_a_wildcard_listener_is_refused_at_startup_naming_both()
 {
    let port = free_port();
    let listener = format!("tcp://0.0.0.0:{port}");
    let dead_letter = format!("payments.dead@tcp://127.0.0.1:{port}");
    let (calls, _seen) = journal();
    let app = RustStream::new(AppInfo::new("loop-back", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(AppState { calls }))
        .with_broker(ZmqQueue::new(ZmqEndpoint::bind(listener.clone())), |b| {
            b.include(work.name("payments"))
                .max_attempts(std::num::NonZeroU32::new(2).unwrap())
                .dead_letter(dead_letter.clone());
        });
    let err = app
        .start()
        .await
        .expect_err("a dead letter into the own listener started");
    let text = format!("{err:?} {err}");
    assert!(
        text.contains(&listener) && text.contains(&dead_letter),
        "the refusal names both addresses: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_to_another_port_of_the_same_host_starts() {
    let listener = format!("tcp://0.0.0.0:{}", free_port());
    let dead_letter = format!("payments.dead@tcp://127.0.0.1:{}", free_port());
    let (calls, _seen) = journal();
    let running = RustStream::new(AppInfo::new("loop-back", "0.1.0"))
        .on_startup(async move |()| Ok::<_, Infallible>(AppState { calls }))
        .with_broker(ZmqQueue::new(ZmqEndpoint::bind(listener)), |b| {
            b.include(work.name("payments"))
                .max_attempts(std::num::NonZeroU32::new(2).unwrap())
                .dead_letter(dead_letter);
        })
        .start()
        .await
        .expect("a dead letter to another port starts");
    running.shutdown().await.unwrap();
}
