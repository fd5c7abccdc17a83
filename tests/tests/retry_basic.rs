//! Retry basics (S1, S2, S3) and the classification edges: what is retried on which
//! method, and what is never sent at all; and a fixed jitter's exact waits.

use std::time::Duration;

use resilient_api::Jitter;
use resilient_api::retry::backoff::Backoff;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, resilient_api};
use tests::{
    Clock, assert_follow_up_succeeds, assert_nothing_leaked, ms, scripted, scripted_builder,
};

/// Two retries, 20 ms apart, on 503.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503])
)]
pub trait Basic {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;

    #[get("/disabled")]
    #[retry(max = 0)]
    async fn disabled(&self) -> Result<String, ApiError>;

    /// A plain POST: the trait's retries apply to never-sent failures only.
    #[post("/items")]
    async fn create(&self) -> Result<String, ApiError>;

    #[get("/items/{id}")]
    async fn item(&self, id: &str) -> Result<String, ApiError>;

    #[get("/document")]
    async fn document(&self) -> Result<serde_json::Value, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn s1_retry_recovery() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        Step::status(503).body("busy"),
        Step::status(200).body("ready"),
    ]);
    let clock = Clock::start();
    let api = scripted::<BasicClient>(&t);

    let value = api.resource().await.unwrap();
    assert_eq!(value, "ready");
    assert_eq!(clock.now_ms(), 40);
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(20), ms(40)]);

    // None later.
    tests::assert_no_late_dispatch(&t, 3, Duration::from_secs(1)).await;
    assert_follow_up_succeeds(&t, || api.resource()).await;
}

#[tokio::test(start_paused = true)]
async fn s2_retry_exhaustion() {
    let t = ScriptedTransport::new([
        Step::status(503).body("overloaded"),
        Step::status(503).body("overloaded"),
        Step::status(503).body("overloaded"),
    ]);
    let clock = Clock::start();
    let api = scripted::<BasicClient>(&t);

    let e = api.resource().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Status);
    assert_eq!(e.status(), Some(503));
    assert_eq!(e.body_text().as_deref(), Some("overloaded"));
    assert_eq!(e.attempts(), 3);
    assert_eq!(e.endpoint(), "resource");
    assert_eq!(clock.now_ms(), 40);
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(20), ms(40)]);

    tests::assert_no_late_dispatch(&t, 3, Duration::from_secs(1)).await;
    assert_follow_up_succeeds(&t, || api.resource()).await;
}

#[tokio::test(start_paused = true)]
async fn s3_retry_disabled() {
    let t = ScriptedTransport::new([Step::status(503).body("busy")]);
    let clock = Clock::start();
    let api = scripted::<BasicClient>(&t);

    let e = api.disabled().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Status);
    assert_eq!(e.status(), Some(503));
    assert_eq!(e.body_text().as_deref(), Some("busy"));
    assert_eq!(e.attempts(), 1);
    assert_eq!(clock.now_ms(), 0);

    tests::assert_no_late_dispatch(&t, 1, Duration::from_secs(1)).await;
    assert_follow_up_succeeds(&t, || api.resource()).await;
}

#[tokio::test(start_paused = true)]
async fn connect_error_is_retried_on_a_plain_post() {
    let t = ScriptedTransport::new([Step::connect_error(), Step::status(200).body("created")]);
    let clock = Clock::start();
    let api = scripted::<BasicClient>(&t);

    assert_eq!(api.create().await.unwrap(), "created");
    assert_eq!(clock.now_ms(), 20);
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(20)]);
    assert!(t.requests().iter().all(|r| r.method == http::Method::POST));
    assert_follow_up_succeeds(&t, || api.resource()).await;
}

#[tokio::test(start_paused = true)]
async fn connect_errors_on_a_plain_post_exhaust_the_retries() {
    let t = ScriptedTransport::new([
        Step::connect_error(),
        Step::connect_error(),
        Step::connect_error(),
    ]);
    let clock = Clock::start();
    let api = scripted::<BasicClient>(&t);

    let e = api.create().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connect);
    assert!(e.is_connect());
    assert_eq!(e.attempts(), 3);
    assert_eq!(clock.now_ms(), 40);
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(20), ms(40)]);
    assert_follow_up_succeeds(&t, || api.resource()).await;
}

#[tokio::test(start_paused = true)]
async fn reset_is_not_retried_on_a_plain_post() {
    let t = ScriptedTransport::new([Step::reset()]);
    let clock = Clock::start();
    let api = scripted::<BasicClient>(&t);

    let e = api.create().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transport);
    assert_eq!(e.attempts(), 1);
    assert_eq!(clock.now_ms(), 0);

    tests::assert_no_late_dispatch(&t, 1, Duration::from_secs(1)).await;
    assert_follow_up_succeeds(&t, || api.resource()).await;
}

#[tokio::test(start_paused = true)]
async fn reset_is_retried_on_a_get() {
    let t = ScriptedTransport::new([Step::reset(), Step::status(200).body("ready")]);
    let clock = Clock::start();
    let api = scripted::<BasicClient>(&t);

    assert_eq!(api.resource().await.unwrap(), "ready");
    assert_eq!(clock.now_ms(), 20);
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(20)]);
    assert_follow_up_succeeds(&t, || api.resource()).await;
}

