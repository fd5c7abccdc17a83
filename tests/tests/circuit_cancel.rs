//! S21 circuit_local_cancel: a cancellation by the caller is not a breaker failure,
//! nor is an attempt cut short by the caller's deadline, and a dropped half-open probe
//! gives its slot back.

use resilient_api::circuit_breaker::state::Phase;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, CancellationToken, ErrorKind, resilient_api};
use tests::{Clock, ms, script_follow_up, scripted, settle, spawn_timed};
use tokio::time::{Instant, sleep_until};

/// One failure trips it.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 1, reset = "100ms", probes = 1)
)]
pub trait Fragile {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// One failure trips it, as in the scenario; the backoff follows a 429, which is
/// retried but is not a breaker failure.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 2, backoff = fixed(delay = "100ms"), on = [429]),
    breaker(failures = 1, reset = "1s")
)]
pub trait Throttled {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// Two failures trip it, so the 503 before the backoff alone does not.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 2, backoff = fixed(delay = "100ms"), on = [503]),
    breaker(failures = 2, reset = "1s")
)]
pub trait Backoff {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn s21_circuit_local_cancel() {
    let t = ScriptedTransport::new([Step::hang()]);
    let clock = Clock::start();
    let api = scripted::<FragileClient>(&t);

    let token = CancellationToken::new();
    let cancellable = api.with_options(CallOptions::new().cancel_on(token.clone()));
    let call = spawn_timed(clock, async move { cancellable.resource().await });
    settle().await;
    assert_eq!((t.attempts(), t.in_flight()), (1, 1));

    tokio::time::sleep(ms(20)).await;
    token.cancel();
    settle().await;
    assert!(call.is_finished(), "settles in the same tick");
    let (res, at) = call.await.unwrap();
    assert_eq!(res.unwrap_err().kind(), ErrorKind::Cancelled);
    assert_eq!(at, 20);
    assert_eq!(t.in_flight(), 0, "the hanging attempt was dropped");

    let state = api.circuit_state();
    assert_eq!(
        (state.phase, state.consecutive_failures, state.generation),
        (Phase::Closed, 0, 0),
        "a cancel is not a failure"
    );

