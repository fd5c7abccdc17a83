//! The retry budget: retries stay a bounded fraction of traffic per partition, and an
//! exhausted budget ends the call with the last error under a kind that says so.

use std::time::Duration;

use resilient_api::retry::budget::BudgetConfig;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, resilient_api};

/// Two retries on 503, 20 ms apart.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 100, reset = "1s")
)]
pub trait Budgeted {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

fn budget(min_per_sec: u32, retry_ratio: f32) -> Option<BudgetConfig> {
    Some(BudgetConfig {
        ttl: Duration::from_secs(10),
        min_per_sec,
        retry_ratio,
    })
}

#[tokio::test(start_paused = true)]
async fn an_empty_budget_ends_the_call_with_the_last_error() {
    let t = ScriptedTransport::new([Step::status(503).body("busy")]);
    let api: BudgetedClient = tests::scripted_builder(&t)
        .retry_budget(budget(0, 0.0))
        .build()
        .expect("builds");
    let e = api.resource().await.expect_err("no retry allowed");
    assert_eq!(e.kind(), ErrorKind::BudgetExhausted);
    assert_eq!(e.attempts(), 1);
    let source = std::error::Error::source(&e)
        .and_then(|s| s.downcast_ref::<ApiError>())
        .expect("the last error is the source");
    assert_eq!(source.status(), Some(503));
    assert_eq!(source.body_text().as_deref(), Some("busy"));
    assert_eq!(t.attempts(), 1);
    tests::assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn the_budget_allows_a_fraction_of_recent_calls() {
    // 20% of recent calls, no floor: ten healthy calls earn exactly two retries.
    let t = ScriptedTransport::new((0..10).map(|_| Step::status(200).body("ok")));
    let api: BudgetedClient = tests::scripted_builder(&t)
        .retry_budget(budget(0, 0.2))
        .build()
        .expect("builds");
    for _ in 0..10 {
        assert_eq!(api.resource().await.expect("healthy"), "ok");
    }
    // The next call fails three times; its two retries spend the whole budget.
    t.push([
        Step::status(503),
        Step::status(503),
        Step::status(200).body("late"),
    ]);
    assert_eq!(api.resource().await.expect("two retries allowed"), "late");
    // One more failing call: its first retry is refused.
    t.push([Step::status(503)]);
    let e = api.resource().await.expect_err("budget spent");
    assert_eq!(e.kind(), ErrorKind::BudgetExhausted);
    assert_eq!(t.attempts(), 14);
    tests::assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn turning_the_budget_off_leaves_only_the_retry_count() {
    let t = ScriptedTransport::new([
        Step::status(503),
        Step::status(503),
        Step::status(200).body("ok"),
    ]);
    let api: BudgetedClient = tests::scripted_builder(&t)
        .retry_budget(None)
        .build()
        .expect("builds");
    assert_eq!(api.resource().await.expect("retried"), "ok");
    assert_eq!(t.attempts(), 3);
}
