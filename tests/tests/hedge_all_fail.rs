//! S14 hedge_all_fail: every hedged branch fails, in either order. The call stays
//! pending until the last branch fails, then reports that all failed, with the
//! last-completing branch's error as its source. A non-retryable failure is an
//! answer and ends the call at once.

use std::time::Duration;

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, resilient_api};
use tests::{Clock, assert_follow_up_succeeds, ms, scripted};

/// A hedged search with no retries.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0, on = [503]))]
pub trait Search {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;
}

/// Run the call; check it is still pending 1 ms before `settles_at`, then that it
/// ended at exactly `settles_at` with every branch failed and `last_body` (the
/// last-completing branch) as the source.
async fn all_fail(steps: [Step; 2], settles_at: u64, last_body: &str) {
    let t = ScriptedTransport::new(steps);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    let call = api.search();
    tokio::pin!(call);
    let pending = tokio::time::timeout(ms(settles_at - 1), &mut call).await;
    assert!(pending.is_err(), "settled early: {pending:?}");
    assert_eq!(clock.now_ms(), settles_at - 1);
    assert_eq!(t.attempts(), 2);
    assert_eq!(t.in_flight(), 1, "the last branch is still running");

    let e = call.await.expect_err("every branch failed");
    assert_eq!(clock.now_ms(), settles_at);
    assert_eq!(e.kind(), ErrorKind::AllHedgesFailed, "{e:?}");
    assert_eq!(e.attempts(), 2);
    assert_eq!(e.status(), Some(503));
    assert_eq!(e.body_text().as_deref(), Some(last_body));
    let source = std::error::Error::source(&e)
        .and_then(|s| s.downcast_ref::<ApiError>())
        .expect("the last branch's error as source");
    assert_eq!(source.kind(), ErrorKind::Status);
    assert_eq!(source.status(), Some(503));
    assert_eq!(source.body_text().as_deref(), Some(last_body));
    assert_eq!(t.attempts(), 2);
    assert_eq!(t.dispatch_times(), [ms(0), ms(10)]);

    // Nothing later.
    tokio::time::sleep(ms(100)).await;
    assert_eq!(t.attempts(), 2);
    assert_follow_up_succeeds(&t, || api.search()).await;
}

#[tokio::test(start_paused = true)]
async fn s14_hedge_all_fail_primary_first() {
    // Primary fails at t=5, before the hedge is even due; the hedge still starts at
    // t=10 and fails at t=30.
    all_fail(
        [
            Step::status(503).body("primary").delay(ms(5)),
            Step::status(503).body("hedge").delay(ms(20)),
        ],
        30,
        "hedge",
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn s14_hedge_all_fail_hedge_first() {
    // The hedge (launched at t=10) fails at t=20; the primary fails last, at t=40.
    all_fail(
        [
            Step::status(503).body("primary").delay(ms(40)),
            Step::status(503).body("hedge").delay(ms(10)),
        ],
        40,
        "primary",
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn s14_hedge_all_fail_transport_errors() {
    // Failures without a response: a reset (t=5) and a connect error (t=10). The
    // source is the last one, the connect error.
    let t = ScriptedTransport::new([Step::reset().delay(ms(5)), Step::connect_error()]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    let e = api.search().await.unwrap_err();
    assert_eq!(clock.now_ms(), 10);
    assert_eq!(e.kind(), ErrorKind::AllHedgesFailed);
    assert_eq!(e.status(), None);
    assert_eq!(e.attempts(), 2);
    let source = std::error::Error::source(&e)
        .and_then(|s| s.downcast_ref::<ApiError>())
        .expect("the last branch's error as source");
    assert_eq!(source.kind(), ErrorKind::Connect);
    assert_eq!(t.attempts(), 2);
    assert_eq!(t.dispatch_times(), [ms(0), ms(10)]);
    assert_follow_up_succeeds(&t, || api.search()).await;
}

#[tokio::test(start_paused = true)]
async fn s14_non_retryable_failure_ends_the_call_at_once() {
    // The hedge is pending (launched at t=10, hangs) when the primary answers 404 at
    // t=15: that is an answer, the call ends with it and the hedge is dropped.
    let t = ScriptedTransport::new([
        Step::status(404).body("no such thing").delay(ms(15)),
        Step::hang(),
    ]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    let e = api.search().await.unwrap_err();
    assert_eq!(clock.now_ms(), 15);
    assert_eq!(e.kind(), ErrorKind::Status, "{e:?}");
    assert_eq!(e.status(), Some(404));
    assert_eq!(e.body_text().as_deref(), Some("no such thing"));
    assert_eq!(e.attempts(), 2);
    assert_eq!(t.attempts(), 2);
    assert_eq!(t.dispatch_times(), [ms(0), ms(10)]);
    assert_eq!(t.in_flight(), 0, "the pending hedge was dropped");
    assert_follow_up_succeeds(&t, || api.search()).await;
}

#[tokio::test(start_paused = true)]
async fn s14_non_retryable_failure_before_the_hedge_is_due_launches_none() {
    let t = ScriptedTransport::new([Step::status(404).body("no such thing").delay(ms(5))]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    let e = api.search().await.unwrap_err();
    assert_eq!(clock.now_ms(), 5);
    assert_eq!(e.kind(), ErrorKind::Status);
    assert_eq!(e.status(), Some(404));
    assert_eq!(e.attempts(), 1);
    tokio::time::sleep(ms(50)).await;
    assert_eq!(t.attempts(), 1, "no hedge after the call ended");
    assert_eq!(t.dispatch_times(), [Duration::ZERO]);
    assert_follow_up_succeeds(&t, || api.search()).await;
}

#[tokio::test(start_paused = true)]
async fn s14_retryable_failure_then_hedge_success_wins() {
    // A retryable failure does not end the round while the hedge may still start:
    // the primary's 503 at t=5 loses to the hedge's 200 at t=15.
    let t = ScriptedTransport::new([
        Step::status(503).body("primary").delay(ms(5)),
        Step::status(200).body("hedge").delay(ms(5)),
    ]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    assert_eq!(api.search().await.unwrap(), "hedge");
    assert_eq!(clock.now_ms(), 15);
    assert_eq!(t.attempts(), 2);
    assert_eq!(t.dispatch_times(), [ms(0), ms(10)]);
    assert_follow_up_succeeds(&t, || api.search()).await;
}
