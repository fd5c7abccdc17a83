//! Generated code needs no `#[allow]` of rustc's lints, so it compiles in a crate that
//! forbids them: under `#![forbid(dead_code)]` and the others here, any such `allow`
//! would be an error (E0453). The trait below makes the macro write each kind of
//! code it writes (every body, query, header and result kind, every policy), and its
//! client is used only in part. No derives: serde's do `allow` some of these lints.
#![forbid(dead_code, unused_qualifications, non_upper_case_globals, unused, nonstandard_style)]
#![forbid(missing_docs, unsafe_code, rust_2018_idioms)]

use resilient_api::{ApiError, BodyStream, Bytes, Response, ResponseStream, resilient_api};
use serde_json::Value;

/// An API that uses every kind of parameter, result and policy.
#[resilient_api(
    base_url = "https://api.example.com/v1",
    timeout(attempt = "3s", total = "15s"),
    retry(max = 3, backoff = exponential_jitter(base = "200ms", factor = 2, cap = "10s")),
    breaker(failures = 5, reset = "30s"),
    bulkhead(concurrency = 8, queue = 32),
    rate_limit(per_second = 10, burst = 20),
    headers("Accept" = "application/json"),
)]
pub trait Strict {
    /// JSON body, keyed; a path parameter named like a keyword.
    #[post("/items/{type}")]
    #[idempotency_key]
    #[hedge(delay = "100ms")]
    async fn create(&self, r#type: &str, #[body] item: &Value) -> Result<Response<Value>, ApiError>;

    /// Form body; queries and headers of every kind.
    #[put("/forms/{id}")]
    #[coalesce]
    #[partition("forms")]
    async fn form(
        &self,
        id: u64,
        #[body(form)] form: &[(&str, &str)],
        #[query] q: &str,
        #[query("page")] page: Option<u32>,
        #[query("key", secret)] key: &str,
        #[query] filter: &[(&str, u32)],
        #[header("X-Trace")] trace: Option<String>,
        #[header("X-Api-Key", secret)] api_key: &str,
    ) -> Result<(), ApiError>;

    /// Raw body, text result (checked), its own breaker and backoff.
    #[patch("/raw")]
    #[idempotent]
    #[parse(with = checks::not_empty)]
    #[breaker(failure_rate = 0.5, window = "20s", min_calls = 20)]
    #[retry(backoff = decorrelated_jitter(base = "100ms", cap = "2s"))]
    async fn raw(&self, #[body(raw)] bytes: Vec<u8>) -> Result<String, ApiError>;

    /// Streamed body, no retries, no attempt timeout.
    #[put("/upload")]
    #[retry(max = 0)]
    #[timeout(attempt = "none", total = "1m")]
    async fn upload(&self, #[body(stream)] body: BodyStream) -> Result<Bytes, ApiError>;

    /// Streamed result, its own bulkhead and rate.
    #[get("/export")]
    #[bulkhead(concurrency = 2)]
    #[rate_limit(per_second = 0.5)]
    async fn export(&self) -> Result<ResponseStream, ApiError>;

    /// Never called: no `dead_code` on what the macro wrote for it.
    #[delete("/items/{id}")]
    async fn remove(&self, id: u64) -> Result<(), ApiError>;

    /// Not an endpoint: a provided method stays as written.
    fn describe(&self) -> &'static str {
        "strict"
    }
}

mod checks {
    /// A check of a text result.
    pub(crate) fn not_empty(text: &str) -> Result<(), &'static str> {
        if text.is_empty() { Err("empty") } else { Ok(()) }
    }
}

/// A second trait whose client nothing uses.
#[resilient_api(timeout(attempt = "3s"))]
pub trait Unused {
    /// An endpoint.
    #[get("/users/{id}")]
    async fn user(&self, id: u64, #[query] q: Option<&str>) -> Result<Value, ApiError>;

    /// A checked result nothing asks for: no `dead_code` on the check's type.
    #[get("/users")]
    #[parse(with = checks::not_empty)]
    async fn users(&self) -> Result<Response<String>, ApiError>;
}

async fn use_it(api: &StrictClient) -> Result<(), ApiError> {
    let _: Response<Value> = api.create("a", &serde_json::json!({ "n": 1 })).await?;
    api.form(1, &[("a", "b")], "q", None, "k", &[("limit", 3)], None, "s")
        .await?;
    let _: String = api.raw(b"hi".to_vec()).await?;
    let body = BodyStream::new(futures_util::stream::iter(vec![Ok(Bytes::from_static(
        b"x",
    ))]));
    let _: Bytes = api.upload(body).await?;
    let _: ResponseStream = api.export().await?;
    let _ = (api.describe(), api.circuit_state());
    Ok(())
}

fn main() {
    let _ = use_it;
    let _ = StrictClient::builder();
}
