//! Many concurrent calls against the isolation policies at once, on the paused clock:
//! a breaker opening under a full bulkhead queue and rate-limit line, a retry budget
//! shared by many failing calls, half of a long queue cancelled at once, a deadline
//! passing for every queued call in one tick, half-open with two probes and ten
//! callers, and a slow-call breaker fed many slow successes. Exact counts and times,
//! and nothing left over: no attempt in flight, no open body, every bulkhead slot and
//! queue place and every unspent token given back.

use std::time::Duration;

use resilient_api::circuit_breaker::state::Phase;
use resilient_api::retry::budget::BudgetConfig;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, CancellationToken, ErrorKind, resilient_api};
use tests::{Clock, assert_nothing_leaked, ms, scripted, settle, spawn_timed};
use tokio::task::JoinHandle;

type Timed = JoinHandle<(Result<String, ApiError>, u64)>;

/// 22 calls made one after another, each with a token of its own: their tasks and
/// their tokens.
async fn cancellable_calls<F, Fut>(clock: Clock, call: F) -> (Vec<Timed>, Vec<CancellationToken>)
where
    F: Fn(CallOptions, u32) -> Fut,
    Fut: Future<Output = Result<String, ApiError>> + Send + 'static,
{
    let mut calls = Vec::new();
    let mut tokens = Vec::new();
    for n in 0..22 {
        let token = CancellationToken::new();
        calls.push(spawn_timed(
            clock,
            call(CallOptions::new().cancel_on(token.clone()), n),
        ));
        tokens.push(token);
        settle().await;
    }
    (calls, tokens)
}

/// At t=20, cancels the odd-numbered of the twenty calls queued behind the first two
/// (3, 5, ..., 21): each settles at once with `Cancelled`, and every other call
/// succeeds. When the others settled, in call order.
async fn cancel_the_odd_half(calls: Vec<Timed>, tokens: &[CancellationToken]) -> Vec<u64> {
    tokio::time::sleep(ms(20)).await;
    for token in tokens.iter().skip(3).step_by(2) {
        token.cancel();
    }
    let mut served_at = Vec::new();
    for (n, (r, at)) in outcomes(calls).await.iter().enumerate() {
        if n >= 2 && n % 2 == 1 {
            assert_eq!((kind(r), *at), (Some(ErrorKind::Cancelled), 20), "call {n}");
        } else {
            assert_eq!(r.as_deref().ok(), Some("ok"), "call {n}");
            served_at.push(*at);
        }
    }
    served_at
}

async fn outcomes(calls: Vec<Timed>) -> Vec<(Result<String, ApiError>, u64)> {
    let mut out = Vec::new();
    for c in calls {
        out.push(c.await.expect("the call's task ends"));
    }
    out
}

fn kind(r: &Result<String, ApiError>) -> Option<ErrorKind> {
    r.as_ref().err().map(ApiError::kind)
}

fn source(e: &ApiError) -> &ApiError {
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<ApiError>())
        .expect("the failure is the source")
}

