//! Metrics (feature `metrics`) when calls end in every way, cancellation by dropping
//! the future included: the in-flight and queue-depth gauges come back to zero, the
//! counters count what their docs say, and the breaker gauge follows every transition.
#![cfg(feature = "metrics")]

#[path = "support/recorder.rs"]
mod recorder;

use recorder::{
    CALLS, DEFAULT, DEPTH, DURATION, EP, IN_FLIGHT, REQUESTS, RETRIES, Recorded, run_for,
};
use resilient_api::bulkhead::BulkheadConfig;
use resilient_api::circuit_breaker::state::Phase;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, Engine, ErrorKind, resilient_api};
use tests::{assert_nothing_leaked, ms, scripted, settle};

/// Concurrency 1, queue 1; retries on 503 after 20 ms.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]),
    bulkhead(concurrency = 1, queue = 1)
)]
pub trait Narrow {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn a_caller_dropped_in_the_bulkhead_queue_leaves_the_queue_depth() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([Step::hang()]);
    let api = scripted::<NarrowClient>(&t);

    let mut first = Box::pin(api.resource());
    run_for(&mut first, ms(10)).await;
    let mut second = Box::pin(api.resource());
    run_for(&mut second, ms(10)).await;
    assert_eq!(m.gauge(DEPTH, &[DEFAULT]), Some(1.0));
    assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(1.0));

    drop(second);
    assert_eq!(m.gauge(DEPTH, &[DEFAULT]), Some(0.0));
    drop(first);
    assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(0.0));
    assert_eq!(m.counter(REQUESTS, &[EP, DEFAULT]), 1);
    // Each caller that left is one `cancelled` call, timed to the moment it left.
    assert_eq!(
        m.counter(CALLS, &[EP, DEFAULT, ("outcome", "cancelled")]),
        2
    );
    assert_eq!(m.histogram(DURATION, &[EP, DEFAULT]), [0.01, 0.02]);
    m.assert_gauges_at_rest();
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn a_call_dropped_during_its_backoff_or_its_retry_leaves_nothing_in_flight() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([Step::status(503), Step::status(503), Step::hang()]);
    let api = scripted::<NarrowClient>(&t);

    // Dropped during the backoff after the first 503.
    let mut call = Box::pin(api.resource());
    run_for(&mut call, ms(10)).await;
    assert_eq!(t.attempts(), 1);
    assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(0.0));
    drop(call);
    assert_eq!(m.counter(RETRIES, &[EP, DEFAULT]), 1);

    // Dropped while its retry hangs.
    let mut call = Box::pin(api.resource());
    run_for(&mut call, ms(30)).await;
    assert_eq!(t.attempts(), 3);
    assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(1.0));
    drop(call);
    assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(0.0));
    assert_eq!(m.counter(REQUESTS, &[EP, DEFAULT]), 3);
    assert_eq!(m.counter(RETRIES, &[EP, DEFAULT]), 2);
    assert_eq!(
        m.counter(CALLS, &[EP, DEFAULT, ("outcome", "cancelled")]),
        2
    );
    assert_eq!(m.histogram(DURATION, &[EP, DEFAULT]), [0.01, 0.03]);
    m.assert_gauges_at_rest();
    assert_nothing_leaked(&t);
}

/// Each call may wait in the global bulkhead: concurrency 1, queue 1.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Global {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn a_caller_dropped_in_the_global_queue_leaves_its_depth() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([Step::hang(), Step::status(200).body("ok")]);
    let engine = Engine::new().global_bulkhead(BulkheadConfig {
        concurrency: 1,
        queue: 1,
    });
    let api: GlobalClient = tests::scripted_builder(&t)
        .engine(engine)
        .build()
        .expect("builds");
    let global = ("partition", "global");

    let mut first = Box::pin(api.resource());
    run_for(&mut first, ms(10)).await;
    let mut second = Box::pin(api.resource());
    run_for(&mut second, ms(10)).await;
    assert_eq!(m.gauge(DEPTH, &[global]), Some(1.0));
    drop(second);
    assert_eq!(m.gauge(DEPTH, &[global]), Some(0.0));

    // Queued again, then let through when the first call ends.
    let mut third = Box::pin(api.resource());
    run_for(&mut third, ms(10)).await;
    assert_eq!(m.gauge(DEPTH, &[global]), Some(1.0));
    drop(first);
    assert_eq!(third.await.expect("served"), "ok");
    assert_eq!(m.gauge(DEPTH, &[global]), Some(0.0));
    m.assert_gauges_at_rest();
    assert_nothing_leaked(&t);
}

