//! What the README says, checked: the defaults in its policy table (retry, Retry-After,
//! backoff cap, breaker, bulkhead, budget), how a method's attributes override the
//! trait's ("The attribute language"), the order of the steps of one call ("One call,
//! in order"), and that every attribute form it documents compiles. Each test names
//! the claim it pins.

use std::time::Duration;

use resilient_api::circuit_breaker::state::Phase;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, resilient_api};
use tests::{Clock, assert_nothing_leaked, ms, scripted, settle, spawn_timed};
use tokio::time::{Instant, sleep_until};

// ------------------------------------------------------------------ retry defaults

/// Nothing but an attempt timeout: every retry setting is the default.
#[resilient_api(timeout(attempt = "10s"))]
pub trait Defaults {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
}

/// README Policies, retry: `max = 2`, exponential full jitter 200 ms ×2, on
/// 408/425/429/500/502/503/504.
#[tokio::test(start_paused = true)]
async fn default_statuses_are_retried_twice_with_the_default_backoff() {
    for status in [408u16, 425, 429, 500, 502, 503, 504] {
        let t = ScriptedTransport::new([
            Step::status(status),
            Step::status(status),
            Step::status(status),
            Step::status(200).body("late"),
        ]);
        let api = scripted::<DefaultsClient>(&t);
        let e = api.r().await.unwrap_err();
        assert_eq!(e.status(), Some(status));
        assert_eq!(e.attempts(), 3, "status {status}");
        // Jitter::fixed(0.5): half of 200 ms, then half of 400 ms.
        assert_eq!(
            t.dispatch_times()
                .windows(2)
                .map(|w| w[1] - w[0])
                .collect::<Vec<_>>(),
            vec![ms(100), ms(200)],
            "status {status}"
        );
        assert_nothing_leaked(&t);
    }
    for status in [400u16, 401, 404, 409, 501, 505] {
        let t = ScriptedTransport::new([Step::status(status), Step::status(200).body("x")]);
        let api = scripted::<DefaultsClient>(&t);
        let e = api.r().await.unwrap_err();
        assert_eq!(
            (e.status(), e.attempts()),
            (Some(status), 1),
            "status {status}"
        );
    }
}

/// README Policies, Retry-After: honoured, capped at 60 s.
#[tokio::test(start_paused = true)]
async fn retry_after_is_capped_at_60s_by_default() {
    let t = ScriptedTransport::new([
        Step::status(503).header("retry-after", "120"),
        Step::status(200).body("ok"),
    ]);
    let api = scripted::<DefaultsClient>(&t);
    assert_eq!(api.r().await.unwrap(), "ok");
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(60_000)]);
}

/// The exponential backoff's default cap is 30 s (full jitter 0.5: 15 s).
#[resilient_api(timeout(attempt = "10s"), retry(max = 9), breaker(failures = 100))]
pub trait Capped {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn default_backoff_caps_at_30s() {
    let t = ScriptedTransport::new((0..10).map(|_| Step::status(503)));
    let api = scripted::<CappedClient>(&t);
    let e = api.r().await.unwrap_err();
    assert_eq!(e.attempts(), 10);
    let gaps: Vec<Duration> = t.dispatch_times().windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(
        gaps,
        [100, 200, 400, 800, 1_600, 3_200, 6_400, 12_800, 15_000].map(ms)
    );
}

// -------------------------------------------------------- method overrides the trait

/// Three retries on 500, 20 ms apart; methods that override part of it.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 3, backoff = fixed(delay = "20ms"), on = [500])
)]
pub trait KeyByKey {
    /// Only `max` is the method's: `on` and `backoff` stay the trait's.
    #[get("/r")]
    #[retry(max = 1)]
    async fn r(&self) -> Result<String, ApiError>;

    /// A backoff named on the method replaces the trait's whole.
    #[get("/s")]
    #[retry(backoff = exponential(base = "10ms"))]
    async fn s(&self) -> Result<String, ApiError>;
}

/// README: a method's `#[retry(...)]` overrides key by key.
#[tokio::test(start_paused = true)]
async fn method_retry_overrides_key_by_key() {
    let t = ScriptedTransport::new([Step::status(500), Step::status(500), Step::status(200)]);
    let api = scripted::<KeyByKeyClient>(&t);
    let e = api.r().await.unwrap_err();
    assert_eq!(e.attempts(), 2, "max = 1 is the method's");
    assert_eq!(
        t.dispatch_times(),
        vec![ms(0), ms(20)],
        "the trait's fixed 20 ms"
    );

    let t = ScriptedTransport::new([Step::status(503), Step::status(200)]);
    let api = scripted::<KeyByKeyClient>(&t);
    let e = api.r().await.unwrap_err();
    assert_eq!(
        e.attempts(),
        1,
        "on = [500] is the trait's: 503 is not retried"
    );
}

