//! User hooks failing in every place they run (DESIGN §3.3: an error or a panic ends
//! that call with it, is not retried, and leaves the client fully working): inside a
//! coalesced execution (every caller gets it), on a half-open probe (its slot comes
//! back), on a retry and on a redirect hop (no breaker failure, the hop's token comes
//! back), holding the engine's global permit, on a hedge branch and in a hedged round.
//! And the client's lifecycle: a clone's call and a streamed body outlive the client,
//! and views, clones and clients on one engine share the breaker.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use resilient_api::bulkhead::BulkheadConfig;
use resilient_api::circuit_breaker::state::Phase;
use resilient_api::client::RetryEvent;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::transport::HttpRequest;
use resilient_api::{ApiError, CallOptions, Engine, ErrorKind, ResponseStream, resilient_api};
use tests::{
    Clock, HookFailed, assert_nothing_leaked, ms, scripted, scripted_builder, settle, spawn_timed,
};

fn hook_source(e: &ApiError) -> Option<&HookFailed> {
    std::error::Error::source(e)?.downcast_ref::<HookFailed>()
}

/// A middleware that fails (`Err`) on its `n`th use (1-based) and passes otherwise.
fn mw_fails_on(
    n: usize,
) -> (
    Arc<AtomicUsize>,
    impl Fn(&mut HttpRequest) -> Result<(), resilient_api::error::BoxError> + Send + Sync + 'static,
) {
    let uses = Arc::new(AtomicUsize::new(0));
    let c = uses.clone();
    (uses, move |_r: &mut HttpRequest| {
        if c.fetch_add(1, Ordering::SeqCst) + 1 == n {
            return Err(HookFailed("middleware").into());
        }
        Ok(())
    })
}

/// A middleware that panics on its `n`th use (1-based).
fn mw_panics_on(
    n: usize,
) -> impl Fn(&mut HttpRequest) -> Result<(), resilient_api::error::BoxError> + Send + Sync + 'static
{
    let uses = Arc::new(AtomicUsize::new(0));
    move |_r: &mut HttpRequest| {
        if uses.fetch_add(1, Ordering::SeqCst) + 1 == n {
            panic!("middleware panicked");
        }
        Ok(())
    }
}

// ---------------------------------------------------------------- coalescing

/// Coalesced (and not), one retry on 503 after 20 ms.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [503])
)]
pub trait Shared {
    #[get("/config")]
    #[coalesce]
    async fn config(&self) -> Result<String, ApiError>;
}

async fn three_callers(api: &SharedClient, clock: Clock) -> Vec<(Result<String, ApiError>, u64)> {
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let a = api.clone();
            spawn_timed(clock, async move { a.config().await })
        })
        .collect();
    let mut out = Vec::new();
    for c in calls {
        out.push(c.await.expect("no panic"));
    }
    out
}

/// Three coalesced callers of one 503 (answered at `t = 5`), whose retry `hook` fails:
/// each gets the hook's error at `at`, after the one attempt, with the hook's own error
/// as its source; nothing more is sent, and the next call is served afresh.
async fn every_caller_gets_the_hook_error(
    api: SharedClient,
    t: &ScriptedTransport,
    hook: &'static str,
    at: u64,
) {
    let clock = Clock::start();
    for (r, ended) in three_callers(&api, clock).await {
        let e = r.expect_err("hook error");
        assert_eq!(
            (e.kind(), ended, e.attempts()),
            (ErrorKind::Hook, at, 1),
            "{e:?}"
        );
        assert_eq!(hook_source(&e), Some(&HookFailed(hook)));
    }
    tests::assert_no_late_dispatch(t, 1, Duration::from_secs(1)).await;
    assert_nothing_leaked(t);
    t.push([Step::status(200).body("ok")]);
    assert_eq!(api.config().await.expect("served afresh"), "ok");
    assert_eq!(t.attempts(), 2);
}

#[tokio::test(start_paused = true)]
async fn coalesced_callers_all_get_the_retry_predicates_error() {
    let t = ScriptedTransport::new([Step::status(503).body("busy").delay(ms(5))]);
    let api = scripted_builder::<SharedClient>(&t)
        .retry_predicate(|_| Err(HookFailed("predicate").into()))
        .build()
        .expect("the client builds");
    every_caller_gets_the_hook_error(api, &t, "predicate", 5).await;
}

