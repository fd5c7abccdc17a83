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

/// Regression: a 503 asking for 5 s, its retry refused by the budget: the
/// `BudgetExhausted` said nothing of the 5 s (`retry_after()` was `None`), so a caller
/// scheduling its own retry from it retried at once. The budget has no time of its
/// own: the refusal gives the server's, from its source.
#[tokio::test(start_paused = true)]
async fn an_empty_budget_gives_the_servers_retry_after() {
    let t = ScriptedTransport::new([Step::status(503).body("busy").header("retry-after", "5")]);
    let start = tokio::time::Instant::now();
    let api: BudgetedClient = tests::scripted_builder(&t)
        .retry_budget(budget(0, 0.0))
        .build()
        .expect("builds");
    let e = api.resource().await.expect_err("no retry allowed");
    assert_eq!((e.kind(), e.attempts()), (ErrorKind::BudgetExhausted, 1));
    assert_eq!(e.retry_after(), Some(Duration::from_secs(5)));
    assert_eq!(e.retry_at(), Some(start + Duration::from_secs(5)));
    let source = std::error::Error::source(&e)
        .and_then(|s| s.downcast_ref::<ApiError>())
        .expect("the last error is the source");
    assert_eq!(source.retry_after(), Some(Duration::from_secs(5)));
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

// ------------------------------------------- a retry paid for and never sent

/// One slot and no queue, two retries on 503 20 ms apart, and a hedge after 10 ms.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 100, reset = "1s"),
    bulkhead(concurrency = 1, queue = 0)
)]
pub trait OneSlot {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;

    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;
}

/// A call that needs exactly `retries` retries to succeed: `Ok` only if the budget
/// still holds that many (with its own deposit).
async fn needs_retries<F, Fut>(
    t: &ScriptedTransport,
    retries: usize,
    call: F,
) -> Result<String, ApiError>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<String, ApiError>>,
{
    t.push((0..retries).map(|_| Step::status(503).body("busy")));
    t.push([Step::status(200).body("ok")]);
    call().await
}

/// The on-retry hook fails after the budget paid for the retry: the retry is never
/// sent, and the budget gets it back. One retry per call (ratio 1, no floor): the
/// first call's withdrawal, refunded, lets the next call retry twice.
#[tokio::test(start_paused = true)]
async fn a_retry_its_hook_stops_is_given_back() {
    let t = ScriptedTransport::new([Step::status(503).body("busy")]);
    let failed_once = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let fail = failed_once.clone();
    let api: BudgetedClient = tests::scripted_builder(&t)
        .retry_budget(budget(0, 1.0))
        .on_retry(move |_| {
            if fail.swap(true, std::sync::atomic::Ordering::SeqCst) {
                Ok(())
            } else {
                Err("not now".into())
            }
        })
        .build()
        .expect("builds");
    let e = api.resource().await.expect_err("the hook stops it");
    assert_eq!((e.kind(), t.attempts()), (ErrorKind::Hook, 1));
    // Deposits 2 (this call's and the first's), one withdrawal given back: two retries.
    let r = needs_retries(&t, 2, || api.resource()).await;
    assert_eq!(r.expect("two retries were left"), "ok");
    assert_eq!(t.attempts(), 4);
}

/// A retry the bulkhead refuses (another call took the only slot during the backoff)
/// is never sent: the budget gets it back. Half a retry per call, no floor.
#[tokio::test(start_paused = true)]
async fn a_retry_a_policy_refuses_is_given_back() {
    let t = ScriptedTransport::new([
        Step::status(200).body("ok"),
        Step::status(503).body("busy"),
        Step::status(200).body("slow").delay(tests::ms(100)),
    ]);
    let api: OneSlotClient = tests::scripted_builder(&t)
        .retry_budget(budget(0, 0.5))
        .build()
        .expect("builds");
    // Two deposits of half a retry: one, for the next call's retry.
    assert_eq!(api.resource().await.expect("healthy"), "ok");
    let first = api.resource();
    let other = async {
        tokio::time::sleep(tests::ms(10)).await;
        api.resource().await
    };
    let (first, other) = tokio::join!(first, other);
    let e = first.expect_err("its retry finds the slot taken");
    assert_eq!((e.kind(), e.attempts()), (ErrorKind::BulkheadFull, 1));
    assert_eq!(other.expect("the other call"), "slow");
    assert_eq!(t.attempts(), 3);
    // Four deposits of half a retry, none spent: two retries.
    let r = needs_retries(&t, 2, || api.resource()).await;
    assert_eq!(r.expect("the refused retry was given back"), "ok");
}

