//! Metrics (feature `metrics`): exact counts and gauges for retries, rejections,
//! attempts in flight, bulkhead queues and breaker states.
//!
//! Each test installs its own recorder for the test's thread (the runtime is
//! current-thread, so spawned calls report to it too). The recorder reads values
//! without resetting them: `metrics-util`'s `DebuggingRecorder` zeroes counters and
//! gauges on every snapshot, which would turn a gauge read twice into a delta.
#![cfg(feature = "metrics")]

#[path = "support/recorder.rs"]
mod recorder;

use recorder::{DEFAULT, EP, Recorded};
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, CancellationToken, ErrorKind, resilient_api};
use tests::{assert_nothing_leaked, ms, scripted, settle};

/// One retry on 503, after 10 ms.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 1, backoff = fixed(delay = "10ms"), on = [503])
)]
pub trait Retrying {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn a_retried_call_counts_two_requests_one_retry_one_ok() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([Step::status(503), Step::status(200).body("ok")]);
    let api = scripted::<RetryingClient>(&t);

    assert_eq!(api.resource().await.expect("ok after one retry"), "ok");

    assert_eq!(m.counter("resilient_api_requests_total", &[EP, DEFAULT]), 2);
    assert_eq!(m.counter("resilient_api_retries_total", &[EP, DEFAULT]), 1);
    assert_eq!(
        m.counter(
            "resilient_api_calls_total",
            &[EP, DEFAULT, ("outcome", "ok")]
        ),
        1
    );
    assert_eq!(m.series("resilient_api_calls_total"), 1, "one outcome only");
    assert_eq!(
        m.histogram("resilient_api_call_duration_seconds", &[EP, DEFAULT]),
        vec![0.01],
        "the 10 ms backoff, on the paused clock"
    );
    assert_eq!(
        m.gauge("resilient_api_in_flight", &[EP, DEFAULT]),
        Some(0.0)
    );
    assert_eq!(m.series("resilient_api_rejections_total"), 0);
    assert_eq!(m.series("resilient_api_queue_depth"), 0, "never queued");
    assert_eq!(
        m.series("resilient_api_breaker_state"),
        0,
        "never left closed"
    );
}

/// Trips on the first failure; no retries.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 1, reset = "1s")
)]
pub trait Fragile {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;

    /// A partition of its own, `Fragile::other`.
    #[get("/other")]
    #[breaker(failures = 1, reset = "1s")]
    async fn other(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn a_call_refused_by_an_open_breaker_is_a_rejection() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([Step::status(503)]);
    let api = scripted::<FragileClient>(&t);
    let state = |partition| {
        m.gauge(
            "resilient_api_breaker_state",
            &[("origin", "https://example.test"), ("partition", partition)],
        )
    };

    let err = api.resource().await.expect_err("503");
    assert_eq!(err.kind(), ErrorKind::Status);
    assert_eq!(state("default"), Some(2.0), "open");
    assert_eq!(
        m.series("resilient_api_rejections_total"),
        0,
        "a 503 is no rejection"
    );

    let err = api.resource().await.expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::CircuitOpen);
    assert_eq!(
        m.counter(
            "resilient_api_rejections_total",
            &[EP, DEFAULT, ("policy", "circuit_breaker")]
        ),
        1
    );
    assert_eq!(m.series("resilient_api_rejections_total"), 1);
    assert_eq!(
        m.counter(
            "resilient_api_calls_total",
            &[EP, DEFAULT, ("outcome", "circuit_open")]
        ),
        1,
        "a call refused before it starts still ends once"
    );
    assert_eq!(m.counter("resilient_api_requests_total", &[EP, DEFAULT]), 1);

    // After the reset a probe half-opens it, and its success closes it.
    tokio::time::sleep(ms(1000)).await;
    t.push([Step::status(200).body("ok").delay(ms(5))]);
    let probe = tokio::spawn({
        let api = api.clone();
        async move { api.resource().await }
    });
    settle().await;
    assert_eq!(
        state("default"),
        Some(1.0),
        "half-open while the probe runs"
    );
    assert_eq!(probe.await.expect("joins").expect("the probe"), "ok");
    assert_eq!(state("default"), Some(0.0), "closed");

