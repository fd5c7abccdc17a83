//! Metrics (feature `metrics`) along the paths `metrics.rs` does not walk: a redirect,
//! a streamed result, a budget's refusal, hedged rounds (all failed; a hedge refused
//! or withdrawn), coalesced callers, and a call dropped or cancelled mid-way. Each
//! pins a row of the table in `observe.rs`: what a request, a retry, a rejection and a
//! call's outcome are, and that the gauges come back to rest.
#![cfg(feature = "metrics")]

#[path = "support/recorder.rs"]
mod recorder;

use recorder::{
    CALLS, DEFAULT, DEPTH, DURATION, EP, IN_FLIGHT, REJECTIONS, REQUESTS, RETRIES, Recorded,
    run_for,
};
use resilient_api::retry::budget::BudgetConfig;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, ErrorKind, ResponseStream, resilient_api};
use tests::{assert_nothing_leaked, ms, scripted, scripted_builder, settle};

/// One retry on 503, after 10 ms.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 1, backoff = fixed(delay = "10ms"), on = [503])
)]
pub trait Plain {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// A 302 and its hop are one request (a hop is part of its attempt), one ok call, and
/// the call's duration covers both: 3 ms + 4 ms.
#[tokio::test(start_paused = true)]
async fn a_redirect_is_one_request_and_one_call() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([
        Step::status(302)
            .header("location", "/elsewhere")
            .delay(ms(3)),
        Step::status(200).body("ok").delay(ms(4)),
    ]);
    let api = scripted::<PlainClient>(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
    assert_eq!(m.counter(REQUESTS, &[EP, DEFAULT]), 1);
    assert_eq!(m.counter(CALLS, &[EP, DEFAULT, ("outcome", "ok")]), 1);
    assert_eq!(m.histogram(DURATION, &[EP, DEFAULT]), [0.007]);
    m.assert_gauges_at_rest();
    assert_nothing_leaked(&t);
}

/// A streamed result.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Streamed {
    #[get("/resource")]
    async fn resource(&self) -> Result<ResponseStream, ApiError>;
}

/// A streamed result's attempt ends with its head: in flight 0 and the call counted ok
/// when the call returns, before its body is read; reading it counts nothing more.
#[tokio::test(start_paused = true)]
async fn a_streamed_results_attempt_leaves_in_flight_with_its_head() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([Step::status(200).chunks([(ms(20), "a"), (ms(20), "b")])]);
    let api = scripted::<StreamedClient>(&t);
    let s = api.resource().await.unwrap();
    assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(0.0));
    assert_eq!(m.counter(CALLS, &[EP, DEFAULT, ("outcome", "ok")]), 1);
    assert_eq!(s.text().await.unwrap(), "ab");
    assert_eq!(m.series(CALLS), 1);
    m.assert_gauges_at_rest();
}

/// Two retries on 503, 20 ms apart; a breaker that stays closed.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 100, reset = "1s")
)]
pub trait Budgeted {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// A retry the budget refuses: one request, no retry, one `retry_budget` rejection
/// (the only rejection series) and a `budget_exhausted` call.
#[tokio::test(start_paused = true)]
async fn a_retry_the_budget_refuses_is_one_rejection_and_no_retry() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([Step::status(503).body("busy")]);
    let api: BudgetedClient = scripted_builder(&t)
        .retry_budget(Some(BudgetConfig {
            ttl: std::time::Duration::from_secs(10),
            min_per_sec: 0,
            retry_ratio: 0.0,
        }))
        .build()
        .unwrap();
    let e = api.resource().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BudgetExhausted);
    assert_eq!(m.counter(REQUESTS, &[EP, DEFAULT]), 1);
    assert_eq!(m.counter(RETRIES, &[EP, DEFAULT]), 0);
    assert_eq!(
        m.counter(REJECTIONS, &[EP, DEFAULT, ("policy", "retry_budget")]),
        1
    );
    assert_eq!(m.series(REJECTIONS), 1);
    assert_eq!(
        m.counter(CALLS, &[EP, DEFAULT, ("outcome", "budget_exhausted")]),
        1
    );
    m.assert_gauges_at_rest();
}

/// Hedged at 10 ms, no retries.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Hedged {
    #[get("/resource")]
    #[hedge(delay = "10ms", max = 2)]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// Both branches of a hedged round fail: two requests (a hedge is a request, not a
