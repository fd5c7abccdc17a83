//! The circuit breaker's modes and their edges, through the generated client:
//! several half-open probes with mixed outcomes, the slow-call rule measured per
//! attempt, a retry that lands on the end of the cooldown, stale probes of a reopened
//! generation, a method's own breaker partition inheriting the failure-rate mode,
//! and what a response that cannot be decoded tells the breaker.

use resilient_api::circuit_breaker::state::Phase;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, resilient_api};
use tests::{Clock, assert_nothing_leaked, ms, scripted, settle, spawn_timed};
use tokio::time::{Instant, sleep_until};

/// One failure trips it for 100 ms; three probes must succeed to close it.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 1, reset = "100ms", probes = 3)
)]
pub trait Three {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// Half-open with three probes: exactly three are admitted, a fourth call is refused
/// at once; the second probe's failure (at 120) reopens it for a fresh 100 ms, and
/// the third probe's later success (at 130), of the older generation, changes nothing.
#[tokio::test(start_paused = true)]
async fn three_probes_a_failure_between_successes_reopens_at_once() {
    let t = ScriptedTransport::new([
        Step::status(503),
        Step::status(200).body("a").delay(ms(10)),
        Step::status(503).body("b").delay(ms(20)),
        Step::status(200).body("c").delay(ms(30)),
    ]);
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<ThreeClient>(&t);
    assert_eq!(api.resource().await.unwrap_err().status(), Some(503));
    sleep_until(start + ms(100)).await;
    let mut probes = Vec::new();
    for _ in 0..3 {
        let a = api.clone();
        probes.push(spawn_timed(clock, async move { a.resource().await }));
        settle().await;
    }
    assert_eq!(t.attempts(), 4);
    let s = api.circuit_state();
    assert_eq!((s.phase, s.probes_in_flight), (Phase::HalfOpen, 3));
    let e = api.resource().await.unwrap_err();
    assert_eq!((e.kind(), e.retry_at()), (ErrorKind::CircuitOpen, None));
    assert_eq!(t.attempts(), 4, "the fourth call is not dispatched");

    let mut probes = probes.into_iter();
    let (r, at) = probes.next().unwrap().await.unwrap();
    assert_eq!((r.unwrap().as_str(), at), ("a", 110));
    let s = api.circuit_state();
    assert_eq!((s.phase, s.probes_in_flight), (Phase::HalfOpen, 2));
    let (r, at) = probes.next().unwrap().await.unwrap();
    assert_eq!((r.unwrap_err().status(), at), (Some(503), 120));
    let reopened = api.circuit_state();
    assert_eq!(
        (reopened.phase, reopened.open_until),
        (Phase::Open, Some(start + ms(220)))
    );
    let e = api.resource().await.unwrap_err();
    assert_eq!(
        (e.kind(), e.retry_at()),
        (ErrorKind::CircuitOpen, Some(start + ms(220)))
    );
    let (r, at) = probes.next().unwrap().await.unwrap();
    assert_eq!((r.unwrap().as_str(), at), ("c", 130));
    assert_eq!(
        api.circuit_state(),
        reopened,
        "the stale success changes nothing"
    );
    assert_nothing_leaked(&t);
}

/// Successes of 100 ms or more are slow; two slow calls in a row trip it. One retry
/// after 20 ms.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 2, reset = "1s", slow_call = "100ms")
)]
pub trait Slow {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// The slow-call rule looks at the attempt's own latency: a retry answered 10 ms
/// after it was sent is fast, though the call has run 120 ms; it resets the run of
/// failures the 503 began.
#[tokio::test(start_paused = true)]
async fn slow_call_rule_measures_a_retry_from_its_own_dispatch() {
    let t = ScriptedTransport::new([
        Step::status(503).delay(ms(90)),
        Step::status(200).body("fast").delay(ms(10)),
    ]);
    let clock = Clock::start();
    let api = scripted::<SlowClient>(&t);
    assert_eq!(api.resource().await.unwrap(), "fast");
    assert_eq!(clock.now_ms(), 120);
    assert_eq!(t.dispatch_times(), [ms(0), ms(110)]);
    let s = api.circuit_state();
    assert_eq!((s.phase, s.consecutive_failures), (Phase::Closed, 0));
}

/// Failure rate: half of at least 4 over 1 s; `own` has a breaker of its own that
/// overrides only the reset.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 0),
    breaker(failure_rate = 0.5, window = "1s", min_calls = 4, reset = "100ms")
)]
pub trait Rate {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;

    #[get("/own")]
    #[breaker(reset = "50ms")]
    async fn own(&self) -> Result<String, ApiError>;
}