/// README: a `backoff` the method names replaces the trait's whole, its keys left out
/// taking their defaults (factor 2), while `max` and `on` stay the trait's.
#[tokio::test(start_paused = true)]
async fn method_backoff_replaces_the_trait_backoff() {
    let t = ScriptedTransport::new((0..4).map(|_| Step::status(500)));
    let api = scripted::<KeyByKeyClient>(&t);
    let e = api.s().await.unwrap_err();
    assert_eq!(e.attempts(), 4);
    assert_eq!(t.dispatch_times(), [0, 10, 30, 70].map(ms).to_vec());
}

/// Two failures trip the trait's breaker; a method with a reset of its own.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 2, reset = "1s")
)]
pub trait BreakerMerge {
    /// Only `reset` is the method's: two failures still trip it.
    #[get("/r")]
    #[breaker(reset = "5s")]
    async fn r(&self) -> Result<String, ApiError>;

    /// The trait's breaker, as written.
    #[get("/plain")]
    async fn plain(&self) -> Result<String, ApiError>;
}

/// README: every key is a default for every method, and a method's own attribute
/// overrides it field by field.
#[tokio::test(start_paused = true)]
async fn method_breaker_overrides_field_by_field() {
    let t = ScriptedTransport::new([Step::status(503), Step::status(503), Step::status(200)]);
    let start = Instant::now();
    let api = scripted::<BreakerMergeClient>(&t);
    assert_eq!(api.r().await.unwrap_err().status(), Some(503));
    assert_eq!(api.r().await.unwrap_err().status(), Some(503));
    let e = api.r().await.unwrap_err();
    assert_eq!(
        (e.kind(), e.retry_at()),
        (ErrorKind::CircuitOpen, Some(start + ms(5_000)))
    );
    // The method's own partition: the trait's breaker on `plain` is untouched.
    assert_eq!(api.plain().await.unwrap(), "");
    let s = api
        .partition_circuit_state("BreakerMerge::r")
        .expect("the method's own partition");
    assert_eq!(s.phase, Phase::Open);
}

/// The trait's breaker applies to a method that declares none.
#[tokio::test(start_paused = true)]
async fn trait_breaker_applies_to_plain_methods() {
    let t = ScriptedTransport::new([Step::status(503), Step::status(503), Step::status(200)]);
    let start = Instant::now();
    let api = scripted::<BreakerMergeClient>(&t);
    api.plain().await.unwrap_err();
    api.plain().await.unwrap_err();
    let e = api.plain().await.unwrap_err();
    assert_eq!(
        (e.kind(), e.retry_at()),
        (ErrorKind::CircuitOpen, Some(start + ms(1_000)))
    );
}

// -------------------------------------------------------------- breaker defaults

/// The default breaker.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait NoBreaker {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
}

/// README Policies, circuit breaker default: 5 consecutive failures, 30 s reset,
/// 1 probe.
#[tokio::test(start_paused = true)]
async fn default_breaker_is_5_failures_30s_one_probe() {
    let t = ScriptedTransport::new((0..5).map(|_| Step::status(500)));
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<NoBreakerClient>(&t);
    for _ in 0..4 {
        api.r().await.unwrap_err();
    }
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    api.r().await.unwrap_err();
    let e = api.r().await.unwrap_err();
    assert_eq!(
        (e.kind(), e.retry_at()),
        (ErrorKind::CircuitOpen, Some(start + ms(30_000)))
    );
    sleep_until(start + ms(30_000)).await;
    t.push([Step::status(200).body("a").delay(ms(10)), Step::status(200)]);
    let a = api.clone();
    let probe = spawn_timed(clock, async move { a.r().await });
    settle().await;
    let e = api.r().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CircuitOpen, "one probe only");
    assert_eq!(probe.await.unwrap().0.unwrap(), "a");
    assert_eq!(api.circuit_state().phase, Phase::Closed);
}