/// retry), one `all_hedges_failed` call lasting until the later failure, 20 ms.
#[tokio::test(start_paused = true)]
async fn a_round_whose_every_hedge_fails_is_one_call_of_its_kind() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([
        Step::status(503).delay(ms(15)),
        Step::status(503).delay(ms(10)),
    ]);
    let api = scripted::<HedgedClient>(&t);
    let e = api.resource().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AllHedgesFailed);
    assert_eq!(m.counter(REQUESTS, &[EP, DEFAULT]), 2);
    assert_eq!(m.counter(RETRIES, &[EP, DEFAULT]), 0);
    assert_eq!(
        m.counter(CALLS, &[EP, DEFAULT, ("outcome", "all_hedges_failed")]),
        1
    );
    assert_eq!(m.histogram(DURATION, &[EP, DEFAULT]), [0.02]);
    m.assert_gauges_at_rest();
}

/// Coalesced, two retries on 503, 20 ms apart.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503])
)]
pub trait Shared {
    #[get("/resource")]
    #[coalesce]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// Three coalesced callers share one execution with two retries: three requests and
/// two retries (the execution's, not per caller), and three ok calls of 40 ms.
#[tokio::test(start_paused = true)]
async fn a_shared_executions_retries_count_once_and_each_caller_counts_a_call() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([
        Step::status(503),
        Step::status(503),
        Step::status(200).body("ok"),
    ]);
    let api = scripted::<SharedClient>(&t);
    let (a, b, c) = tokio::join!(api.resource(), api.resource(), api.resource());
    assert_eq!(
        (a.unwrap(), b.unwrap(), c.unwrap()),
        ("ok".into(), "ok".into(), "ok".into())
    );
    assert_eq!(m.counter(REQUESTS, &[EP, DEFAULT]), 3);
    assert_eq!(m.counter(RETRIES, &[EP, DEFAULT]), 2);
    assert_eq!(m.counter(CALLS, &[EP, DEFAULT, ("outcome", "ok")]), 3);
    assert_eq!(m.histogram(DURATION, &[EP, DEFAULT]), [0.04, 0.04, 0.04]);
    m.assert_gauges_at_rest();
}

/// A token every 100 ms, a burst of 1.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    rate_limit(per_second = 10, burst = 1)
)]
pub trait LimitedRedirect {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// The 302's hop back to the same origin waits 100 ms for a token (a burst of 1 at
/// 10/s); the caller drops the call at 50 ms: the attempt (still in flight during the
/// wait) leaves, the call ends `cancelled`, and one request was made.
#[tokio::test(start_paused = true)]
async fn a_call_dropped_while_its_hop_waits_for_a_token_leaves_nothing_in_flight() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([
        Step::status(302).header("location", "/elsewhere"),
        Step::status(200).body("ok"),
    ]);
    let api = scripted::<LimitedRedirectClient>(&t);
    let mut call = Box::pin(api.resource());
    run_for(&mut call, ms(50)).await;
    assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(1.0));
    drop(call);
    assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(0.0));
    assert_eq!(
        m.counter(CALLS, &[EP, DEFAULT, ("outcome", "cancelled")]),
        1
    );
    assert_eq!(m.counter(REQUESTS, &[EP, DEFAULT]), 1);
    m.assert_gauges_at_rest();
    settle().await;
}

/// Hedged at 10 ms behind one bulkhead slot with a queue of one; one retry.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [503]),
    bulkhead(concurrency = 1, queue = 1)
)]
pub trait HedgedNarrow {
    #[get("/resource")]
    #[hedge(delay = "10ms", max = 2)]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// One bulkhead slot: the hedge at 10 ms queues behind the primary; the primary's 503
/// at 15 ms asks for a second, which withdraws the queued hedge (depth back to 0,
/// and no rejection: it was never refused); the retry after the wait succeeds.
#[tokio::test(start_paused = true)]
async fn a_hedge_withdrawn_from_the_queue_by_retry_after_leaves_the_queue_depth() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([
        Step::status(503).header("retry-after", "1").delay(ms(15)),
        Step::status(200).body("ok"),
    ]);
    let api = scripted::<HedgedNarrowClient>(&t);
    let mut call = Box::pin(api.resource());
    run_for(&mut call, ms(12)).await;
    assert_eq!(m.gauge(DEPTH, &[DEFAULT]), Some(1.0));
    run_for(&mut call, ms(10)).await;
    assert_eq!(m.gauge(DEPTH, &[DEFAULT]), Some(0.0));
    assert_eq!(call.await.unwrap(), "ok");
    assert_eq!(m.counter(REQUESTS, &[EP, DEFAULT]), 2);
    assert_eq!(m.counter(RETRIES, &[EP, DEFAULT]), 1);
    assert_eq!(m.series(REJECTIONS), 0);
    assert_eq!(m.counter(CALLS, &[EP, DEFAULT, ("outcome", "ok")]), 1);
    m.assert_gauges_at_rest();
}

