//! The server's requested wait (`Retry-After`) is on the error whether or not the
//! call retried: a caller whose retries are spent, off, or not allowed (a
//! non-idempotent method) still learns when the server asked to be called again.

use std::time::Duration;

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, resilient_api};
use tests::{Clock, ms, scripted};
use tokio::time::Instant;

/// One retry on 429 and 503, 20 ms apart.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [429, 503])
)]
pub trait Waits {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;

    #[get("/off")]
    #[retry(max = 0)]
    async fn no_retry(&self) -> Result<String, ApiError>;

    #[post("/charge")]
    async fn charge(&self) -> Result<String, ApiError>;

    #[get("/capped")]
    #[retry(max = 1, retry_after_cap = "1s")]
    async fn capped(&self) -> Result<String, ApiError>;
}

/// Regression: the last attempt's 503 asked for 1 s, and the error said nothing.
#[tokio::test(start_paused = true)]
async fn retry_after_is_kept_when_retries_are_spent() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy").header("retry-after", "1"),
        Step::status(503).body("busy").header("retry-after", "2"),
    ]);
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<WaitsClient>(&t);
    let e = api.resource().await.unwrap_err();
    assert_eq!(
        (e.kind(), e.status(), e.attempts()),
        (ErrorKind::Status, Some(503), 2)
    );
    assert_eq!(clock.now_ms(), 1000);
    assert_eq!(e.retry_after(), Some(Duration::from_secs(2)));
    assert_eq!(e.retry_at(), Some(start + ms(3000)));
}

/// Regression: with `retry(max = 0)`, a 429's `Retry-After: 5` was dropped.
#[tokio::test(start_paused = true)]
async fn retry_after_is_kept_with_retries_off() {
    let t = ScriptedTransport::new([Step::status(429)
        .body("slow down")
        .header("retry-after", "5")]);
    let start = Instant::now();
    let api = scripted::<WaitsClient>(&t);
    let e = api.no_retry().await.unwrap_err();
    assert_eq!((e.status(), e.attempts()), (Some(429), 1));
    assert_eq!(e.retry_after(), Some(Duration::from_secs(5)));
    assert_eq!(e.retry_at(), Some(start + ms(5000)));
}

/// Regression: a POST is not retried on 429 (right), but the server's wait was
/// dropped from the error (wrong).
#[tokio::test(start_paused = true)]
async fn retry_after_is_kept_on_a_non_idempotent_method() {
    let t = ScriptedTransport::new([Step::status(429)
        .body("slow down")
        .header("retry-after", "5")]);
    let api = scripted::<WaitsClient>(&t);
    let e = api.charge().await.unwrap_err();
    assert_eq!((e.status(), e.attempts()), (Some(429), 1));
    assert_eq!(e.retry_after(), Some(Duration::from_secs(5)));
    assert_eq!(t.attempts(), 1);
}

/// An error without the header says nothing.
#[tokio::test(start_paused = true)]
async fn no_retry_after_without_the_header() {
    let t = ScriptedTransport::new([Step::status(429).body("slow down")]);
    let api = scripted::<WaitsClient>(&t);
    let e = api.no_retry().await.unwrap_err();
    assert_eq!((e.retry_after(), e.retry_at()), (None, None));
}

/// The cap bounds the client's own wait, not what the caller is told: a server that
/// asks for two minutes is retried after the 1 s cap, and the error that ends the
/// call says what the last answer asked for, uncapped (DESIGN §3.3: "carrying the
/// server's requested retry time").
#[tokio::test(start_paused = true)]
async fn the_error_says_the_wait_the_server_asked_for_not_the_capped_one() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy").header("retry-after", "120"),
        Step::status(503).body("busy").header("retry-after", "90"),
    ]);
    let start = Instant::now();
    let api = scripted::<WaitsClient>(&t);
    let e = api.capped().await.unwrap_err();
    assert_eq!((e.status(), e.attempts()), (Some(503), 2));
    assert_eq!(
        t.dispatch_times(),
        [ms(0), ms(1000)],
        "retried after the cap"
    );
    assert_eq!(e.retry_after(), Some(Duration::from_secs(90)));
    assert_eq!(e.retry_at(), Some(start + ms(91_000)));

    // With retries off, the default cap of 60 s does not shorten an hour either.
    t.push([Step::status(429).header("retry-after", "3600")]);
    let now = Instant::now();
    let e = api.no_retry().await.unwrap_err();
    assert_eq!(e.retry_after(), Some(Duration::from_secs(3600)));
    assert_eq!(e.retry_at(), Some(now + Duration::from_secs(3600)));
}
