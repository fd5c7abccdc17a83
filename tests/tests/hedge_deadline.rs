//! S15 hedge_deadline: the call's deadline stops every hedged branch. It fires exactly
//! on time, no branch starts at or after it (the deadline wins a tie with the hedge
//! delay), and every in-flight branch is dropped.

use std::time::Duration;

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, ErrorKind, TimeoutKind, resilient_api};
use tests::{Clock, assert_follow_up_succeeds, ms, scripted};

/// Hedged searches under total deadlines.
#[resilient_api(timeout(attempt = "10s"), retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]))]
pub trait Search {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;

    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    #[timeout(attempt = "11ms", total = "11ms")]
    async fn search_total_11(&self) -> Result<String, ApiError>;

    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    #[timeout(attempt = "10ms", total = "10ms")]
    async fn search_total_10(&self) -> Result<String, ApiError>;

    /// The same without hedging.
    #[get("/search")]
    async fn plain(&self) -> Result<String, ApiError>;
}

fn assert_deadline(e: &ApiError) {
    assert_eq!(e.kind(), ErrorKind::Deadline, "{e:?}");
    assert_eq!(e.timeout(), Some(TimeoutKind::Total));
}

/// Every branch hangs; the deadline is `deadline_ms` through the call options. Only
/// the `dispatches` expected steps are scripted (one more would panic loudly).
async fn hedge_deadline(deadline_ms: u64, dispatches: usize) {
    let t = ScriptedTransport::new(std::iter::repeat_with(Step::hang).take(dispatches));
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    let short = api.with_options(CallOptions::new().deadline(ms(deadline_ms)));
    let e = short
        .search()
        .await
        .expect_err("the deadline ends the call");
    assert_eq!(
        clock.now_ms(),
        deadline_ms,
        "settles exactly at the deadline"
    );
    assert_deadline(&e);
    assert_eq!(t.attempts(), dispatches);
    let expected: Vec<Duration> = [ms(0), ms(10)].into_iter().take(dispatches).collect();
    assert_eq!(t.dispatch_times(), expected);
    assert_eq!(t.in_flight(), 0, "every branch was dropped");

    // Nothing dispatched at or after the deadline.
    tokio::time::sleep(ms(100)).await;
    assert_eq!(t.attempts(), dispatches);
    assert_follow_up_succeeds(&t, || api.search()).await;
}

#[tokio::test(start_paused = true)]
async fn s15_hedge_deadline_5() {
    hedge_deadline(5, 1).await;
}

#[tokio::test(start_paused = true)]
async fn s15_hedge_deadline_10() {
    // The hedge is due at t=10, the deadline too: the deadline wins the tie.
    hedge_deadline(10, 1).await;
}

#[tokio::test(start_paused = true)]
async fn s15_hedge_deadline_11() {
    hedge_deadline(11, 2).await;
}

#[tokio::test(start_paused = true)]
async fn s15_hedge_deadline_100() {
    hedge_deadline(100, 2).await;
}

#[tokio::test(start_paused = true)]
async fn s15_hedge_deadline_from_the_trait_total_10() {
    let t = ScriptedTransport::new([Step::hang()]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    let e = api.search_total_10().await.unwrap_err();
    assert_eq!(clock.now_ms(), 10);
    assert_deadline(&e);
    assert_eq!(t.attempts(), 1);
    assert_eq!(t.dispatch_times(), [ms(0)]);
    assert_eq!(t.in_flight(), 0);
    tokio::time::sleep(ms(100)).await;
    assert_eq!(t.attempts(), 1);
    assert_follow_up_succeeds(&t, || api.search()).await;
}

#[tokio::test(start_paused = true)]
async fn s15_hedge_deadline_from_the_trait_total_11() {
    let t = ScriptedTransport::new([Step::hang(), Step::hang()]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    let e = api.search_total_11().await.unwrap_err();
    assert_eq!(clock.now_ms(), 11);
    assert_deadline(&e);
    assert_eq!(t.attempts(), 2);
    assert_eq!(t.dispatch_times(), [ms(0), ms(10)]);
    assert_eq!(t.in_flight(), 0);
    tokio::time::sleep(ms(100)).await;
    assert_eq!(t.attempts(), 2);
    assert_follow_up_succeeds(&t, || api.search()).await;
}

#[tokio::test(start_paused = true)]
async fn s15_hedge_deadline_shorter_of_options_and_trait_total() {
    // Options ask for 100 ms, the method's total is 11 ms: the shorter one applies.
    let t = ScriptedTransport::new([Step::hang(), Step::hang()]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    let e = api
        .with_options(CallOptions::new().deadline(ms(100)))
        .search_total_11()
        .await
        .unwrap_err();
    assert_eq!(clock.now_ms(), 11);
    assert_deadline(&e);
    assert_eq!(t.attempts(), 2);
    assert_eq!(t.in_flight(), 0);
    assert_follow_up_succeeds(&t, || api.search()).await;
}

#[tokio::test(start_paused = true)]
async fn s15_hedge_deadline_during_retry_backoff() {
    // Round 1: both branches fail (t=5 and t=15), so all hedges failed at t=15; the
    // 20 ms backoff ends at t=35, which fits a deadline of 40. Round 2 starts at
    // t=35 with one branch that hangs; its hedge would be due at t=45, after the
    // deadline: the call ends at exactly t=40 with 3 dispatches.
    let t = ScriptedTransport::new([
        Step::status(503).body("a").delay(ms(5)),
        Step::status(503).body("b").delay(ms(5)),
        Step::hang(),
    ]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    let e = api
        .with_options(CallOptions::new().deadline(ms(40)))
        .search()
        .await
        .unwrap_err();
    assert_eq!(clock.now_ms(), 40);
    assert_deadline(&e);
    assert_eq!(t.attempts(), 3);
    assert_eq!(t.dispatch_times(), [ms(0), ms(10), ms(35)]);
    assert_eq!(t.in_flight(), 0);
    tokio::time::sleep(ms(100)).await;
    assert_eq!(t.attempts(), 3);
    assert_follow_up_succeeds(&t, || api.search()).await;
}

/// Regression: the hedge was due at 10 ms, after the 8 ms deadline, so it could never
/// start, yet the round waited for it and the call ended at 8 ms with `Deadline`.
/// The primary's 503 at 5 ms now ends the round, and as without hedging, the 20 ms
/// backoff cannot fit: the call fails at once with the 503.
#[tokio::test(start_paused = true)]
async fn a_hedge_due_after_the_deadline_does_not_hold_the_round_open() {
    for hedged in [true, false] {
        let t = ScriptedTransport::new([Step::status(503).body("busy").delay(ms(5))]);
        let clock = Clock::start();
        let api = scripted::<SearchClient>(&t).with_options(CallOptions::new().deadline(ms(8)));
        let e = if hedged {
            api.search().await
        } else {
            api.plain().await
        }
        .unwrap_err();
        assert_eq!(
            (clock.now_ms(), e.kind(), e.status(), e.attempts()),
            (5, ErrorKind::Status, Some(503), 1),
            "hedged: {hedged}"
        );
        tests::assert_no_late_dispatch(&t, 1, ms(100)).await;
        tests::assert_nothing_leaked(&t);
    }
}