/// One token every 100 ms, burst 1.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    rate_limit(per_second = 10, burst = 1)
)]
pub trait Limited {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn a_caller_dropped_while_waiting_for_a_token_is_a_cancelled_call_and_no_request() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([Step::status(200).body("ok"), Step::status(200).body("ok")]);
    let api = scripted::<LimitedClient>(&t);

    assert_eq!(api.resource().await.expect("first token"), "ok");
    let mut waiting = Box::pin(api.resource());
    run_for(&mut waiting, ms(50)).await;
    drop(waiting);
    assert_eq!(m.counter(REQUESTS, &[EP, DEFAULT]), 1);
    assert_eq!(
        m.counter(CALLS, &[EP, DEFAULT, ("outcome", "cancelled")]),
        1
    );
    assert_eq!(m.histogram(DURATION, &[EP, DEFAULT]), [0.0, 0.05]);
    assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(0.0));
    m.assert_gauges_at_rest();

    // A caller whose deadline the next token cannot meet is refused: a rejection.
    let short = api.with_options(CallOptions::new().deadline(ms(10)));
    let e = short.resource().await.expect_err("no token in time");
    assert_eq!(e.kind(), ErrorKind::RateLimited);
    assert_eq!(
        m.counter(
            "resilient_api_rejections_total",
            &[EP, DEFAULT, ("policy", "rate_limit")]
        ),
        1
    );
    assert_eq!(
        m.counter(CALLS, &[EP, DEFAULT, ("outcome", "rate_limited")]),
        1
    );
    assert_nothing_leaked(&t);
}

/// Two branches 10 ms apart; two permits and a queue of one.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [503]),
    bulkhead(concurrency = 2, queue = 1)
)]
pub trait Hedged {
    #[get("/resource")]
    #[hedge(delay = "10ms", max = 2)]
    async fn resource(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn hedge_branches_are_requests_not_retries_and_leave_no_gauge_behind() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    // The hedge wins at 15 ms; the primary is dropped.
    let t = ScriptedTransport::new([
        Step::status(200).body("slow").delay(ms(100)),
        Step::status(200).body("fast").delay(ms(5)),
    ]);
    let api = scripted::<HedgedClient>(&t);

    assert_eq!(api.resource().await.expect("the hedge wins"), "fast");
    assert_eq!(
        m.counter(REQUESTS, &[EP, DEFAULT]),
        2,
        "hedges are requests"
    );
    assert_eq!(m.counter(RETRIES, &[EP, DEFAULT]), 0, "a hedge is no retry");
    assert_eq!(m.counter(CALLS, &[EP, DEFAULT, ("outcome", "ok")]), 1);
    assert_eq!(m.histogram(DURATION, &[EP, DEFAULT]), vec![0.015]);
    assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(0.0));

    // Dropped with both branches in flight.
    t.push([Step::hang(), Step::hang()]);
    let mut call = Box::pin(api.resource());
    run_for(&mut call, ms(20)).await;
    assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(2.0));
    drop(call);
    assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(0.0));
    assert_eq!(m.counter(REQUESTS, &[EP, DEFAULT]), 4);
    assert_eq!(m.counter(RETRIES, &[EP, DEFAULT]), 0);
    m.assert_gauges_at_rest();
    assert_nothing_leaked(&t);
}

/// One permit, a queue of one, hedged.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 0),
    bulkhead(concurrency = 1, queue = 1)
)]
pub trait HedgedNarrow {
    #[get("/resource")]
    #[hedge(delay = "10ms", max = 2)]
    async fn resource(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn a_hedge_branch_queued_in_the_bulkhead_leaves_the_queue_with_its_round() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([Step::hang(), Step::status(200).body("ok").delay(ms(30))]);
    let api = scripted::<HedgedNarrowClient>(&t);

    // The hedge waits in the queue behind its own primary.
    let mut call = Box::pin(api.resource());
    run_for(&mut call, ms(20)).await;
    assert_eq!(m.gauge(DEPTH, &[DEFAULT]), Some(1.0));
    assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(1.0));
    drop(call);
    assert_eq!(m.gauge(DEPTH, &[DEFAULT]), Some(0.0));
    assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(0.0));
    m.assert_gauges_at_rest();
    assert_nothing_leaked(&t);
}