#[tokio::test(start_paused = true)]
async fn not_found_is_never_retried() {
    let t = ScriptedTransport::new([Step::status(404).body("missing")]);
    let clock = Clock::start();
    let api = scripted::<BasicClient>(&t);

    let e = api.resource().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Status);
    assert_eq!(e.status(), Some(404));
    assert_eq!(e.body_text().as_deref(), Some("missing"));
    assert_eq!(e.attempts(), 1);
    assert_eq!(clock.now_ms(), 0);

    tests::assert_no_late_dispatch(&t, 1, Duration::from_secs(1)).await;
    assert_follow_up_succeeds(&t, || api.resource()).await;
}

#[tokio::test(start_paused = true)]
async fn status_503_on_a_plain_post_is_not_retried() {
    let t = ScriptedTransport::new([Step::status(503).body("busy")]);
    let clock = Clock::start();
    let api = scripted::<BasicClient>(&t);

    let e = api.create().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Status);
    assert_eq!(e.status(), Some(503));
    assert_eq!(e.body_text().as_deref(), Some("busy"));
    assert_eq!(e.attempts(), 1);
    assert_eq!(clock.now_ms(), 0);

    tests::assert_no_late_dispatch(&t, 1, Duration::from_secs(1)).await;
    assert_follow_up_succeeds(&t, || api.resource()).await;
}

#[tokio::test(start_paused = true)]
async fn shape_changing_path_values_are_invalid_requests_never_sent() {
    let t = ScriptedTransport::new([]);
    let clock = Clock::start();
    let api = scripted::<BasicClient>(&t);

    for bad in ["..", ".", "", "a\nb", "a\rb", "a\tb"] {
        let e = api.item(bad).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidRequest, "{bad:?}");
        assert_eq!(e.attempts(), 0, "{bad:?}");
        assert_eq!(e.endpoint(), "item");
        assert!(e.to_string().contains("`id`"), "{bad:?}: {e}");
    }
    assert_eq!(clock.now_ms(), 0);
    assert_eq!(t.attempts(), 0);

    // A good value on the same endpoint goes out, encoded as one segment.
    t.push([Step::status(200).body("item")]);
    assert_eq!(api.item("a/..").await.unwrap(), "item");
    assert_eq!(t.requests()[0].url, "https://example.test/items/a%2F..");
    assert_follow_up_succeeds(&t, || api.resource()).await;
}

/// A decode error, found after the pipeline, still says how many attempts the call made.
#[tokio::test(start_paused = true)]
async fn a_decode_error_says_how_many_attempts_came_before_it() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        Step::status(200)
            .header("content-type", "application/json")
            .body("{not json"),
    ]);
    let api = scripted::<BasicClient>(&t);
    let e = api.document().await.unwrap_err();
    assert_eq!(
        (e.kind(), e.attempts(), t.attempts()),
        (ErrorKind::Decode, 2, 2)
    );
    assert_eq!(e.endpoint(), "document");
}

/// One retry on 503 with full jitter from a 1 s base.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 1, backoff = exponential_jitter(base = "1s", factor = 2, cap = "10s"), on = [503])
)]
pub trait Jittered {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// Regression: a fixed jitter that is not a binary fraction came out a millisecond
/// short. Full jitter waits `min(cap, base * factor^n) * jitter`, floored to whole
/// milliseconds so that a fixed jitter gives round numbers (the backoff module's
/// docs; DESIGN §3.10: exact milliseconds under a fixed jitter). `0.3` is
/// 0.29999999999999998... in binary, and 1000 ms × that, floored, read 299 ms; so did
/// every wait after it, and decorrelated jitter's 100 ms + 200 ms × 0.7 read 239 ms.
#[tokio::test(start_paused = true)]
async fn a_fixed_jitter_of_0_3_waits_300ms() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        Step::status(200).body("ready"),
    ]);
    let clock = Clock::start();
    let api = scripted_builder::<JitteredClient>(&t)
        .jitter(Jitter::fixed(0.3))
        .build()
        .expect("the client builds");

    assert_eq!(api.resource().await.expect("the retry succeeds"), "ready");
    assert_eq!(t.dispatch_times(), [ms(0), ms(300)]);
    assert_eq!(clock.now_ms(), 300);
    assert_nothing_leaked(&t);

    let full = Backoff::ExponentialJitter {
        base: ms(1000),
        factor: 2,
        cap: ms(100_000),
    };
    let waits: Vec<Duration> = full.iter(Jitter::fixed(0.3)).take(4).collect();
    assert_eq!(waits, [300, 600, 1_200, 2_400].map(ms));
    let decorrelated = Backoff::DecorrelatedJitter {
        base: ms(100),
        cap: ms(100_000),
    };
    assert_eq!(decorrelated.iter(Jitter::fixed(0.7)).next(), Some(ms(240)));
}
