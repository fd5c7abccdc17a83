//! limits_shared: the rate limiter (a token bucket per partition; every request sent
//! to the upstream takes a token; a wait for one is decided up front against the
//! deadline) and coalescing (identical concurrent calls share one execution), alone
//! and together.

use resilient_api::circuit_breaker::state::Phase;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, CancellationToken, ErrorKind, resilient_api};
use tests::{
    Clock, assert_no_late_dispatch, assert_nothing_leaked, ms, scripted, settle, spawn_timed,
};

/// One token every 100 ms, burst 1; no retries.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    rate_limit(per_second = 10, burst = 1)
)]
pub trait Limited {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;

    #[get("/config")]
    #[coalesce]
    async fn shared(&self) -> Result<String, ApiError>;

    #[get("/tenant")]
    #[coalesce]
    async fn tenant(
        &self,
        #[query] q: &str,
        #[header("x-tenant")] tenant: &str,
    ) -> Result<String, ApiError>;
}

/// Regression: a same-origin redirect hop is a second request to the same upstream,
/// and was sent without a token. With 10 per second and a burst of 1 (one request per
/// 100 ms), a call answered `307 Location: /resource/v2` sent its first request and
/// the hop both at t=0, and the next call followed at t=100: three requests within
/// 100 ms. "Every attempt takes a token, ... so the limit holds for what actually
/// reaches the upstream" (rate_limit.rs). The hop now waits for the t=100 token.
#[tokio::test(start_paused = true)]
async fn rate_limit_a_same_origin_redirect_hop_takes_a_token() {
    let t = ScriptedTransport::new([
        Step::status(307).header("location", "/resource/v2"),
        Step::status(200).body("moved"),
        Step::status(200).body("next"),
    ]);
    let api = scripted::<LimitedClient>(&t);
    assert_eq!(
        api.resource().await.expect("redirected, then served"),
        "moved"
    );
    assert_eq!(api.resource().await.expect("served"), "next");
    let urls: Vec<String> = t.requests().into_iter().map(|r| r.url).collect();
    assert_eq!(
        urls,
        [
            "https://example.test/resource",
            "https://example.test/resource/v2",
            "https://example.test/resource",
        ]
    );
    assert_eq!(
        t.dispatch_times(),
        [ms(0), ms(100), ms(200)],
        "at most one request per 100 ms reaches the upstream"
    );
    assert_nothing_leaked(&t);
}

