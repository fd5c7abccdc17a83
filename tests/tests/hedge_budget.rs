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

/// A hedged search and a retried read in one partition, whose budget (a floor of one
/// retry a second, nothing earned) holds exactly one retry.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Shared {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;

    #[get("/read")]
    #[retry(max = 1, backoff = fixed(delay = "20ms"), on = [503])]
    async fn read(&self) -> Result<String, ApiError>;
}

fn one_retry(t: &ScriptedTransport) -> SharedClient {
    tests::scripted_builder(t)
        .retry_budget(Some(BudgetConfig {
            ttl: Duration::from_secs(1),
            min_per_sec: 1,
            retry_ratio: 0.0,
        }))
        .build()
        .expect("builds")
}

/// The hedge is paid for when the primary fails (3 ms), not when it leaves (10 ms): a
/// read that fails in between (5 ms) finds the one retry spent, and the hedge still
/// leaves at its time and answers.
#[tokio::test(start_paused = true)]
async fn a_hedge_is_paid_for_when_the_primary_fails_and_leaves_at_its_time() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy").delay(ms(3)),
        Step::status(503).body("busy"),
        Step::status(200).body("hedge").delay(ms(5)),
    ]);
    let api = one_retry(&t);
    let clock = Clock::start();
    let search = spawn_timed(clock, {
        let api = api.clone();
        async move { api.search().await }
    });
    tokio::time::sleep(ms(5)).await;
    let e = api.read().await.expect_err("no retry left");
    assert_eq!(e.kind(), resilient_api::ErrorKind::BudgetExhausted);
    assert_eq!(clock.now_ms(), 5);
    let (r, at) = search.await.expect("joins");
    assert_eq!((r.expect("the hedge answers").as_str(), at), ("hedge", 15));
    assert_eq!(t.dispatch_times(), [ms(0), ms(5), ms(10)]);
    tests::assert_nothing_leaked(&t);
}

/// A hedge paid for at the primary's failure and dropped with its call before its
/// time is given back: the read after it still has its retry.
#[tokio::test(start_paused = true)]
async fn a_hedge_paid_for_and_dropped_before_its_time_is_given_back() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy").delay(ms(3)),
        Step::status(503).body("busy"),
        Step::status(200).body("read"),
    ]);
    let api = one_retry(&t);
    assert!(tokio::time::timeout(ms(5), api.search()).await.is_err());
    assert_eq!(t.attempts(), 1);
    assert_eq!(api.read().await.expect("the retry was given back"), "read");
    assert_eq!(t.attempts(), 3);
    tests::assert_nothing_leaked(&t);
}
