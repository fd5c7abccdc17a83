//! Generated code is written so that it needs no `#[allow]` for the lints a crate
//! may forbid: `#![forbid(dead_code)]` and the others here would make any such `allow`
//! an error (E0453). Same trait as `every-feature.rs`, with no derives, since serde's
//! derives do allow some of these lints.
#![forbid(dead_code, unused_qualifications, non_upper_case_globals, unused, nonstandard_style)]
#![forbid(missing_docs, unsafe_code, rust_2018_idioms)]

use resilient_api::{ApiError, BodyStream, Bytes, Response, ResponseStream, resilient_api};
use serde_json::Value;

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
/// The payments API.
pub trait Payments {
    /// One user.
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<Value, ApiError>;

    /// Path params in template order differ from declaration order.
    #[get("/orgs/{org}/users/{user}")]
    async fn member(&self, #[path] user: &str, org: &str) -> Result<Response<Value>, ApiError>;

    /// POST is retried only because every attempt carries the same key.
    #[post("/charges")]
    #[idempotency_key]
    #[retry(max = 5, on = [500, 503])]
    async fn charge(&self, #[body] charge: &Value) -> Result<Value, ApiError>;

    /// An endpoint.
    #[post("/refunds")]
    #[idempotency_key("X-Refund-Key")]
    #[hedge(delay = "100ms")]
    async fn refund(&self, #[body(form)] form: &[(&str, &str)]) -> Result<(), ApiError>;

    /// Trait-level retries on a POST only cover never-sent failures: not an error.
    #[post("/events")]
    async fn event(&self, #[body(raw)] bytes: Vec<u8>) -> Result<String, ApiError>;

    /// An endpoint.
    #[patch("/users/{id}")]
    #[idempotent]
    #[retry(on = [503])]
    async fn rename(&self, id: u64, #[body] name: &str) -> Result<(), ApiError>;

    /// An endpoint.
    #[put("/files/{name}")]
    #[retry(max = 0)]
    #[timeout(attempt = "none", total = "1m")]
    async fn upload(&self, name: &str, #[body(stream)] body: BodyStream) -> Result<(), ApiError>;

    /// An endpoint.
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
        #[query] filter: &[(&str, u32)],
        #[header("X-Trace")] trace: Option<String>,
        #[header("X-Api-Key", secret)] api_key: &str,
    ) -> Result<Vec<Value>, ApiError>;

    /// An endpoint.
    #[get("/suggest")]
    #[partition("search")]
    async fn suggest(&self, #[query] q: &str) -> Result<Vec<String>, ApiError>;

    /// An endpoint.
    #[delete("/users/{id}")]
    #[breaker(failure_rate = 0.5, window = "20s", min_calls = 20)]
    #[bulkhead(concurrency = 2)]
    #[retry(backoff = decorrelated_jitter(base = "100ms", cap = "2s"))]
    async fn remove(&self, id: u64) -> Result<(), ApiError>;

    /// An endpoint.
    #[head("/users/{id}")]
    #[rate_limit(per_second = 0.5)]
    #[retry(backoff = exponential(base = "1s", factor = 3, cap = "1m"))]
    async fn exists(&self, id: u64) -> Result<Bytes, ApiError>;

    /// An endpoint.
    #[options("/export")]
    #[timeout(total = "1h")]
    async fn export(&self) -> Result<ResponseStream, ApiError>;

    /// An endpoint.
    #[get("/types/{type}")]
    async fn kind(&self, r#type: &str) -> Result<Response<String>, ApiError>;

    /// Not an endpoint: a provided method with a body and no verb stays as written.
    fn describe(&self) -> &'static str {
        "payments"
    }
}

/// A trait whose client nothing uses: no `dead_code` on code the user did not write.
#[resilient_api(timeout(attempt = "3s"))]
pub trait Unused {
    /// An endpoint.
    #[get("/users/{id}")]
    async fn user(&self, id: u64, #[query] q: Option<&str>) -> Result<Value, ApiError>;
}

fn assert_send<T: Send>(_: &T) {}
fn assert_client<T: Send + Sync + Clone + std::fmt::Debug + 'static>() {}

async fn use_it(api: &PaymentsHttp) -> Result<(), ApiError> {
    let user = api.user(42);
    assert_send(&user);
    let _: Value = user.await?;
    let member: Response<Value> = api.member("ann", "acme").await?;
    let _ = member;
    let _: Value = api.charge(&serde_json::json!({ "amount": 5 })).await?;
    api.refund(&[("reason", "dup")]).await?;
    let _: String = api.event(b"hi".to_vec()).await?;
    api.rename(1, "bob").await?;
    let body = BodyStream::new(futures_util::stream::iter(vec![Ok(Bytes::from_static(
        b"x",
    ))]));
    api.upload("a.txt", body).await?;
    let _: Vec<Value> = api
        .search("q", None, "k", &[("limit", 3)], Some("t".into()), "secret")
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
    let _ = use_it;
    let _ = PaymentsHttp::builder();
}