/// A coalesced read.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Shared {
    #[get("/resource")]
    #[coalesce]
    async fn resource(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn a_coalesced_attempt_is_in_flight_until_its_last_caller_leaves() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([Step::status(200).body("ok").delay(ms(50))]);
    let api = scripted::<SharedClient>(&t);

    // One caller drops; the other is served by the same attempt.
    let mut a = Box::pin(api.resource());
    let mut b = Box::pin(api.resource());
    run_for(&mut a, ms(10)).await;
    run_for(&mut b, ms(10)).await;
    assert_eq!(t.attempts(), 1);
    assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(1.0));
    drop(a);
    assert_eq!(
        m.gauge(IN_FLIGHT, &[EP, DEFAULT]),
        Some(1.0),
        "b still waits"
    );
    assert_eq!(b.await.expect("served"), "ok");
    assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(0.0));
    assert_eq!(m.counter(REQUESTS, &[EP, DEFAULT]), 1, "one attempt sent");
    assert_eq!(m.counter(CALLS, &[EP, DEFAULT, ("outcome", "ok")]), 1);
    assert_eq!(
        m.counter(CALLS, &[EP, DEFAULT, ("outcome", "cancelled")]),
        1,
        "a left"
    );

    // Every caller drops: the shared attempt is dropped too.
    t.push([Step::hang()]);
    let mut a = Box::pin(api.resource());
    let mut b = Box::pin(api.resource());
    run_for(&mut a, ms(10)).await;
    run_for(&mut b, ms(10)).await;
    assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(1.0));
    drop(b);
    drop(a);
    assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(0.0));
    m.assert_gauges_at_rest();
    assert_nothing_leaked(&t);
}

/// Trips on one failure for 100 ms; two probes; hedged.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 0),
    breaker(failures = 1, reset = "100ms", probes = 2)
)]
pub trait Probed {
    #[get("/resource")]
    #[hedge(delay = "10ms", max = 2)]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// A hedged round dropped after one branch failed: the failure, held for the round's
/// end, is recorded as the round drops and trips the breaker; the gauge follows. A
/// half-open probe's failure reopens the breaker when it fails, while the call still
/// runs, and the gauge follows that too.
#[tokio::test(start_paused = true)]
async fn the_breaker_gauge_follows_a_transition_made_after_the_caller_dropped() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([Step::status(503).delay(ms(5)), Step::hang()]);
    let api = scripted::<ProbedClient>(&t);
    let state = || {
        m.gauge(
            "resilient_api_breaker_state",
            &[("origin", "https://example.test"), DEFAULT],
        )
    };

    // Closed: the primary fails at 5 ms, held while the hedge (10 ms) hangs.
    let mut call = Box::pin(api.resource());
    run_for(&mut call, ms(20)).await;
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    assert_ne!(state(), Some(2.0));
    drop(call);
    assert_eq!(api.circuit_state().phase, Phase::Open);
    assert_eq!(
        state(),
        Some(2.0),
        "tripped by the failure the drop recorded"
    );
    m.assert_gauges_at_rest();
    tokio::time::sleep(ms(100)).await;

    // Half-open: the primary probe hangs, the hedge probe fails at 15 ms, which
    // reopens the breaker at once.
    t.push([Step::hang(), Step::status(503).delay(ms(5))]);
    let mut call = Box::pin(api.resource());
    run_for(&mut call, ms(12)).await;
    assert_eq!(state(), Some(1.0));
    assert_eq!(api.circuit_state().phase, Phase::HalfOpen);
    run_for(&mut call, ms(8)).await;
    assert_eq!(api.circuit_state().phase, Phase::Open);
    assert_eq!(state(), Some(2.0), "reopened by the failed probe");
    drop(call);
    assert_eq!(api.circuit_state().phase, Phase::Open);
    assert_eq!(state(), Some(2.0));
    m.assert_gauges_at_rest();

    // And closed by two successful probes.
    tokio::time::sleep(ms(100)).await;
    t.push([
        Step::status(200).body("ok").delay(ms(15)),
        Step::status(200).body("ok").delay(ms(1)),
    ]);
    let two = futures_util::future::join(api.resource(), api.resource());
    let (a, b) = two.await;
    assert_eq!((a.expect("ok"), b.expect("ok")), ("ok".into(), "ok".into()));
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    assert_eq!(state(), Some(0.0));
    settle().await;
    m.assert_gauges_at_rest();
}