/// Three per second, burst 1: one token every 333.333334 ms, which the millisecond
/// timer hands out at 334, 668, 1002 ms.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    rate_limit(per_second = 3, burst = 1)
)]
pub trait Thirds {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// Regression: the up-front decision for a caller behind another waiter ignored that
/// each waiter takes its token on the timer's tick (the rounding rate_limit.rs
/// documents: 0, 334, 668). At t=0 the bucket's token is spent (due again at 333.33
/// ms); W1 (no deadline) queues and is served at 334; W2 (deadline 668 ms) queues
/// behind it. The token W2 can get is 334 + 333.33 = 667.33 ms at the earliest, in
/// its deadline's own millisecond, so it is refused at once. It was predicted at
/// 666.67 (as if W1 were served at 333.33), let into the line, and refused only after
/// sleeping 334 ms. `acquire`: "Fails with RateLimited at once, without sleeping, when
/// the next token this caller could get comes at or after deadline, or less than a
/// timer tick (1 ms) before it".
#[tokio::test(start_paused = true)]
async fn rate_limit_a_caller_behind_a_waiter_is_refused_at_once_when_its_token_is_in_the_deadlines_tick()
 {
    let t = ScriptedTransport::new((0..2).map(|_| Step::status(200).body("ok")));
    let clock = Clock::start();
    let api = scripted::<ThirdsClient>(&t);
    assert_eq!(api.resource().await.expect("the bucket's token"), "ok");

    let w1 = api.clone();
    let w1 = spawn_timed(clock, async move { w1.resource().await });
    settle().await;
    let w2 = api.with_options(CallOptions::new().deadline(ms(668)));
    let w2 = spawn_timed(clock, async move { w2.resource().await });
    settle().await;

    let (r, at) = w1.await.expect("w1's task");
    assert_eq!((r.expect("served").as_str(), at), ("ok", 334));
    let (r, at) = w2.await.expect("w2's task");
    let e = r.expect_err("its token comes in its deadline's millisecond");
    assert_eq!((e.kind(), at), (ErrorKind::RateLimited, 0));
    assert_eq!(t.dispatch_times(), [ms(0), ms(334)]);
    assert_nothing_leaked(&t);
}

/// Three coalesced callers share one execution and so one token: a plain call made
/// at the same instant gets the next token (t=100), not the fourth; and a coalesced
/// call after the shared execution ended starts afresh and takes a token of its own.
#[tokio::test(start_paused = true)]
async fn coalesced_callers_spend_one_token_per_attempt_not_per_caller() {
    let t = ScriptedTransport::new(
        (0..3).map(|i| Step::status(200).body(format!("r{i}")).delay(ms(30))),
    );
    let clock = Clock::start();
    let api = scripted::<LimitedClient>(&t);
    let mut callers = Vec::new();
    for _ in 0..3 {
        let a = api.clone();
        callers.push(spawn_timed(clock, async move { a.shared().await }));
    }
    settle().await;
    let p = api.clone();
    let plain = spawn_timed(clock, async move { p.resource().await });
    for c in callers {
        let (r, at) = c.await.expect("caller's task");
        assert_eq!((r.expect("shared answer").as_str(), at), ("r0", 30));
    }
    let (r, at) = plain.await.expect("plain call's task");
    assert_eq!((r.expect("served").as_str(), at), ("r1", 130));
    let a = api.clone();
    let (r, at) = spawn_timed(clock, async move { a.shared().await })
        .await
        .expect("later caller's task");
    assert_eq!((r.expect("fresh execution").as_str(), at), ("r2", 230));
    assert_eq!(t.dispatch_times(), [ms(0), ms(100), ms(200)]);
    assert_nothing_leaked(&t);
}

/// A shared execution waiting in the rate limiter's line (due at t=100) is dropped
/// when its last caller leaves (both cancelled at t=50): it takes nothing, so the
/// plain call queued behind it moves up to the t=100 token (not t=200), and nothing
/// is ever sent for the shared execution.
#[tokio::test(start_paused = true)]
async fn a_shared_execution_waiting_for_a_token_leaves_the_line_with_its_last_caller() {
    let t = ScriptedTransport::new((0..2).map(|_| Step::status(200).body("ok")));
    let clock = Clock::start();
    let api = scripted::<LimitedClient>(&t);
    assert_eq!(api.resource().await.expect("the bucket's token"), "ok");

    let token = CancellationToken::new();
    let a = api.with_options(CallOptions::new().cancel_on(token.clone()));
    let b = a.clone();
    let a = spawn_timed(clock, async move { a.shared().await });
    let b = spawn_timed(clock, async move { b.shared().await });
    settle().await;
    let p = api.clone();
    let plain = spawn_timed(clock, async move { p.resource().await });
    settle().await;
    tokio::time::sleep(ms(50)).await;
    token.cancel();
    for c in [a, b] {
        let (r, at) = c.await.expect("caller's task");
        assert_eq!(
            (r.expect_err("cancelled").kind(), at),
            (ErrorKind::Cancelled, 50)
        );
    }
    let (r, at) = plain.await.expect("plain call's task");
    assert_eq!((r.expect("served").as_str(), at), ("ok", 100));
    assert_eq!(t.dispatch_times(), [ms(0), ms(100)]);
    assert_no_late_dispatch(&t, 2, ms(500)).await;
    assert_nothing_leaked(&t);
}

/// Calls that differ only in a query value or only in a header value are different
/// requests: never coalesced (each its own execution and its own token), while the
/// same query and header would be.
#[tokio::test(start_paused = true)]
async fn coalesce_keeps_calls_with_another_query_or_header_apart() {
    let t = ScriptedTransport::new(
        (0..3).map(|i| Step::status(200).body(format!("r{i}")).delay(ms(300))),
    );
    let clock = Clock::start();
    let api = scripted::<LimitedClient>(&t);
    let (a, b, c, d) = (api.clone(), api.clone(), api.clone(), api.clone());
    let a = spawn_timed(clock, async move { a.tenant("x", "t1").await });
    let b = spawn_timed(clock, async move { b.tenant("x", "t2").await });
    let c = spawn_timed(clock, async move { c.tenant("y", "t1").await });
    let d = spawn_timed(clock, async move { d.tenant("x", "t1").await });
    let mut got = Vec::new();
    for h in [a, b, c, d] {
        let (r, at) = h.await.expect("caller's task");
        got.push((r.expect("served"), at));
    }
    let expected = [("r0", 300), ("r1", 400), ("r2", 500), ("r0", 300)];
    assert_eq!(got, expected.map(|(s, at)| (s.to_owned(), at)));
    let sent: Vec<(String, String)> = t
        .requests()
        .into_iter()
        .map(|r| {
            let tenant = r.headers["x-tenant"].to_str().unwrap_or("?").to_owned();
            (r.url, tenant)
        })
        .collect();
    assert_eq!(
        sent,
        [
            ("https://example.test/tenant?q=x", "t1"),
            ("https://example.test/tenant?q=x", "t2"),
            ("https://example.test/tenant?q=y", "t1"),
        ]
        .map(|(u, h)| (u.to_owned(), h.to_owned()))
    );
    assert_eq!(t.dispatch_times(), [ms(0), ms(100), ms(200)]);
    assert_nothing_leaked(&t);
}

/// One token every 100 ms, burst 1; a 50 ms attempt limit; one failure opens the
/// breaker; no retries.
#[resilient_api(
    timeout(attempt = "50ms"),
    retry(max = 0),
    breaker(failures = 1, reset = "30s"),
    rate_limit(per_second = 10, burst = 1)
)]
pub trait ShortAttempt {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// Regression: a same-origin redirect hop waits for its token inside the attempt, and
/// that wait was bounded by the deadline only. Answered `307` at t=0 (the bucket's
/// token spent), the hop's token is due at t=100, after the attempt's 50 ms limit: the
/// hop slept until the attempt timed out at t=50, and that `AttemptTimeout` opened the
/// breaker against an upstream that had answered at once. The attempt's limit now
/// bounds the wait as the deadline does: refused at once with `RateLimited`, saying
/// when the token is free, and the breaker counts nothing.
#[tokio::test(start_paused = true)]
async fn a_hop_whose_token_comes_after_the_attempts_limit_is_refused_at_once() {
    let t = ScriptedTransport::new([
        Step::status(307).header("location", "/resource/v2"),
        Step::status(200).body("later"),
    ]);
    let start = tokio::time::Instant::now();
    let clock = Clock::start();
    let api = scripted::<ShortAttemptClient>(&t);
    let e = api
        .resource()
        .await
        .expect_err("the hop's token is too late");
    assert_eq!(e.kind(), ErrorKind::RateLimited);
    assert!(e.is_rejection());
    assert_eq!(e.retry_at(), Some(start + ms(100)));
    assert_eq!(e.retry_after(), Some(ms(100)));
    assert_eq!(e.attempts(), 1);
    assert_eq!(clock.now_ms(), 0, "refused at once");
    let state = api.circuit_state();
    assert_eq!(
        (state.phase, state.consecutive_failures),
        (Phase::Closed, 0),
        "the upstream answered: no breaker failure"
    );
    assert_eq!(t.dispatch_times(), [ms(0)]);
    assert_nothing_leaked(&t);

    // The refused hop took nothing: a call at t=100 gets that token at once.
    tokio::time::sleep(ms(100)).await;
    assert_eq!(api.resource().await.expect("served"), "later");
    assert_eq!(t.dispatch_times(), [ms(0), ms(100)]);
}
