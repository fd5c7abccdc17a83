//! Partitions: a method with its own policy gets its own compartment, and clients
//! that share an engine share per-host state and the global bulkhead.

use resilient_api::bulkhead::BulkheadConfig;
use resilient_api::circuit_breaker::state::Phase;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, Engine, ErrorKind, resilient_api};
use tests::{Clock, ms, settle, spawn_timed};

/// Two endpoints on one host: `search` has a breaker of its own.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 0),
    breaker(failures = 1, reset = "1s")
)]
pub trait Shop {
    #[get("/items")]
    async fn items(&self) -> Result<String, ApiError>;

    #[get("/search")]
    #[breaker(failures = 1, reset = "1s")]
    async fn search(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn a_method_with_its_own_breaker_trips_alone() {
    let t = ScriptedTransport::new([Step::status(503), Step::status(200).body("items")]);
    let api: ShopClient = tests::scripted(&t);
    let e = api.search().await.expect_err("503");
    assert_eq!(e.kind(), ErrorKind::Status);
    // `search` is open now; `items` lives in the default partition, still closed.
    let e = api.search().await.expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::CircuitOpen);
    assert_eq!(t.attempts(), 1);
    assert_eq!(api.items().await.expect("items is unaffected"), "items");
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    assert_eq!(t.attempts(), 2);
}

#[tokio::test(start_paused = true)]
async fn clients_sharing_an_engine_share_the_host_breaker() {
    let t = ScriptedTransport::new([Step::status(503)]);
    let engine = Engine::new();
    let a: ShopClient = tests::scripted_builder(&t)
        .engine(engine.clone())
        .build()
        .expect("builds");
    let b: ShopClient = tests::scripted_builder(&t)
        .engine(engine)
        .build()
        .expect("builds");
    assert_eq!(a.items().await.expect_err("503").kind(), ErrorKind::Status);
    // The breaker `a` tripped is the one `b` asks: refused without a dispatch.
    assert_eq!(
        b.items().await.expect_err("refused").kind(),
        ErrorKind::CircuitOpen
    );
    assert_eq!(t.attempts(), 1);

    // A client with an engine of its own does not share it.
    t.push([Step::status(200).body("fresh")]);
    let c: ShopClient = tests::scripted(&t);
    assert_eq!(c.items().await.expect("own engine"), "fresh");
}

/// One endpoint with a generous bulkhead of its own.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 0),
    bulkhead(concurrency = 8, queue = 8)
)]
pub trait Slow {
    #[get("/slow")]
    async fn slow(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn the_global_bulkhead_limits_every_client_of_the_engine() {
    let t = ScriptedTransport::new([
        Step::status(200).body("a").delay(ms(100)),
        Step::status(200).body("b").delay(ms(100)),
    ]);
    let engine = Engine::new().global_bulkhead(BulkheadConfig {
        concurrency: 1,
        queue: 0,
    });
    let a: SlowClient = tests::scripted_builder(&t)
        .engine(engine.clone())
        .build()
        .expect("builds");
    let b: SlowClient = tests::scripted_builder(&t)
        .base_url("https://other.test")
        .engine(engine)
        .build()
        .expect("builds");
    let clock = Clock::start();
    let first = spawn_timed(clock, async move { a.slow().await });
    settle().await;
    // `b` talks to another host, so its own bulkhead is empty, but the global one is full.
    let e = b.slow().await.expect_err("global limit");
    assert_eq!(e.kind(), ErrorKind::BulkheadFull);
    assert_eq!(clock.now_ms(), 0);
    let (r, at) = first.await.expect("joins");
    assert_eq!(r.expect("a is served"), "a");
    assert_eq!(at, 100);
    assert_eq!(b.slow().await.expect("the global slot is back"), "b");
    assert_eq!(t.attempts(), 2);
    tests::assert_nothing_leaked(&t);
}

/// A method with a breaker of its own, named like one of `Catalog`'s.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Users {
    #[get("/users")]
    #[breaker(failures = 1, reset = "1s")]
    async fn fetch(&self) -> Result<String, ApiError>;
}

/// The same method name, a breaker of its own that tolerates 100 failures.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Catalog {
    #[get("/catalog")]
    #[breaker(failures = 100, reset = "1s")]
    async fn fetch(&self) -> Result<String, ApiError>;
}

