//! Dropping a hedged call's future while two branches are in flight drops both: both
//! requests are aborted, nothing is dispatched later, and neither branch keeps its
//! bulkhead permit or its half-open probe slot.

use resilient_api::circuit_breaker::state::Phase;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, resilient_api};
use tests::{Clock, assert_no_late_dispatch, assert_nothing_leaked, ms, scripted};

/// Two permits, no queue: exactly room for the primary and its hedge.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 0),
    bulkhead(concurrency = 2, queue = 0)
)]
pub trait Narrow {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;
}

/// One failure trips the breaker for 100 ms; half-open, two probes at once.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 0),
    breaker(failures = 1, reset = "100ms", probes = 2)
)]
pub trait Probed {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;

    #[get("/plain")]
    async fn plain(&self) -> Result<String, ApiError>;
}

/// Poll `call` for `for_ms`, expecting it still pending, then drop it.
async fn drop_after<F: Future>(call: F, for_ms: u64)
where
    F::Output: std::fmt::Debug,
{
    let pending = tokio::time::timeout(ms(for_ms), call).await;
    assert!(pending.is_err(), "settled before the drop: {pending:?}");
}

/// A hedged call that needs both branches' room: the primary answers at +50, the
/// hedge (launched at +10) at +15 and wins. A leaked permit or probe slot would
/// refuse the hedge and leave the primary to answer at +50.
fn both_branches_needed(t: &ScriptedTransport) {
    t.push([
        Step::status(200).body("primary").delay(ms(50)),
        Step::status(200).body("hedge").delay(ms(5)),
    ]);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_hedged_call_drops_both_branches_and_their_permits() {
    let t = ScriptedTransport::new([Step::hang(), Step::hang()]);
    let clock = Clock::start();
    let api = scripted::<NarrowClient>(&t);

    drop_after(api.search(), 15).await;
    assert_eq!(clock.now_ms(), 15);
    assert_eq!(t.dispatch_times(), [ms(0), ms(10)]);
    assert_eq!(t.in_flight(), 0, "both requests were aborted");
    assert_no_late_dispatch(&t, 2, ms(100)).await;
    assert_nothing_leaked(&t);

    // Both permits are back: a follow-up's primary and hedge both get one.
    both_branches_needed(&t);
    let at = clock.now_ms();
    assert_eq!(api.search().await.expect("the hedge answers"), "hedge");
    assert_eq!(clock.now_ms(), at + 15);
    assert_eq!(t.attempts(), 4);
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_hedged_call_releases_both_half_open_probe_slots() {
    let t = ScriptedTransport::new([Step::status(503).body("down"), Step::hang(), Step::hang()]);
    let clock = Clock::start();
    let api = scripted::<ProbedClient>(&t);

    let e = api.plain().await.expect_err("the 503 trips the breaker");
    assert_eq!((e.kind(), e.status()), (ErrorKind::Status, Some(503)));
    assert_eq!(api.circuit_state().phase, Phase::Open);
    tokio::time::sleep(ms(100)).await;

    // t=100 the primary is the first probe, t=110 the hedge the second; t=115 the
    // call is dropped.
    let ((), probes_at_112) = tokio::join!(drop_after(api.search(), 15), async {
        tokio::time::sleep(ms(12)).await;
        api.circuit_state().probes_in_flight
    });
    assert_eq!(probes_at_112, 2, "both branches hold a probe slot");
    assert_eq!(clock.now_ms(), 115);
    assert_eq!(t.dispatch_times(), [ms(0), ms(100), ms(110)]);
    assert_eq!(t.in_flight(), 0, "both requests were aborted");
    let state = api.circuit_state();
    assert_eq!(state.phase, Phase::HalfOpen, "a cancellation is no outcome");
    assert_eq!(state.probes_in_flight, 0, "both probe slots released");
    assert_no_late_dispatch(&t, 3, ms(100)).await;

    // Both slots are free: a follow-up's primary and hedge are both admitted as
    // probes; the hedge's success is the first of the two needed to close.
    both_branches_needed(&t);
    let at = clock.now_ms();
    assert_eq!(api.search().await.expect("the hedge answers"), "hedge");
    assert_eq!(clock.now_ms(), at + 15);
    assert_eq!(t.attempts(), 5);
    let state = api.circuit_state();
    assert_eq!((state.phase, state.probes_in_flight), (Phase::HalfOpen, 0));

    t.push([Step::status(200).body("ok")]);
    assert_eq!(api.plain().await.expect("the second probe"), "ok");
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    assert_eq!(t.attempts(), 6);
    assert_nothing_leaked(&t);
}
