//! A hedge branch refused by a policy (rate limiter, bulkhead, breaker, retry budget)
//! is a rejection, and a rejection is final for the call: the branches already in
//! flight may still win, but when they fail (even with a retryable 503) the call ends
//! with the rejection, whose source is the round's failure, and is never retried.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use resilient_api::retry::budget::BudgetConfig;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, resilient_api};
use tests::{Clock, assert_follow_up_succeeds, assert_no_late_dispatch, ms};
use tokio::time::Instant;

/// One token a second, burst 1, under a 900 ms deadline: a hedge at t=10 cannot get
/// the t=1000 token and is refused at once.
#[resilient_api(
    timeout(attempt = "500ms", total = "900ms"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]),
    rate_limit(per_second = 1, burst = 1)
)]
pub trait Limited {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;
}

/// One permit and no queue: the primary holds the permit, the hedge is refused.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]),
    bulkhead(concurrency = 1, queue = 0)
)]
pub trait Narrow {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;
}

/// One failure trips the breaker for 20 ms.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 1, reset = "20ms")
)]
pub trait Guarded {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;

    #[get("/plain")]
    #[retry(max = 0)]
    async fn plain(&self) -> Result<String, ApiError>;
}

/// Hedged and plain endpoints sharing one retry budget.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503])
)]
pub trait Budgeted {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;

    #[get("/plain")]
    async fn plain(&self) -> Result<String, ApiError>;
}