/// A method whose `#[breaker]` overrides only `reset` keeps the trait's failure-rate
/// mode, in a partition of its own (`Rate::own`) that the default one does not see.
#[tokio::test(start_paused = true)]
async fn a_methods_own_breaker_keeps_the_traits_failure_rate_mode() {
    let t = ScriptedTransport::new([
        Step::status(503),
        Step::status(503),
        Step::status(503),
        Step::status(503),
    ]);
    let start = Instant::now();
    let api = scripted::<RateClient>(&t);
    let own = || {
        api.partition_circuit_state("Rate::own")
            .expect("own partition")
    };
    for _ in 0..3 {
        assert_eq!(api.own().await.unwrap_err().status(), Some(503));
    }
    let s = own();
    assert_eq!(
        (s.phase, s.calls_in_window, s.failures_in_window),
        (Phase::Closed, 3, 3),
        "3 calls are under min_calls"
    );
    assert_eq!(api.own().await.unwrap_err().status(), Some(503));
    let s = own();
    assert_eq!((s.phase, s.open_until), (Phase::Open, Some(start + ms(50))));
    let d = api.circuit_state();
    assert_eq!((d.phase, d.calls_in_window), (Phase::Closed, 0));
    let e = api.own().await.unwrap_err();
    assert_eq!(
        (e.kind(), e.retry_at()),
        (ErrorKind::CircuitOpen, Some(start + ms(50)))
    );
    assert_eq!(t.attempts(), 4);
    sleep_until(start + ms(50)).await;
    assert_eq!(own().phase, Phase::HalfOpen);
}

/// One failure trips it for 100 ms; two probes; one retry after 100 ms (`resource`)
/// on 503.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 1, backoff = fixed(delay = "100ms"), on = [503]),
    breaker(failures = 1, reset = "100ms", probes = 2)
)]
pub trait Edge {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// A retry whose backoff ends exactly when the cooldown does is not refused ahead of
/// time: it sleeps and is admitted as a probe at exactly t=100 (one success of the
/// two needed, so the breaker stays half-open).
#[tokio::test(start_paused = true)]
async fn a_retry_that_lands_on_the_end_of_the_cooldown_is_a_probe() {
    let t = ScriptedTransport::new([Step::status(503), Step::status(200).body("ok")]);
    let clock = Clock::start();
    let api = scripted::<EdgeClient>(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
    assert_eq!(clock.now_ms(), 100);
    assert_eq!(t.dispatch_times(), [ms(0), ms(100)]);
    let s = api.circuit_state();
    assert_eq!((s.phase, s.probes_in_flight), (Phase::HalfOpen, 0));
}

/// One failure trips it for 100 ms; two probes; one retry after 20 ms on 503.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 1, reset = "100ms", probes = 2)
)]
pub trait Probes {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// Two probes at t=100; the second fails at 105 and reopens it until 205. The first
/// probe's 503 at 130 is of the older generation: it does not extend the cooldown,
/// and its retry is refused then, at once, with the cooldown's end.
#[tokio::test(start_paused = true)]
async fn a_stale_probe_failure_after_the_other_probe_reopened_changes_nothing() {
    let t = ScriptedTransport::new([
        Step::status(503),
        Step::status(503).delay(ms(30)),
        Step::status(503).delay(ms(5)),
    ]);
    let start = Instant::now();
    let clock = Clock::start();
    let api = scripted::<ProbesClient>(&t);
    // Trips it at t=0; its retry would land in the cooldown: refused now.
    let e = api.resource().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CircuitOpen);
    sleep_until(start + ms(100)).await;
    let a = api.clone();
    let first = spawn_timed(clock, async move { a.resource().await });
    settle().await;
    let e = api.resource().await.unwrap_err();
    assert_eq!(clock.now_ms(), 105);
    assert_eq!(
        (e.kind(), e.retry_at()),
        (ErrorKind::CircuitOpen, Some(start + ms(205)))
    );
    let (r, at) = first.await.unwrap();
    let e = r.unwrap_err();
    assert_eq!(at, 130);
    assert_eq!(
        (e.kind(), e.retry_at()),
        (ErrorKind::CircuitOpen, Some(start + ms(205)))
    );
    assert_eq!(api.circuit_state().open_until, Some(start + ms(205)));
    assert_eq!(t.attempts(), 3);
    assert_nothing_leaked(&t);
}

/// Two failures in a row trip it for 100 ms; one probe; a JSON endpoint, and one
/// with a failure-rate breaker of its own.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 0),
    breaker(failures = 2, reset = "100ms")
)]
pub trait Json {
    #[get("/n")]
    async fn n(&self) -> Result<u32, ApiError>;

    #[get("/n")]
    #[breaker(failure_rate = 0.5, window = "10s", min_calls = 2)]
    async fn rated(&self) -> Result<u32, ApiError>;
}

/// A 200 whose JSON body is broken: the caller gets a decode error.
fn bad_json() -> Step {
    Step::status(200)
        .header("content-type", "application/json")
        .body("{not json")
}

