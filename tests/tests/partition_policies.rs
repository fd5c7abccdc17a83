//! Partitions and per-method policies at run time: a named partition shared by its
//! methods (breaker, bulkhead, rate limit, budget), a method's own partition for a rate
//! limit alone, the builder's defaults reaching methods' own partitions, a method's
//! `#[max_body]`, `#[timeout]` and `#[bulkhead]` overriding the trait's key by key, the
//! global bulkhead across partitions, and which redirect hops take a token.

use resilient_api::bulkhead::BulkheadConfig;
use resilient_api::circuit_breaker::state::{BreakerConfig, BreakerMode, Phase};
use resilient_api::retry::budget::BudgetConfig;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, Engine, ErrorKind, resilient_api};
use tests::{Clock, assert_nothing_leaked, ms, scripted, settle, spawn_timed};

// ------------------------------------------------ a named partition, two methods

/// Two methods in one named partition; a token every 100 ms.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    rate_limit(per_second = 10, burst = 1)
)]
pub trait Named {
    #[get("/a")]
    #[partition("p")]
    #[breaker(failures = 1, reset = "1s")]
    #[bulkhead(concurrency = 1, queue = 0)]
    async fn a(&self) -> Result<String, ApiError>;

    #[get("/b")]
    #[partition("p")]
    #[breaker(failures = 1, reset = "1s")]
    #[bulkhead(concurrency = 1, queue = 0)]
    async fn b(&self) -> Result<String, ApiError>;

    #[get("/c")]
    async fn c(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn named_partition_breaker_is_shared_by_its_methods() {
    let t = ScriptedTransport::new([Step::status(503), Step::status(200).body("c")]);
    let api = scripted::<NamedClient>(&t);
    assert_eq!(api.a().await.unwrap_err().status(), Some(503));
    assert_eq!(api.b().await.unwrap_err().kind(), ErrorKind::CircuitOpen);
    assert_eq!(
        api.partition_circuit_state("p").map(|s| s.phase),
        Some(Phase::Open)
    );
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    assert_eq!(api.c().await.unwrap(), "c");
    assert_eq!(t.attempts(), 2);
}

#[tokio::test(start_paused = true)]
async fn named_partition_bulkhead_and_rate_limit_are_shared() {
    let t = ScriptedTransport::new([
        Step::status(200).body("a").delay(ms(50)),
        Step::status(200).body("c"),
        Step::status(200).body("b"),
    ]);
    let clock = Clock::start();
    let api = scripted::<NamedClient>(&t);
    let a = api.clone();
    let a = spawn_timed(clock, async move { a.a().await });
    settle().await;
    // b shares p's one slot.
    assert_eq!(api.b().await.unwrap_err().kind(), ErrorKind::BulkheadFull);
    // c is in the default partition: its own bucket and slot.
    assert_eq!(api.c().await.unwrap(), "c");
    assert_eq!(clock.now_ms(), 0);
    let (r, at) = a.await.unwrap();
    assert_eq!((r.unwrap().as_str(), at), ("a", 50));
    // p's token is due at t=100.
    assert_eq!(api.b().await.unwrap(), "b");
    assert_eq!(t.dispatch_times(), [ms(0), ms(0), ms(100)]);
    assert_nothing_leaked(&t);
}

// ------------------------------------------------- own rate limit only

/// A method with a rate limit of its own, beside the trait's breaker.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 1, reset = "1s")
)]
pub trait OwnRate {
    #[get("/a")]
    #[rate_limit(per_second = 10, burst = 1)]
    async fn a(&self) -> Result<String, ApiError>;

