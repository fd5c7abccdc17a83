//! Cancelling during a backoff (S4) and during a server's `Retry-After` wait (S12), or
//! while the retry is decided (an on-retry hook cancelling the token), and the exact
//! waits a `Retry-After` (or `retry-after-ms`) header asks for.

use std::time::Duration;

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, CancellationToken, ErrorKind, resilient_api};
use tests::{Clock, assert_nothing_leaked, ms, script_follow_up, scripted, scripted_builder};

/// Two retries, 100 ms apart.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 2, backoff = fixed(delay = "100ms"), on = [503])
)]
pub trait SlowBackoff {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// One retry after 50 ms, or after what the server asks for, at most 1 s.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 1, backoff = fixed(delay = "50ms"), on = [503], retry_after_cap = "1s")
)]
pub trait Polite {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

fn polite_client(t: &ScriptedTransport) -> PoliteClient {
    scripted_builder::<PoliteClient>(t)
        .wall_clock(tests::fixed_wall_clock)
        .build()
        .expect("the client builds")
}

#[tokio::test(start_paused = true)]
async fn s4_retry_backoff_cancel() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        Step::status(200).body("ready"),
        Step::status(200).body("ready"),
    ]);
    let clock = Clock::start();
    let api = scripted::<SlowBackoffClient>(&t);
    let token = CancellationToken::new();
    let cancellable = api.with_options(CallOptions::new().cancel_on(token.clone()));
    let call = tokio::spawn(async move { cancellable.resource().await });

    tokio::time::sleep(ms(20)).await;
    assert_eq!(t.attempts(), 1);
    assert!(!call.is_finished());
    token.cancel();
    let e = call.await.unwrap().unwrap_err();
    assert_eq!(clock.now_ms(), 20);
    assert_eq!(e.kind(), ErrorKind::Cancelled);
    assert_eq!(e.attempts(), 1);

    // Nothing is dispatched when the backoff would have ended, or later.
    tests::assert_no_late_dispatch(&t, 1, Duration::from_secs(1)).await;
    assert_nothing_leaked(&t);

    // Follow-up on the same client: the next scripted 200.
    assert_eq!(api.resource().await.unwrap(), "ready");
    assert_eq!(t.attempts(), 2);
    assert_nothing_leaked(&t);
}

/// A 503 carrying `header: value`, then a 200: the retry must leave exactly
/// `expected_ms` after the first dispatch.
async fn assert_waits(header: &str, value: &str, expected_ms: u64) {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy").header(header, value),
        Step::status(200).body("ready"),
    ]);
    let clock = Clock::start();
    let api = polite_client(&t);

    assert_eq!(
        api.resource().await.expect("the call failed"),
        "ready",
        "{header}: {value}"
    );
    assert_eq!(clock.now_ms(), expected_ms, "{header}: {value}");
    assert_eq!(
        t.dispatch_times(),
        vec![ms(0), ms(expected_ms)],
        "{header}: {value}"
    );

    tests::assert_no_late_dispatch(&t, 2, Duration::from_secs(2)).await;
    script_follow_up(&t);
    assert_eq!(api.resource().await.expect("the call failed"), "ok");
    assert_eq!(t.attempts(), 3);
}

/// The same 503, but the caller cancels at t=20, during the wait: the call settles at
/// once and nothing more is dispatched.
async fn assert_cancel_during_wait(header: &str, value: &str) {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy").header(header, value),
        Step::status(200).body("ready"),
    ]);
    let clock = Clock::start();
    let api = polite_client(&t);
    let token = CancellationToken::new();
    let cancellable = api.with_options(CallOptions::new().cancel_on(token.clone()));
    let call = tokio::spawn(async move { cancellable.resource().await });

    tokio::time::sleep(ms(20)).await;
    assert!(!call.is_finished(), "{header}: {value}");
    token.cancel();
    let e = call
        .await
        .expect("the call task panicked")
        .expect_err("the call succeeded");
    assert_eq!(clock.now_ms(), 20, "{header}: {value}");
    assert_eq!(e.kind(), ErrorKind::Cancelled, "{header}: {value}");
    assert_eq!(e.attempts(), 1);

    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(t.attempts(), 1, "{header}: {value}");
    assert_nothing_leaked(&t);

    // Follow-up: the 200 the cancelled call never reached.
    assert_eq!(api.resource().await.expect("the call failed"), "ready");
    assert_eq!(t.attempts(), 2);
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn s12_retry_after_cancel_delta_seconds() {
    assert_waits("retry-after", "1", 1000).await;
    assert_cancel_during_wait("retry-after", "1").await;
}

#[tokio::test(start_paused = true)]
async fn s12_retry_after_cancel_http_date() {
    let date = tests::http_date_after(1);
    assert_waits("retry-after", &date, 1000).await;
    assert_cancel_during_wait("retry-after", &date).await;
}

