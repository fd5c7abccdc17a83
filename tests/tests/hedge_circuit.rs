//! S7 circuit_hedge: hedged attempts go through the breaker, and a losing branch's
//! failure is not a breaker failure when another branch wins.

use resilient_api::circuit_breaker::state::Phase;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, ErrorKind, resilient_api};
use tests::{Clock, assert_nothing_leaked, ms, scripted};

/// Hedged and plain endpoints behind one breaker (the default partition).
#[resilient_api(
    timeout(attempt = "10s"),
    breaker(failures = 1, reset = "1s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503])
)]
pub trait Search {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;

    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    #[retry(max = 0)]
    async fn search_once(&self) -> Result<String, ApiError>;

    #[get("/plain")]
    #[retry(max = 0)]
    async fn plain(&self) -> Result<String, ApiError>;
}

fn assert_closed_and_clean(api: &SearchClient) {
    let state = api.circuit_state();
    assert_eq!(state.phase, Phase::Closed);
    assert_eq!(state.consecutive_failures, 0);
}

/// The breaker is open: every call is refused at once, without dispatch.
async fn assert_refused(t: &ScriptedTransport, api: &SearchClient, clock: &Clock) {
    let before = t.attempts();
    let at = clock.now_ms();
    let e = api.search().await.expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::CircuitOpen);
    assert_eq!(e.attempts(), 0, "nothing was dispatched: {e:?}");
    let e = api.plain().await.expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::CircuitOpen);
    assert_eq!(e.attempts(), 0, "nothing was dispatched: {e:?}");
    assert_eq!(t.attempts(), before, "a refused call dispatches nothing");
    assert_eq!(clock.now_ms(), at, "refused at once");
}

/// After the cooldown a healthy call is admitted, succeeds and closes the breaker.
async fn recover(t: &ScriptedTransport, api: &SearchClient, clock: &Clock, open_until_ms: u64) {
    let now = clock.now_ms();
    tokio::time::sleep(ms(open_until_ms - now)).await;
    assert_eq!(clock.now_ms(), open_until_ms);
    t.push([Step::status(200).body("ok")]);
    let before = t.attempts();
    assert_eq!(
        api.plain().await.expect("the follow-up call succeeds"),
        "ok"
    );
    assert_eq!(t.attempts(), before + 1);
    assert_closed_and_clean(api);
    assert_nothing_leaked(t);
}

#[tokio::test(start_paused = true)]
async fn s7_circuit_hedge() {
    let t = ScriptedTransport::new([
        Step::status(503).body("primary").delay(ms(15)),
        Step::status(200).body("winner").delay(ms(20)),
    ]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    // Between the primary's 503 (t=15) and the hedge's answer (t=30) the losing
    // failure must not have been counted.
    let (result, state_at_20) = tokio::join!(api.search(), async {
        tokio::time::sleep(ms(20)).await;
        api.circuit_state()
    });
    assert_eq!(result.unwrap(), "winner");
    assert_eq!(clock.now_ms(), 30);
    assert_eq!(state_at_20.phase, Phase::Closed);
    assert_eq!(state_at_20.consecutive_failures, 0);
    assert_eq!(t.attempts(), 2);
    assert_eq!(t.dispatch_times(), [ms(0), ms(10)]);
    assert_nothing_leaked(&t);
    assert_closed_and_clean(&api);

    // A later failing call (no retry, no hedge) trips it and reports its own failure.
    t.push([Step::status(503).body("down")]);
    let e = api.plain().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Status);
    assert_eq!(e.status(), Some(503));
    assert_eq!(e.body_text().as_deref(), Some("down"));
    assert_eq!(e.attempts(), 1);
    assert_eq!(clock.now_ms(), 30);
    assert_eq!(t.attempts(), 3);
    let state = api.circuit_state();
    assert_eq!(state.phase, Phase::Open);

    // The next call is refused without dispatch.
    assert_refused(&t, &api, &clock).await;
    assert_nothing_leaked(&t);

    recover(&t, &api, &clock, 1030).await;
}

#[tokio::test(start_paused = true)]
async fn s7_circuit_hedge_both_branches_failing_trip_it() {
    let t = ScriptedTransport::new([
        Step::status(503).body("primary").delay(ms(5)),
        Step::status(503).body("hedge").delay(ms(20)),
    ]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    let e = api.search_once().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AllHedgesFailed);
    assert_eq!(clock.now_ms(), 30);
    assert_eq!(t.attempts(), 2);
    assert_eq!(t.dispatch_times(), [ms(0), ms(10)]);
    assert_eq!(api.circuit_state().phase, Phase::Open);
    assert_nothing_leaked(&t);

    assert_refused(&t, &api, &clock).await;
    recover(&t, &api, &clock, 1030).await;
}