    #[get("/b")]
    async fn b(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn own_rate_limit_makes_its_own_partition() {
    let t = ScriptedTransport::new([
        Step::status(200).body("a1"),
        Step::status(200).body("b1"),
        Step::status(200).body("b2"),
        Step::status(200).body("a2"),
    ]);
    let api = scripted::<OwnRateClient>(&t);
    assert_eq!(api.a().await.unwrap(), "a1");
    assert_eq!(api.b().await.unwrap(), "b1");
    assert_eq!(api.b().await.unwrap(), "b2");
    assert_eq!(api.a().await.unwrap(), "a2");
    assert_eq!(t.dispatch_times(), [ms(0), ms(0), ms(0), ms(100)]);
    assert_eq!(
        api.partition_circuit_state("OwnRate::a").map(|s| s.phase),
        Some(Phase::Closed)
    );
}

// --------------------------------------------- builder overrides, own partitions

/// Methods with only a breaker, or only a bulkhead, of their own.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait OwnBreaker {
    #[get("/a")]
    #[breaker(failures = 100)]
    async fn a(&self) -> Result<String, ApiError>;

    #[get("/b")]
    #[bulkhead(concurrency = 4)]
    async fn b(&self) -> Result<String, ApiError>;
}

/// `default_bulkhead`: "The bulkhead of endpoints that declare none": `a` declares a
/// breaker, not a bulkhead.
#[tokio::test(start_paused = true)]
async fn builder_default_bulkhead_applies_to_an_own_breaker_partition() {
    let t = ScriptedTransport::new([
        Step::status(200).body("a").delay(ms(50)),
        Step::status(200).body("x"),
    ]);
    let clock = Clock::start();
    let api: OwnBreakerClient = tests::scripted_builder(&t)
        .default_bulkhead(BulkheadConfig::new(1, 0))
        .build()
        .unwrap();
    let a = api.clone();
    let a = spawn_timed(clock, async move { a.a().await });
    settle().await;
    assert_eq!(api.a().await.unwrap_err().kind(), ErrorKind::BulkheadFull);
    let (r, at) = a.await.unwrap();
    assert_eq!((r.unwrap().as_str(), at), ("a", 50));
}

/// `default_breaker`: the breaker of endpoints that declare none: `b` declares a
/// bulkhead only.
#[tokio::test(start_paused = true)]
async fn builder_default_breaker_applies_to_an_own_bulkhead_partition() {
    let t = ScriptedTransport::new([Step::status(503), Step::status(200)]);
    let api: OwnBreakerClient = tests::scripted_builder(&t)
        .default_breaker(BreakerConfig {
            mode: BreakerMode::ConsecutiveFailures { failures: 1 },
            ..BreakerConfig::DEFAULT
        })
        .build()
        .unwrap();
    assert_eq!(api.b().await.unwrap_err().status(), Some(503));
    assert_eq!(api.b().await.unwrap_err().kind(), ErrorKind::CircuitOpen);
    assert_eq!(
        api.partition_circuit_state("OwnBreaker::b")
            .map(|s| s.phase),
        Some(Phase::Open)
    );
    assert_eq!(t.attempts(), 1);
}

/// Up to five retries 10 ms apart, on methods with partitions of their own.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 5, backoff = fixed(delay = "10ms"), on = [503]),
    breaker(failures = 100)
)]
pub trait Budgeted {
    #[get("/a")]
    #[breaker(failures = 100, reset = "2s")]
    async fn a(&self) -> Result<String, ApiError>;
}

/// `retry_budget` is "the retry budget per partition": a method's own partition too.
#[tokio::test(start_paused = true)]
async fn builder_retry_budget_applies_to_own_partitions() {
    let t = ScriptedTransport::new([Step::status(503), Step::status(200)]);
    let none = BudgetConfig {
        min_per_sec: 0,
        retry_ratio: 0.0,
        ..BudgetConfig::DEFAULT
    };
    let api: BudgetedClient = tests::scripted_builder(&t)
        .retry_budget(Some(none))
        .build()
        .unwrap();
    let e = api.a().await.unwrap_err();
    assert_eq!((e.kind(), t.attempts()), (ErrorKind::BudgetExhausted, 1));
}

// --------------------------------------------------------------- max_body