/// A hedge the bulkhead refuses (the call's first branch holds the only slot) is
/// never sent: the budget gets it back.
#[tokio::test(start_paused = true)]
async fn a_hedge_a_policy_refuses_is_given_back() {
    let t = ScriptedTransport::new([Step::status(200).body("slow").delay(tests::ms(50))]);
    let api: OneSlotClient = tests::scripted_builder(&t)
        .retry_budget(budget(0, 1.0))
        .build()
        .expect("builds");
    assert_eq!(api.search().await.expect("the first branch wins"), "slow");
    assert_eq!(t.attempts(), 1, "the hedge was refused");
    // Two deposits, nothing spent: two retries.
    let r = needs_retries(&t, 2, || api.resource()).await;
    assert_eq!(r.expect("the refused hedge was given back"), "ok");
}

/// A call dropped during its backoff never sends the retry it paid for: the budget
/// gets it back.
#[tokio::test(start_paused = true)]
async fn a_retry_its_caller_drops_is_given_back() {
    let t = ScriptedTransport::new([Step::status(503).body("busy")]);
    let api: BudgetedClient = tests::scripted_builder(&t)
        .retry_budget(budget(0, 1.0))
        .build()
        .expect("builds");
    let dropped = tokio::time::timeout(tests::ms(10), api.resource()).await;
    assert!(dropped.is_err(), "dropped during the 20 ms backoff");
    assert_eq!(t.attempts(), 1);
    let r = needs_retries(&t, 2, || api.resource()).await;
    assert_eq!(r.expect("the dropped retry was given back"), "ok");
    assert_eq!(t.attempts(), 4);
}

/// A coalesced read, and a read with two retries, in one partition's budget.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 100, reset = "1s")
)]
pub trait Shared {
    #[get("/config")]
    #[coalesce]
    async fn config(&self) -> Result<String, ApiError>;

    #[get("/plain")]
    #[retry(max = 2)]
    async fn plain(&self) -> Result<String, ApiError>;
}

/// Pins the budget for a shared execution: it deposits once and pays for its retry
/// once, whoever is waiting; a refusal reaches every caller, each with the one
/// attempt, when the 503 comes in (t=5); nothing is sent again.
#[tokio::test(start_paused = true)]
async fn a_coalesced_execution_refused_by_the_budget_ends_every_callers_call() {
    let t = ScriptedTransport::new([Step::status(503).body("busy").delay(tests::ms(5))]);
    let api: SharedClient = tests::scripted_builder(&t)
        .retry_budget(budget(0, 0.0))
        .build()
        .expect("builds");
    let clock = tests::Clock::start();
    let callers: Vec<_> = (0..2)
        .map(|_| {
            let api = api.clone();
            tests::spawn_timed(clock, async move { api.config().await })
        })
        .collect();
    for caller in callers {
        let (result, at) = caller.await.expect("the caller's task ends");
        let e = result.expect_err("no retry allowed");
        assert_eq!(
            (e.kind(), e.attempts(), at),
            (ErrorKind::BudgetExhausted, 1, 5)
        );
    }
    assert_eq!(t.attempts(), 1);
    tests::assert_nothing_leaked(&t);
}

/// Pins the refund when the last caller of a shared execution leaves during its
/// backoff: the retry it paid for at t=5 is never sent, so it is given back. With one
/// retry earned per call and no floor, the next call (two deposits, none spent) can
/// retry twice; had the shared execution kept its payment, its second retry would be
/// refused.
#[tokio::test(start_paused = true)]
async fn the_last_coalesced_caller_leaving_during_the_backoff_gives_the_payment_back() {
    let t = ScriptedTransport::new([Step::status(503).body("busy").delay(tests::ms(5))]);
    let api: SharedClient = tests::scripted_builder(&t)
        .retry_budget(budget(0, 1.0))
        .build()
        .expect("builds");
    let clock = tests::Clock::start();
    let (a, b) = futures_util::future::join(
        tokio::time::timeout(tests::ms(10), api.config()),
        tokio::time::timeout(tests::ms(10), api.config()),
    )
    .await;
    assert!(a.is_err() && b.is_err(), "both callers leave at t=10");
    assert_eq!(
        t.attempts(),
        1,
        "one shared execution, its retry never sent"
    );
    assert_eq!(clock.now_ms(), 10);

    t.push([
        Step::status(503),
        Step::status(503),
        Step::status(200).body("ok"),
    ]);
    assert_eq!(api.plain().await.expect("two retries paid for"), "ok");
    assert_eq!(
        t.dispatch_times()[1..],
        [tests::ms(10), tests::ms(30), tests::ms(50)]
    );
    tests::assert_nothing_leaked(&t);
}
