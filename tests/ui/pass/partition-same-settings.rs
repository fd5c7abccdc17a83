//! Endpoints that share a `#[partition]` must agree on its breaker and bulkhead, and
//! they do when their settings are the same, whether a default is written out or left
//! out: `reset = "30s"` is the breaker's default reset, and 256 the bulkhead's default
//! queue, so both pairs below configure one identical breaker and one identical
//! bulkhead (the generated `BreakerConfig { .., ..BreakerConfig::DEFAULT }` values are
//! equal).

use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Search {
    #[get("/search")]
    #[partition("search")]
    #[breaker(failures = 3, reset = "30s")]
    async fn search(&self) -> Result<String, ApiError>;

    #[get("/suggest")]
    #[partition("search")]
    #[breaker(failures = 3)]
    async fn suggest(&self) -> Result<String, ApiError>;

    #[get("/export")]
    #[partition("export")]
    #[bulkhead(concurrency = 4, queue = 256)]
    async fn export(&self) -> Result<String, ApiError>;

    #[get("/import")]
    #[partition("export")]
    #[bulkhead(concurrency = 4)]
    async fn import(&self) -> Result<String, ApiError>;
}

fn main() {
    let _ = SearchClient::builder();
}