/// Regression: a method's own partition was named after the method alone, so on an
/// engine shared by two APIs for one host, `Users::fetch` and `Catalog::fetch` were
/// one partition: `Catalog::fetch` was refused after one failure of `Users::fetch`,
/// its own `failures = 100` silently dropped. Each is now `Trait::method`.
#[tokio::test(start_paused = true)]
async fn methods_own_partitions_of_two_apis_on_one_engine_stay_apart() {
    let t = ScriptedTransport::new([Step::status(503), Step::status(200).body("catalog")]);
    let engine = Engine::new();
    let users: UsersClient = tests::scripted_builder(&t)
        .engine(engine.clone())
        .build()
        .unwrap();
    let catalog: CatalogClient = tests::scripted_builder(&t).engine(engine).build().unwrap();
    assert_eq!(users.fetch().await.unwrap_err().status(), Some(503));
    assert_eq!(
        users.fetch().await.unwrap_err().kind(),
        ErrorKind::CircuitOpen
    );
    assert_eq!(catalog.fetch().await.unwrap(), "catalog");
    assert_eq!(t.attempts(), 2);
}

/// A method's own partition is observable through the client, by its name.
#[tokio::test(start_paused = true)]
async fn a_methods_own_breaker_is_observable_by_its_partitions_name() {
    let t = ScriptedTransport::new([Step::status(503)]);
    let api: ShopClient = tests::scripted(&t);
    assert_eq!(
        api.partition_circuit_state("Shop::search").map(|s| s.phase),
        Some(Phase::Closed)
    );
    assert_eq!(api.search().await.unwrap_err().status(), Some(503));
    let own = api.partition_circuit_state("Shop::search");
    assert_eq!(own.map(|s| s.phase), Some(Phase::Open));
    assert_eq!(api.circuit_state().phase, Phase::Closed, "the default one");
    assert_eq!(
        api.partition_circuit_state("search"),
        None,
        "no such partition"
    );
}

/// Two versions of one API, in two modules: two traits with the same name, each
/// with a method `fetch` that has a breaker of its own.
mod v1 {
    use resilient_api::{ApiError, resilient_api};

    #[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
    pub trait Accounts {
        #[get("/v1/accounts")]
        #[breaker(failures = 1, reset = "1s")]
        async fn fetch(&self) -> Result<String, ApiError>;
    }
}

mod v2 {
    use resilient_api::{ApiError, resilient_api};

    #[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
    pub trait Accounts {
        #[get("/v2/accounts")]
        #[breaker(failures = 100, reset = "1s")]
        async fn fetch(&self) -> Result<String, ApiError>;
    }
}

/// Regression: a method's own partition is named `Trait::method`, and the engine
/// looked partitions up by that name alone, so two APIs whose traits share a name
/// (`v1::Accounts`, `v2::Accounts`) shared `Accounts::fetch` on one engine: the v2
/// endpoint was refused after one failure of the v1 one, its own `failures = 100`
/// silently dropped. A method's own partition is the API's alone.
#[tokio::test(start_paused = true)]
async fn methods_own_partitions_of_two_same_named_apis_on_one_engine_stay_apart() {
    let t = ScriptedTransport::new([Step::status(503), Step::status(200).body("v2")]);
    let engine = Engine::new();
    let old: v1::AccountsClient = tests::scripted_builder(&t)
        .engine(engine.clone())
        .build()
        .unwrap();
    let new: v2::AccountsClient = tests::scripted_builder(&t)
        .engine(engine.clone())
        .build()
        .unwrap();
    assert_eq!(
        v1::Accounts::fetch(&old).await.unwrap_err().status(),
        Some(503)
    );
    assert_eq!(
        old.partition_circuit_state("Accounts::fetch")
            .map(|s| s.phase),
        Some(Phase::Open)
    );
    assert_eq!(
        new.partition_circuit_state("Accounts::fetch")
            .map(|s| s.phase),
        Some(Phase::Closed),
        "v2's own breaker is not v1's"
    );
    assert_eq!(
        v2::Accounts::fetch(&new).await.expect("v2 is not refused"),
        "v2"
    );
    // Two clients of one API on the engine still share its method's own partition.
    let again: v1::AccountsClient = tests::scripted_builder(&t).engine(engine).build().unwrap();
    assert_eq!(
        v1::Accounts::fetch(&again).await.unwrap_err().kind(),
        ErrorKind::CircuitOpen
    );
    assert_eq!(t.attempts(), 2);
    tests::assert_nothing_leaked(&t);
}

