//! A hook that panics inside a shared (coalesced) execution: the panic reaches the
//! caller whose poll ran the hook, every other caller of that execution is told at
//! once (it panics too, rather than waiting for an answer that cannot come), and the
//! client keeps working: the next identical call starts a fresh execution.
//!
//! The last test runs on two worker threads and the real clock: it needs a caller
//! that joins the execution while another caller, on another thread, is inside the
//! hook. Flags order the two exactly; the real clock only bounds how long it waits.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, resilient_api};
use tests::{Clock, assert_follow_up_succeeds, ms, scripted_builder};

/// A coalesced read retried once, 20 ms after a 503.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [503])
)]
pub trait Retried {
    #[get("/config")]
    #[coalesce]
    async fn config(&self) -> Result<String, ApiError>;
}

/// Regression: two callers share an execution whose retry's middleware panics at
/// t=20. The caller whose poll ran it unwound through its hold on the execution,
/// whose drop asked the (now poisoned) execution for its output and panicked again:
/// a panic during a panic, and the whole process aborted.
#[tokio::test(start_paused = true)]
async fn a_hook_panicking_in_a_shared_execution_reaches_every_caller() {
    let t = ScriptedTransport::new([Step::status(503).body("busy")]);
    let uses = Arc::new(AtomicUsize::new(0));
    let hook_uses = uses.clone();
    let api = scripted_builder::<RetriedClient>(&t)
        .middleware(move |_| {
            if hook_uses.fetch_add(1, Ordering::SeqCst) == 1 {
                panic!("middleware panicked");
            }
            Ok(())
        })
        .build()
        .expect("the client builds");
    let clock = Clock::start();
    let callers = [api.clone(), api.clone()].map(|c| tokio::spawn(async move { c.config().await }));
    let mut payloads = Vec::new();
    for caller in callers {
        let e = caller.await.expect_err("every caller's call panics");
        assert!(e.is_panic(), "{e}");
        payloads.push(e.into_panic().downcast_ref::<&str>().copied());
    }
    assert_eq!(clock.now_ms(), 20);
    assert_eq!(
        payloads
            .iter()
            .filter(|p| **p == Some("middleware panicked"))
            .count(),
        1,
        "the hook's own panic reaches the caller that ran it: {payloads:?}"
    );
    assert_eq!((t.attempts(), uses.load(Ordering::SeqCst)), (1, 2));
    // The client keeps working: the next call starts a fresh execution.
    tokio::time::sleep(ms(100)).await;
    assert_follow_up_succeeds(&t, || api.config()).await;
}

/// A coalesced read, no retries.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Config {
    #[get("/config")]
    #[coalesce]
    async fn config(&self) -> Result<String, ApiError>;
}

/// Wait on the real clock, up to 10 s, for `flag`.
fn spin_until(flag: &AtomicBool) {
    for _ in 0..10_000 {
        if flag.load(Ordering::SeqCst) {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Regression: the first caller's middleware panicked while a second caller, on
/// another worker, had just joined the shared execution (it found it being polled and
/// waited to be woken). Nothing ever woke it: the second caller waited forever (or
/// until its own deadline), and the key stayed in the client's map meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_hook_does_not_leave_a_coalesced_follower_waiting() {
    let t = ScriptedTransport::new([]);
    let in_hook = Arc::new(AtomicBool::new(false));
    let joined = Arc::new(AtomicBool::new(false));
    let uses = Arc::new(AtomicUsize::new(0));
    let (hook_in, hook_joined, hook_uses) = (in_hook.clone(), joined.clone(), uses.clone());
    let api = scripted_builder::<ConfigClient>(&t)
        .middleware(move |_| {
            if hook_uses.fetch_add(1, Ordering::SeqCst) == 0 {
                hook_in.store(true, Ordering::SeqCst);
                spin_until(&hook_joined);
                panic!("middleware panicked");
            }
            Ok(())
        })
        .build()
        .expect("the client builds");

    let first = api.clone();
    let leader = tokio::spawn(async move { first.config().await });
    while !in_hook.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let second = api.clone();
    let follower = tokio::spawn(async move {
        let mut call = std::pin::pin!(second.config());
        std::future::poll_fn(|cx| {
            let polled = call.as_mut().poll(cx);
            joined.store(true, Ordering::SeqCst);
            polled
        })
        .await
    });

    let led = leader.await.expect_err("the leader's call panics");
    assert_eq!(
        led.into_panic().downcast_ref::<&str>(),
        Some(&"middleware panicked"),
        "the hook's own panic reaches the caller that ran it"
    );
    let followed = tokio::time::timeout(Duration::from_secs(5), follower)
        .await
        .expect("the follower waited forever for an execution whose hook panicked");
    assert!(
        followed.as_ref().is_err_and(|e| e.is_panic()),
        "the follower's call panics too: {followed:?}"
    );
    assert_eq!(t.attempts(), 0, "the panic came before any dispatch");

    // The client keeps working: a fresh execution, with a dispatch of its own.
    t.push([Step::status(200).body("ok")]);
    let after = tokio::time::timeout(Duration::from_secs(5), api.config())
        .await
        .expect("the next call joined the execution that panicked");
    assert_eq!(after.expect("the next call succeeds"), "ok");
    assert_eq!((t.attempts(), uses.load(Ordering::SeqCst)), (1, 2));
    assert_eq!((t.in_flight(), t.open_bodies()), (0, 0));
}