/// Attempts time out after 50 ms; no retries; a breaker that never trips here.
#[resilient_api(
    timeout(attempt = "50ms", total = "1s"),
    retry(max = 0),
    breaker(failures = 100)
)]
pub trait Outcomes {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// Every way a call ends has its outcome, once, and its exact duration on the paused
/// clock; every series carries `endpoint` and `partition`.
#[tokio::test(start_paused = true)]
async fn each_end_of_a_call_is_one_outcome_with_its_exact_duration() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([]);
    let api = scripted::<OutcomesClient>(&t);
    let token_api =
        || api.with_options(CallOptions::new().cancel_on(resilient_api::CancellationToken::new()));
    let cases: Vec<(Step, Option<std::time::Duration>, bool, &str, f64)> = vec![
        (
            Step::status(200).body("ok").delay(ms(7)),
            None,
            false,
            "ok",
            0.007,
        ),
        (Step::status(404).delay(ms(3)), None, false, "status", 0.003),
        (Step::hang(), None, false, "attempt_timeout", 0.05),
        (Step::hang(), None, true, "attempt_timeout", 0.05),
        (Step::hang(), Some(ms(30)), false, "deadline", 0.03),
        (Step::hang(), Some(ms(30)), true, "deadline", 0.03),
        (Step::connect_error(), None, false, "connect", 0.0),
        (Step::reset(), None, true, "transport", 0.0),
    ];
    let n = cases.len() as u64;
    for (step, deadline, with_token, outcome, took) in cases {
        t.push([step]);
        let before = m.histogram(DURATION, &[EP, DEFAULT]).len();
        let mut client = if with_token { token_api() } else { api.clone() };
        if let Some(d) = deadline {
            client = client.with_options(CallOptions::new().deadline(d));
        }
        let r = client.resource().await;
        let got = r.as_ref().map_or_else(|e| e.kind().as_str(), |_| "ok");
        assert_eq!(got, outcome);
        assert_eq!(
            m.histogram(DURATION, &[EP, DEFAULT])[before..],
            [took],
            "{outcome}"
        );
        assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(0.0), "{outcome}");
    }
    let counted: u64 = [
        "ok",
        "status",
        "attempt_timeout",
        "deadline",
        "connect",
        "transport",
    ]
    .iter()
    .map(|o| m.counter(CALLS, &[EP, DEFAULT, ("outcome", o)]))
    .sum();
    assert_eq!(counted, n, "one outcome per call");
    assert_eq!(m.counter(REQUESTS, &[EP, DEFAULT]), n);
    for series in m.all_series() {
        if series.starts_with(DEPTH) || series.starts_with("resilient_api_breaker_state") {
            continue;
        }
        assert!(
            series.contains("endpoint=resource") && series.contains("partition=default"),
            "{series}"
        );
        assert!(!series.contains("example.test"), "{series}");
    }
    assert_nothing_leaked(&t);
}

/// A caller that gives up by dropping the call (here through `tokio::time::timeout`,
/// the usual way) ends it as `cancelled`, once, at the moment it dropped it; a call
/// dropped before its first poll never started and records nothing.
#[tokio::test(start_paused = true)]
async fn a_call_dropped_by_its_caller_is_one_cancelled_call_with_its_duration() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([Step::hang()]);
    let api = scripted::<OutcomesClient>(&t);

    let gave_up = tokio::time::timeout(ms(40), api.resource()).await;
    assert!(gave_up.is_err(), "the caller's own timeout");
    assert_eq!(
        m.counter(CALLS, &[EP, DEFAULT, ("outcome", "cancelled")]),
        1
    );
    assert_eq!(m.histogram(DURATION, &[EP, DEFAULT]), [0.04]);
    assert_eq!(m.counter(REQUESTS, &[EP, DEFAULT]), 1);
    assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(0.0));

    drop(api.resource());
    assert_eq!(
        m.counter(CALLS, &[EP, DEFAULT, ("outcome", "cancelled")]),
        1,
        "never polled, never started"
    );
    assert_eq!(m.histogram(DURATION, &[EP, DEFAULT]).len(), 1);
    m.assert_gauges_at_rest();
    assert_nothing_leaked(&t);
}

/// A coalesced read that trips its breaker on one failure.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 1, reset = "1s")
)]
pub trait SharedFragile {
    #[get("/resource")]
    #[coalesce]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// The caller whose call started the shared execution leaves by its deadline; the
/// execution's 503 trips the breaker after that, and the gauge follows. Each caller is
/// one call with its own outcome and duration; the execution is one request.
#[tokio::test(start_paused = true)]
async fn a_coalesced_outcome_after_its_first_caller_left_moves_the_breaker_gauge() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([Step::status(503).delay(ms(50))]);
    let api = scripted::<SharedFragileClient>(&t);
    let short = api.with_options(CallOptions::new().deadline(ms(20)));

