//! S20 circuit_half_open: refused until exactly the end of the cooldown, one probe at
//! a time, a failed probe reopens with a fresh cooldown, and an outcome of an attempt
//! admitted before the trip changes nothing.
//!
//! Breaker: 1 failure, reset 100 ms, 1 probe. No retries.

use resilient_api::circuit_breaker::state::Phase;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, resilient_api};
use tests::{Clock, assert_nothing_leaked, ms, script_follow_up, scripted, settle, spawn_timed};
use tokio::time::{Instant, sleep_until};

/// One failure trips it for 100 ms; one probe.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 1, reset = "100ms", probes = 1)
)]
pub trait HalfOpen {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// A call made now is refused at once, with no dispatch.
async fn refused_now(api: &HalfOpenClient, t: &ScriptedTransport, clock: Clock) {
    let (before, at) = (t.attempts(), clock.now_ms());
    let err = api.resource().await.expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::CircuitOpen, "at t={at}");
    assert_eq!(clock.now_ms(), at, "refused without waiting");
    assert_eq!(t.attempts(), before, "refused without a dispatch");
}

#[tokio::test(start_paused = true)]
async fn s20_circuit_half_open() {
    let t = ScriptedTransport::new([
        // A slow call admitted at t=0, before the trip; its 200 lands at t=150.
        Step::status(200).body("slow").delay(ms(150)),
        // The failure that trips the breaker at t=0.
        Step::status(503).body("down"),
        // The first probe, at t=100; fails at t=120.
        Step::status(503).body("still down").delay(ms(20)),
        // The second probe, at t=220.
        Step::status(200).body("recovered"),
    ]);
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<HalfOpenClient>(&t);

    let api_slow = api.clone();
    let slow = spawn_timed(clock, async move { api_slow.resource().await });
    settle().await;
    assert_eq!(t.attempts(), 1, "the slow call is dispatched first");

    let err = api.resource().await.unwrap_err();
    assert_eq!((err.kind(), err.status()), (ErrorKind::Status, Some(503)));
    assert_eq!(clock.now_ms(), 0);
    let state = api.circuit_state();
    assert_eq!(state.phase, Phase::Open);
    assert_eq!(state.open_until, Some(start + ms(100)));

    // Refused one tick before the cooldown ends...
    sleep_until(start + ms(99)).await;
    refused_now(&api, &t, clock).await;
    assert_eq!(t.attempts(), 2);

    // ...and the probe is admitted at exactly t=100.
    sleep_until(start + ms(100)).await;
    let api_probe = api.clone();
    let probe = spawn_timed(clock, async move { api_probe.resource().await });
    settle().await;
    assert_eq!(t.attempts(), 3, "the probe is dispatched at t=100");
    let state = api.circuit_state();
    assert_eq!((state.phase, state.probes_in_flight), (Phase::HalfOpen, 1));

    // While it is in flight, a second call is refused at once.
    refused_now(&api, &t, clock).await;
    sleep_until(start + ms(110)).await;
    refused_now(&api, &t, clock).await;

    // The probe fails at t=120: open again, for a fresh 100 ms.
    let (res, at) = probe.await.unwrap();
    let err = res.unwrap_err();
    assert_eq!(
        (err.kind(), err.status(), at),
        (ErrorKind::Status, Some(503), 120)
    );
    let state = api.circuit_state();
    assert_eq!(state.phase, Phase::Open);
    assert_eq!(state.open_until, Some(start + ms(220)));

    // The slow call admitted before the trip succeeds at t=150: its answer is the
    // caller's, but it neither closes the breaker nor shortens the cooldown.
    let (res, at) = slow.await.unwrap();
    assert_eq!((res.unwrap().as_str(), at), ("slow", 150));
    let state = api.circuit_state();
    assert_eq!(state.phase, Phase::Open);
    assert_eq!(state.open_until, Some(start + ms(220)));
    refused_now(&api, &t, clock).await;

    sleep_until(start + ms(219)).await;
    refused_now(&api, &t, clock).await;

    // Recovery at exactly t=220.
    sleep_until(start + ms(220)).await;
    assert_eq!(api.resource().await.unwrap(), "recovered");
    assert_eq!(clock.now_ms(), 220);
    let state = api.circuit_state();
    assert_eq!(
        (state.phase, state.consecutive_failures),
        (Phase::Closed, 0)
    );
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(0), ms(100), ms(220)]);

    script_follow_up(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
    assert_eq!(t.attempts(), 5);
}

