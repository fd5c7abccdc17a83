//! A trait using every feature of the attribute language compiles, and its client
//! is `Send`, `Sync`, `Clone` and `Debug`, with `Send` futures.

use resilient_api::{ApiError, BodyStream, Bytes, Response, ResponseStream, resilient_api};
use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize)]
pub struct User {
    pub id: u64,
}

#[derive(Debug, Serialize)]
pub struct NewCharge {
    pub amount: u64,
}

#[derive(Debug, Deserialize)]
pub struct Charge {
    pub id: String,
}

#[derive(Debug, Serialize)]
pub struct Filter {
    pub tag: String,
    pub limit: u32,
}

#[resilient_api(
    base_url = "https://payments.example.com/v1",
    client = "PaymentsHttp",
    crate = "::resilient_api",
    timeout(attempt = "3s", total = "15s"),
    retry(
        max = 3,
        backoff = exponential_jitter(base = "200ms", factor = 2, cap = "10s"),
        on = [503, 429],
        retry_after_cap = "5s",
    ),
    breaker(failures = 5, reset = "30s", probes = 2, slow_call = "2s"),
    bulkhead(concurrency = 8, queue = 32),
    rate_limit(per_second = 10, burst = 20),
    headers("User-Agent" = "payments/1.0", "Accept" = "application/json"),
)]
pub trait Payments {
    /// One user.
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<User, ApiError>;

    /// Path params in template order differ from declaration order.
    #[get("/orgs/{org}/users/{user}")]
    async fn member(&self, #[path] user: &str, org: &str) -> Result<Response<User>, ApiError>;

    /// POST is retried only because every attempt carries the same key.
    #[post("/charges")]
    #[idempotency_key]
    #[retry(max = 5, on = [500, 503])]
    async fn charge(&self, #[body] charge: &NewCharge) -> Result<Charge, ApiError>;

    #[post("/refunds")]
    #[idempotency_key("X-Refund-Key")]
    #[hedge(delay = "100ms")]
    async fn refund(&self, #[body(form)] form: &[(&str, &str)]) -> Result<(), ApiError>;

    /// Trait-level retries on a POST only cover never-sent failures: not an error.
    #[post("/events")]
    async fn event(&self, #[body(raw)] bytes: Vec<u8>) -> Result<String, ApiError>;

    #[patch("/users/{id}")]
    #[idempotent]
    #[retry(on = [503])]
    async fn rename(&self, id: u64, #[body] name: &str) -> Result<(), ApiError>;

    #[put("/files/{name}")]
    #[retry(max = 0)]
    #[timeout(attempt = "none", total = "1m")]
    async fn upload(&self, name: &str, #[body(stream)] body: BodyStream) -> Result<(), ApiError>;

    #[get("/search")]
    #[hedge(delay = "50ms", max = 3)]
    #[coalesce]
    #[partition("search")]
    #[timeout(attempt = "1s")]
    #[retry(backoff = fixed(delay = "20ms"))]
    async fn search(
        &self,
        #[query] q: &str,
        #[query("page")] page: Option<u32>,
        #[query("api_key", secret)] key: &str,
        #[query] filter: &Filter,
        #[header("X-Trace")] trace: Option<String>,
        #[header("X-Api-Key", secret)] api_key: &str,
    ) -> Result<Vec<User>, ApiError>;

    #[get("/suggest")]
    #[partition("search")]
    async fn suggest(&self, #[query] q: &str) -> Result<Vec<String>, ApiError>;

    #[delete("/users/{id}")]
    #[breaker(failure_rate = 0.5, window = "20s", min_calls = 20)]
    #[bulkhead(concurrency = 2)]
    #[retry(backoff = decorrelated_jitter(base = "100ms", cap = "2s"))]
    async fn remove(&self, id: u64) -> Result<(), ApiError>;

    #[head("/users/{id}")]
    #[rate_limit(per_second = 0.5)]
    #[retry(backoff = exponential(base = "1s", factor = 3, cap = "1m"))]
    async fn exists(&self, id: u64) -> Result<Bytes, ApiError>;

    #[options("/export")]
    #[timeout(total = "1h")]
    async fn export(&self) -> Result<ResponseStream, ApiError>;

    #[get("/types/{type}")]
    async fn kind(&self, r#type: &str) -> Result<Response<String>, ApiError>;

    /// Not an endpoint: a provided method with a body and no verb stays as written.
    fn describe(&self) -> &'static str {
        "payments"
    }
}

fn assert_send<T: Send>(_: &T) {}
fn assert_client<T: Send + Sync + Clone + std::fmt::Debug + 'static>() {}

#[allow(dead_code)]
async fn use_it(api: &PaymentsHttp) -> Result<(), ApiError> {
    let user = api.user(42);
    assert_send(&user);
    let _: User = user.await?;
    let member: Response<User> = api.member("ann", "acme").await?;
    let _ = member;
    let _: Charge = api.charge(&NewCharge { amount: 5 }).await?;
    api.refund(&[("reason", "dup")]).await?;
    let _: String = api.event(b"hi".to_vec()).await?;
    api.rename(1, "bob").await?;
    let body = BodyStream::new(futures_util::stream::iter(vec![Ok(Bytes::from_static(
        b"x",
    ))]));
    api.upload("a.txt", body).await?;
    let filter = Filter {
        tag: "x".into(),
        limit: 3,
    };
    let _: Vec<User> = api
        .search("q", None, "k", &filter, Some("t".into()), "secret")
        .await?;
    let _: Vec<String> = api.suggest("q").await?;
    api.remove(1).await?;
    let _: Bytes = api.exists(1).await?;
    let _: ResponseStream = api.export().await?;
    let _: Response<String> = api.kind("a").await?;
    let _ = api.describe();
    let _ = api.circuit_state();
    Ok(())
}

fn main() {
    assert_client::<PaymentsHttp>();
    let _ = PaymentsHttp::builder();
}