#[tokio::test(start_paused = true)]
async fn s7_circuit_hedge_tripped_with_retries_left_ends_with_circuit_open() {
    // Both branches fail (t=5, t=30) and trip the breaker; a retry remains, but the
    // breaker would still be open after the 20 ms backoff: the call ends at once with
    // CircuitOpen whose source is the hedged round's failure.
    let t = ScriptedTransport::new([
        Step::status(503).body("primary").delay(ms(5)),
        Step::status(503).body("hedge").delay(ms(20)),
    ]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    let e = api.search().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CircuitOpen);
    assert_eq!(clock.now_ms(), 30, "no sleep just to be refused");
    assert_eq!(t.attempts(), 2);
    let source = std::error::Error::source(&e)
        .and_then(|s| s.downcast_ref::<ApiError>())
        .expect("the round's failure as source");
    assert_eq!(source.kind(), ErrorKind::AllHedgesFailed);
    assert_eq!(source.status(), Some(503));
    assert_eq!(source.body_text().as_deref(), Some("hedge"));
    assert_eq!(api.circuit_state().phase, Phase::Open);
    assert_nothing_leaked(&t);

    assert_refused(&t, &api, &clock).await;
    recover(&t, &api, &clock, 1030).await;
}

#[tokio::test(start_paused = true)]
async fn s7_open_breaker_refuses_the_hedge_branch_too() {
    // The primary (t=0) is admitted; before the hedge is due (t=10) an unrelated call
    // trips the breaker at t=5: the hedge is refused without dispatch, and the
    // primary's later answer still serves its caller.
    let t = ScriptedTransport::new([
        Step::status(200).body("primary").delay(ms(40)),
        Step::status(503).body("down").delay(ms(5)),
    ]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    let (hedged, tripping) = tokio::join!(api.search(), api.plain());
    let e = tripping.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Status);
    assert_eq!(e.status(), Some(503));
    assert_eq!(hedged.unwrap(), "primary");
    assert_eq!(clock.now_ms(), 40);
    assert_eq!(
        t.attempts(),
        2,
        "the hedge branch was refused by the open breaker"
    );
    assert_eq!(t.dispatch_times(), [ms(0), ms(0)]);
    assert_nothing_leaked(&t);
    // The primary was admitted under the closed generation: its success does not
    // close the breaker that opened after it.
    assert_eq!(api.circuit_state().phase, Phase::Open);

    assert_refused(&t, &api, &clock).await;
    recover(&t, &api, &clock, 1005).await;
}

/// One failure trips it for 100 ms; a hedged endpoint with no retry.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 1, reset = "100ms")
)]
pub trait HedgedTrip {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;

    #[get("/plain")]
    async fn plain(&self) -> Result<String, ApiError>;
}

/// Regression: a hedged round whose branches all fail trips the breaker when the
/// round ends (210 ms), but the cooldown was counted from when the first branch
/// failed (5 + 100 = 105 ms, already past), so the breaker was never really open.
/// It now refuses for its full reset, until 310 ms.
#[tokio::test(start_paused = true)]
async fn hedged_trip_gets_a_full_cooldown() {
    let t = ScriptedTransport::new([
        Step::status(503).body("primary").delay(ms(5)),
        Step::status(503).body("hedge").delay(ms(200)),
    ]);
    let start = tokio::time::Instant::now();
    let clock = Clock::start();
    let api = scripted::<HedgedTripClient>(&t);

    let e = api.search().await.unwrap_err();
    assert_eq!(
        (e.kind(), clock.now_ms()),
        (ErrorKind::AllHedgesFailed, 210)
    );
    assert_eq!(t.attempts(), 2);
    let s = api.circuit_state();
    assert_eq!(s.phase, Phase::Open);
    assert_eq!(s.open_until.map(|u| u - start), Some(ms(310)));
    // Refused without a dispatch until then, admitted at exactly 310 ms.
    t.push([Step::status(200).body("probe")]);
    let refused = api.plain().await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::CircuitOpen);
    assert_eq!(t.attempts(), 2);
    tokio::time::sleep_until(start + ms(310)).await;
    assert_eq!(api.plain().await.unwrap(), "probe");
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    assert_nothing_leaked(&t);
}

