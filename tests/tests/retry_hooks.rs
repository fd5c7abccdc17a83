//! User hooks that fail (S13): a retry predicate, an on-retry hook or a request
//! middleware that returns an error ends the call with that error; one that panics
//! sends the panic to the caller. Either way the client keeps working and no bulkhead
//! permit is lost (concurrency 1, no queue: a lost permit refuses the follow-up).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use resilient_api::client::RetryEvent;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::transport::HttpRequest;
use resilient_api::{ApiError, ErrorKind, resilient_api};
use tests::{Clock, HookFailed, assert_nothing_leaked, ms, script_follow_up, scripted_builder};

/// Two retries, 20 ms apart; one bulkhead slot and no queue.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]),
    bulkhead(concurrency = 1, queue = 0)
)]
pub trait Hooked {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// True on the first call of the hook it is shared by, false after.
fn first_use(counter: &AtomicUsize) -> bool {
    counter.fetch_add(1, Ordering::SeqCst) == 0
}

fn assert_hook_error(e: &ApiError, which: &'static str) {
    assert_eq!(e.kind(), ErrorKind::Hook, "{e}");
    let source = std::error::Error::source(e).expect("the hook error has no source");
    assert_eq!(
        source.downcast_ref::<HookFailed>(),
        Some(&HookFailed(which)),
        "source: {source}"
    );
}

/// Nothing in flight or open; a follow-up that retries once (so the hook runs again,
/// and the single bulkhead slot must be free) succeeds.
async fn assert_follow_up(api: &HookedClient, t: &ScriptedTransport) {
    assert_nothing_leaked(t);
    let before = t.attempts();
    let clock = Clock::start();
    t.push([Step::status(503).body("busy"), Step::status(200).body("ok")]);
    assert_eq!(api.resource().await.expect("the call failed"), "ok");
    assert_eq!(clock.now_ms(), 20);
    assert_eq!(t.attempts(), before + 2);
    assert_nothing_leaked(t);
}

fn assert_panic(err: tokio::task::JoinError, message: &str) {
    assert!(err.is_panic(), "the call did not panic: {err}");
    let payload = err.into_panic();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&message));
}

#[tokio::test(start_paused = true)]
async fn s13_retry_hook_error_predicate() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        Step::status(200).body("spare"),
    ]);
    let clock = Clock::start();
    let uses = Arc::new(AtomicUsize::new(0));
    let counter = uses.clone();
    let api = scripted_builder::<HookedClient>(&t)
        .retry_predicate(move |_e: &ApiError| {
            if first_use(&counter) {
                return Err(HookFailed("predicate").into());
            }
            Ok(true)
        })
        .build()
        .unwrap();

    let e = api.resource().await.unwrap_err();
    assert_eq!(clock.now_ms(), 0);
    assert_hook_error(&e, "predicate");
    assert_eq!(e.attempts(), 1);
    tests::assert_no_late_dispatch(&t, 1, Duration::from_secs(1)).await;

    // The 200 the failed call never reached goes to the next call.
    assert_eq!(api.resource().await.unwrap(), "spare");
    assert_follow_up(&api, &t).await;
    assert_eq!(uses.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn retry_predicate_saying_no_ends_with_the_failure() {
    let t = ScriptedTransport::new([Step::status(503).body("busy")]);
    let clock = Clock::start();
    let api = scripted_builder::<HookedClient>(&t)
        .retry_predicate(|_e: &ApiError| Ok(false))
        .build()
        .unwrap();

    let e = api.resource().await.unwrap_err();
    assert_eq!(clock.now_ms(), 0);
    assert_eq!(e.kind(), ErrorKind::Status);
    assert_eq!(e.status(), Some(503));
    assert_eq!(e.attempts(), 1);
    assert_eq!(t.attempts(), 1);
    script_follow_up(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
}

#[tokio::test(start_paused = true)]
async fn s13_retry_hook_error_on_retry() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        Step::status(200).body("spare"),
    ]);
    let clock = Clock::start();
    let uses = Arc::new(AtomicUsize::new(0));
    let events = Arc::new(Mutex::new(Vec::new()));
    let (counter, seen) = (uses.clone(), events.clone());
    let api = scripted_builder::<HookedClient>(&t)
        .on_retry(move |event: &RetryEvent<'_>| {
            seen.lock()
                .unwrap()
                .push((event.attempt, event.wait, event.error.status()));
            if first_use(&counter) {
                return Err(HookFailed("on_retry").into());
            }
            Ok(())
        })
        .build()
        .unwrap();

    let e = api.resource().await.unwrap_err();
    assert_eq!(clock.now_ms(), 0);
    assert_hook_error(&e, "on_retry");
    assert_eq!(e.attempts(), 1);
    tests::assert_no_late_dispatch(&t, 1, Duration::from_secs(1)).await;

    assert_eq!(api.resource().await.unwrap(), "spare");
    assert_follow_up(&api, &t).await;
    assert_eq!(uses.load(Ordering::SeqCst), 2);
    assert_eq!(
        *events.lock().unwrap(),
        vec![(1, ms(20), Some(503)), (1, ms(20), Some(503))]
    );
}