    // A method's own partition is tagged with its name, `Trait::method`.
    t.push([Step::status(503)]);
    api.other().await.expect_err("503");
    assert_eq!(state("Fragile::other"), Some(2.0));
    assert_eq!(state("default"), Some(0.0));
    assert_nothing_leaked(&t);
}

/// Concurrency 1, queue 1.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    bulkhead(concurrency = 1, queue = 1)
)]
pub trait Narrow {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn an_attempt_is_in_flight_until_its_future_is_dropped() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([Step::hang()]);
    let api = scripted::<NarrowClient>(&t);
    let in_flight = || m.gauge("resilient_api_in_flight", &[EP, DEFAULT]);

    let mut call = Box::pin(api.resource());
    assert!(
        tokio::time::timeout(ms(50), &mut call).await.is_err(),
        "the attempt hangs"
    );
    assert_eq!(t.attempts(), 1);
    assert_eq!(in_flight(), Some(1.0));

    drop(call);
    assert_eq!(in_flight(), Some(0.0), "a dropped attempt leaves no trace");
    assert_eq!(
        m.counter(
            "resilient_api_calls_total",
            &[EP, DEFAULT, ("outcome", "cancelled")]
        ),
        1,
        "a dropped call ended as cancelled"
    );
    assert_eq!(m.series("resilient_api_calls_total"), 1);
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn a_waiter_is_in_the_queue_depth_until_it_is_cancelled() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([Step::hang()]);
    let api = scripted::<NarrowClient>(&t);
    let depth = || m.gauge("resilient_api_queue_depth", &[DEFAULT]);

    // The first call holds the only slot.
    let mut first = Box::pin(api.resource());
    assert!(tokio::time::timeout(ms(10), &mut first).await.is_err());
    assert_eq!(depth(), None, "it never queued");

    // The second waits in the queue until its token is cancelled.
    let token = CancellationToken::new();
    let second = tokio::spawn({
        let api = api.with_options(CallOptions::new().cancel_on(token.clone()));
        async move { api.resource().await }
    });
    settle().await;
    assert!(!second.is_finished());
    assert_eq!(depth(), Some(1.0));

    // The queue is full: a third is turned away, and never counts as waiting.
    let err = api.resource().await.expect_err("queue full");
    assert_eq!(err.kind(), ErrorKind::BulkheadFull);
    assert_eq!(depth(), Some(1.0));
    assert_eq!(
        m.counter(
            "resilient_api_rejections_total",
            &[EP, DEFAULT, ("policy", "bulkhead")]
        ),
        1
    );

    token.cancel();
    let err = second.await.expect("joins").expect_err("cancelled");
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert_eq!(depth(), Some(0.0));
    assert_eq!(
        m.counter(
            "resilient_api_calls_total",
            &[EP, DEFAULT, ("outcome", "cancelled")]
        ),
        1
    );
    assert_eq!(t.attempts(), 1, "only the first was sent");
    assert_eq!(
        m.gauge("resilient_api_in_flight", &[EP, DEFAULT]),
        Some(1.0)
    );

    drop(first);
    assert_eq!(
        m.gauge("resilient_api_in_flight", &[EP, DEFAULT]),
        Some(0.0)
    );
    assert_eq!(m.series("resilient_api_rejections_total"), 1);
    assert_nothing_leaked(&t);
}

/// One failure trips it for 1 s.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 1, reset = "1s")
)]
pub trait Alpha {
    #[get("/a")]
    async fn a(&self) -> Result<String, ApiError>;
}

/// One failure trips it for 100 ms.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 1, reset = "100ms")
)]
pub trait Beta {
    #[get("/b")]
    async fn b(&self) -> Result<String, ApiError>;
}

