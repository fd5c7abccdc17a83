//! A retry refused by a policy (rate limit, bulkhead, breaker) ends the call with that
//! refusal, and its source is the failure the call was retrying, as when the open
//! breaker or the spent budget is foreseen before the backoff (DESIGN §3.3).

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, ErrorKind, resilient_api};
use std::time::Duration;
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

// A refused retry's `retry_after()`: a refusal with a time of its own (an open
// breaker's end, the next token) gives that; one without gives the server's
// `Retry-After` from its source; with both, the later. Each server below asks for
// 120 s, which `retry_after_cap = "1s"` cuts to a 1 s wait: the server's instant is
// still ahead when the retry is refused.

/// A 503 whose server asks for 120 s.
fn overloaded_for_120s() -> Step {
    Step::status(503)
        .body("overloaded")
        .header("retry-after", "120")
}

/// `err` refused the retry of [`overloaded_for_120s`]'s 503, its source, and gives the
/// server's instant (120 s after `start`), `retry_after` from the call's end.
fn gives_the_servers_wait(err: &ApiError, start: Instant, retry_after: Duration) {
    assert_eq!(
        source_of(err),
        Some((Some(503), Some("overloaded".to_owned())))
    );
    assert_eq!(err.retry_at(), Some(start + ms(120_000)));
    assert_eq!(err.retry_after(), Some(retry_after));
}

/// Asked-for waits honoured up to 1 s; one slot, no queue.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [503], retry_after_cap = "1s"),
    bulkhead(concurrency = 1, queue = 0)
)]
pub trait CappedBulk {
    #[get("/a")]
    async fn a(&self) -> Result<String, ApiError>;
}

/// The bulkhead has no time of its own: the refusal gives the server's.
#[tokio::test(start_paused = true)]
async fn retry_refused_by_the_bulkhead_gives_the_servers_retry_after() {
    let t = ScriptedTransport::new([overloaded_for_120s(), Step::hang()]);
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<CappedBulkClient>(&t);
    let first = tokio::spawn({
        let api = api.clone();
        async move { api.a().await }
    });
    // At 1 ms, during the first call's 1 s wait, a second call takes the one slot.
    tokio::time::sleep(ms(1)).await;
    let holder = tokio::spawn({
        let api = api.clone();
        async move { api.a().await }
    });
    let err = first.await.unwrap().unwrap_err();
    assert_eq!(
        (err.kind(), clock.now_ms()),
        (ErrorKind::BulkheadFull, 1000)
    );
    gives_the_servers_wait(&err, start, ms(119_000));
    assert_eq!(t.attempts(), 2);
    holder.abort();
}

/// Asked-for waits honoured up to 1 s; a token every 2 s, burst 1.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [503], retry_after_cap = "1s"),
    rate_limit(per_second = 0.5, burst = 1)
)]
pub trait CappedLimit {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// The next token (at 2 s) is past the 1.5 s deadline, and the server's 120 s is
/// later still: the refusal gives the later of the two.
#[tokio::test(start_paused = true)]
async fn retry_refused_by_the_rate_limit_gives_the_later_of_its_token_and_the_servers_wait() {
    let t = ScriptedTransport::new([overloaded_for_120s()]);
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<CappedLimitClient>(&t);
    let err = api
        .with_options(CallOptions::new().deadline(ms(1500)))
        .resource()
        .await
        .unwrap_err();
    assert_eq!((err.kind(), clock.now_ms()), (ErrorKind::RateLimited, 1000));
    gives_the_servers_wait(&err, start, ms(119_000));
    assert_eq!(t.attempts(), 1);
    assert_nothing_leaked(&t);
}

/// The retry's token, at 100 ms, is past the 100 ms deadline; the 503 named no wait:
/// the refusal gives its own time.
#[tokio::test(start_paused = true)]
async fn retry_refused_by_the_rate_limit_gives_its_token_when_the_server_named_no_wait() {
    let t = ScriptedTransport::new([Step::status(503).body("overloaded")]);
    let start = Instant::now();
    let api = scripted::<LimitedRetryClient>(&t);
    let err = api
        .with_options(CallOptions::new().deadline(ms(100)))
        .resource()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::RateLimited);
    assert_eq!(err.retry_at(), Some(start + ms(100)));
    assert_eq!(err.retry_after(), Some(ms(80)), "from the refusal at 20 ms");
}

/// Asked-for waits honoured up to 1 s; one failure opens the breaker for 2 s.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [503], retry_after_cap = "1s"),
    breaker(failures = 1, reset = "2s")
)]
pub trait CappedBreaker {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// The breaker will still be open when the 1 s wait ends (until 2 s), and the call
/// ends at once with `CircuitOpen`; the server asked for 120 s, later than the
/// breaker's end: the refusal gives the later.
#[tokio::test(start_paused = true)]
async fn retry_foreseen_open_gives_the_later_of_the_breakers_end_and_the_servers_wait() {
    let t = ScriptedTransport::new([overloaded_for_120s()]);
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<CappedBreakerClient>(&t);
    let err = api.resource().await.unwrap_err();
    assert_eq!((err.kind(), clock.now_ms()), (ErrorKind::CircuitOpen, 0));
    gives_the_servers_wait(&err, start, ms(120_000));
    assert_eq!(t.attempts(), 1);
    assert_nothing_leaked(&t);
}

/// The breaker's end (2 s) is later than the server's 1 s: the refusal gives the
/// breaker's.
#[tokio::test(start_paused = true)]
async fn retry_foreseen_open_gives_the_breakers_end_when_it_is_later() {
    let t = ScriptedTransport::new([Step::status(503)
        .body("overloaded")
        .header("retry-after", "1")]);
    let start = Instant::now();
    let api = scripted::<CappedBreakerClient>(&t);
    let err = api.resource().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::CircuitOpen);
    assert_eq!(err.retry_at(), Some(start + ms(2000)));
    assert_eq!(err.retry_after(), Some(ms(2000)));
    assert_eq!(t.attempts(), 1);
}