/// A 2xx the client cannot use (a body that is not the JSON it expects, or an HTML
/// page on a JSON endpoint) is a success for the breaker. The breaker judges whether
/// the upstream answers, and this one did; a decode error says the client's type and
/// the answer disagree, which no cooldown mends (DESIGN: decode errors are not
/// failures). So it ends a run of failures, closes a half-open breaker whose probe it
/// was, and counts as a call without failure in a failure-rate window. (The module
/// docs said such an answer counted as nothing; the docs were what was wrong.)
#[tokio::test(start_paused = true)]
async fn an_answer_that_cannot_be_decoded_is_a_success_for_the_breaker() {
    let html = || {
        Step::status(200)
            .header("content-type", "text/html")
            .body("<p>")
    };
    let t = ScriptedTransport::new([
        Step::status(503),
        bad_json(),
        Step::status(503),
        html(),
        Step::status(503),
        Step::status(503),
        bad_json(),
        bad_json(),
    ]);
    let start = Instant::now();
    let api = scripted::<JsonClient>(&t);
    // A run of failures ends at a decode error and at an unexpected content type.
    assert_eq!(api.n().await.unwrap_err().status(), Some(503));
    assert_eq!(api.circuit_state().consecutive_failures, 1);
    let e = api.n().await.unwrap_err();
    assert_eq!((e.kind(), e.status()), (ErrorKind::Decode, Some(200)));
    assert_eq!(api.circuit_state().consecutive_failures, 0);
    assert_eq!(api.n().await.unwrap_err().status(), Some(503));
    let e = api.n().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnexpectedContentType);
    assert_eq!(
        (
            api.circuit_state().phase,
            api.circuit_state().consecutive_failures
        ),
        (Phase::Closed, 0)
    );
    // Two failures in a row trip it; the probe at the cooldown's end gets a body it
    // cannot decode, and closes it.
    assert_eq!(api.n().await.unwrap_err().status(), Some(503));
    assert_eq!(api.n().await.unwrap_err().status(), Some(503));
    let tripped = api.circuit_state();
    assert_eq!(tripped.open_until, Some(start + ms(100)));
    sleep_until(start + ms(100)).await;
    assert_eq!(api.n().await.unwrap_err().kind(), ErrorKind::Decode);
    let s = api.circuit_state();
    // Two transitions since it tripped: to half-open, then closed.
    assert_eq!(
        (s.phase, s.probes_in_flight, s.generation),
        (Phase::Closed, 0, tripped.generation + 2)
    );
    // In a failure-rate window: one call, no failure.
    assert_eq!(api.rated().await.unwrap_err().kind(), ErrorKind::Decode);
    let s = api.partition_circuit_state("Json::rated").unwrap();
    assert_eq!((s.calls_in_window, s.failures_in_window), (1, 0));
    assert_eq!(t.attempts(), 8);
}

/// Two failures trip it; the default retry set, three attempts, 20 ms apart; and a
/// plain endpoint in the same partition that never retries.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 2, backoff = fixed(delay = "20ms")),
    breaker(failures = 2, reset = "100ms")
)]
pub trait Odd {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;

    #[get("/plain")]
    #[retry(max = 0)]
    async fn plain(&self) -> Result<String, ApiError>;
}

/// Regression: a status past 599 (`http` accepts up to 999) was judged a 5xx by the
/// breaker (`>= 500`): a 503 then a 799 tripped a breaker of `failures = 2`. A status
/// of no class HTTP defines is an answer, as a 4xx is: `ErrorKind::Status` with the
/// status and body, never retried, and no breaker failure nor success (a run of
/// failures goes on across it).
#[tokio::test(start_paused = true)]
async fn a_status_past_599_is_an_answer_never_retried_and_no_breaker_failure() {
    let t = ScriptedTransport::new([
        Step::status(503),
        Step::status(600).body("six"),
        Step::status(799).body("odd"),
        Step::status(999).body("nine"),
        Step::status(503),
    ]);
    let clock = Clock::start();
    let api = scripted::<OddClient>(&t);
    assert_eq!(api.plain().await.unwrap_err().status(), Some(503));
    assert_eq!(api.circuit_state().consecutive_failures, 1);
    for (code, body) in [(600, "six"), (799, "odd"), (999, "nine")] {
        let e = api.resource().await.unwrap_err();
        assert_eq!(
            (e.kind(), e.status(), e.attempts()),
            (ErrorKind::Status, Some(code), 1)
        );
        assert_eq!(e.body_text().as_deref(), Some(body));
        let s = api.circuit_state();
        assert_eq!(
            (s.phase, s.consecutive_failures),
            (Phase::Closed, 1),
            "{code}"
        );
    }
    assert_eq!(clock.now_ms(), 0, "no backoff: nothing was retried");
    assert_eq!(t.attempts(), 4);
    // The run of failures went on across them: the next 503 is the second.
    assert_eq!(api.plain().await.unwrap_err().status(), Some(503));
    assert_eq!(api.circuit_state().phase, Phase::Open);
    assert_eq!(t.attempts(), 5);
    assert_nothing_leaked(&t);
}