/// Bulkhead 2 + 3, 10 per second with a burst of 2, two retries 20 ms apart, a breaker
/// that opens on the second failure for 200 ms.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 2, reset = "200ms"),
    bulkhead(concurrency = 2, queue = 3),
    rate_limit(per_second = 10, burst = 2)
)]
pub trait Guarded {
    #[get("/work")]
    async fn work(&self, #[query] n: u32) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn breaker_opening_refuses_every_queued_waiter_and_they_give_everything_back() {
    let t = ScriptedTransport::new([
        Step::status(503).body("a").delay(ms(10)),
        Step::status(503).body("b").delay(ms(10)),
        // For the probe after the reset (see below).
        Step::status(200).body("ok").delay(ms(1000)),
    ]);
    let clock = Clock::start();
    let api = scripted::<GuardedClient>(&t);
    let mut calls = Vec::new();
    for n in 0..6 {
        let api = api.clone();
        calls.push(spawn_timed(clock, async move { api.work(n).await }));
        settle().await;
    }
    assert_eq!(t.attempts(), 2, "the burst: two at once");
    let done = outcomes(calls).await;
    // The sixth found the queue full at once.
    assert_eq!(kind(&done[5].0), Some(ErrorKind::BulkheadFull));
    assert_eq!(done[5].1, 0);
    // The first failure retries in 20 ms; the second trips the breaker, and with a
    // retry left ends at once as open. The first's retry is then refused at t=30.
    assert_eq!(kind(&done[0].0), Some(ErrorKind::CircuitOpen));
    assert_eq!(done[0].1, 30);
    assert_eq!(kind(&done[1].0), Some(ErrorKind::CircuitOpen));
    assert_eq!(done[1].1, 10);
    assert_eq!(source(done[1].0.as_ref().unwrap_err()).status(), Some(503));
    // The three queued ones reach admission when the next token is due (t=100) and are
    // refused there, every one in that tick, none dispatched.
    for (i, (r, at)) in done.iter().enumerate().take(5).skip(2) {
        assert_eq!(kind(r), Some(ErrorKind::CircuitOpen), "call {i}");
        assert_eq!(*at, 100, "call {i} settles when its token is due");
    }
    assert_eq!(t.attempts(), 2);
    assert_nothing_leaked(&t);

    // The breaker closes at t=210 after a probe; no refused call spent a token: the
    // bucket refilled from the two dispatches at t=0 is whole by then.
    tokio::time::sleep_until(tokio::time::Instant::now() + ms(110)).await;
    assert_eq!(clock.now_ms(), 210);
    t.push((0..5).map(|_| Step::status(200).body("ok").delay(ms(1000))));
    let mut calls = Vec::new();
    for n in 0..6 {
        let api = api.clone();
        calls.push(spawn_timed(clock, async move { api.work(n).await }));
        settle().await;
    }
    // A probe first (half-open, one probe): the rest are refused until it succeeds.
    let done = outcomes(calls).await;
    assert_eq!(done[0].0.as_deref().ok(), Some("ok"));
    assert_eq!(done[0].1, 1210);
    for (r, at) in &done[1..] {
        assert_eq!(kind(r), Some(ErrorKind::CircuitOpen));
        assert_eq!(*at, 210);
    }
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    // Now two slots, three queue places and two tokens: 2 run, 3 wait, 1 is refused.
    let mut calls = Vec::new();
    for n in 0..6 {
        let api = api.clone();
        calls.push(spawn_timed(clock, async move { api.work(n).await }));
        settle().await;
    }
    assert_eq!(t.attempts(), 5, "two tokens: both slots dispatch at once");
    let done = outcomes(calls).await;
    let at: Vec<u64> = done.iter().map(|(_, at)| *at).collect();
    assert_eq!(at, vec![2210, 2210, 3210, 3210, 4210, 1210]);
    assert_eq!(kind(&done[5].0), Some(ErrorKind::BulkheadFull));
    assert_eq!(t.attempts(), 8);
    assert_nothing_leaked(&t);
}

/// Retries on 503, two of them, no bulkhead in the way.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 1000, reset = "1s"),
    bulkhead(concurrency = 100, queue = 0)
)]
pub trait Budgeted {
    #[get("/work")]
    async fn work(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn a_shared_budget_allows_exactly_the_floor_plus_the_ratio_of_deposits() {
    // Floor 1/s × 10 s = 10; 20 first attempts × 0.2 = 4: 14 retries, no more.
    let t = ScriptedTransport::new((0..40).map(|_| Step::status(503).body("busy")));
    let api: BudgetedClient = tests::scripted_builder(&t)
        .retry_budget(Some(BudgetConfig {
            ttl: Duration::from_secs(10),
            min_per_sec: 1,
            retry_ratio: 0.2,
        }))
        .build()
        .expect("builds");
    let clock = Clock::start();
    let calls: Vec<Timed> = (0..20)
        .map(|_| {
            let api = api.clone();
            spawn_timed(clock, async move { api.work().await })
        })
        .collect();
    let done = outcomes(calls).await;
    assert_eq!(t.attempts(), 34, "20 first attempts and 14 retries");
    let mut by_attempts = [0; 4];
    for (r, at) in &done {
        let e = r.as_ref().expect_err("every call fails");
        assert_eq!(e.kind(), ErrorKind::BudgetExhausted);
        assert_eq!(source(e).status(), Some(503));
        assert_eq!(source(e).body_text().as_deref(), Some("busy"));
        by_attempts[e.attempts() as usize] += 1;
        assert_eq!(*at, if e.attempts() == 1 { 0 } else { 20 });
    }
    assert_eq!(by_attempts, [0, 6, 14, 0]);
    assert_nothing_leaked(&t);
}

/// Two at a time, 20 may wait; 10 per second, burst 2.
#[resilient_api(
    timeout(attempt = "10s"),
    bulkhead(concurrency = 2, queue = 20),
    rate_limit(per_second = 10, burst = 2)
)]
pub trait Queued {
    #[get("/work")]
    async fn work(&self, #[query] n: u32) -> Result<String, ApiError>;
}

fn served(t: &ScriptedTransport) -> Vec<u32> {
    t.requests()
        .iter()
        .map(|r| {
            let (_, n) = r.url.rsplit_once("n=").expect("a query");
            n.parse().expect("a number")
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn cancelling_half_of_twenty_queued_calls_keeps_fifo_and_leaks_nothing() {
    let t = ScriptedTransport::new((0..12).map(|_| Step::status(200).body("ok").delay(ms(100))));
    let clock = Clock::start();
    let api = scripted::<QueuedClient>(&t);
    let (calls, tokens) = cancellable_calls(clock, |options, n| {
        let h = api.with_options(options);
        async move { h.work(n).await }
    })
    .await;
    assert_eq!(t.attempts(), 2);
    cancel_the_odd_half(calls, &tokens).await;
    assert_eq!(
        served(&t),
        vec![0, 1, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20],
        "the rest in FIFO order"
    );
    // Two slots, one token every 100 ms after the burst: 0, 0, then 100 ms apart.
    let times: Vec<u64> = t
        .dispatch_times()
        .iter()
        .map(|d| d.as_millis() as u64)
        .collect();
    assert_eq!(
        times,
        vec![0, 0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]
    );
    assert_nothing_leaked(&t);
    // Nothing leaked: after a full refill, 2 dispatch at once, 20 queue, 1 is refused.
    tokio::time::sleep(ms(1000)).await;
    t.push((0..22).map(|_| Step::hang()));
    let mut calls = Vec::new();
    for n in 0..23 {
        let api = api.clone();
        calls.push(spawn_timed(clock, async move { api.work(n).await }));
        settle().await;
    }
    assert_eq!(t.attempts(), 14);
    let (last, at) = calls.pop().expect("23 calls").await.expect("ends");
    assert_eq!(
        (kind(&last), at),
        (Some(ErrorKind::BulkheadFull), clock.now_ms())
    );
    for c in calls {
        c.abort();
    }
    settle().await;
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn a_deadline_passing_for_every_queued_call_in_one_tick() {
    let t = ScriptedTransport::new((0..2).map(|_| Step::hang()));
    let clock = Clock::start();
    let api = scripted::<QueuedClient>(&t);
    let mut calls = Vec::new();
    for n in 0..12 {
        let h = api.with_options(CallOptions::new().deadline(ms(50)));
        calls.push(spawn_timed(clock, async move { h.work(n).await }));
    }
    let done = outcomes(calls).await;
    for (n, (r, at)) in done.iter().enumerate() {
        assert_eq!(kind(r), Some(ErrorKind::Deadline), "call {n}");
        assert_eq!(*at, 50, "call {n}");
    }
    assert_eq!(t.attempts(), 2);
    assert_nothing_leaked(&t);
    // Every place was given back: 2 run, 20 wait, 1 is refused.
    tokio::time::sleep(ms(1000)).await;
    t.push((0..2).map(|_| Step::hang()));
    let mut calls = Vec::new();
    for n in 0..23 {
        let api = api.clone();
        calls.push(spawn_timed(clock, async move { api.work(n).await }));
        settle().await;
    }
    assert_eq!(t.attempts(), 4);
    let (last, _) = calls.pop().expect("23 calls").await.expect("ends");
    assert_eq!(kind(&last), Some(ErrorKind::BulkheadFull));
    for c in calls {
        c.abort();
    }
    settle().await;
    assert_nothing_leaked(&t);
}

/// Opens on one failure for 100 ms; half-open admits two probes.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 1, reset = "100ms", probes = 2)
)]
pub trait Probed {
    #[get("/work")]
    async fn work(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn half_open_with_two_probes_and_ten_callers() {
    let t = ScriptedTransport::new([
        Step::status(503).body("trip"),
        Step::status(200).body("ok").delay(ms(10)),
        Step::status(503).body("bad").delay(ms(20)),
    ]);
    let clock = Clock::start();
    let api = scripted::<ProbedClient>(&t);
    assert_eq!(kind(&api.work().await), Some(ErrorKind::Status));
    tokio::time::sleep(ms(100)).await;
    let calls: Vec<Timed> = (0..10)
        .map(|_| {
            let api = api.clone();
            spawn_timed(clock, async move { api.work().await })
        })
        .collect();
    let done = outcomes(calls).await;
    assert_eq!(t.attempts(), 3, "exactly two probes");
    assert_eq!(done[0].0.as_deref().ok(), Some("ok"));
    assert_eq!(done[0].1, 110);
    assert_eq!(
        done[1].0.as_ref().map_err(ApiError::status).err(),
        Some(Some(503))
    );
    assert_eq!(done[1].1, 120);
    for (r, at) in &done[2..] {
        assert_eq!(kind(r), Some(ErrorKind::CircuitOpen));
        assert_eq!(*at, 100);
    }
    // One success is not enough to close; the failure reopens for a fresh 100 ms.
    let state = api.circuit_state();
    assert_eq!(state.phase, Phase::Open);
    assert_eq!(
        state
            .open_until
            .map(|u| u.duration_since(tokio::time::Instant::now())),
        Some(ms(100))
    );
    assert_nothing_leaked(&t);
}

/// A slow success (100 ms or more) is a failure; two trip it for 1 s.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 2, reset = "1s", slow_call = "100ms")
)]
pub trait Slow {
    #[get("/work")]
    async fn work(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn many_concurrent_slow_successes_trip_once() {
    let t = ScriptedTransport::new((0..8).map(|i| Step::status(200).body("ok").delay(ms(100 + i))));
    let clock = Clock::start();
    let api = scripted::<SlowClient>(&t);
    let calls: Vec<Timed> = (0..8)
        .map(|_| {
            let api = api.clone();
            spawn_timed(clock, async move { api.work().await })
        })
        .collect();
    let done = outcomes(calls).await;
    for (i, (r, at)) in done.iter().enumerate() {
        assert_eq!(
            r.as_deref().ok(),
            Some("ok"),
            "a slow success is still a success"
        );
        assert_eq!(*at, 100 + i as u64);
    }
    let state = api.circuit_state();
    assert_eq!(state.phase, Phase::Open);
    assert_eq!(
        state.generation, 1,
        "tripped once; later slow ones are stale"
    );
    assert_eq!(
        state
            .open_until
            .map(|u| u.duration_since(clock_start(&clock))),
        Some(ms(1101))
    );
    assert_eq!(kind(&api.work().await), Some(ErrorKind::CircuitOpen));
    assert_eq!(t.attempts(), 8);
    assert_nothing_leaked(&t);
}

fn clock_start(clock: &Clock) -> tokio::time::Instant {
    tokio::time::Instant::now() - ms(clock.now_ms())
}

/// No bulkhead in the way; 10 per second, burst 2: the rate limiter's line is long.
#[resilient_api(
    timeout(attempt = "10s"),
    bulkhead(concurrency = 100, queue = 0),
    rate_limit(per_second = 10, burst = 2)
)]
pub trait Lined {
    #[get("/work")]
    async fn work(&self, #[query] n: u32) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn cancelling_half_of_twenty_in_the_rate_limit_line_moves_the_rest_up() {
    let t = ScriptedTransport::new((0..12).map(|_| Step::status(200).body("ok")));
    let clock = Clock::start();
    let api = scripted::<LinedClient>(&t);
    let (calls, tokens) = cancellable_calls(clock, |options, n| {
        let h = api.with_options(options);
        async move { h.work(n).await }
    })
    .await;
    assert_eq!(t.attempts(), 2);
    let served_at = cancel_the_odd_half(calls, &tokens).await;
    // Two at once, then one every 100 ms: no turn lost to a cancelled waiter.
    assert_eq!(
        served_at,
        vec![0, 0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]
    );
    assert_eq!(served(&t), vec![0, 1, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20]);
    assert_nothing_leaked(&t);
    // The bucket is whole again 200 ms after the last token: two at once.
    tokio::time::sleep(ms(200)).await;
    t.push((0..3).map(|_| Step::status(200).body("ok")));
    let clock = Clock::start();
    let calls: Vec<Timed> = (0..3)
        .map(|n| {
            let api = api.clone();
            spawn_timed(clock, async move { api.work(n).await })
        })
        .collect();
    let at: Vec<u64> = outcomes(calls).await.iter().map(|(_, at)| *at).collect();
    assert_eq!(at, vec![0, 0, 100]);
    assert_nothing_leaked(&t);
}

/// Slow is 100 ms or more; two at once, the rest queue.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 1, reset = "1s", slow_call = "100ms"),
    bulkhead(concurrency = 2, queue = 10)
)]
pub trait SlowQueued {
    #[get("/work")]
    async fn work(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn time_queued_does_not_make_an_attempt_slow() {
    let t = ScriptedTransport::new((0..10).map(|_| Step::status(200).body("ok").delay(ms(99))));
    let clock = Clock::start();
    let api = scripted::<SlowQueuedClient>(&t);
    let calls: Vec<Timed> = (0..10)
        .map(|_| {
            let api = api.clone();
            spawn_timed(clock, async move { api.work().await })
        })
        .collect();
    let at: Vec<u64> = outcomes(calls)
        .await
        .iter()
        .map(|(r, at)| {
            assert_eq!(r.as_deref().ok(), Some("ok"));
            *at
        })
        .collect();
    assert_eq!(at, vec![99, 99, 198, 198, 297, 297, 396, 396, 495, 495]);
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    assert_eq!(api.circuit_state().generation, 0);
    assert_nothing_leaked(&t);
}