/// Regression: the gauge was tagged with the partition alone, and every client's
/// default partition is `default`, so two upstreams' breakers wrote one series: here
/// it read closed while Alpha's breaker was open.
#[tokio::test(start_paused = true)]
async fn breaker_gauges_of_two_upstreams_are_apart() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let ta = ScriptedTransport::new([Step::status(503)]);
    let tb = ScriptedTransport::new([Step::status(503), Step::status(200).body("ok")]);
    let alpha: AlphaClient = tests::scripted_builder(&ta)
        .base_url("https://alpha.test")
        .build()
        .unwrap();
    let beta: BetaClient = tests::scripted_builder(&tb)
        .base_url("https://beta.test")
        .build()
        .unwrap();
    alpha.a().await.unwrap_err();
    beta.b().await.unwrap_err();
    tokio::time::sleep(ms(100)).await;
    assert_eq!(beta.b().await.unwrap(), "ok");
    let state = |origin| {
        m.gauge(
            "resilient_api_breaker_state",
            &[("origin", origin), ("partition", "default")],
        )
    };
    assert_eq!(m.series("resilient_api_breaker_state"), 2);
    assert_eq!(state("https://alpha.test"), Some(2.0), "open");
    assert_eq!(state("https://beta.test"), Some(0.0), "closed again");
}

/// A JSON read, no retries.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Documents {
    #[get("/resource")]
    async fn resource(&self) -> Result<serde_json::Value, ApiError>;
}

/// A call whose answer cannot be decoded ends in an error, and its metric says so:
/// `decode` or `unexpected_content_type`, not `ok`. A dashboard that counts failed
/// calls by `outcome` sees a server that broke its contract.
#[tokio::test(start_paused = true)]
async fn a_call_whose_answer_cannot_be_decoded_is_no_ok_call() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([
        Step::status(200)
            .header("content-type", "application/json")
            .body("{not json")
            .delay(ms(4)),
        Step::status(200)
            .header("content-type", "text/html")
            .body("<h1>Sign in</h1>"),
        Step::status(200)
            .header("content-type", "application/json")
            .body("{}"),
    ]);
    let api = scripted::<DocumentsClient>(&t);
    let outcome = |o| m.counter("resilient_api_calls_total", &[EP, DEFAULT, ("outcome", o)]);

    assert_eq!(api.resource().await.unwrap_err().kind(), ErrorKind::Decode);
    assert_eq!(
        api.resource().await.unwrap_err().kind(),
        ErrorKind::UnexpectedContentType
    );
    assert_eq!(api.resource().await.unwrap(), serde_json::json!({}));
    assert_eq!(
        (
            outcome("decode"),
            outcome("unexpected_content_type"),
            outcome("ok")
        ),
        (1, 1, 1)
    );
    assert_eq!(m.series("resilient_api_calls_total"), 3);
    assert_eq!(
        m.histogram("resilient_api_call_duration_seconds", &[EP, DEFAULT]),
        vec![0.004, 0.0, 0.0]
    );
    assert_eq!(m.counter("resilient_api_requests_total", &[EP, DEFAULT]), 3);
    assert_nothing_leaked(&t);
}

/// A result type whose `Deserialize` panics, as a user's hand-written impl may.
#[derive(Debug)]
pub struct Explodes;

impl<'de> serde::Deserialize<'de> for Explodes {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        panic!("the user's Deserialize impl panicked");
    }
}

/// A JSON read into a type whose `Deserialize` panics.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Panicky {
    #[get("/resource")]
    async fn resource(&self) -> Result<Explodes, ApiError>;
}