#[tokio::test(start_paused = true)]
async fn coalesced_callers_all_get_the_on_retry_error() {
    let t = ScriptedTransport::new([Step::status(503).body("busy").delay(ms(5))]);
    let api = scripted_builder::<SharedClient>(&t)
        .on_retry(|_: &RetryEvent<'_>| Err(HookFailed("on_retry").into()))
        .build()
        .expect("the client builds");
    every_caller_gets_the_hook_error(api, &t, "on_retry", 5).await;
}

/// The middleware fails on the retry, at `t = 20` (the 503 answers at once).
#[tokio::test(start_paused = true)]
async fn coalesced_callers_all_get_the_retrys_middleware_error() {
    let t = ScriptedTransport::new([Step::status(503).body("busy")]);
    let (_uses, mw) = mw_fails_on(2);
    let api = scripted_builder::<SharedClient>(&t)
        .middleware(mw)
        .build()
        .expect("the client builds");
    every_caller_gets_the_hook_error(api, &t, "middleware", 20).await;
}

// ---------------------------------------------------------------- half-open probe

/// One failure trips it for 100 ms; one probe.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 1, reset = "100ms", probes = 1)
)]
pub trait Probed {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
    #[get("/shared")]
    #[coalesce]
    async fn shared(&self) -> Result<String, ApiError>;
}

async fn trip(api: &ProbedClient, t: &ScriptedTransport) {
    t.push([Step::status(503).body("down")]);
    let e = api.resource().await.expect_err("the 503 trips it");
    assert_eq!(e.status(), Some(503));
    assert_eq!(api.circuit_state().phase, Phase::Open);
    tokio::time::sleep(ms(100)).await;
}

#[tokio::test(start_paused = true)]
async fn a_probes_middleware_error_releases_the_probe_slot() {
    let t = ScriptedTransport::new([]);
    let (_uses, mw) = mw_fails_on(2);
    let api = scripted_builder::<ProbedClient>(&t)
        .middleware(mw)
        .build()
        .unwrap();
    trip(&api, &t).await;
    let e = api.resource().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Hook);
    let s = api.circuit_state();
    assert_eq!((s.phase, s.probes_in_flight), (Phase::HalfOpen, 0));
    t.push([Step::status(200).body("ok")]);
    assert_eq!(api.resource().await.unwrap(), "ok");
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    assert_eq!(t.attempts(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_probes_middleware_panic_releases_the_probe_slot() {
    let t = ScriptedTransport::new([]);
    let api = scripted_builder::<ProbedClient>(&t)
        .middleware(mw_panics_on(2))
        .build()
        .unwrap();
    trip(&api, &t).await;
    let a = api.clone();
    let j = tokio::spawn(async move { a.resource().await }).await;
    assert!(j.unwrap_err().is_panic());
    let s = api.circuit_state();
    assert_eq!((s.phase, s.probes_in_flight), (Phase::HalfOpen, 0));
    t.push([Step::status(200).body("ok")]);
    assert_eq!(api.resource().await.unwrap(), "ok");
    assert_eq!(api.circuit_state().phase, Phase::Closed);
}

#[tokio::test(start_paused = true)]
async fn a_coalesced_probes_middleware_error_frees_the_slot() {
    let t = ScriptedTransport::new([]);
    let (_uses, mw) = mw_fails_on(2);
    let api = scripted_builder::<ProbedClient>(&t)
        .middleware(mw)
        .build()
        .unwrap();
    trip(&api, &t).await;
    // The middleware fails in the first poll, so no second caller can join it: one
    // caller, through the shared execution's own attempt path.
    let e = api.shared().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Hook, "{e:?}");
    let s = api.circuit_state();
    assert_eq!((s.phase, s.probes_in_flight), (Phase::HalfOpen, 0));
    t.push([Step::status(200).body("ok")]);
    assert_eq!(api.shared().await.unwrap(), "ok");
    assert_eq!(api.circuit_state().phase, Phase::Closed);
}

// ---------------------------------------------------------------- retries, redirects

/// Two retries on 503, 20 ms apart; two failures trip the breaker.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 2, reset = "1s")
)]
pub trait Retried {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// A middleware error on the retry ends the call then, with one attempt, and is not a
/// breaker failure (the first 503 is).
#[tokio::test(start_paused = true)]
async fn a_retrys_middleware_error_ends_the_call_then_and_is_no_breaker_failure() {
    let t = ScriptedTransport::new([Step::status(503).body("busy")]);
    let (uses, mw) = mw_fails_on(2);
    let api = scripted_builder::<RetriedClient>(&t)
        .middleware(mw)
        .build()
        .unwrap();
    let clock = Clock::start();
    let e = api.resource().await.unwrap_err();
    assert_eq!(
        (e.kind(), e.attempts(), clock.now_ms()),
        (ErrorKind::Hook, 1, 20)
    );
    let s = api.circuit_state();
    assert_eq!((s.phase, s.consecutive_failures), (Phase::Closed, 1));
    assert_eq!(uses.load(Ordering::SeqCst), 2);
    tests::assert_no_late_dispatch(&t, 1, Duration::from_secs(1)).await;
    t.push([Step::status(200).body("ok")]);
    assert_eq!(api.resource().await.unwrap(), "ok");
}

/// A middleware error on a redirect hop ends the call with that error: not retried,
/// no breaker failure.
#[tokio::test(start_paused = true)]
async fn a_hops_middleware_error_ends_the_call_without_retry_or_breaker_failure() {
    let t = ScriptedTransport::new([Step::status(302).header("location", "/elsewhere")]);
    let (uses, mw) = mw_fails_on(2);
    let api = scripted_builder::<RetriedClient>(&t)
        .middleware(mw)
        .build()
        .unwrap();
    let clock = Clock::start();
    let e = api.resource().await.unwrap_err();
    assert_eq!(
        (e.kind(), e.attempts(), clock.now_ms()),
        (ErrorKind::Hook, 1, 0),
        "{e:?}"
    );
    assert_eq!(hook_source(&e), Some(&HookFailed("middleware")));
    let s = api.circuit_state();
    assert_eq!((s.phase, s.consecutive_failures), (Phase::Closed, 0));
    assert_eq!(uses.load(Ordering::SeqCst), 2);
    tests::assert_no_late_dispatch(&t, 1, Duration::from_secs(1)).await;
    assert_nothing_leaked(&t);
    t.push([Step::status(200).body("ok")]);
    assert_eq!(api.resource().await.unwrap(), "ok");
}

/// A token every 100 ms, a burst of 1.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    rate_limit(per_second = 10, burst = 1)
)]
pub trait Limited {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// A hop's middleware panics after the hop took its token (at t=100): the token goes
/// back, so the next call is sent at t=100, not t=200.
#[tokio::test(start_paused = true)]
async fn a_hops_middleware_panic_gives_its_token_back() {
    let t = ScriptedTransport::new([Step::status(302).header("location", "/elsewhere")]);
    let api = scripted_builder::<LimitedClient>(&t)
        .middleware(mw_panics_on(2))
        .build()
        .unwrap();
    let clock = Clock::start();
    let a = api.clone();
    let j = spawn_timed(clock, async move { a.resource().await });
    let err = j.await.unwrap_err();
    assert!(err.is_panic());
    assert_eq!(clock.now_ms(), 100);
    assert_eq!(t.attempts(), 1);
    assert_nothing_leaked(&t);
    t.push([Step::status(200).body("ok")]);
    assert_eq!(api.resource().await.unwrap(), "ok");
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(100)]);
}