    tokio::time::sleep(ms(500)).await;
    assert_eq!(t.attempts(), 1, "nothing dispatched after the cancel");
    assert_eq!(t.open_bodies(), 0);
    t.push([Step::status(200).body("ok")]);
    assert_eq!(api.resource().await.unwrap(), "ok");
    assert_eq!(api.circuit_state().phase, Phase::Closed);
}

/// Makes a call with `call`, whose first attempt has failed into a 100 ms backoff, and
/// cancels it at t=20: it settles at once, cancelled, and nothing is dispatched then or
/// later (when the backoff would have ended).
async fn cancel_in_backoff<F, Fut>(t: &ScriptedTransport, call: F)
where
    F: FnOnce(CallOptions) -> Fut,
    Fut: Future<Output = Result<String, ApiError>> + Send + 'static,
{
    let clock = Clock::start();
    let token = CancellationToken::new();
    let call = spawn_timed(clock, call(CallOptions::new().cancel_on(token.clone())));
    settle().await;
    assert_eq!((t.attempts(), t.in_flight()), (1, 0), "in the backoff");

    tokio::time::sleep(ms(20)).await;
    token.cancel();
    settle().await;
    assert!(call.is_finished(), "settles in the same tick");
    let (res, at) = call.await.expect("the call's task");
    let kind = res.expect_err("cancelled").kind();
    assert_eq!((kind, at), (ErrorKind::Cancelled, 20));

    tokio::time::sleep(ms(500)).await;
    assert_eq!(t.dispatch_times(), vec![ms(0)]);
    assert_eq!(t.open_bodies(), 0);
}

/// The scenario as written: a 1-failure breaker, and a cancel in the middle of a
/// backoff. The attempt before the backoff answered 429, so the breaker has counted
/// nothing; after the cancel it must still have counted nothing.
#[tokio::test(start_paused = true)]
async fn s21_circuit_local_cancel_during_backoff_one_failure_breaker() {
    let t = ScriptedTransport::new([Step::status(429).body("slow down")]);
    let api = scripted::<ThrottledClient>(&t);
    let caller = api.clone();
    cancel_in_backoff(&t, move |options| async move {
        caller.with_options(options).resource().await
    })
    .await;

    let state = api.circuit_state();
    assert_eq!(
        (state.phase, state.consecutive_failures, state.generation),
        (Phase::Closed, 0, 0),
        "a cancel during a backoff is not a failure"
    );
    script_follow_up(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
    assert_eq!(api.circuit_state().phase, Phase::Closed);
}

/// The same with one failure already counted before the cancel (so a 2-failure
/// breaker, which the 503 alone does not trip): the cancel adds nothing to it.
#[tokio::test(start_paused = true)]
async fn s21_circuit_local_cancel_during_backoff() {
    let t = ScriptedTransport::new([Step::status(503).body("busy")]);
    let api = scripted::<BackoffClient>(&t);
    let caller = api.clone();
    cancel_in_backoff(&t, move |options| async move {
        caller.with_options(options).resource().await
    })
    .await;

    let state = api.circuit_state();
    assert_eq!(
        (state.phase, state.consecutive_failures, state.generation),
        (Phase::Closed, 1, 0),
        "the 503 counts, the cancel adds nothing"
    );
    script_follow_up(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
    let state = api.circuit_state();
    assert_eq!(
        (state.phase, state.consecutive_failures),
        (Phase::Closed, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn dropped_half_open_probe_releases_its_slot() {
    let t = ScriptedTransport::new([
        Step::status(503).body("down"),
        Step::hang(),
        Step::status(200).body("probe"),
    ]);
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<FragileClient>(&t);

    assert_eq!(api.resource().await.unwrap_err().status(), Some(503));
    assert_eq!(api.circuit_state().phase, Phase::Open);

    // t=100: the probe hangs; the caller drops it at t=110.
    sleep_until(start + ms(100)).await;
    let dropped = tokio::time::timeout(ms(10), api.resource());
    let api_other = api.clone();
    let other = async move {
        settle().await;
        // While the probe is in flight its slot is taken.
        let admitted = api_other.circuit_state();
        assert_eq!(
            (admitted.phase, admitted.probes_in_flight),
            (Phase::HalfOpen, 1)
        );
        (api_other.resource().await, admitted)
    };
    let (dropped, (other, admitted)) = tokio::join!(dropped, other);
    assert!(dropped.is_err());
    assert_eq!(other.unwrap_err().kind(), ErrorKind::CircuitOpen);
    assert_eq!(clock.now_ms(), 110);
    assert_eq!(t.in_flight(), 0, "the probe's attempt was dropped");

    // Its slot is free and nothing was counted: the next call is the new probe.
    let state = api.circuit_state();
    assert_eq!(
        (
            state.phase,
            state.probes_in_flight,
            state.consecutive_failures,
            state.generation
        ),
        (
            Phase::HalfOpen,
            0,
            admitted.consecutive_failures,
            admitted.generation
        )
    );
    assert_eq!(api.resource().await.unwrap(), "probe");
    assert_eq!(clock.now_ms(), 110);
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(100), ms(110)]);

    script_follow_up(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
}

#[tokio::test(start_paused = true)]
async fn cancelled_half_open_probe_releases_its_slot() {
    let t = ScriptedTransport::new([
        Step::status(503).body("down"),
        Step::hang(),
        Step::status(200).body("probe"),
    ]);
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<FragileClient>(&t);

    assert_eq!(api.resource().await.unwrap_err().status(), Some(503));
    sleep_until(start + ms(100)).await;

    let token = CancellationToken::new();
    let cancellable = api.with_options(CallOptions::new().cancel_on(token.clone()));
    let probe = spawn_timed(clock, async move { cancellable.resource().await });
    settle().await;
    assert_eq!(api.circuit_state().probes_in_flight, 1);

    sleep_until(start + ms(110)).await;
    token.cancel();
    settle().await;
    assert!(probe.is_finished());
    let (res, at) = probe.await.unwrap();
    assert_eq!((res.unwrap_err().kind(), at), (ErrorKind::Cancelled, 110));

    let state = api.circuit_state();
    assert_eq!((state.phase, state.probes_in_flight), (Phase::HalfOpen, 0));
    assert_eq!(api.resource().await.unwrap(), "probe");
    assert_eq!(clock.now_ms(), 110);
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(100), ms(110)]);

    script_follow_up(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
}

/// The caller's deadline is the caller's limit, not the upstream's: an attempt it cuts
/// short counts neither way, like a cancel. (The attempt timeout is what counts.)
#[tokio::test(start_paused = true)]
async fn an_attempt_cut_short_by_the_callers_deadline_is_not_a_failure() {
    let t = ScriptedTransport::new([Step::hang(), Step::hang()]);
    let api = scripted::<FragileClient>(&t);
    let hurried = api.with_options(CallOptions::new().deadline(ms(100)));
    for _ in 0..2 {
        let e = hurried.resource().await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Deadline);
        let state = api.circuit_state();
        assert_eq!(
            (state.phase, state.consecutive_failures, state.generation),
            (Phase::Closed, 0, 0)
        );
    }
    assert_eq!((t.attempts(), t.in_flight()), (2, 0));
}

/// One failure trips it for 100 ms; one probe; coalesced calls.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 1, reset = "100ms")
)]
pub trait Shared {
    #[get("/config")]
    #[coalesce]
    async fn config(&self) -> Result<String, ApiError>;
}

/// Regression: half-open, the one probe in flight for a coalesced call; an identical
/// call was refused at its start with `CircuitOpen` instead of joining the execution
/// in flight and sharing the probe's answer.
#[tokio::test(start_paused = true)]
async fn an_identical_call_joins_the_coalesced_probe_in_flight() {
    let t = ScriptedTransport::new([Step::status(503)]);
    let clock = Clock::start();
    let api = tests::scripted::<SharedClient>(&t);
    assert_eq!(api.config().await.unwrap_err().status(), Some(503));
    tokio::time::sleep(ms(100)).await;
    t.push([Step::status(200).body("ok").delay(ms(20))]);
    let (a, b) = tokio::join!(api.config(), api.config());
    assert_eq!((a.unwrap(), b.unwrap()), ("ok".to_owned(), "ok".to_owned()));
    assert_eq!(clock.now_ms(), 120);
    assert_eq!(t.attempts(), 2, "one probe for both");
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    // Open (not half-open), an identical call is still refused at once.
    t.push([Step::status(503)]);
    assert_eq!(api.config().await.unwrap_err().status(), Some(503));
    let e = api.config().await.unwrap_err();
    assert_eq!((e.kind(), t.attempts()), (ErrorKind::CircuitOpen, 3));
}

/// Regression: a call whose token was cancelled before it started, on an open
/// breaker, ended with `CircuitOpen`; the caller's own word comes first.
#[tokio::test(start_paused = true)]
async fn a_cancelled_call_on_an_open_breaker_is_cancelled() {
    let t = ScriptedTransport::new([Step::status(503)]);
    let api = tests::scripted::<SharedClient>(&t);
    assert_eq!(api.config().await.unwrap_err().status(), Some(503));
    let token = CancellationToken::new();
    token.cancel();
    let e = api
        .with_options(CallOptions::new().cancel_on(token))
        .config()
        .await
        .unwrap_err();
    assert_eq!((e.kind(), t.attempts()), (ErrorKind::Cancelled, 1));
}