/// Hedged at 10 ms behind one bulkhead slot and no queue.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 0),
    bulkhead(concurrency = 1, queue = 0)
)]
pub trait HedgedNoQueue {
    #[get("/resource")]
    #[hedge(delay = "10ms", max = 2)]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// No bulkhead queue: the hedge at 10 ms is refused while the primary holds the slot.
/// When the primary then wins, the call counts no rejection and one request; when it
/// fails, the refusal is the call's end: one `bulkhead` rejection, a `bulkhead_full`
/// call.
#[tokio::test(start_paused = true)]
async fn a_hedge_the_bulkhead_refuses_is_a_rejection_only_when_the_call_ends_with_it() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([Step::status(200).body("ok").delay(ms(30))]);
    let api = scripted::<HedgedNoQueueClient>(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
    assert_eq!(m.series(REJECTIONS), 0);
    assert_eq!(m.counter(REQUESTS, &[EP, DEFAULT]), 1);
    t.push([Step::status(503).delay(ms(30))]);
    let e = api.resource().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BulkheadFull);
    assert_eq!(
        m.counter(REJECTIONS, &[EP, DEFAULT, ("policy", "bulkhead")]),
        1
    );
    assert_eq!(
        m.counter(CALLS, &[EP, DEFAULT, ("outcome", "bulkhead_full")]),
        1
    );
    m.assert_gauges_at_rest();
}

/// The token cancels the call at 20 ms, between two chunks: the attempt was in flight
/// until then, the call ends `cancelled` after 20 ms, and the gauges come to rest.
#[tokio::test(start_paused = true)]
async fn a_call_cancelled_during_its_body_read_ends_cancelled_with_nothing_in_flight() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([Step::status(200).chunks([(ms(10), "a"), (ms(50), "b")])]);
    let api = scripted::<PlainClient>(&t);
    let token = resilient_api::CancellationToken::new();
    let caller = api.with_options(CallOptions::new().cancel_on(token.clone()));
    let call = tokio::spawn(async move { caller.resource().await });
    tokio::time::sleep(ms(20)).await;
    assert_eq!(m.gauge(IN_FLIGHT, &[EP, DEFAULT]), Some(1.0));
    token.cancel();
    assert_eq!(
        call.await.unwrap().unwrap_err().kind(),
        ErrorKind::Cancelled
    );
    assert_eq!(
        m.counter(CALLS, &[EP, DEFAULT, ("outcome", "cancelled")]),
        1
    );
    assert_eq!(m.histogram(DURATION, &[EP, DEFAULT]), [0.02]);
    m.assert_gauges_at_rest();
    assert_nothing_leaked(&t);
}

/// Coalesced, a JSON result.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait SharedJson {
    #[get("/resource")]
    #[coalesce]
    async fn resource(&self) -> Result<serde_json::Value, ApiError>;
}

/// Two coalesced callers of one answer that is no JSON: one request, and each caller
/// counts its own `decode` call, in one series.
#[tokio::test(start_paused = true)]
async fn coalesced_callers_of_an_undecodable_answer_each_count_a_decode_call() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([Step::status(200)
        .header("content-type", "application/json")
        .body("{bad")
        .delay(ms(5))]);
    let api = scripted::<SharedJsonClient>(&t);
    let (a, b) = tokio::join!(api.resource(), api.resource());
    assert_eq!(a.unwrap_err().kind(), ErrorKind::Decode);
    assert_eq!(b.unwrap_err().kind(), ErrorKind::Decode);
    assert_eq!(m.counter(CALLS, &[EP, DEFAULT, ("outcome", "decode")]), 2);
    assert_eq!(m.series(CALLS), 1);
    assert_eq!(m.counter(REQUESTS, &[EP, DEFAULT]), 1);
    m.assert_gauges_at_rest();
}