/// A stale success landing while the probe is in flight does not close the breaker
/// nor free the probe's slot; only the probe's own success closes it.
#[tokio::test(start_paused = true)]
async fn stale_success_during_half_open_changes_nothing() {
    let t = ScriptedTransport::new([
        Step::status(200).body("slow").delay(ms(110)),
        Step::status(503).body("down"),
        Step::status(200).body("probe").delay(ms(30)),
    ]);
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<HalfOpenClient>(&t);

    let api_slow = api.clone();
    let slow = spawn_timed(clock, async move { api_slow.resource().await });
    settle().await;
    assert_eq!(api.resource().await.unwrap_err().status(), Some(503));
    assert_eq!(api.circuit_state().phase, Phase::Open);

    sleep_until(start + ms(100)).await;
    let api_probe = api.clone();
    let probe = spawn_timed(clock, async move { api_probe.resource().await });
    settle().await;
    assert_eq!(t.attempts(), 3);
    let generation = api.circuit_state().generation;

    // t=110: the stale success lands.
    let (res, at) = slow.await.unwrap();
    assert_eq!((res.unwrap().as_str(), at), ("slow", 110));
    let state = api.circuit_state();
    assert_eq!(
        (state.phase, state.probes_in_flight, state.generation),
        (Phase::HalfOpen, 1, generation)
    );
    refused_now(&api, &t, clock).await;

    // t=130: the probe's own success closes it.
    let (res, at) = probe.await.unwrap();
    assert_eq!((res.unwrap().as_str(), at), ("probe", 130));
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(0), ms(100)]);

    script_follow_up(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
}

/// A failure from an attempt admitted before the trip (landing during the cooldown)
/// does not extend the cooldown either.
#[tokio::test(start_paused = true)]
async fn stale_failure_does_not_extend_the_cooldown() {
    let t = ScriptedTransport::new([
        Step::status(503).body("late").delay(ms(50)),
        Step::status(503).body("down"),
        Step::status(200).body("probe"),
    ]);
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<HalfOpenClient>(&t);

    let api_slow = api.clone();
    let slow = spawn_timed(clock, async move { api_slow.resource().await });
    settle().await;
    assert_eq!(api.resource().await.unwrap_err().status(), Some(503));
    let state = api.circuit_state();
    assert_eq!(state.open_until, Some(start + ms(100)));

    let (res, at) = slow.await.unwrap();
    assert_eq!((res.unwrap_err().status(), at), (Some(503), 50));
    let after = api.circuit_state();
    assert_eq!(
        (after.phase, after.open_until, after.generation),
        (Phase::Open, Some(start + ms(100)), state.generation)
    );

    sleep_until(start + ms(100)).await;
    assert_eq!(api.resource().await.unwrap(), "probe");
    assert_eq!(clock.now_ms(), 100);
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(0), ms(100)]);

    script_follow_up(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
}

/// The state read after the cooldown is half-open, whether or not a call has asked
/// since: at exactly the end of the cooldown the breaker admits a probe, and
/// `circuit_state()` says so. The move happens once: the probe that follows starts
/// no other generation.
#[tokio::test(start_paused = true)]
async fn the_state_reads_half_open_from_the_end_of_the_cooldown() {
    let t = ScriptedTransport::new([
        Step::status(503).body("down"),
        Step::status(200).body("recovered"),
    ]);
    let start = Instant::now();
    let api = scripted::<HalfOpenClient>(&t);
    assert_eq!(api.resource().await.unwrap_err().status(), Some(503));
    let tripped = api.circuit_state();
    assert_eq!(tripped.phase, Phase::Open);

    sleep_until(start + ms(99)).await;
    assert_eq!(api.circuit_state(), tripped, "still open one tick before");

    sleep_until(start + ms(100)).await;
    let state = api.circuit_state();
    assert_eq!(
        (state.phase, state.open_until, state.probes_in_flight),
        (Phase::HalfOpen, None, 0)
    );
    assert_eq!(state.generation, tripped.generation + 1);
    assert_eq!(api.circuit_state(), state, "read twice, moved once");

    assert_eq!(api.resource().await.unwrap(), "recovered");
    let closed = api.circuit_state();
    assert_eq!(closed.phase, Phase::Closed);
    assert_eq!(
        closed.generation,
        state.generation + 1,
        "the probe closed it"
    );
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(100)]);
}

