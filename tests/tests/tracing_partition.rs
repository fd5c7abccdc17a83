//! Clients on one engine share a host's partitions. A partition keeps the settings of
//! the first client built with it; a later client that asks for it with other
//! settings shares it all the same, and a warning names what differs, so that a
//! trait's `breaker(...)` is never ignored without a word.
//!
//! A test binary of its own: tracing decides once per call site whether anybody
//! listens, and tests on other threads of one binary could make the event vanish.

use resilient_api::testing::ScriptedTransport;
use resilient_api::{ApiError, Engine, resilient_api};
use tests::LogBuffer;

/// One failure opens the host's breaker.
#[resilient_api(
    base_url = "https://shop.test",
    timeout(attempt = "1s"),
    breaker(failures = 1)
)]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

/// The same host, and the same breaker.
#[resilient_api(
    base_url = "https://shop.test",
    timeout(attempt = "1s"),
    breaker(failures = 1)
)]
pub trait Accounts {
    #[get("/accounts/{id}")]
    async fn account(&self, id: u64) -> Result<String, ApiError>;
}

/// The same host, with the default breaker (5 failures) and a bulkhead of its own.
#[resilient_api(
    base_url = "https://shop.test",
    timeout(attempt = "1s"),
    bulkhead(concurrency = 2, queue = 0)
)]
pub trait Orders {
    #[get("/orders/{id}")]
    async fn order(&self, id: u64) -> Result<String, ApiError>;
}

#[test]
fn a_client_that_asks_a_shared_partition_for_other_settings_is_warned() {
    let logs = LogBuffer::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_ansi(false)
        .finish();
    let t = ScriptedTransport::new([]);
    let engine = Engine::new();
    tracing::subscriber::with_default(subscriber, || {
        let build = |t: &ScriptedTransport| {
            (
                UsersClient::builder()
                    .engine(engine.clone())
                    .transport(t.clone())
                    .build(),
                AccountsClient::builder()
                    .engine(engine.clone())
                    .transport(t.clone())
                    .build(),
            )
        };
        let (users, accounts) = build(&t);
        users.expect("the first client builds");
        accounts.expect("the same settings build");
        assert_eq!(logs.contents(), "", "the same settings are no news");
        let orders = OrdersClient::builder()
            .engine(engine.clone())
            .transport(t.clone())
            .build();
        orders.expect("other settings build all the same");
    });
    let logged = logs.contents();
    assert_eq!(logged.lines().count(), 1, "one warning: {logged}");
    assert!(logged.contains("WARN"), "{logged}");
    assert!(
        logged.contains("origin=https://shop.test partition= differ=breaker, bulkhead"),
        "{logged}"
    );
}
