//! Coalescing meets the breaker: a half-open breaker whose probe slots are taken lets
//! a coalesced call go on only to join an identical call in flight (and share its
//! probe's answer). With none in flight, the call is refused at once, as any other
//! call is: it never waits in a bulkhead queue or for a rate-limit token first. A
//! breaker still in its cooldown refuses at once even a call that could join one.

use resilient_api::circuit_breaker::state::Phase;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, resilient_api};
use tests::{Clock, assert_nothing_leaked, ms, scripted, settle, spawn_timed};

/// One failure trips it for 100 ms, one probe; one bulkhead slot with a queue of one.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 1, reset = "100ms", probes = 1),
    bulkhead(concurrency = 1, queue = 1)
)]
pub trait Guarded {
    #[get("/config")]
    #[coalesce]
    async fn config(&self) -> Result<String, ApiError>;

    #[get("/other")]
    async fn other(&self) -> Result<String, ApiError>;
}

/// Regression: half-open with its one probe (a different call) in flight and holding
/// the only bulkhead slot, a coalesced call with nothing to join queued for the slot
/// and, when the probe succeeded at t=150, was dispatched: it was not refused at once.
#[tokio::test(start_paused = true)]
async fn a_half_open_refusal_of_a_coalesced_call_waits_in_no_queue() {
    let t = ScriptedTransport::new([
        Step::status(503),
        Step::status(200).body("probe").delay(ms(50)),
    ]);
    let clock = Clock::start();
    let api = scripted::<GuardedClient>(&t);
    assert_eq!(api.other().await.unwrap_err().status(), Some(503));
    assert_eq!(api.circuit_state().phase, Phase::Open);

    tokio::time::sleep(ms(100)).await;
    let prober = api.clone();
    let probe = spawn_timed(clock, async move { prober.other().await });
    settle().await;
    assert_eq!(t.attempts(), 2, "the probe is dispatched at t=100");
    let state = api.circuit_state();
    assert_eq!((state.phase, state.probes_in_flight), (Phase::HalfOpen, 1));

    // A step for the coalesced call, should it (wrongly) be dispatched.
    t.push([Step::status(200).body("late")]);
    let caller = api.clone();
    let coalesced = spawn_timed(clock, async move { caller.config().await });
    settle().await;
    tokio::time::sleep(ms(60)).await;
    let (result, at) = coalesced.await.expect("the call's task");
    let e = result.expect_err("refused: the probe slot is taken and nothing to join");
    assert_eq!(
        (e.kind(), at, t.attempts()),
        (ErrorKind::CircuitOpen, 100, 2),
        "refused at once, without dispatch: {e:?}"
    );

    let (probe, at) = probe.await.expect("the probe's task");
    assert_eq!(
        (probe.expect("the probe succeeds").as_str(), at),
        ("probe", 150)
    );
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    assert_nothing_leaked(&t);
    assert_eq!(clock.now_ms(), 160);
}

/// One failure trips it for 100 ms; no bulkhead limit to speak of.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 1, reset = "100ms", probes = 1)
)]
pub trait Tripped {
    #[get("/config")]
    #[coalesce]
    async fn config(&self) -> Result<String, ApiError>;

    #[get("/other")]
    async fn other(&self) -> Result<String, ApiError>;
}

/// Pins the order of the breaker's fast check and coalescing (README, the coalesce
/// row): an identical call is in flight, admitted while the breaker was closed, when
/// another call's 503 opens it. A second identical call at t=10 is refused at once
/// with the breaker's time, without joining (the fast check waits for nothing, not
/// even for an answer already on its way); the first caller still gets its answer at
/// t=50, which, admitted under the older state, does not close the breaker.
#[tokio::test(start_paused = true)]
async fn a_breaker_in_its_cooldown_refuses_a_call_that_could_join_one_in_flight() {
    let t = ScriptedTransport::new([
        Step::status(200).body("shared").delay(ms(50)),
        Step::status(503),
    ]);
    let clock = Clock::start();
    let api = scripted::<TrippedClient>(&t);
    let caller = api.clone();
    let first = spawn_timed(clock, async move { caller.config().await });
    settle().await;
    assert_eq!(t.attempts(), 1, "the first call is in flight");
    assert_eq!(api.other().await.unwrap_err().status(), Some(503));
    assert_eq!(api.circuit_state().phase, Phase::Open);

    tokio::time::sleep(ms(10)).await;
    let e = api.config().await.expect_err("refused by the open breaker");
    assert_eq!(
        (e.kind(), e.attempts(), clock.now_ms(), t.attempts()),
        (ErrorKind::CircuitOpen, 0, 10, 2),
        "{e:?}"
    );
    assert_eq!(e.retry_after(), Some(ms(90)), "when the breaker may close");

    let (result, at) = first.await.expect("the first call's task");
    assert_eq!((result.expect("its answer").as_str(), at), ("shared", 50));
    assert_eq!(api.circuit_state().phase, Phase::Open, "a stale success");
    assert_nothing_leaked(&t);
}