/// Half-open with one probe: the primary is the probe and fails at 105 ms, before the
/// hedge is due (110 ms). Regressions:
/// - the round ended with `CircuitOpen` that did not say when the breaker may close;
/// - then, the probe's verdict was held until the round ended, like a losing branch's.
///   Held, it kept the one probe slot, so the round waited for a hedge that this
///   very slot made the breaker refuse at 110 ms, and only then reopened the breaker,
///   5 ms late, for every caller.
///
/// A failed probe now reopens the breaker when it fails (DESIGN §3.6), and the round
/// ends then, with the time the breaker may close.
#[tokio::test(start_paused = true)]
async fn a_failed_probe_reopens_the_breaker_at_once_and_ends_the_round_then() {
    let t = ScriptedTransport::new([
        Step::status(503),
        Step::status(503).body("probe").delay(ms(5)),
    ]);
    let start = tokio::time::Instant::now();
    let clock = Clock::start();
    let api = scripted::<HedgedTripClient>(&t);
    assert_eq!(api.plain().await.unwrap_err().status(), Some(503));
    tokio::time::sleep(ms(100)).await;
    let e = api.search().await.unwrap_err();
    assert_eq!((e.kind(), clock.now_ms()), (ErrorKind::CircuitOpen, 105));
    assert_eq!(e.retry_at(), Some(start + ms(205)));
    assert_eq!(api.circuit_state().open_until, Some(start + ms(205)));
    assert_eq!(
        t.dispatch_times(),
        [ms(0), ms(100)],
        "the hedge is not sent"
    );
    assert_nothing_leaked(&t);
}

/// Hedged, behind a breaker that opens on one failure, with two half-open probes.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 1, reset = "100ms", probes = 2)
)]
pub trait TwoProbes {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;

    #[get("/plain")]
    async fn plain(&self) -> Result<String, ApiError>;
}

/// Regression: the primary's 503 at 5 ms waits for the hedge (launched at 10 ms, it
/// hangs), and the call's deadline ends the round at 50 ms. The 503's verdict was
/// held for the round's end and dropped with it, so the breaker never saw a failure
/// that a call without hedging counts at once. It counts now, when the round is cut
/// short, and the cooldown starts then.
#[tokio::test(start_paused = true)]
async fn a_branch_failure_counts_when_the_deadline_cuts_the_round_short() {
    let t = ScriptedTransport::new([Step::status(503).delay(ms(5)), Step::hang()]);
    let start = tokio::time::Instant::now();
    let clock = Clock::start();
    let api = scripted::<HedgedTripClient>(&t).with_options(CallOptions::new().deadline(ms(50)));

    let e = api.search().await.unwrap_err();
    assert_eq!((e.kind(), clock.now_ms()), (ErrorKind::Deadline, 50));
    assert_eq!(t.dispatch_times(), [ms(0), ms(10)]);
    let state = api.circuit_state();
    assert_eq!(state.phase, Phase::Open, "the 503 counts: {state:?}");
    assert_eq!(state.open_until, Some(start + ms(150)));
    let e = api.plain().await.unwrap_err();
    assert_eq!((e.kind(), e.attempts()), (ErrorKind::CircuitOpen, 0));
    assert_eq!(t.attempts(), 2);
    assert_nothing_leaked(&t);
}

/// Regression: half-open with two probes, both taken by one hedged call. The first
/// probe fails at 120 ms, the second (sent at 110 ms) hangs, and the caller gives up
/// at 130 ms (dropping the call). The failed probe's verdict went with the round,
/// which freed its slot without a verdict: the breaker stayed half-open and let the
/// next call probe the failing upstream again. The failure now reopens it when it
/// fails, at 120 ms, while the other probe is still in flight.
#[tokio::test(start_paused = true)]
async fn a_failed_probe_reopens_the_breaker_when_the_caller_gives_up() {
    let t = ScriptedTransport::new([
        Step::status(503),
        Step::status(503).delay(ms(20)),
        Step::hang(),
    ]);
    let start = tokio::time::Instant::now();
    let clock = Clock::start();
    let api = scripted::<TwoProbesClient>(&t);
    assert_eq!(api.plain().await.unwrap_err().status(), Some(503));
    assert_eq!(api.circuit_state().phase, Phase::Open);
    tokio::time::sleep(ms(100)).await;

    let gave_up = tokio::time::timeout(ms(30), api.search()).await;
    assert!(gave_up.is_err(), "the caller gave up: {gave_up:?}");
    assert_eq!(clock.now_ms(), 130);
    assert_eq!(t.dispatch_times(), [ms(0), ms(100), ms(110)]);
    let state = api.circuit_state();
    assert_eq!(
        state.phase,
        Phase::Open,
        "the failed probe reopens it: {state:?}"
    );
    assert_eq!(state.open_until, Some(start + ms(220)));
    let e = api.plain().await.unwrap_err();
    assert_eq!((e.kind(), e.attempts()), (ErrorKind::CircuitOpen, 0));
    assert_eq!(t.attempts(), 3);
    assert_nothing_leaked(&t);
}

