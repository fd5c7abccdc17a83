//! A retry refused by a policy (rate limit, bulkhead, breaker) ends the call with that
//! refusal, and its source is the failure the call was retrying, as when the open
//! breaker or the spent budget is foreseen before the backoff (DESIGN §3.3).

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, ErrorKind, resilient_api};
use tests::{Clock, assert_nothing_leaked, ms, scripted};
use tokio::time::Instant;

/// The refused call's source: status and body of the failure it was retrying.
fn source_of(e: &ApiError) -> Option<(Option<u16>, Option<String>)> {
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<ApiError>())
        .map(|s| (s.status(), s.body_text()))
}

/// Ten per second, burst 1; one retry after 20 ms on 503.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [503]),
    rate_limit(per_second = 10, burst = 1)
)]
pub trait LimitedRetry {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// Regression: the retry, refused a token its 100 ms deadline cannot wait for, ended
/// with a bare `RateLimited`: the 503 the upstream answered was lost.
#[tokio::test(start_paused = true)]
async fn retry_refused_by_the_rate_limit_keeps_the_last_failure() {
    let t = ScriptedTransport::new([Step::status(503).body("overloaded")]);
    let clock = Clock::start();
    let api = scripted::<LimitedRetryClient>(&t);
    let err = api
        .with_options(CallOptions::new().deadline(ms(100)))
        .resource()
        .await
        .unwrap_err();
    assert_eq!((err.kind(), clock.now_ms()), (ErrorKind::RateLimited, 20));
    assert_eq!(err.attempts(), 1);
    assert_eq!(
        source_of(&err),
        Some((Some(503), Some("overloaded".to_owned())))
    );
    assert_eq!(t.attempts(), 1);
    assert_nothing_leaked(&t);
}

/// One slot, no queue; one retry after 20 ms on 503.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [503]),
    bulkhead(concurrency = 1, queue = 0)
)]
pub trait Bulk {
    #[get("/a")]
    async fn a(&self) -> Result<String, ApiError>;
}

/// Regression: the retry, turned away by a full bulkhead, lost the 503 it retried.
#[tokio::test(start_paused = true)]
async fn retry_refused_by_the_bulkhead_keeps_the_last_failure() {
    let t = ScriptedTransport::new([Step::status(503).body("overloaded"), Step::hang()]);
    let api = scripted::<BulkClient>(&t);
    let first = tokio::spawn({
        let api = api.clone();
        async move { api.a().await }
    });
    // At 1 ms, during the first call's backoff, a second call takes the one slot.
    tokio::time::sleep(ms(1)).await;
    let holder = tokio::spawn({
        let api = api.clone();
        async move { api.a().await }
    });
    let err = first.await.unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BulkheadFull);
    assert_eq!(
        source_of(&err),
        Some((Some(503), Some("overloaded".to_owned())))
    );
    assert_eq!(t.attempts(), 2);
    holder.abort();
}

/// Two failures trip it; two retries 50 ms apart; a plain endpoint in the same
/// partition.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 2, backoff = fixed(delay = "50ms"), on = [503]),
    breaker(failures = 2, reset = "1s")
)]
pub trait Shared {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;

    #[get("/plain")]
    #[retry(max = 0)]
    async fn plain(&self) -> Result<String, ApiError>;
}

/// Regression: another call trips the breaker during this call's backoff; the retry
/// is refused with `CircuitOpen`, which used to have no source.
#[tokio::test(start_paused = true)]
async fn retry_refused_by_the_breaker_keeps_the_last_failure() {
    let t = ScriptedTransport::new([
        Step::status(503).body("first"),
        Step::status(503).body("other").delay(ms(10)),
    ]);
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<SharedClient>(&t);
    let (a, b) = tokio::join!(api.resource(), api.plain());
    assert_eq!(b.unwrap_err().status(), Some(503));
    let e = a.unwrap_err();
    assert_eq!((e.kind(), clock.now_ms()), (ErrorKind::CircuitOpen, 50));
    assert_eq!(e.attempts(), 1);
    assert_eq!(e.retry_at(), Some(start + ms(1010)));
    assert_eq!(source_of(&e), Some((Some(503), Some("first".to_owned()))));
    assert_eq!(t.attempts(), 2);
}
