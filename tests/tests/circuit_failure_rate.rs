//! The breaker's failure-rate mode and slow-call rule, through the generated client
//! and the pipeline: outcomes are counted in the rolling window only once `min_calls`
//! are in (outcomes that left the window, a bucket at a time, count toward neither),
//! a 4xx counts as nothing, a success at least `slow_call` long counts as a failure
//! (while the caller still gets its answer), and an open breaker refuses with
//! `CircuitOpen` and no dispatch until exactly the end of the cooldown.

use resilient_api::circuit_breaker::state::Phase;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, resilient_api};
use tests::{Clock, assert_nothing_leaked, ms, scripted};
use tokio::time::{Instant, sleep_until};

/// Half the calls failing over 10 s, once 4 are in, trips it for 1 s. No retries.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 0),
    breaker(failure_rate = 0.5, window = "10s", min_calls = 4, reset = "1s")
)]
pub trait Rate {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// The same, with successes of 100 ms or more counted as failures.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 0),
    breaker(
        failure_rate = 0.5,
        window = "10s",
        min_calls = 4,
        reset = "1s",
        slow_call = "100ms"
    )
)]
pub trait Slow {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// Two slow successes in a row trip it (consecutive mode).
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 0),
    breaker(failures = 2, reset = "1s", slow_call = "100ms")
)]
pub trait SlowInARow {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// A call made now is refused at once with `CircuitOpen`, no dispatch, saying when
/// the breaker may admit again.
async fn refused_now(
    call: impl Future<Output = Result<String, ApiError>>,
    t: &ScriptedTransport,
    clock: Clock,
    until: Instant,
) {
    let (before, at) = (t.attempts(), clock.now_ms());
    let e = call.await.expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::CircuitOpen, "at t={at}: {e:?}");
    assert!(e.is_rejection());
    assert_eq!(e.attempts(), 0);
    assert_eq!(e.retry_at(), Some(until));
    assert_eq!(clock.now_ms(), at, "refused without waiting");
    assert_eq!(t.attempts(), before, "refused without a dispatch");
}