/// Response size limits of the method's own.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Sizes {
    #[get("/big")]
    #[max_body("2KiB")]
    async fn big(&self) -> Result<String, ApiError>;

    #[get("/small")]
    async fn small(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn method_max_body_wins_over_the_builders_either_way() {
    let body = "x".repeat(1500);
    let t = ScriptedTransport::new([
        Step::status(200).body(body.clone()),
        Step::status(200).body(body.clone()),
    ]);
    let api: SizesClient = tests::scripted_builder(&t)
        .max_body_size(1024)
        .build()
        .unwrap();
    assert_eq!(api.big().await.unwrap().len(), 1500);
    assert_eq!(
        api.small().await.unwrap_err().kind(),
        ErrorKind::BodyTooLarge
    );
}

// ----------------------------------------------------------- timeouts key by key

/// A 100 ms attempt under a 1 s total, five retries 10 ms apart.
#[resilient_api(timeout(attempt = "100ms", total = "1s"), retry(max = 5, backoff = fixed(delay = "10ms")))]
pub trait Times {
    #[get("/t")]
    #[timeout(total = "250ms")]
    async fn t(&self) -> Result<String, ApiError>;

    #[get("/u")]
    #[timeout(attempt = "300ms")]
    async fn u(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn method_timeout_overrides_key_by_key() {
    let t = ScriptedTransport::new((0..10).map(|_| Step::hang()));
    let api = scripted::<TimesClient>(&t);
    let clock = Clock::start();
    let e = api.t().await.unwrap_err();
    // attempts at 0, 110, 220 (attempt 100 ms, the trait's), deadline 250 ms
    assert_eq!((e.kind(), clock.now_ms()), (ErrorKind::Deadline, 250));
    assert_eq!(t.dispatch_times(), [ms(0), ms(110), ms(220)]);

    let t = ScriptedTransport::new((0..10).map(|_| Step::hang()));
    let api = scripted::<TimesClient>(&t);
    let clock = Clock::start();
    let e = api.u().await.unwrap_err();
    // attempt 300 ms, total the trait's 1 s: 0, 310, 620, 930
    assert_eq!((e.kind(), clock.now_ms()), (ErrorKind::Deadline, 1000));
    assert_eq!(t.dispatch_times(), [ms(0), ms(310), ms(620), ms(930)]);
}

// ------------------------------------------------ global bulkhead, own partitions

/// One method with a partition of its own, one in the default.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Two {
    #[get("/a")]
    #[bulkhead(concurrency = 4, queue = 4)]
    async fn a(&self) -> Result<String, ApiError>;

    #[get("/b")]
    async fn b(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn the_global_bulkhead_spans_a_clients_own_partitions() {
    let t = ScriptedTransport::new([
        Step::status(200).body("a").delay(ms(100)),
        Step::status(200).body("b"),
    ]);
    let engine = Engine::new().global_bulkhead(BulkheadConfig::new(1, 1));
    let api: TwoClient = tests::scripted_builder(&t).engine(engine).build().unwrap();
    let clock = Clock::start();
    let a = api.clone();
    let a = spawn_timed(clock, async move { a.a().await });
    settle().await;
    let (r, at) = spawn_timed(clock, async move { api.b().await })
        .await
        .unwrap();
    assert_eq!((r.unwrap().as_str(), at), ("b", 100));
    let (r, at) = a.await.unwrap();
    assert_eq!((r.unwrap().as_str(), at), ("a", 100));
    assert_eq!(t.dispatch_times(), [ms(0), ms(100)]);
}

// ------------------------------------------------ redirect to another origin

/// A token every 100 ms, a burst of 1, for redirect hops.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    rate_limit(per_second = 10, burst = 1)
)]
pub trait Moves {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
}

/// README rate limit: a redirect hop back to the same origin takes a token; a hop to
/// another origin is not this partition's to count.
#[tokio::test(start_paused = true)]
async fn a_cross_origin_hop_takes_no_token_but_a_hop_back_does() {
    let t = ScriptedTransport::new([
        Step::status(307).header("location", "https://cdn.test/r"),
        Step::status(307).header("location", "https://example.test/r2"),
        Step::status(200).body("back"),
    ]);
    let api = scripted::<MovesClient>(&t);
    assert_eq!(api.r().await.unwrap(), "back");
    assert_eq!(t.dispatch_times(), [ms(0), ms(0), ms(100)]);
}

// ------------------------------------------- bulkhead field by field; shared budget

/// One slot and a queue of five, overridden field by field.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    bulkhead(concurrency = 1, queue = 5)
)]
pub trait Fields {
    #[get("/a")]
    #[bulkhead(queue = 0)]
    async fn a(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn method_bulkhead_overrides_field_by_field() {
    let t = ScriptedTransport::new([Step::status(200).body("a").delay(ms(50))]);
    let api = scripted::<FieldsClient>(&t);
    let clock = Clock::start();
    let a = api.clone();
    let a = spawn_timed(clock, async move { a.a().await });
    settle().await;
    // concurrency 1 (the trait's), queue 0 (the method's): refused at once.
    assert_eq!(api.a().await.unwrap_err().kind(), ErrorKind::BulkheadFull);
    assert_eq!(clock.now_ms(), 0);
    assert_eq!(a.await.unwrap().0.unwrap(), "a");
}

/// Three retries 10 ms apart, in a named partition's budget.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 3, backoff = fixed(delay = "10ms"), on = [503]),
    breaker(failures = 1000)
)]
pub trait SharedBudget {
    #[get("/a")]
    #[partition("p")]
    async fn a(&self) -> Result<String, ApiError>;