#[tokio::test(start_paused = true)]
async fn s12_retry_after_cancel_malformed_falls_back_to_the_backoff() {
    assert_waits("retry-after", "bad", 50).await;
    assert_cancel_during_wait("retry-after", "bad").await;
}

#[tokio::test(start_paused = true)]
async fn s12_retry_after_cancel_capped() {
    assert_waits("retry-after", "1000", 1000).await;
    assert_cancel_during_wait("retry-after", "1000").await;
}

#[tokio::test(start_paused = true)]
async fn malformed_retry_after_values_fall_back_to_the_backoff() {
    for value in ["-5", "1.5", "5s", ""] {
        assert_waits("retry-after", value, 50).await;
    }
}

#[tokio::test(start_paused = true)]
async fn http_date_far_ahead_is_capped() {
    assert_waits("retry-after", &tests::http_date_after(3600), 1000).await;
}

#[tokio::test(start_paused = true)]
async fn http_date_in_the_past_retries_at_once() {
    let past = httpdate::fmt_http_date(tests::fixed_wall_clock() - Duration::from_secs(5));
    assert_waits("retry-after", &past, 0).await;
}

#[tokio::test(start_paused = true)]
async fn retry_after_ms_sets_the_wait() {
    assert_waits("retry-after-ms", "300", 300).await;
    assert_cancel_during_wait("retry-after-ms", "300").await;
}

#[tokio::test(start_paused = true)]
async fn retry_after_ms_is_capped() {
    assert_waits("retry-after-ms", "5000", 1000).await;
}

#[tokio::test(start_paused = true)]
async fn retry_after_ms_wins_over_retry_after() {
    let t = ScriptedTransport::new([
        Step::status(503)
            .body("busy")
            .header("retry-after", "1")
            .header("retry-after-ms", "300"),
        Step::status(200).body("ready"),
    ]);
    let clock = Clock::start();
    let api = polite_client(&t);

    assert_eq!(api.resource().await.unwrap(), "ready");
    assert_eq!(clock.now_ms(), 300);
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(300)]);
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn retry_after_on_the_last_attempt_is_reported() {
    // No retry left: the error ends the call at once and still carries the status.
    let t = ScriptedTransport::new([
        Step::status(503).body("busy").header("retry-after", "1"),
        Step::status(503)
            .body("still busy")
            .header("retry-after", "1"),
    ]);
    let clock = Clock::start();
    let api = polite_client(&t);

    let e = api.resource().await.unwrap_err();
    assert_eq!(clock.now_ms(), 1000);
    assert_eq!(e.kind(), ErrorKind::Status);
    assert_eq!(e.status(), Some(503));
    assert_eq!(e.body_text().as_deref(), Some("still busy"));
    assert_eq!(e.attempts(), 2);
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(1000)]);
    script_follow_up(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
}

/// The call's token cancelled by the on-retry hook, before the retry: with a backoff
/// of 100 ms, and with the server's `Retry-After: 0`, a wait of none. Returns the
/// call's error kind, when it ended and how many requests were sent.
async fn cancelled_by_on_retry(first: Step) -> (Option<ErrorKind>, u64, usize) {
    let t = ScriptedTransport::new([first, Step::status(200).body("ok")]);
    let token = CancellationToken::new();
    let hook_token = token.clone();
    let api = scripted_builder::<SlowBackoffClient>(&t)
        .on_retry(move |_: &resilient_api::client::RetryEvent<'_>| {
            hook_token.cancel();
            Ok(())
        })
        .build()
        .expect("the client builds")
        .with_options(CallOptions::new().cancel_on(token));
    let clock = Clock::start();
    let r = api.resource().await;
    assert_nothing_leaked(&t);
    (r.err().map(|e| e.kind()), clock.now_ms(), t.attempts())
}

/// Regression: a retry with no wait (`Retry-After: 0`) went straight into its attempt
/// in the same poll, so a token the on-retry hook had just cancelled was never looked
/// at: the retry was sent after the cancellation and its 200 returned as `Ok`. Nothing
/// is dispatched after cancellation (DESIGN §3.4): the call ends at once as
/// `Cancelled`, with its one request, as it does with a backoff to wait.
#[tokio::test(start_paused = true)]
async fn a_token_cancelled_while_the_retry_is_decided_sends_nothing_more() {
    assert_eq!(
        cancelled_by_on_retry(Step::status(503)).await,
        (Some(ErrorKind::Cancelled), 0, 1),
        "a backoff to wait: (error kind, ended at ms, requests)"
    );
    assert_eq!(
        cancelled_by_on_retry(Step::status(503).header("retry-after", "0")).await,
        (Some(ErrorKind::Cancelled), 0, 1),
        "no wait: (error kind, ended at ms, requests)"
    );
}