/// README Policies, breaker: 4xx count neither way.
#[tokio::test(start_paused = true)]
async fn client_errors_do_not_reset_the_failure_count() {
    let t = ScriptedTransport::new([
        Step::status(500),
        Step::status(500),
        Step::status(404),
        Step::status(500),
        Step::status(500),
        Step::status(500),
    ]);
    let api = scripted::<NoBreakerClient>(&t);
    for _ in 0..6 {
        api.r().await.unwrap_err();
    }
    assert_eq!(
        api.circuit_state().phase,
        Phase::Open,
        "the 404 did not count as a success"
    );
}

// -------------------------------------------------------------- bulkhead defaults

/// The default bulkhead.
#[resilient_api(timeout(attempt = "1h"), retry(max = 0))]
pub trait Hanging {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
}

/// README Policies, bulkhead default: 64 in flight, 256 queued.
#[tokio::test(start_paused = true)]
async fn default_bulkhead_is_64_in_flight_256_queued() {
    let t = ScriptedTransport::new((0..400).map(|_| Step::hang()));
    let api = scripted::<HangingClient>(&t);
    let mut tasks = Vec::new();
    for _ in 0..(64 + 256) {
        let a = api.clone();
        tasks.push(tokio::spawn(async move { a.r().await }));
    }
    settle().await;
    settle().await;
    assert_eq!(t.attempts(), 64);
    let e = api.r().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BulkheadFull);
    for task in tasks {
        task.abort();
    }
}

// -------------------------------------------------------- README one call, in order

/// One method with a breaker of its own, one with the default.
#[resilient_api(timeout(attempt = "1h"), retry(max = 0))]
pub trait Ordered {
    /// A breaker of its own, tripped by one failure.
    #[get("/q")]
    #[breaker(failures = 1, reset = "10s")]
    async fn q(&self) -> Result<String, ApiError>;

    #[get("/p")]
    async fn p(&self) -> Result<String, ApiError>;
}

/// "breaker fast check (open → fail now, no await, no wait in any queue) → bulkhead
/// permit": with `q`'s breaker open and the global bulkhead full, `q` fails as
/// `CircuitOpen`, not `BulkheadFull`.
#[tokio::test(start_paused = true)]
async fn an_open_breaker_is_checked_before_the_bulkhead() {
    use resilient_api::Engine;
    use resilient_api::bulkhead::BulkheadConfig;
    let t = ScriptedTransport::new([Step::status(503), Step::hang()]);
    let engine = Engine::new().global_bulkhead(BulkheadConfig {
        concurrency: 1,
        queue: 0,
    });
    let api: OrderedClient = tests::scripted_builder(&t).engine(engine).build().unwrap();
    assert_eq!(api.q().await.unwrap_err().status(), Some(503));
    let a = api.clone();
    let hold = tokio::spawn(async move { a.p().await });
    settle().await;
    assert_eq!(t.attempts(), 2);
    assert_eq!(api.p().await.unwrap_err().kind(), ErrorKind::BulkheadFull);
    assert_eq!(api.q().await.unwrap_err().kind(), ErrorKind::CircuitOpen);
    hold.abort();
}

// ------------------------------------------------------------- retry budget default

/// Up to 500 retries, 1 ms apart, under the default budget.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 500, backoff = fixed(delay = "1ms"), on = [503]),
    breaker(failures = 1000)
)]
pub trait Spender {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
}

/// README Policies, retry budget: on, 20% of recent calls + 10/s per partition (the
/// module docs: a floor of `10/s × 10 s` = 100 retries in any 10 s window).
#[tokio::test(start_paused = true)]
async fn default_budget_floor_is_100_retries_per_10s() {
    let t = ScriptedTransport::new((0..200).map(|_| Step::status(503)));
    let api = scripted::<SpenderClient>(&t);
    let e = api.r().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BudgetExhausted);
    // One call deposited 0.2: 100 retries, then refused.
    assert_eq!(t.attempts(), 101);
}

// ----------------------------------------------- bulkhead permit, then rate-limit token

/// One bulkhead slot and a queue of one; a token a second.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    bulkhead(concurrency = 1, queue = 1),
    rate_limit(per_second = 1, burst = 1)
)]
pub trait PermitThenToken {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
}