/// The primary fails before the hedge is due, and the breaker (tripped meanwhile by
/// another call) will still be open when it is: the round ends at the failure with
/// `CircuitOpen`, saying when the breaker may close, instead of waiting for a hedge
/// it would refuse. As a retry whose backoff would end in an open breaker does.
#[tokio::test(start_paused = true)]
async fn a_hedge_the_breaker_will_refuse_is_not_waited_for() {
    let t = ScriptedTransport::new([
        Step::status(503).body("primary").delay(ms(3)),
        Step::status(503).body("down").delay(ms(1)),
    ]);
    let clock = Clock::start();
    let start = tokio::time::Instant::now();
    let api = scripted::<SearchClient>(&t);
    let (hedged, tripping) = tokio::join!(
        async {
            let r = api.search_once().await;
            (r, clock.now_ms())
        },
        api.plain()
    );
    assert_eq!(tripping.unwrap_err().status(), Some(503));
    let (r, at) = hedged;
    let e = r.expect_err("the hedge would be refused");
    assert_eq!((e.kind(), at), (ErrorKind::CircuitOpen, 3));
    assert_eq!(e.retry_at(), Some(start + ms(1001)));
    assert_eq!(e.attempts(), 1);
    let source = std::error::Error::source(&e)
        .and_then(|s| s.downcast_ref::<ApiError>())
        .expect("what the primary got is the source");
    assert_eq!(source.status(), Some(503));
    assert_eq!(t.dispatch_times(), [ms(0), ms(0)]);
    assert_nothing_leaked(&t);
}

/// Half-open with one probe, and a retry on a 429: hedged and unhedged endpoints.
#[resilient_api(
    timeout(attempt = "10s"),
    breaker(failures = 1, reset = "100ms"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [429, 503])
)]
pub trait ProbeRetried {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;

    #[get("/search")]
    async fn unhedged(&self) -> Result<String, ApiError>;

    #[get("/trip")]
    #[retry(max = 0)]
    async fn trip(&self) -> Result<String, ApiError>;
}

/// Trips the breaker at 0 ms (open until 100 ms), waits for its cooldown, and makes
/// one call whose first attempt is the probe: sent at 100 ms, it answers 429 at
/// 115 ms; the retry, 20 ms later, gets a 200. What the call returned, when, and
/// the breaker's phase then.
async fn a_probe_answering_429(
    hedged: bool,
) -> (Result<String, ApiError>, u64, Phase, ScriptedTransport) {
    let t = ScriptedTransport::new([
        Step::status(503).body("down"),
        Step::status(429).body("slow down").delay(ms(15)),
        Step::status(200).body("ok"),
    ]);
    let clock = Clock::start();
    let api = scripted::<ProbeRetriedClient>(&t);
    let e = api.trip().await.expect_err("the 503 trips it");
    assert_eq!(e.status(), Some(503));
    assert_eq!(api.circuit_state().phase, Phase::Open);
    tokio::time::sleep(ms(100)).await;
    let result = if hedged {
        api.search().await
    } else {
        api.unhedged().await
    };
    let at = clock.now_ms();
    (result, at, api.circuit_state().phase, t)
}

/// An unhedged call whose probe answers 429 (no breaker failure: it releases the
/// probe slot) retries it, and the retry is the next probe.
#[tokio::test(start_paused = true)]
async fn an_unhedged_probe_answering_429_is_retried() {
    let (result, at, phase, t) = a_probe_answering_429(false).await;
    assert_eq!((result.unwrap(), at), ("ok".to_owned(), 135));
    assert_eq!(phase, Phase::Closed, "the retry's 200 closes it");
    assert_eq!(t.dispatch_times(), [ms(0), ms(100), ms(135)]);
    assert_nothing_leaked(&t);
}

/// Regression: the hedged call's primary is the probe; its hedge, due at 110 ms, is
/// refused by the breaker only because that probe holds the one slot. The probe's
/// 429 at 115 ms then ended the call with the hedge's `CircuitOpen` (with no time
/// to wait, and the 429 as its source), where an unhedged call retries the 429. The
/// round's result is its probe's answer: the 429 is retried at 135 ms, as a probe
/// again, and its 200 closes the breaker.
#[tokio::test(start_paused = true)]
async fn a_hedge_refused_for_its_own_probe_leaves_the_round_to_the_probe() {
    let (result, at, phase, t) = a_probe_answering_429(true).await;
    assert_eq!(
        (result.map_err(|e| (e.kind(), e.status())), at),
        (Ok("ok".to_owned()), 135)
    );
    assert_eq!(phase, Phase::Closed, "the retry's 200 closes it");
    assert_eq!(
        t.dispatch_times(),
        [ms(0), ms(100), ms(135)],
        "the refused hedge is never sent"
    );
    assert_nothing_leaked(&t);
}
