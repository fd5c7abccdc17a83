//! A hedge branch takes a rate-limit token, as a retry does: it waits for the next
//! free token (the call has no deadline), is dispatched when it gets it, and the token
//! it spent is not there for the next call.

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, resilient_api};
use tests::{Clock, assert_no_late_dispatch, assert_nothing_leaked, ms, scripted};

/// One token every 100 ms, burst 1; hedged after 10 ms; no retries.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 0),
    rate_limit(per_second = 10, burst = 1)
)]
pub trait Limited {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn a_hedge_waits_for_its_own_token_and_spends_it() {
    // t=0 the primary takes the only token and hangs; the hedge is due at t=10 but
    // waits for the t=100 token, is dispatched then and answers at t=105.
    let t = ScriptedTransport::new([Step::hang(), Step::status(200).body("hedge").delay(ms(5))]);
    let clock = Clock::start();
    let api = scripted::<LimitedClient>(&t);

    let call = api.search();
    tokio::pin!(call);
    let early = tokio::time::timeout(ms(99), &mut call).await;
    assert!(early.is_err(), "settled early: {early:?}");
    assert_eq!(t.attempts(), 1, "at t=99 the hedge still waits for a token");
    assert_eq!(call.await.expect("the hedge answers"), "hedge");
    assert_eq!(clock.now_ms(), 105);
    assert_eq!(t.dispatch_times(), [ms(0), ms(100)]);
    assert_nothing_leaked(&t);

    // The hedge spent the t=100 token: the next call, made at t=105, waits for the
    // t=200 one.
    t.push([Step::status(200).body("next")]);
    assert_eq!(api.search().await.expect("the next call answers"), "next");
    assert_eq!(clock.now_ms(), 200);
    assert_eq!(t.dispatch_times(), [ms(0), ms(100), ms(200)]);
    assert_no_late_dispatch(&t, 3, ms(500)).await;
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn a_primary_answering_while_the_hedge_waits_leaves_the_token() {
    // The hedge is waiting for the t=100 token when the primary answers at t=50: the
    // hedge leaves the line and takes nothing, so the next call gets that token at
    // t=100 (not t=200).
    let t = ScriptedTransport::new([Step::status(200).body("primary").delay(ms(50))]);
    let clock = Clock::start();
    let api = scripted::<LimitedClient>(&t);

    assert_eq!(api.search().await.expect("the primary answers"), "primary");
    assert_eq!(clock.now_ms(), 50);
    assert_eq!(t.dispatch_times(), [ms(0)]);

    t.push([Step::status(200).body("next")]);
    assert_eq!(api.search().await.expect("the next call answers"), "next");
    assert_eq!(clock.now_ms(), 100);
    assert_eq!(t.dispatch_times(), [ms(0), ms(100)]);
    assert_no_late_dispatch(&t, 2, ms(500)).await;
    assert_nothing_leaked(&t);
}
