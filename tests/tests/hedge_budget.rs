//! Hedges spend the retry budget, as retries do: with an empty budget no hedge is
//! launched and the primary attempt answers alone.

use std::time::Duration;

use resilient_api::retry::budget::BudgetConfig;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, resilient_api};
use tests::{Clock, ms, spawn_timed};

/// A hedged GET, 10 ms.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Hedged {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;
}

fn budget(min_per_sec: u32) -> Option<BudgetConfig> {
    Some(BudgetConfig {
        ttl: Duration::from_secs(10),
        min_per_sec,
        retry_ratio: 0.0,
    })
}

/// One search through `t` with a budget of `min_per_sec`: the answer and when it came.
async fn search(t: &ScriptedTransport, min_per_sec: u32) -> (Result<String, ApiError>, u64) {
    let api: HedgedClient = tests::scripted_builder(t)
        .retry_budget(budget(min_per_sec))
        .build()
        .expect("builds");
    spawn_timed(Clock::start(), async move { api.search().await })
        .await
        .expect("joins")
}

#[tokio::test(start_paused = true)]
async fn an_empty_budget_launches_no_hedge() {
    let t = ScriptedTransport::new([Step::status(200).body("primary").delay(ms(40))]);
    let (r, at) = search(&t, 0).await;
    assert_eq!(r.expect("the primary answers"), "primary");
    assert_eq!(at, 40);
    assert_eq!(t.attempts(), 1);
    tests::assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn a_budget_with_room_launches_the_hedge() {
    let t = ScriptedTransport::new([Step::hang(), Step::status(200).body("hedge").delay(ms(5))]);
    let (r, at) = search(&t, 1).await;
    assert_eq!(r.expect("the hedge answers"), "hedge");
    assert_eq!(at, 15);
    assert_eq!(t.dispatch_times(), [ms(0), ms(10)]);
    tests::assert_nothing_leaked(&t);
}

/// The primary fails before the hedge is due and the budget cannot pay for the hedge:
/// the round ends at the failure with `BudgetExhausted` (what the primary got as its
/// source), instead of waiting for a hedge it would refuse. A hedge is paid for when
/// it becomes the round's only way on, as a retry is before its backoff.
#[tokio::test(start_paused = true)]
async fn a_hedge_the_budget_cannot_pay_for_is_not_waited_for() {
    let t = ScriptedTransport::new([Step::status(503).body("busy").delay(ms(3))]);
    let (r, at) = search(&t, 0).await;
    let e = r.expect_err("no hedge");
    assert_eq!(
        (e.kind(), at),
        (resilient_api::ErrorKind::BudgetExhausted, 3)
    );
    assert_eq!(e.attempts(), 1);
    let source = std::error::Error::source(&e)
        .and_then(|s| s.downcast_ref::<ApiError>())
        .expect("what the primary got is the source");
    assert_eq!(source.status(), Some(503));
    assert_eq!(t.attempts(), 1);
    tests::assert_nothing_leaked(&t);
}

/// With room in the budget, a primary that fails early still gets its hedge, at the
/// hedge's time (the hedge was paid for at the failure).
#[tokio::test(start_paused = true)]
async fn a_hedge_paid_for_at_the_failure_still_leaves_at_its_time() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy").delay(ms(3)),
        Step::status(200).body("hedge").delay(ms(5)),
    ]);
    let (r, at) = search(&t, 1).await;
    assert_eq!(r.expect("the hedge answers"), "hedge");
    assert_eq!(at, 15);
    assert_eq!(t.dispatch_times(), [ms(0), ms(10)]);
    tests::assert_nothing_leaked(&t);
}
