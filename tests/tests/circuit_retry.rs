//! S19 circuit_retry_accounting: the breaker counts attempts, not calls, and a call
//! that still has retries left does not sleep just to be refused.

use std::error::Error as _;

use resilient_api::circuit_breaker::state::Phase;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, resilient_api};
use tests::{Clock, assert_nothing_leaked, ms, script_follow_up, scripted};
use tokio::time::Instant;

/// Two failures trip it; two retries.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 2, reset = "1s")
)]
pub trait Accounting {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// Two failures trip it; one retry, so the tripping attempt is the last.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 2, reset = "1s")
)]
pub trait LastRetry {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// Two failures trip it; no retries.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 2, reset = "1s")
)]
pub trait NoRetry {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// The error `e` wraps, as an `ApiError`.
fn source_of(e: &ApiError) -> &ApiError {
    e.source()
        .expect("a source")
        .downcast_ref::<ApiError>()
        .expect("the source is the underlying ApiError")
}

#[tokio::test(start_paused = true)]
async fn s19_circuit_retry_accounting() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        Step::status(503).body("busy"),
    ]);
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<AccountingClient>(&t);

    // 503 at t=0 (one failure), 503 at t=20 (two: tripped). Retries are left, but the
    // breaker would still be open after the 20 ms backoff: the call ends now.
    let err = api.resource().await.unwrap_err();
    assert_eq!(clock.now_ms(), 20);
    assert_eq!(err.kind(), ErrorKind::CircuitOpen);
    assert_eq!(err.attempts(), 2);
    let cause = source_of(&err);
    assert_eq!(cause.kind(), ErrorKind::Status);
    assert_eq!(cause.status(), Some(503));
    assert_eq!(cause.body_text().as_deref(), Some("busy"));
    assert_eq!(t.attempts(), 2);
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(20)]);
    assert_eq!(
        err.retry_at(),
        Some(start + ms(1020)),
        "says when it may close"
    );

    let state = api.circuit_state();
    assert_eq!(state.phase, Phase::Open);
    assert_eq!(state.open_until, Some(start + ms(1020)));

    // The next call is refused at once, without a dispatch.
    let err = api.resource().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::CircuitOpen);
    assert!(err.is_rejection());
    assert_eq!(err.retry_at(), Some(start + ms(1020)));
    assert_eq!(clock.now_ms(), 20);
    assert_eq!(t.attempts(), 2);

    // Still refused one tick before the cooldown ends.
    tokio::time::sleep_until(start + ms(1019)).await;
    assert_eq!(
        api.resource().await.unwrap_err().kind(),
        ErrorKind::CircuitOpen
    );
    assert_eq!(t.attempts(), 2);

    // At t=1020 the probe goes through and closes it.
    tokio::time::sleep_until(start + ms(1020)).await;
    script_follow_up(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
    assert_eq!(clock.now_ms(), 1020);
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(20), ms(1020)]);
    let state = api.circuit_state();
    assert_eq!(
        (state.phase, state.consecutive_failures),
        (Phase::Closed, 0)
    );
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn breaker_trip_with_no_retry_left_reports_the_failure() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        Step::status(503).body("still busy"),
    ]);
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<LastRetryClient>(&t);

    // The last attempt (t=20) trips the breaker: the caller sees that 503, not
    // CircuitOpen.
    let err = api.resource().await.unwrap_err();
    assert_eq!(clock.now_ms(), 20);
    assert_eq!(err.kind(), ErrorKind::Status);
    assert_eq!(err.status(), Some(503));
    assert_eq!(err.body_text().as_deref(), Some("still busy"));
    assert_eq!(err.attempts(), 2);
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(20)]);
    let state = api.circuit_state();
    assert_eq!(state.phase, Phase::Open);
    assert_eq!(state.open_until, Some(start + ms(1020)));

    let err = api.resource().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::CircuitOpen);
    assert_eq!(t.attempts(), 2);

    tokio::time::sleep_until(start + ms(1020)).await;
    script_follow_up(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
    assert_eq!(api.circuit_state().phase, Phase::Closed);
}

#[tokio::test(start_paused = true)]
async fn breaker_does_not_count_4xx() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        Step::status(404).body("missing"),
        Step::status(400).body("bad"),
        Step::status(429).body("slow down"),
        Step::status(503).body("busy"),
    ]);
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<NoRetryClient>(&t);

    let err = api.resource().await.unwrap_err();
    assert_eq!((err.kind(), err.status()), (ErrorKind::Status, Some(503)));
    assert_eq!(api.circuit_state().consecutive_failures, 1);

    for (status, body) in [(404, "missing"), (400, "bad"), (429, "slow down")] {
        let err = api.resource().await.unwrap_err();
        assert_eq!(
            (err.kind(), err.status()),
            (ErrorKind::Status, Some(status))
        );
        assert_eq!(err.body_text().as_deref(), Some(body));
        assert_eq!(err.attempts(), 1);
        let state = api.circuit_state();
        assert_eq!(
            (state.phase, state.consecutive_failures),
            (Phase::Closed, 1),
            "a {status} is neither a failure nor a success"
        );
    }

    // The second 5xx in a row (4xx in between count as nothing) trips it.
    let err = api.resource().await.unwrap_err();
    assert_eq!((err.kind(), err.status()), (ErrorKind::Status, Some(503)));
    let state = api.circuit_state();
    assert_eq!(state.phase, Phase::Open);
    assert_eq!(state.open_until, Some(start + ms(1000)));
    assert_eq!(clock.now_ms(), 0);
    assert_eq!(t.attempts(), 5);
    assert_eq!(
        api.resource().await.unwrap_err().kind(),
        ErrorKind::CircuitOpen
    );
    assert_eq!(t.attempts(), 5);

    tokio::time::sleep_until(start + ms(1000)).await;
    script_follow_up(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
    assert_eq!(api.circuit_state().phase, Phase::Closed);
}

/// 4xx answers from a closed breaker: however many, it stays closed.
#[tokio::test(start_paused = true)]
async fn breaker_stays_closed_under_4xx_only() {
    let t = ScriptedTransport::new((0..5).map(|_| Step::status(404).body("missing")));
    let api = scripted::<AccountingClient>(&t);
    for _ in 0..5 {
        let err = api.resource().await.unwrap_err();
        assert_eq!((err.kind(), err.status()), (ErrorKind::Status, Some(404)));
        assert_eq!(err.attempts(), 1, "4xx are never retried");
    }
    let state = api.circuit_state();
    assert_eq!(
        (state.phase, state.consecutive_failures),
        (Phase::Closed, 0)
    );
    assert_eq!(t.attempts(), 5);
    script_follow_up(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
}