/// Regression: a call whose decoder panicked was counted as `cancelled`, as if its
/// caller had given up on it (its end's guard, dropped by the unwinding, took it for
/// a dropped future), and so was a call whose middleware panicked. Nobody cancelled
/// them: each is `panicked`, once, with its duration.
#[tokio::test(start_paused = true)]
async fn a_call_whose_decoder_panics_is_panicked_not_cancelled() {
    let m = Recorded::new();
    let _installed = metrics::set_default_local_recorder(&m);
    let t = ScriptedTransport::new([Step::status(200).body("{}").delay(ms(7))]);
    let api = scripted::<PanickyClient>(&t);
    let outcome = |o| m.counter("resilient_api_calls_total", &[EP, DEFAULT, ("outcome", o)]);

    let joined = tokio::spawn(async move { api.resource().await.map(|_| ()) }).await;
    assert!(joined.expect_err("the panic reaches the caller").is_panic());

    assert_eq!((outcome("panicked"), outcome("cancelled")), (1, 0));
    assert_eq!(m.series("resilient_api_calls_total"), 1, "one outcome only");
    assert_eq!(
        m.histogram("resilient_api_call_duration_seconds", &[EP, DEFAULT]),
        vec![0.007]
    );
    assert_eq!(m.counter("resilient_api_requests_total", &[EP, DEFAULT]), 1);
    assert_eq!(
        m.gauge("resilient_api_in_flight", &[EP, DEFAULT]),
        Some(0.0)
    );
    assert_nothing_leaked(&t);

    // A hook's panic ends its call the same way.
    let api = tests::scripted_builder::<PanickyClient>(&t)
        .middleware(|_| panic!("the middleware panicked"))
        .build()
        .expect("the client builds");
    let joined = tokio::spawn(async move { api.resource().await.map(|_| ()) }).await;
    assert!(joined.expect_err("the panic reaches the caller").is_panic());
    assert_eq!((outcome("panicked"), outcome("cancelled")), (2, 0));
    assert_eq!(t.attempts(), 1, "nothing more was sent");
}

/// Every value the queue-depth gauge took, in order: what a recorder that reports
/// each update (a statsd-style one) sees, where the registry above keeps only the last.
#[derive(Default)]
struct DepthLog {
    value: std::sync::Mutex<f64>,
    seen: std::sync::Mutex<Vec<f64>>,
}

impl DepthLog {
    fn apply(&self, f: impl FnOnce(f64) -> f64) {
        let mut v = self.value.lock().unwrap_or_else(|e| e.into_inner());
        *v = f(*v);
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).push(*v);
    }

    fn seen(&self) -> Vec<f64> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl metrics::GaugeFn for DepthLog {
    fn increment(&self, by: f64) {
        self.apply(|v| v + by);
    }
    fn decrement(&self, by: f64) {
        self.apply(|v| v - by);
    }
    fn set(&self, to: f64) {
        self.apply(|_| to);
    }
}

/// Logs the queue-depth gauge; every other series goes nowhere.
struct DepthRecorder(std::sync::Arc<DepthLog>);

impl metrics::Recorder for DepthRecorder {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn register_counter(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        metrics::Counter::noop()
    }
    fn register_gauge(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        if key.name() == "resilient_api_queue_depth" {
            metrics::Gauge::from_arc(std::sync::Arc::clone(&self.0))
        } else {
            metrics::Gauge::noop()
        }
    }
    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}

/// Regression: a caller turned away by a full queue was counted in the queue depth
/// and taken out again at once, so a recorder that reports every update saw the
/// depth reach 2 with a queue of 1. Only a caller that joins the queue moves it now.
#[tokio::test(start_paused = true)]
async fn a_caller_turned_away_by_a_full_queue_never_moves_the_queue_depth() {
    let log = std::sync::Arc::new(DepthLog::default());
    let recorder = DepthRecorder(log.clone());
    let _installed = metrics::set_default_local_recorder(&recorder);
    let t = ScriptedTransport::new([Step::hang()]);
    let api = scripted::<NarrowClient>(&t);

    let mut first = Box::pin(api.resource());
    assert!(tokio::time::timeout(ms(10), &mut first).await.is_err());
    let token = CancellationToken::new();
    let second = tokio::spawn({
        let api = api.with_options(CallOptions::new().cancel_on(token.clone()));
        async move { api.resource().await }
    });
    settle().await;
    assert_eq!(log.seen(), [1.0], "the second waits in the queue");

    for _ in 0..3 {
        let err = api.resource().await.expect_err("queue full");
        assert_eq!(err.kind(), ErrorKind::BulkheadFull);
    }
    assert_eq!(log.seen(), [1.0], "the turned-away callers never queued");

    token.cancel();
    let err = second.await.expect("joins").expect_err("cancelled");
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert_eq!(log.seen(), [1.0, 0.0]);
    drop(first);
    assert_nothing_leaked(&t);
}