// ---------------------------------------------------------------- global bulkhead

/// No retries.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Plain {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
}

/// A middleware that panics while its call holds the engine's only global permit:
/// the other client on the engine is served at once afterwards.
#[tokio::test(start_paused = true)]
async fn a_middleware_panic_gives_the_global_permit_back() {
    let t = ScriptedTransport::new([]);
    let engine = Engine::new().global_bulkhead(BulkheadConfig {
        concurrency: 1,
        queue: 0,
    });
    let a: PlainClient = scripted_builder(&t)
        .base_url("https://a.test")
        .engine(engine.clone())
        .middleware(mw_panics_on(1))
        .build()
        .unwrap();
    let b: PlainClient = scripted_builder(&t)
        .base_url("https://b.test")
        .engine(engine.clone())
        .build()
        .unwrap();
    let a2 = a.clone();
    assert!(
        tokio::spawn(async move { a2.r().await })
            .await
            .unwrap_err()
            .is_panic()
    );
    t.push([Step::status(200).body("b"), Step::status(200).body("a")]);
    assert_eq!(b.r().await.unwrap(), "b");
    assert_eq!(a.r().await.unwrap(), "a");
    assert_eq!(t.attempts(), 2);
}

// ---------------------------------------------------------------- hedging

/// Hedged, one retry on 503 after 20 ms.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [503])
)]
pub trait Hedged {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn a_hedges_middleware_panic_drops_the_primary_and_leaves_the_client_working() {
    let t = ScriptedTransport::new([Step::status(200).body("slow").delay(ms(50))]);
    let api = scripted_builder::<HedgedClient>(&t)
        .middleware(mw_panics_on(2))
        .build()
        .unwrap();
    let clock = Clock::start();
    let a = api.clone();
    let err = spawn_timed(clock, async move { a.search().await })
        .await
        .unwrap_err();
    assert!(err.is_panic());
    assert_eq!(clock.now_ms(), 10);
    assert_nothing_leaked(&t);
    tests::assert_no_late_dispatch(&t, 1, Duration::from_secs(1)).await;
    assert_eq!(api.circuit_state().consecutive_failures, 0);
    t.push([Step::status(200).body("ok")]);
    assert_eq!(api.search().await.unwrap(), "ok");
}

#[tokio::test(start_paused = true)]
async fn a_retry_predicate_error_in_a_hedged_round_ends_the_call_then() {
    let t = ScriptedTransport::new([Step::status(503).body("busy").delay(ms(3))]);
    let api = scripted_builder::<HedgedClient>(&t)
        .retry_predicate(|_| Err(HookFailed("predicate").into()))
        .build()
        .unwrap();
    let clock = Clock::start();
    let e = api.search().await.unwrap_err();
    assert_eq!(
        (e.kind(), e.attempts(), clock.now_ms()),
        (ErrorKind::Hook, 1, 3)
    );
    assert_eq!(hook_source(&e), Some(&HookFailed("predicate")));
    tests::assert_no_late_dispatch(&t, 1, Duration::from_secs(1)).await;
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn a_retry_predicate_panic_in_a_hedged_round_leaves_nothing_in_flight() {
    let t = ScriptedTransport::new([Step::status(503).body("busy").delay(ms(15)), Step::hang()]);
    let api = scripted_builder::<HedgedClient>(&t)
        .retry_predicate(|_| panic!("predicate panicked"))
        .build()
        .unwrap();
    let clock = Clock::start();
    let a = api.clone();
    // The primary fails at t=15 while the hedge (t=10) is still in flight: the
    // predicate is not asked then (another branch is pending); the hedge hangs.
    let j = spawn_timed(clock, async move { a.search().await });
    tokio::time::sleep(ms(100)).await;
    assert_eq!(t.attempts(), 2);
    j.abort();
    let _ = j.await;
    assert_nothing_leaked(&t);
}

// ---------------------------------------------------------------- lifecycle

/// No retries.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Life {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
    #[get("/download")]
    async fn download(&self) -> Result<ResponseStream, ApiError>;
}

/// The original client dropped while a clone's call is in flight: the call finishes.
#[tokio::test(start_paused = true)]
async fn a_call_on_a_clone_outlives_the_original() {
    let t = ScriptedTransport::new([Step::status(200).body("late").delay(ms(50))]);
    let api: LifeClient = scripted(&t);
    let clone = api.clone();
    let clock = Clock::start();
    let j = spawn_timed(clock, async move { clone.r().await });
    settle().await;
    drop(api);
    let (r, at) = j.await.unwrap();
    assert_eq!((r.unwrap(), at), ("late".to_owned(), 50));
    assert_nothing_leaked(&t);
}

/// A streamed body read after every handle on its client is gone.
#[tokio::test(start_paused = true)]
async fn a_stream_outlives_its_client() {
    let t = ScriptedTransport::new([Step::status(200).chunks([(ms(10), "ab"), (ms(10), "cd")])]);
    let api: LifeClient = scripted(&t);
    let clock = Clock::start();
    let s = api.download().await.unwrap();
    drop(api);
    assert_eq!(s.text().await.unwrap(), "abcd");
    assert_eq!(clock.now_ms(), 20);
    assert_nothing_leaked(&t);
}

/// One failure trips it for 1 s.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 0),
    breaker(failures = 1, reset = "1s")
)]
pub trait Views {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
}