/// A client of `t` that counts the retries it starts.
fn counting<C: resilient_api::client::GeneratedClient>(
    t: &ScriptedTransport,
) -> (C, Arc<AtomicUsize>) {
    let retries = Arc::new(AtomicUsize::new(0));
    let seen = retries.clone();
    let api = tests::scripted_builder::<C>(t)
        .on_retry(move |_| {
            seen.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .build()
        .expect("builds");
    (api, retries)
}

/// Nothing follows the call's end: `retried` retries in all (as the on-retry hook
/// counted them), dispatches at exactly `times` (ms), and no other even `quiet` ms
/// later.
async fn assert_nothing_follows(
    t: &ScriptedTransport,
    retries: &AtomicUsize,
    retried: usize,
    times: &[u64],
    quiet: u64,
) {
    assert_eq!(retries.load(Ordering::SeqCst), retried, "retries");
    assert_eq!(
        t.dispatch_times(),
        times.iter().map(|&at| ms(at)).collect::<Vec<_>>()
    );
    assert_no_late_dispatch(t, times.len(), ms(quiet)).await;
}

/// The call ended with a rejection of `kind` whose source is the primary's 503.
fn assert_rejected_with_primary_503(e: &ApiError, kind: ErrorKind) {
    assert_eq!(e.kind(), kind, "{e:?}");
    assert!(e.is_rejection());
    assert_eq!(e.status(), None, "the rejection is not a response");
    assert_eq!(e.attempts(), 1, "only the primary was dispatched");
    let source = std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<ApiError>())
        .expect("the round's failure as source");
    assert_eq!(source.kind(), ErrorKind::Status, "{source:?}");
    assert_eq!(source.status(), Some(503));
    assert_eq!(source.body_text().as_deref(), Some("primary"));
}

#[tokio::test(start_paused = true)]
async fn a_hedge_refused_by_the_rate_limiter_is_final_when_the_primary_then_fails() {
    // t=0 the primary takes the only token; t=10 the hedge is refused (the next
    // token, at t=1000, is after the 900 ms deadline); t=50 the primary's 503 ends the
    // call with the refusal, at once, with no retry.
    let t = ScriptedTransport::new([Step::status(503).body("primary").delay(ms(50))]);
    let start = Instant::now();
    let clock = Clock::start();
    let (api, retries) = counting::<LimitedClient>(&t);

    let e = api.search().await.expect_err("the primary failed");
    assert_eq!(clock.now_ms(), 50);
    assert_rejected_with_primary_503(&e, ErrorKind::RateLimited);
    assert_eq!(
        e.retry_at(),
        Some(start + ms(1000)),
        "the next token's time"
    );
    // Regression: `retry_after` was measured from when the hedge was refused (t=10:
    // 990 ms), so a caller waiting that long came back 40 ms after the token. It is
    // measured from the call's end, as a server's `Retry-After` is: 950 ms.
    assert_eq!(e.retry_after(), Some(ms(950)), "from the call's end, t=50");
    assert_nothing_follows(&t, &retries, 0, &[0], 1000).await;
    assert_follow_up_succeeds(&t, || api.search()).await;
}

#[tokio::test(start_paused = true)]
async fn a_hedge_refused_by_the_rate_limiter_after_the_primary_failed_ends_the_call() {
    // The primary's 503 (t=5) does not end the round, the hedge is due at t=10; it is
    // refused there, with nothing left in flight: the call ends at t=10 with the
    // refusal, carrying the primary's 503.
    let t = ScriptedTransport::new([Step::status(503).body("primary").delay(ms(5))]);
    let clock = Clock::start();
    let (api, retries) = counting::<LimitedClient>(&t);

    let e = api.search().await.expect_err("the primary failed");
    assert_eq!(clock.now_ms(), 10);
    assert_rejected_with_primary_503(&e, ErrorKind::RateLimited);
    assert_nothing_follows(&t, &retries, 0, &[0], 1000).await;
    assert_follow_up_succeeds(&t, || api.search()).await;
}

#[tokio::test(start_paused = true)]
async fn a_hedge_refused_by_the_rate_limiter_still_lets_the_primary_win() {
    let t = ScriptedTransport::new([Step::status(200).body("primary").delay(ms(50))]);
    let clock = Clock::start();
    let (api, retries) = counting::<LimitedClient>(&t);

    assert_eq!(api.search().await.expect("the primary answers"), "primary");
    assert_eq!(clock.now_ms(), 50);
    assert_nothing_follows(&t, &retries, 0, &[0], 1000).await;
    assert_follow_up_succeeds(&t, || api.search()).await;
}

#[tokio::test(start_paused = true)]
async fn a_hedge_refused_by_the_bulkhead_is_final_when_the_primary_then_fails() {
    // t=10 the hedge finds the one permit taken and no queue: BulkheadFull. t=50 the
    // primary's 503 ends the call with that refusal; no retry (which would find the
    // permit free at t=70 and dispatch a second request).
    let t = ScriptedTransport::new([Step::status(503).body("primary").delay(ms(50))]);
    let clock = Clock::start();
    let (api, retries) = counting::<NarrowClient>(&t);

    let e = api.search().await.expect_err("the primary failed");
    assert_eq!(clock.now_ms(), 50);
    assert_rejected_with_primary_503(&e, ErrorKind::BulkheadFull);
    assert_nothing_follows(&t, &retries, 0, &[0], 100).await;
    assert_follow_up_succeeds(&t, || api.search()).await;
}

#[tokio::test(start_paused = true)]
async fn a_hedge_refused_by_the_open_breaker_is_final_when_the_primary_then_fails() {
    // t=0 the primary (admitted, closed) and an unrelated plain call are dispatched;
    // t=5 the plain call's 503 trips the breaker until t=25; t=10 the hedge is refused
    // (CircuitOpen); t=40 the primary's 503 (a stale generation) ends the call with
    // that refusal. A retry after the 20 ms backoff (t=60) would have been admitted
    // as the half-open probe.
    let t = ScriptedTransport::new([
        Step::status(503).body("primary").delay(ms(40)),
        Step::status(503).body("down").delay(ms(5)),
    ]);
    let start = Instant::now();
    let clock = Clock::start();
    let (api, retries) = counting::<GuardedClient>(&t);

    let (hedged, tripping) = tokio::join!(api.search(), api.plain());
    assert_eq!(tripping.expect_err("503").status(), Some(503));
    let e = hedged.expect_err("the primary failed");
    assert_eq!(clock.now_ms(), 40);
    assert_rejected_with_primary_503(&e, ErrorKind::CircuitOpen);
    assert_eq!(
        e.retry_at(),
        Some(start + ms(25)),
        "the end of the cooldown"
    );
    assert_nothing_follows(&t, &retries, 0, &[0, 0], 100).await;
    // Past the cooldown: the follow-up is the probe, and closes the breaker.
    assert_follow_up_succeeds(&t, || api.plain()).await;
}

#[tokio::test(start_paused = true)]
async fn a_hedge_refused_by_the_retry_budget_is_final_when_the_primary_then_fails() {
    // A budget of one retry per second (floor only). A plain call spends it at t=0
    // (503, retried at t=20). At t=960 the hedge of a call started at t=950 is
    // refused: that retry still counts until t=1000. At t=1010 the primary's 503 ends
    // the call with BudgetExhausted, although the budget has room again by then.
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        Step::status(200).body("ok"),
        Step::status(503).body("primary").delay(ms(60)),
    ]);
    let clock = Clock::start();
    let retries = Arc::new(AtomicUsize::new(0));
    let seen = retries.clone();
    let api: BudgetedClient = tests::scripted_builder(&t)
        .retry_budget(Some(BudgetConfig {
            ttl: Duration::from_secs(1),
            min_per_sec: 1,
            retry_ratio: 0.0,
        }))
        .on_retry(move |_| {
            seen.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .build()
        .expect("builds");

    assert_eq!(api.plain().await.expect("the retry answers"), "ok");
    assert_eq!(clock.now_ms(), 20);
    assert_eq!(retries.load(Ordering::SeqCst), 1);

    tokio::time::sleep(ms(930)).await;
    let e = api.search().await.expect_err("the primary failed");
    assert_eq!(clock.now_ms(), 1010);
    assert_rejected_with_primary_503(&e, ErrorKind::BudgetExhausted);
    assert_nothing_follows(&t, &retries, 1, &[0, 20, 950], 100).await;
    assert_follow_up_succeeds(&t, || api.search()).await;
}

/// Regression: the primary's 503 asked for 5 s, and the bulkhead's refusal of the
/// hedge (a refusal with no time of its own) ended the call saying nothing of it
/// (`retry_after()` was `None`). It gives the server's wait, from the call's end.
#[tokio::test(start_paused = true)]
async fn a_hedge_refused_by_the_bulkhead_gives_the_primarys_retry_after() {
    let t = ScriptedTransport::new([Step::status(503)
        .body("primary")
        .header("retry-after", "5")
        .delay(ms(50))]);
    let start = Instant::now();
    let clock = Clock::start();
    let (api, retries) = counting::<NarrowClient>(&t);

    let e = api.search().await.expect_err("the primary failed");
    assert_eq!(clock.now_ms(), 50);
    assert_rejected_with_primary_503(&e, ErrorKind::BulkheadFull);
    assert_eq!(e.retry_at(), Some(start + ms(5050)));
    assert_eq!(e.retry_after(), Some(ms(5000)));
    assert_nothing_follows(&t, &retries, 0, &[0], 100).await;
}