/// One failure trips it for 100 ms; one probe; an attempt may take 30 ms.
#[resilient_api(
    timeout(attempt = "30ms"),
    retry(max = 0),
    breaker(failures = 1, reset = "100ms", probes = 1)
)]
pub trait ShortAttempts {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;

    #[get("/resource")]
    #[retry(max = 1, backoff = fixed(delay = "20ms"))]
    async fn retried(&self) -> Result<String, ApiError>;
}

/// Trips the breaker at 0 ms with a 503 and waits for its cooldown: half-open at
/// 100 ms. The next step scripted is the probe's.
async fn half_open_at_100(t: &ScriptedTransport, api: &ShortAttemptsClient, start: Instant) {
    let e = api.resource().await.expect_err("the 503 trips it");
    assert_eq!(e.status(), Some(503));
    assert_eq!(api.circuit_state().open_until, Some(start + ms(100)));
    sleep_until(start + ms(100)).await;
    assert_eq!(t.attempts(), 1);
}

/// A probe that hangs is cut short by its attempt timeout at 130 ms: a failure, which
/// reopens the breaker with a fresh cooldown from then, until 230 ms. Refused (no
/// dispatch) one tick before, the next probe is admitted at exactly 230 ms, and its
/// success closes it.
#[tokio::test(start_paused = true)]
async fn a_probe_cut_short_by_its_attempt_timeout_reopens_the_breaker() {
    let t = ScriptedTransport::new([
        Step::status(503).body("down"),
        Step::hang(),
        Step::status(200).body("recovered"),
    ]);
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<ShortAttemptsClient>(&t);
    half_open_at_100(&t, &api, start).await;

    let e = api.resource().await.expect_err("the probe times out");
    assert_eq!(
        (e.kind(), e.attempts(), clock.now_ms()),
        (ErrorKind::AttemptTimeout, 1, 130)
    );
    let state = api.circuit_state();
    assert_eq!(
        (state.phase, state.open_until, state.probes_in_flight),
        (Phase::Open, Some(start + ms(230)), 0)
    );
    sleep_until(start + ms(229)).await;
    let e = api.resource().await.expect_err("still open");
    assert_eq!(
        (e.kind(), e.retry_at(), e.attempts()),
        (ErrorKind::CircuitOpen, Some(start + ms(230)), 0)
    );
    assert_eq!(t.attempts(), 2, "refused without a dispatch");

    sleep_until(start + ms(230)).await;
    assert_eq!(api.resource().await.unwrap(), "recovered");
    assert_eq!(t.dispatch_times(), [ms(0), ms(100), ms(230)]);
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    assert_nothing_leaked(&t);
}

/// The same probe with a retry left: its timeout at 130 ms reopens the breaker until
/// 230 ms, so the retry, due at 150 ms, would be refused; the call ends at 130 ms with
/// `CircuitOpen` saying 230 ms (100 ms from now), the timeout as its source, and
/// nothing more is sent.
#[tokio::test(start_paused = true)]
async fn a_timed_out_probe_with_a_retry_left_ends_with_the_new_cooldown() {
    let t = ScriptedTransport::new([Step::status(503).body("down"), Step::hang()]);
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<ShortAttemptsClient>(&t);
    half_open_at_100(&t, &api, start).await;

    let e = api.retried().await.expect_err("refused after the timeout");
    assert_eq!(
        (e.kind(), e.attempts(), clock.now_ms()),
        (ErrorKind::CircuitOpen, 1, 130)
    );
    assert_eq!(
        (e.retry_at(), e.retry_after()),
        (Some(start + ms(230)), Some(ms(100)))
    );
    let source = std::error::Error::source(&e)
        .and_then(|s| s.downcast_ref::<ApiError>())
        .expect("the probe's timeout is the source");
    assert_eq!(source.kind(), ErrorKind::AttemptTimeout);
    assert_eq!(api.circuit_state().open_until, Some(start + ms(230)));
    assert_eq!(t.dispatch_times(), [ms(0), ms(100)]);
    assert_nothing_leaked(&t);
}
