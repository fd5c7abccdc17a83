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

/// Hedged searches with two retries, 50 ms apart; a breaker that the rounds' failures
/// do not trip.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 2, backoff = fixed(delay = "50ms"), on = [503]),
    breaker(failures = 10, reset = "30s")
)]
pub trait Retried {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;

    #[get("/search")]
    #[hedge(delay = "10ms", max = 3)]
    #[retry(max = 1)]
    async fn search_3(&self) -> Result<String, ApiError>;
}

/// A 503 answered 20 ms after it was sent.
fn slow_503(body: &'static str) -> Step {
    Step::status(503).body(body).delay(ms(20))
}

/// `retry(max = N)` counts hedged rounds, not branches: a round is one attempt of the
/// retry loop (DESIGN §3.1: the hedge sits inside the retry loop), however many
/// branches it sent. With `max = 2` and two branches a round, three rounds of two
/// (six dispatches) before the call fails; with `max = 1` and three branches a round,
/// two rounds of three.
#[tokio::test(start_paused = true)]
async fn retry_max_counts_hedged_rounds_not_branches() {
    // Each round: a branch at its start and one 10 ms later, each failing 20 ms after
    // it left; the round ends at +30, the next leaves 50 ms later.
    let t = ScriptedTransport::new(["a1", "b1", "a2", "b2", "a3", "b3"].map(slow_503));
    let clock = Clock::start();
    let api = scripted::<RetriedClient>(&t);

    let e = api.search().await.unwrap_err();
    assert_eq!(clock.now_ms(), 190);
    assert_eq!(
        (e.kind(), e.status(), e.attempts()),
        (ErrorKind::AllHedgesFailed, Some(503), 6)
    );
    assert_eq!(e.body_text().as_deref(), Some("b3"));
    assert_eq!(
        t.dispatch_times(),
        [0, 10, 80, 90, 160, 170].map(ms),
        "three rounds of two branches"
    );
    tokio::time::sleep(ms(1000)).await;
    assert_eq!(t.attempts(), 6, "nothing after the third round");
    assert_follow_up_succeeds(&t, || api.search()).await;

    // Three branches a round, one retry: two rounds of three (the first ends at +40
    // when its third branch fails, the second leaves at +90). The second round's
    // third branch wins at once.
    t.push(["a1", "b1", "c1", "a2", "b2"].map(slow_503));
    t.push([Step::status(200).body("c2")]);
    let start = t.attempts();
    let clock = Clock::start();
    assert_eq!(api.search_3().await.unwrap(), "c2");
    assert_eq!(clock.now_ms(), 110);
    let times: Vec<Duration> = t.dispatch_times()[start..]
        .iter()
        .map(|d| *d - t.dispatch_times()[start])
        .collect();
    assert_eq!(
        times,
        [0, 10, 20, 90, 100, 110].map(ms),
        "two rounds of three"
    );
    assert_eq!(t.attempts() - start, 6);
    tests::assert_nothing_leaked(&t);
}
