//! hedge_withdraw: once a branch's failure carries the server's `Retry-After`, a hedge
//! launched but not sent yet (waiting for a rate-limit token, or in a bulkhead queue
//! behind other calls) is withdrawn at once: the round does not wait until it would
//! have been let through just to withdraw it, and it leaves its queue place or its
//! place in line for a token.

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, resilient_api};
use tests::{Clock, assert_no_late_dispatch, assert_nothing_leaked, ms, scripted, spawn_timed};

/// A 429 asking to come back in 5 s, answered after 20 ms.
fn slow_down() -> Step {
    Step::status(429)
        .body("slow down")
        .header("retry-after", "5")
        .delay(ms(20))
}

/// One token a second, burst 1; hedged after 10 ms; no retries.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0, on = [429, 503]),
    rate_limit(per_second = 1, burst = 1)
)]
pub trait Limited {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;
}

/// Regression: the hedge launched at t=10 waited for the t=1000 token; the primary's
/// 429 at t=20 asked to wait, but the round went on until the hedge got its token at
/// t=1000 and withdrew then, so the call (with no retry left) ended at t=1000 instead
/// of t=20.
#[tokio::test(start_paused = true)]
async fn a_hedge_waiting_for_a_token_is_withdrawn_at_once() {
    let t = ScriptedTransport::new([slow_down()]);
    let clock = Clock::start();
    let api = scripted::<LimitedClient>(&t);

    let e = api.search().await.expect_err("the 429 is the answer");
    assert_eq!(
        (e.kind(), e.status(), e.attempts(), clock.now_ms()),
        (ErrorKind::Status, Some(429), 1, 20)
    );
    assert_eq!(t.dispatch_times(), [ms(0)]);
    assert_nothing_leaked(&t);

    // The withdrawn hedge left its place in line: the next call gets the t=1000 token.
    t.push([Step::status(200).body("ok")]);
    assert_eq!(api.search().await.expect("the next call answers"), "ok");
    assert_eq!(clock.now_ms(), 1000);
    assert_no_late_dispatch(&t, 2, ms(100)).await;
    assert_nothing_leaked(&t);
}

/// Two slots and a queue of two, shared by a slow endpoint and a hedged one.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0, on = [429, 503]),
    bulkhead(concurrency = 2, queue = 2)
)]
pub trait Queued {
    #[get("/slow")]
    async fn slow(&self) -> Result<String, ApiError>;

    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;
}

/// Regression: the hedge launched at t=10 queued behind another call (queued at t=5);
/// the primary's 429 at t=20 asked to wait and gave its slot to that call, so the hedge
/// stayed queued until that call ended at t=120, and the search with it.
#[tokio::test(start_paused = true)]
async fn a_hedge_queued_behind_another_call_is_withdrawn_at_once() {
    let t = ScriptedTransport::new([
        Step::status(200).body("x").delay(ms(1000)),
        slow_down(),
        Step::status(200).body("y").delay(ms(100)),
    ]);
    let clock = Clock::start();
    let api = scripted::<QueuedClient>(&t);

    let x = api.clone();
    let x = spawn_timed(clock, async move { x.slow().await });
    tests::settle().await;
    let s = api.clone();
    let search = spawn_timed(clock, async move { s.search().await });
    tests::settle().await;
    tokio::time::sleep(ms(5)).await;
    let y = api.clone();
    let y = spawn_timed(clock, async move { y.slow().await });

    let (r, at) = search.await.expect("joins");
    let e = r.expect_err("the 429 is the answer");
    assert_eq!(
        (e.kind(), e.status(), e.attempts(), at),
        (ErrorKind::Status, Some(429), 1, 20)
    );
    let (r, at) = y.await.expect("joins");
    assert_eq!((r.expect("y answers").as_str(), at), ("y", 120));
    let (r, at) = x.await.expect("joins");
    assert_eq!((r.expect("x answers").as_str(), at), ("x", 1000));
    assert_eq!(t.dispatch_times(), [ms(0), ms(0), ms(20)]);
    assert_nothing_leaked(&t);
}