#[tokio::test(start_paused = true)]
async fn s13_retry_hook_error_middleware() {
    let t = ScriptedTransport::new([]);
    let clock = Clock::start();
    let uses = Arc::new(AtomicUsize::new(0));
    let counter = uses.clone();
    let api = scripted_builder::<HookedClient>(&t)
        .middleware(move |_r: &mut HttpRequest| {
            if first_use(&counter) {
                return Err(HookFailed("middleware").into());
            }
            Ok(())
        })
        .build()
        .unwrap();

    let e = api.resource().await.unwrap_err();
    assert_eq!(clock.now_ms(), 0);
    assert_hook_error(&e, "middleware");
    assert_eq!(t.attempts(), 0, "dispatched despite the middleware's error");
    tests::assert_no_late_dispatch(&t, 0, Duration::from_secs(1)).await;

    assert_follow_up(&api, &t).await;
    // Once for the failed call, then once per attempt of the follow-up.
    assert_eq!(uses.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn s13_retry_hook_error_predicate_panics() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        Step::status(200).body("spare"),
    ]);
    let clock = Clock::start();
    let counter = Arc::new(AtomicUsize::new(0));
    let api = scripted_builder::<HookedClient>(&t)
        .retry_predicate(move |_e: &ApiError| {
            if first_use(&counter) {
                panic!("predicate panicked");
            }
            Ok(true)
        })
        .build()
        .unwrap();

    let api2 = api.clone();
    let err = tokio::spawn(async move { api2.resource().await })
        .await
        .unwrap_err();
    assert_eq!(clock.now_ms(), 0);
    assert_panic(err, "predicate panicked");
    tests::assert_no_late_dispatch(&t, 1, Duration::from_secs(1)).await;

    assert_eq!(api.resource().await.unwrap(), "spare");
    assert_follow_up(&api, &t).await;
}

#[tokio::test(start_paused = true)]
async fn s13_retry_hook_error_on_retry_panics() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        Step::status(200).body("spare"),
    ]);
    let clock = Clock::start();
    let counter = Arc::new(AtomicUsize::new(0));
    let api = scripted_builder::<HookedClient>(&t)
        .on_retry(move |_event: &RetryEvent<'_>| {
            if first_use(&counter) {
                panic!("on_retry panicked");
            }
            Ok(())
        })
        .build()
        .unwrap();

    let api2 = api.clone();
    let err = tokio::spawn(async move { api2.resource().await })
        .await
        .unwrap_err();
    assert_eq!(clock.now_ms(), 0);
    assert_panic(err, "on_retry panicked");
    tests::assert_no_late_dispatch(&t, 1, Duration::from_secs(1)).await;

    assert_eq!(api.resource().await.unwrap(), "spare");
    assert_follow_up(&api, &t).await;
}

#[tokio::test(start_paused = true)]
async fn s13_retry_hook_error_middleware_panics() {
    let t = ScriptedTransport::new([]);
    let clock = Clock::start();
    let counter = Arc::new(AtomicUsize::new(0));
    let api = scripted_builder::<HookedClient>(&t)
        .middleware(move |_r: &mut HttpRequest| {
            if first_use(&counter) {
                panic!("middleware panicked");
            }
            Ok(())
        })
        .build()
        .unwrap();

    let api2 = api.clone();
    let err = tokio::spawn(async move { api2.resource().await })
        .await
        .unwrap_err();
    assert_eq!(clock.now_ms(), 0);
    assert_panic(err, "middleware panicked");
    tests::assert_no_late_dispatch(&t, 0, Duration::from_secs(1)).await;

    // The middleware held the only bulkhead slot when it panicked.
    assert_follow_up(&api, &t).await;
}

#[tokio::test(start_paused = true)]
async fn hook_failure_keeps_the_breaker_closed_for_the_next_call() {
    // A middleware error is not an upstream failure: a breaker-relevant outcome must
    // not be recorded, and the probe/admission taken for it must be released.
    let t = ScriptedTransport::new([]);
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let flag = fail.clone();
    let api = scripted_builder::<HookedClient>(&t)
        .middleware(move |_r: &mut HttpRequest| {
            if flag.load(Ordering::SeqCst) {
                return Err(HookFailed("middleware").into());
            }
            Ok(())
        })
        .build()
        .unwrap();

    // More hook failures than the default breaker's 5-failure threshold.
    for _ in 0..8 {
        let e = api.resource().await.unwrap_err();
        assert_hook_error(&e, "middleware");
    }
    assert_eq!(t.attempts(), 0);
    fail.store(false, Ordering::SeqCst);
    t.push([Step::status(200).body("ok")]);
    assert_eq!(api.resource().await.unwrap(), "ok");
    assert_eq!(t.attempts(), 1);
}

/// Regression: the retry predicate and the on-retry hook were handed the failure before
/// the call had stamped it, so `endpoint()` was `""` and `attempts()` was 0 there (a
/// predicate keyed on the endpoint or the attempt count never matched), and so was
/// the source of a refused retry (`BudgetExhausted`, `CircuitOpen`).
#[tokio::test(start_paused = true)]
async fn retry_hooks_see_the_failures_endpoint_and_attempt_count() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        Step::status(503).body("busy"),
        Step::status(503).body("busy"),
    ]);
    let asked = Arc::new(Mutex::new(Vec::new()));
    let told = Arc::new(Mutex::new(Vec::new()));
    let (a, b) = (asked.clone(), told.clone());
    let api = scripted_builder::<HookedClient>(&t)
        .retry_predicate(move |e: &ApiError| {
            a.lock().unwrap().push((e.endpoint(), e.attempts()));
            Ok(true)
        })
        .on_retry(move |event: &RetryEvent<'_>| {
            let e = event.error;
            b.lock()
                .unwrap()
                .push((event.attempt, e.endpoint(), e.attempts()));
            Ok(())
        })
        .build()
        .unwrap();

    let e = api.resource().await.unwrap_err();
    assert_eq!((e.kind(), e.attempts()), (ErrorKind::Status, 3));
    assert_eq!(
        *asked.lock().unwrap(),
        vec![("resource", 1), ("resource", 2)],
        "what the retry predicate was shown"
    );
    assert_eq!(
        *told.lock().unwrap(),
        vec![(1, "resource", 1), (2, "resource", 2)],
        "what the on-retry hook was shown"
    );
    assert_nothing_leaked(&t);
}