/// README "One call, in order": bulkhead permit → rate-limit token. A call waiting for
/// a token holds its permit, so the next waits in the queue and the one after finds
/// the queue full at once.
#[tokio::test(start_paused = true)]
async fn a_call_waiting_for_a_token_holds_its_bulkhead_permit() {
    let t = ScriptedTransport::new((0..4).map(|_| Step::status(200).body("ok")));
    let clock = Clock::start();
    let api = scripted::<PermitThenTokenClient>(&t);
    assert_eq!(api.r().await.unwrap(), "ok");
    let (a, b) = (api.clone(), api.clone());
    let waiting = spawn_timed(clock, async move { a.r().await });
    settle().await;
    let queued = spawn_timed(clock, async move { b.r().await });
    settle().await;
    let e = api.r().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BulkheadFull);
    assert_eq!(clock.now_ms(), 0);
    let (r, at) = waiting.await.unwrap();
    assert_eq!((r.unwrap().as_str(), at), ("ok", 1_000));
    let (r, at) = queued.await.unwrap();
    assert_eq!((r.unwrap().as_str(), at), ("ok", 2_000));
}

// ------------------------------------------------------------ caller idempotency key

/// A POST made retryable by the caller's own key.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(backoff = fixed(delay = "10ms"))
)]
pub trait CallerKey {
    /// README: a caller's `Idempotency-Key` header makes a POST retryable; then status
    /// retries may be asked for on the method.
    #[post("/charges")]
    #[retry(on = [503])]
    async fn charge(&self, #[header("Idempotency-Key")] key: &str) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn a_callers_key_makes_a_post_retry_statuses() {
    let t = ScriptedTransport::new([Step::status(503), Step::status(200).body("ok")]);
    let api = scripted::<CallerKeyClient>(&t);
    assert_eq!(api.charge("k1").await.unwrap(), "ok");
    let reqs = t.requests();
    assert_eq!(reqs.len(), 2);
    for r in &reqs {
        assert_eq!(r.headers.get("idempotency-key").unwrap(), "k1");
    }
}

// ----------------------------------------------------- forms the docs say are accepted

/// Every form below is in README "The attribute language" or DESIGN §2; this compiles.
#[resilient_api(
    base_url = "https://api.example.com",
    client = "FormsApi",
    crate = "::resilient_api",
    timeout(attempt = "none", total = "1m"),
    retry(max = 3, backoff = decorrelated_jitter(base = "200ms", cap = "10s"), on = [400, 599], retry_after_cap = "60s"),
    breaker(failure_rate = 0.5, window = "10s", min_calls = 20, reset = "30s", slow_call = "2s"),
    bulkhead(concurrency = 8, queue = 0),
    rate_limit(per_second = 0.5, burst = 10),
    headers("User-Agent" = "me/1.0", "X-Two" = "2"),
)]
pub trait Forms {
    #[get("/a/{id}")]
    #[timeout(attempt = "250ms", total = "2h")]
    #[retry(max = 0)]
    async fn a(&self, id: u64, #[query("q", secret)] q: Option<&str>) -> Result<String, ApiError>;

    #[post("/b")]
    #[idempotency_key("X-Key")]
    #[hedge(delay = "50ms", max = 2)]
    #[retry(on = [503], backoff = exponential(base = "10ms", factor = 3, cap = "1s"))]
    async fn b(&self, #[body(form)] f: &[(&str, &str)]) -> Result<(), ApiError>;

    #[patch("/c")]
    #[idempotent]
    #[retry(on = [503], backoff = exponential_jitter(base = "200ms", cap = "10s"))]
    #[breaker(failures = 5, reset = "30s", probes = 1)]
    #[bulkhead(concurrency = 8, queue = 32)]
    #[rate_limit(per_second = 50, burst = 10)]
    async fn c(&self, #[body(raw)] b: Vec<u8>) -> Result<Vec<u8>, ApiError>;

    #[get("/d")]
    #[coalesce]
    #[partition = "search"]
    #[max_body("4MiB")]
    async fn d(&self, #[header("X-Api-Key", secret)] k: &str) -> Result<String, ApiError>;

    #[put("/e")]
    #[partition("search")]
    #[retry(backoff = fixed(delay = "100ms"))]
    async fn e(&self, #[body] v: &serde_json::Value) -> Result<serde_json::Value, ApiError>;

    #[delete("/f")]
    async fn f(&self) -> Result<(), ApiError>;

    #[head("/g")]
    async fn g(&self) -> Result<(), ApiError>;

    #[options("/h")]
    async fn h(&self) -> Result<(), ApiError>;
}

#[test]
fn every_documented_form_compiles() {
    let _ = std::any::type_name::<FormsApi>();
}