    #[get("/b")]
    #[partition("p")]
    async fn b(&self) -> Result<String, ApiError>;

    #[get("/c")]
    async fn c(&self) -> Result<String, ApiError>;
}

/// A named partition's budget is one for its methods: `a`'s deposits pay for `b`'s
/// retry; the default partition's budget is another.
#[tokio::test(start_paused = true)]
async fn a_named_partitions_budget_is_shared_by_its_methods() {
    // 20% of 5 calls = one retry; no floor.
    let cfg = BudgetConfig {
        min_per_sec: 0,
        retry_ratio: 0.2,
        ..BudgetConfig::DEFAULT
    };
    let t = ScriptedTransport::new((0..4).map(|_| Step::status(200).body("a")).chain([
        Step::status(503),
        Step::status(200).body("b"),
        Step::status(503),
    ]));
    let api: SharedBudgetClient = tests::scripted_builder(&t)
        .retry_budget(Some(cfg))
        .build()
        .unwrap();
    for _ in 0..4 {
        assert_eq!(api.a().await.unwrap(), "a");
    }
    assert_eq!(
        api.b().await.unwrap(),
        "b",
        "paid for by a's four calls and b's own"
    );
    let e = api.c().await.unwrap_err();
    assert_eq!(
        e.kind(),
        ErrorKind::BudgetExhausted,
        "the default partition's budget is its own"
    );
    assert_eq!(t.attempts(), 7);
}

/// A method with a bulkhead of its own, every key left out.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait EmptyBulkhead {
    #[get("/a")]
    #[bulkhead()]
    async fn a(&self) -> Result<String, ApiError>;
}

/// Pins what the generated docs now say of `#[bulkhead()]` ("64 calls at once, 256
/// waiting"; they said "the client's default"): a method's own bulkhead takes the
/// keys it leaves out from the library's defaults, not from the builder's
/// `default_bulkhead`, which sets the partitions no method names. With that default
/// at one call and no queue, a second call at once still goes out.
#[tokio::test(start_paused = true)]
async fn a_methods_own_bulkhead_fills_its_keys_from_the_librarys_defaults() {
    let t = ScriptedTransport::new([
        Step::status(200).body("first").delay(ms(50)),
        Step::status(200).body("second"),
    ]);
    let clock = Clock::start();
    let api: EmptyBulkheadClient = tests::scripted_builder(&t)
        .default_bulkhead(BulkheadConfig::new(1, 0))
        .build()
        .expect("the client builds");
    let first = api.clone();
    let first = spawn_timed(clock, async move { first.a().await });
    settle().await;
    assert_eq!(api.a().await.expect("a slot of 64"), "second");
    let (r, at) = first.await.expect("the first call's task");
    assert_eq!((r.expect("answered").as_str(), at), ("first", 50));
    assert_nothing_leaked(&t);
}