#[tokio::test(start_paused = true)]
async fn failure_rate_trips_when_min_calls_are_in_and_half_failed() {
    // Calls one after the other, each answered after 10 ms: 200, 200, 404, 503, 503.
    let t = ScriptedTransport::new([
        Step::status(200).body("a").delay(ms(10)),
        Step::status(200).body("b").delay(ms(10)),
        Step::status(404).body("gone").delay(ms(10)),
        Step::status(503).body("down").delay(ms(10)),
        Step::status(503).body("down").delay(ms(10)),
    ]);
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<RateClient>(&t);
    let counts = || {
        let s = api.circuit_state();
        (s.phase, s.calls_in_window, s.failures_in_window)
    };

    assert_eq!(api.resource().await.expect("200"), "a");
    assert_eq!(api.resource().await.expect("200"), "b");
    assert_eq!(counts(), (Phase::Closed, 2, 0));
    // A 4xx is an answer, not a failure: it is not counted at all.
    let e = api.resource().await.expect_err("404");
    assert_eq!((e.kind(), e.status()), (ErrorKind::Status, Some(404)));
    assert_eq!(counts(), (Phase::Closed, 2, 0));
    // 1 failure in 3 calls: below `min_calls`, whatever the rate.
    let e = api.resource().await.expect_err("503");
    assert_eq!(e.status(), Some(503));
    assert_eq!(counts(), (Phase::Closed, 3, 1));
    // 2 failures in 4 calls (0.5, at the threshold) trips it at t=50.
    let e = api.resource().await.expect_err("503");
    assert_eq!((e.kind(), e.status()), (ErrorKind::Status, Some(503)));
    assert_eq!(clock.now_ms(), 50);
    let state = api.circuit_state();
    assert_eq!(state.phase, Phase::Open);
    assert_eq!(state.open_until, Some(start + ms(1050)));
    assert_eq!(t.attempts(), 5);

    refused_now(api.resource(), &t, clock, start + ms(1050)).await;
    tokio::time::sleep(ms(999)).await;
    refused_now(api.resource(), &t, clock, start + ms(1050)).await;

    // At exactly t=1050 the probe is admitted; its success closes the breaker and
    // starts a fresh window.
    tokio::time::sleep(ms(1)).await;
    t.push([Step::status(200).body("ok")]);
    assert_eq!(api.resource().await.expect("the probe"), "ok");
    assert_eq!(t.dispatch_times()[5], ms(1050));
    assert_eq!(counts(), (Phase::Closed, 0, 0));
    assert_eq!(t.attempts(), 6);
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn failure_rate_below_min_calls_does_not_trip_even_at_full_rate() {
    // Failures first: 2 of 2 fail (rate 1.0) but only 2 calls are in; then 2 successes
    // bring it to 4 calls, 2 failures: the fourth call's *success* trips it (the rate
    // is evaluated after every counted outcome), and its caller still gets the 200.
    let t = ScriptedTransport::new([
        Step::status(503).body("down"),
        Step::status(500).body("down"),
        Step::status(200).body("a"),
        Step::status(200).body("b"),
    ]);
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<RateClient>(&t);

    assert_eq!(api.resource().await.expect_err("503").status(), Some(503));
    assert_eq!(api.resource().await.expect_err("500").status(), Some(500));
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    assert_eq!(api.resource().await.expect("200"), "a");
    assert_eq!(
        api.circuit_state().phase,
        Phase::Closed,
        "3 calls < min_calls"
    );
    assert_eq!(api.resource().await.expect("200"), "b");
    let state = api.circuit_state();
    assert_eq!(state.phase, Phase::Open);
    assert_eq!(state.open_until, Some(start + ms(1000)));
    assert_eq!(clock.now_ms(), 0);
    refused_now(api.resource(), &t, clock, start + ms(1000)).await;
    assert_eq!(t.attempts(), 4);
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn slow_successes_count_as_failures_in_the_failure_rate() {
    // Two fast successes (10 ms), then two slow ones (150 ms): every caller gets its
    // 200, but the slow ones are failures, 2 of 4, and the fourth trips it at t=320.
    let t = ScriptedTransport::new([
        Step::status(200).body("fast").delay(ms(10)),
        Step::status(200).body("fast").delay(ms(10)),
        Step::status(200).body("slow").delay(ms(150)),
        Step::status(200).body("slow").delay(ms(150)),
    ]);
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<SlowClient>(&t);
    let counts = || {
        let s = api.circuit_state();
        (s.phase, s.calls_in_window, s.failures_in_window)
    };

    assert_eq!(api.resource().await.expect("200"), "fast");
    assert_eq!(api.resource().await.expect("200"), "fast");
    assert_eq!(counts(), (Phase::Closed, 2, 0));
    assert_eq!(api.resource().await.expect("200"), "slow");
    assert_eq!(clock.now_ms(), 170);
    assert_eq!(counts(), (Phase::Closed, 3, 1));
    assert_eq!(api.resource().await.expect("200"), "slow");
    assert_eq!(clock.now_ms(), 320);
    let state = api.circuit_state();
    assert_eq!(state.phase, Phase::Open);
    assert_eq!(state.open_until, Some(start + ms(1320)));
    assert_eq!(t.dispatch_times(), [ms(0), ms(10), ms(20), ms(170)]);

    refused_now(api.resource(), &t, clock, start + ms(1320)).await;
    assert_eq!(t.attempts(), 4);
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn slow_call_threshold_is_inclusive() {
    // 99 ms is not slow (and resets the count); 100 ms and 150 ms are: the second
    // slow success in a row trips it at t=449.
    let t = ScriptedTransport::new([
        Step::status(200).body("a").delay(ms(100)),
        Step::status(200).body("b").delay(ms(99)),
        Step::status(200).body("c").delay(ms(100)),
        Step::status(200).body("d").delay(ms(150)),
    ]);
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<SlowInARowClient>(&t);

    assert_eq!(api.resource().await.expect("200"), "a");
    assert_eq!(
        api.circuit_state().consecutive_failures,
        1,
        "100 ms is slow"
    );
    assert_eq!(api.resource().await.expect("200"), "b");
    assert_eq!(api.circuit_state().consecutive_failures, 0, "99 ms is not");
    assert_eq!(api.resource().await.expect("200"), "c");
    assert_eq!(api.circuit_state().consecutive_failures, 1);
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    assert_eq!(api.resource().await.expect("200"), "d");
    assert_eq!(clock.now_ms(), 449);
    let state = api.circuit_state();
    assert_eq!(state.phase, Phase::Open);
    assert_eq!(state.open_until, Some(start + ms(1449)));
    assert_eq!(t.dispatch_times(), [ms(0), ms(100), ms(199), ms(299)]);

    refused_now(api.resource(), &t, clock, start + ms(1449)).await;
    assert_eq!(t.attempts(), 4);
    assert_nothing_leaked(&t);
}

/// 20% of at least 10 calls over 10 s trips it.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 0),
    breaker(failure_rate = 0.2, window = "10s", min_calls = 10, reset = "1s")
)]
pub trait Rate20 {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// Regression: `failure_rate = 0.2` is the `f32` 0.200000003, and 2 failures in 10
/// calls (exactly 20%) were compared against 2.00000003 and left it closed.
#[tokio::test(start_paused = true)]
async fn failure_rate_trips_at_exactly_a_decimal_threshold() {
    let mut steps: Vec<Step> = (0..8).map(|_| Step::status(200).body("ok")).collect();
    steps.extend([Step::status(503), Step::status(503)]);
    let t = ScriptedTransport::new(steps);
    let api = scripted::<Rate20Client>(&t);
    for _ in 0..8 {
        assert_eq!(api.resource().await.unwrap(), "ok");
    }
    assert_eq!(api.resource().await.unwrap_err().status(), Some(503));
    assert_eq!(
        api.circuit_state().phase,
        Phase::Closed,
        "1 of 9 is under 20%"
    );
    assert_eq!(api.resource().await.unwrap_err().status(), Some(503));
    let s = api.circuit_state();
    assert_eq!((s.calls_in_window, s.failures_in_window), (10, 2));
    assert_eq!(s.phase, Phase::Open, "2 of 10 is exactly 20%");
    assert_eq!(
        api.resource().await.unwrap_err().kind(),
        ErrorKind::CircuitOpen
    );
    assert_eq!(t.attempts(), 10);
}

/// The window of `Rate` (10 s, in ten buckets of 1 s counted from the first outcome)
/// after three 503s: at 0 ms and 999 ms (the first bucket) and at 1 000 ms (the
/// second). Under `min_calls`, they leave it closed.
async fn three_failures(api: &RateClient, start: Instant) {
    for at in [0, 999, 1000] {
        sleep_until(start + ms(at)).await;
        let e = api.resource().await.expect_err("a 503");
        assert_eq!(e.status(), Some(503));
    }
    let s = api.circuit_state();
    assert_eq!(
        (s.phase, s.calls_in_window, s.failures_in_window),
        (Phase::Closed, 3, 3),
        "3 calls are under min_calls, whatever the rate"
    );
}

/// Failures older than the window no longer count: the window moves a bucket at a
/// time, so both failures of the first second leave it at exactly 10 000 ms (the one
/// of 999 ms too) and the one of 1 000 ms at exactly 11 000 ms.
#[tokio::test(start_paused = true)]
async fn failures_leave_the_window_a_bucket_at_a_time_at_its_edge() {
    let t = ScriptedTransport::new((0..3).map(|_| Step::status(503)));
    let start = Instant::now();
    let api = scripted::<RateClient>(&t);
    three_failures(&api, start).await;
    let api = &api;
    let counts_at = |at: u64| async move {
        sleep_until(start + ms(at)).await;
        let s = api.circuit_state();
        (s.calls_in_window, s.failures_in_window)
    };
    assert_eq!(counts_at(9_999).await, (3, 3));
    assert_eq!(counts_at(10_000).await, (1, 1));
    assert_eq!(counts_at(10_999).await, (1, 1));
    assert_eq!(counts_at(11_000).await, (0, 0));
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    assert_eq!(t.attempts(), 3);
}

/// A fourth 503 one tick before the first bucket leaves the window (9 999 ms) makes
/// 4 of 4: `min_calls` is met and it trips, open until 10 999 ms.
#[tokio::test(start_paused = true)]
async fn a_failure_at_the_windows_last_tick_counts_with_the_oldest() {
    let t = ScriptedTransport::new((0..4).map(|_| Step::status(503)));
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<RateClient>(&t);
    three_failures(&api, start).await;

    sleep_until(start + ms(9_999)).await;
    assert_eq!(api.resource().await.unwrap_err().status(), Some(503));
    let s = api.circuit_state();
    assert_eq!(
        (s.phase, s.calls_in_window, s.failures_in_window),
        (Phase::Open, 4, 4)
    );
    assert_eq!(s.open_until, Some(start + ms(10_999)));
    refused_now(api.resource(), &t, clock, start + ms(10_999)).await;
    assert_eq!(t.attempts(), 4);
    assert_nothing_leaked(&t);
}

/// The same fourth 503 at exactly 10 000 ms: the two failures of the first second
/// have left, so the window holds 2 calls, under `min_calls`, and it stays closed
/// (all failures, rate 1.0). It trips only once `min_calls` is met again inside the
/// window: 200 and 503 at 10 000 ms make 2 failures of 4 (0.5), open until 11 000 ms.
#[tokio::test(start_paused = true)]
async fn failures_older_than_the_window_do_not_count_toward_min_calls_or_the_rate() {
    let t = ScriptedTransport::new(
        (0..4)
            .map(|_| Step::status(503))
            .chain([Step::status(200).body("ok"), Step::status(503)]),
    );
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<RateClient>(&t);
    three_failures(&api, start).await;

    sleep_until(start + ms(10_000)).await;
    assert_eq!(api.resource().await.unwrap_err().status(), Some(503));
    let counts = || {
        let s = api.circuit_state();
        (s.phase, s.calls_in_window, s.failures_in_window)
    };
    assert_eq!(counts(), (Phase::Closed, 2, 2));
    assert_eq!(api.resource().await.unwrap(), "ok");
    assert_eq!(counts(), (Phase::Closed, 3, 2), "3 calls: under min_calls");
    assert_eq!(api.resource().await.unwrap_err().status(), Some(503));
    assert_eq!(clock.now_ms(), 10_000);
    let s = api.circuit_state();
    assert_eq!(
        (s.phase, s.calls_in_window, s.failures_in_window),
        (Phase::Open, 4, 3)
    );
    assert_eq!(s.open_until, Some(start + ms(11_000)));
    refused_now(api.resource(), &t, clock, start + ms(11_000)).await;
    assert_eq!(t.attempts(), 6);
    assert_nothing_leaked(&t);
}