/// Every endpoint in a partition of its own: nothing uses the default partition.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Reports {
    #[get("/reports")]
    #[partition("reports")]
    async fn reports(&self) -> Result<String, ApiError>;
}

/// Regression: a client none of whose endpoints uses the default partition still
/// made the host's default partition on a shared engine, with the builder's default
/// breaker (5 failures), and the next API built on that engine for the same host got
/// that one instead of its own: `Shop`'s `breaker(failures = 1)` was silently
/// dropped, so a failure of `items` did not open it.
#[tokio::test(start_paused = true)]
async fn an_api_that_never_uses_the_default_partition_does_not_fix_its_settings() {
    let t = ScriptedTransport::new([Step::status(503)]);
    let engine = Engine::new();
    let reports: ReportsClient = tests::scripted_builder(&t)
        .engine(engine.clone())
        .build()
        .unwrap();
    let shop: ShopClient = tests::scripted_builder(&t).engine(engine).build().unwrap();
    assert_eq!(shop.items().await.unwrap_err().status(), Some(503));
    assert_eq!(
        shop.circuit_state().phase,
        Phase::Open,
        "Shop's own `breaker(failures = 1)` applies to its default partition"
    );
    assert_eq!(
        shop.items().await.expect_err("refused").kind(),
        ErrorKind::CircuitOpen
    );
    assert_eq!(t.attempts(), 1);
    tests::assert_nothing_leaked(&t);
    drop(reports);
}

/// One failure trips it; the partition named explicitly like a method's own.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Billing {
    #[get("/charges")]
    #[partition("Billing::charges")]
    #[breaker(failures = 1, reset = "1s")]
    async fn charges(&self) -> Result<String, ApiError>;
}

/// The same, with the partition the macro names for a breaker of its own.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Invoices {
    #[get("/charges")]
    #[breaker(failures = 1, reset = "1s")]
    async fn charges(&self) -> Result<String, ApiError>;
}

/// Another API naming that partition on purpose.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Ledger {
    #[get("/ledger")]
    #[partition("Billing::charges")]
    #[breaker(failures = 1, reset = "1s")]
    async fn ledger(&self) -> Result<String, ApiError>;

    #[get("/ledger")]
    #[partition("Invoices::charges")]
    #[breaker(failures = 1, reset = "1s")]
    async fn invoiced(&self) -> Result<String, ApiError>;
}

/// Regression: whether a partition was a method's own (its API's alone) was guessed
/// from its name, so an explicit `#[partition("Billing::charges")]` on
/// `Billing::charges` was Billing's alone while `Ledger`'s same explicit name was
/// shared: two breakers where the docs promise one. A name the user gives is shared
/// by the clients on one engine, whatever it looks like; the one the macro gives a
/// method with a breaker of its own (`Invoices::charges`) stays its API's, even when
/// another API names it.
#[tokio::test(start_paused = true)]
async fn an_explicit_partition_name_is_shared_whatever_it_looks_like() {
    let t = ScriptedTransport::new([
        Step::status(503),
        Step::status(503),
        Step::status(200).body("invoiced"),
    ]);
    let engine = Engine::new();
    let billing: BillingClient = tests::scripted_builder(&t)
        .engine(engine.clone())
        .build()
        .expect("the client builds");
    let invoices: InvoicesClient = tests::scripted_builder(&t)
        .engine(engine.clone())
        .build()
        .expect("the client builds");
    let ledger: LedgerClient = tests::scripted_builder(&t)
        .engine(engine)
        .build()
        .expect("the client builds");

    assert_eq!(billing.charges().await.unwrap_err().status(), Some(503));
    let state = |name| ledger.partition_circuit_state(name).map(|s| s.phase);
    assert_eq!(state("Billing::charges"), Some(Phase::Open), "one breaker");
    assert_eq!(
        ledger.ledger().await.unwrap_err().kind(),
        ErrorKind::CircuitOpen
    );
    assert_eq!(t.attempts(), 1);

    assert_eq!(invoices.charges().await.unwrap_err().status(), Some(503));
    assert_eq!(
        state("Invoices::charges"),
        Some(Phase::Closed),
        "Invoices' own"
    );
    assert_eq!(
        ledger.invoiced().await.expect("its own breaker"),
        "invoiced"
    );
    assert_eq!(t.attempts(), 3);
}