    let (a, b) = tokio::join!(short.resource(), api.resource());
    assert_eq!(a.expect_err("left").kind(), ErrorKind::Deadline);
    assert_eq!(b.expect_err("503").kind(), ErrorKind::Status);
    assert_eq!(
        m.gauge(
            "resilient_api_breaker_state",
            &[("origin", "https://example.test"), DEFAULT]
        ),
        Some(2.0)
    );
    assert_eq!(m.counter(REQUESTS, &[EP, DEFAULT]), 1);
    assert_eq!(m.counter(CALLS, &[EP, DEFAULT, ("outcome", "deadline")]), 1);
    assert_eq!(m.counter(CALLS, &[EP, DEFAULT, ("outcome", "status")]), 1);
    let mut took = m.histogram(DURATION, &[EP, DEFAULT]);
    took.sort_by(f64::total_cmp);
    assert_eq!(took, [0.02, 0.05]);
    m.assert_gauges_at_rest();
    assert_nothing_leaked(&t);
}

/// Retries on 503; one failure opens the breaker for 1 s.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 1, reset = "1s")
)]
pub trait RetryTrips {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// A retry the open breaker refuses is no retry: the call ends as a rejection by the
/// breaker, counted once, after one request.
#[tokio::test(start_paused = true)]
async fn a_retry_refused_by_the_breaker_is_a_rejection_not_a_retry() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([Step::status(503)]);
    let api = scripted::<RetryTripsClient>(&t);

    let e = api.resource().await.expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::CircuitOpen);
    assert_eq!(m.counter(REQUESTS, &[EP, DEFAULT]), 1);
    assert_eq!(m.counter(RETRIES, &[EP, DEFAULT]), 0);
    assert_eq!(
        m.counter(CALLS, &[EP, DEFAULT, ("outcome", "circuit_open")]),
        1
    );
    assert_eq!(
        m.counter(
            "resilient_api_rejections_total",
            &[EP, DEFAULT, ("policy", "circuit_breaker")]
        ),
        1
    );
    m.assert_gauges_at_rest();
    assert_nothing_leaked(&t);
}

/// Three branches 10 ms apart.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Wide {
    #[get("/resource")]
    #[hedge(delay = "10ms", max = 3)]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// A hedged call cancelled through its token with three branches in flight: one
/// `cancelled` call, three requests, nothing left in flight.
#[tokio::test(start_paused = true)]
async fn a_hedged_call_cancelled_with_three_branches_in_flight_leaves_none() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([Step::hang(), Step::hang(), Step::hang()]);
    let api = scripted::<WideClient>(&t);
    let token = resilient_api::CancellationToken::new();
    let caller = api.with_options(CallOptions::new().cancel_on(token.clone()));

    let call = tokio::spawn(async move { caller.resource().await });
    tokio::time::sleep(ms(25)).await;
    assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(3.0));
    token.cancel();
    let e = call.await.expect("joins").expect_err("cancelled");
    assert_eq!(e.kind(), ErrorKind::Cancelled);
    assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(0.0));
    assert_eq!(m.counter(REQUESTS, &[EP, DEFAULT]), 3);
    assert_eq!(m.counter(RETRIES, &[EP, DEFAULT]), 0);
    assert_eq!(
        m.counter(CALLS, &[EP, DEFAULT, ("outcome", "cancelled")]),
        1
    );
    assert_eq!(m.histogram(DURATION, &[EP, DEFAULT]), [0.025]);
    m.assert_gauges_at_rest();
    assert_nothing_leaked(&t);
}

/// A coalesced read behind one permit and a queue of one.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    bulkhead(concurrency = 1, queue = 1)
)]
pub trait SharedNarrow {
    #[get("/resource")]
    #[coalesce]
    async fn resource(&self) -> Result<String, ApiError>;

    #[get("/resource")]
    async fn plain(&self) -> Result<String, ApiError>;
}

/// A shared execution waiting in the bulkhead queue stays counted while one caller
/// is left, and leaves the queue when the last one does.
#[tokio::test(start_paused = true)]
async fn a_queued_shared_execution_leaves_the_queue_with_its_last_caller() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([Step::hang()]);
    let api = scripted::<SharedNarrowClient>(&t);

    let mut holder = Box::pin(api.plain());
    run_for(&mut holder, ms(5)).await;
    let mut a = Box::pin(api.resource());
    let mut b = Box::pin(api.resource());
    run_for(&mut a, ms(5)).await;
    run_for(&mut b, ms(5)).await;
    assert_eq!(m.gauge(DEPTH, &[DEFAULT]), Some(1.0), "one shared waiter");
    drop(a);
    assert_eq!(m.gauge(DEPTH, &[DEFAULT]), Some(1.0), "b still waits");
    drop(b);
    assert_eq!(m.gauge(DEPTH, &[DEFAULT]), Some(0.0));
    drop(holder);
    m.assert_gauges_at_rest();
    assert_nothing_leaked(&t);
}