/// A `with_options` view and a clone share the breaker with the client.
#[tokio::test(start_paused = true)]
async fn views_and_clones_share_the_breaker() {
    let t = ScriptedTransport::new([Step::status(503)]);
    let api: ViewsClient = scripted(&t);
    let view = api.with_options(CallOptions::new().deadline(ms(500)));
    let clone = api.clone();
    view.r().await.unwrap_err();
    assert_eq!(api.circuit_state().phase, Phase::Open);
    assert_eq!(clone.r().await.unwrap_err().kind(), ErrorKind::CircuitOpen);
    assert_eq!(api.r().await.unwrap_err().kind(), ErrorKind::CircuitOpen);
    assert_eq!(t.attempts(), 1);
}

/// Two clients of one API on one engine share the host's breaker.
#[tokio::test(start_paused = true)]
async fn two_clients_on_one_engine_share_the_breaker() {
    let t = ScriptedTransport::new([Step::status(503)]);
    let engine = Engine::new();
    let a: ViewsClient = scripted_builder(&t).engine(engine.clone()).build().unwrap();
    let b: ViewsClient = scripted_builder(&t).engine(engine.clone()).build().unwrap();
    a.r().await.unwrap_err();
    assert_eq!(b.r().await.unwrap_err().kind(), ErrorKind::CircuitOpen);
    assert_eq!(t.attempts(), 1);
    let _ = AtomicBool::new(false);
}
