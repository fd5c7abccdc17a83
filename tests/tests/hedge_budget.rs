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
