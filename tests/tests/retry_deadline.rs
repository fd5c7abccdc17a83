//! Retries under a total deadline (S10): a wait that cannot fit fails at once with the
//! real error; a deadline during an attempt fires exactly on time.

use std::time::Duration;

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, ErrorKind, TimeoutKind, resilient_api};
use tests::{Clock, assert_nothing_leaked, ms, script_follow_up, scripted};

/// A 300 ms backoff that cannot fit the 100 ms deadline.
#[resilient_api(
    timeout(attempt = "100ms", total = "100ms"),
    retry(max = 1, backoff = fixed(delay = "300ms"), on = [503])
)]
pub trait LongBackoff {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// An 80 ms backoff that fits the 100 ms deadline.
#[resilient_api(
    timeout(attempt = "100ms", total = "100ms"),
    retry(max = 1, backoff = fixed(delay = "80ms"), on = [503])
)]
pub trait ShortBackoff {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn s10_retry_total_deadline_backoff_too_long() {
    let t = ScriptedTransport::new([Step::status(503).body("busy")]);
    let clock = Clock::start();
    let api = scripted::<LongBackoffClient>(&t);

    let e = api.resource().await.unwrap_err();
    assert_eq!(clock.now_ms(), 0);
    assert_eq!(e.kind(), ErrorKind::Status);
    assert_eq!(e.status(), Some(503));
    assert_eq!(e.body_text().as_deref(), Some("busy"));
    assert_eq!(e.attempts(), 1);
    assert_eq!(e.retry_after(), None);

    tests::assert_no_late_dispatch(&t, 1, Duration::from_secs(1)).await;
    script_follow_up(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn s10_retry_total_deadline_hang_after_backoff() {
    let t = ScriptedTransport::new([Step::status(503).body("busy"), Step::hang()]);
    let clock = Clock::start();
    let api = scripted::<ShortBackoffClient>(&t);
    let api2 = api.clone();
    let call = tokio::spawn(async move { api2.resource().await });

    tokio::time::sleep(ms(99)).await;
    assert!(!call.is_finished(), "settled before the deadline");
    assert_eq!(t.attempts(), 2);
    assert_eq!(t.in_flight(), 1);

    let e = call.await.unwrap().unwrap_err();
    assert_eq!(clock.now_ms(), 100);
    assert_eq!(e.kind(), ErrorKind::Deadline);
    assert_eq!(e.timeout(), Some(TimeoutKind::Total));
    assert_eq!(e.attempts(), 2);
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(80)]);
    assert_nothing_leaked(&t);

    tests::assert_no_late_dispatch(&t, 2, Duration::from_secs(1)).await;
    tests::assert_follow_up_succeeds(&t, || api.resource()).await;
}

#[tokio::test(start_paused = true)]
async fn retry_after_that_cannot_fit_fails_at_once_and_carries_it() {
    let t = ScriptedTransport::new([Step::status(503).body("busy").header("retry-after", "1")]);
    let start = tokio::time::Instant::now();
    let clock = Clock::start();
    let api = scripted::<ShortBackoffClient>(&t);

    let e = api.resource().await.unwrap_err();
    assert_eq!(clock.now_ms(), 0);
    assert_eq!(e.kind(), ErrorKind::Status);
    assert_eq!(e.status(), Some(503));
    assert_eq!(e.body_text().as_deref(), Some("busy"));
    assert_eq!(e.attempts(), 1);
    assert_eq!(e.retry_after(), Some(Duration::from_secs(1)));
    assert_eq!(e.retry_at(), Some(start + Duration::from_secs(1)));

    tests::assert_no_late_dispatch(&t, 1, Duration::from_secs(2)).await;
    script_follow_up(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
}

#[tokio::test(start_paused = true)]
async fn wait_ending_exactly_at_the_deadline_fails_at_once() {
    let t = ScriptedTransport::new([Step::status(503)
        .body("busy")
        .header("retry-after-ms", "100")]);
    let clock = Clock::start();
    let api = scripted::<ShortBackoffClient>(&t);

    let e = api.resource().await.unwrap_err();
    assert_eq!(clock.now_ms(), 0);
    assert_eq!(e.kind(), ErrorKind::Status);
    assert_eq!(e.retry_after(), Some(ms(100)));
    assert_eq!(t.attempts(), 1);
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn wait_ending_just_before_the_deadline_is_taken() {
    let t = ScriptedTransport::new([
        Step::status(503)
            .body("busy")
            .header("retry-after-ms", "99"),
        Step::status(200).body("ready"),
    ]);
    let clock = Clock::start();
    let api = scripted::<ShortBackoffClient>(&t);

    assert_eq!(api.resource().await.unwrap(), "ready");
    assert_eq!(clock.now_ms(), 99);
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(99)]);
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn per_call_deadline_counts_when_fitting_the_backoff() {
    // The trait's 100 ms would fit the 80 ms backoff; the caller's 50 ms does not.
    let t = ScriptedTransport::new([Step::status(503).body("busy")]);
    let clock = Clock::start();
    let api = scripted::<ShortBackoffClient>(&t);

    let quick = api.with_options(CallOptions::new().deadline(ms(50)));
    let e = quick.resource().await.unwrap_err();
    assert_eq!(clock.now_ms(), 0);
    assert_eq!(e.kind(), ErrorKind::Status);
    assert_eq!(e.status(), Some(503));
    assert_eq!(e.attempts(), 1);
    assert_eq!(t.attempts(), 1);
    script_follow_up(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
}

/// A 79 ms backoff under a 100 ms deadline.
#[resilient_api(
    timeout(attempt = "100ms", total = "100ms"),
    retry(max = 1, backoff = fixed(delay = "79ms"), on = [503])
)]
pub trait SameTick {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// Regression: off the timer's millisecond grid (as every real-clock instant is), the
/// 503 lands at 20.4 ms and the 79 ms backoff would end at 99.4 ms, "before" the 100
/// ms deadline; but tokio rounds the sleep up to the 100 ms tick, where the deadline
/// fires first. The call slept 79 ms just to fail with `Deadline`, losing the 503. A
/// wait must now end a whole tick before the deadline, or the call fails at once.
#[tokio::test(start_paused = true)]
async fn a_backoff_ending_in_the_deadlines_millisecond_fails_at_once() {
    let t = ScriptedTransport::new([Step::status(503).body("busy").delay(ms(20)), Step::hang()]);
    let clock = Clock::start();
    let api = scripted::<SameTickClient>(&t);
    let call = tests::spawn_timed(clock, async move { api.resource().await });
    tests::settle().await;
    tokio::time::advance(Duration::from_micros(20_400)).await;
    tests::settle().await;
    assert!(call.is_finished(), "decided when the 503 came");
    let (r, at) = call.await.unwrap();
    let e = r.unwrap_err();
    assert_eq!(
        (e.kind(), e.status(), e.attempts(), at),
        (ErrorKind::Status, Some(503), 1, 20)
    );
    assert_eq!(t.attempts(), 1);
}
