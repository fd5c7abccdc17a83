use resilient_api::{ApiError, resilient_api};

#[resilient_api(
    timeout(attempt = "3s"),
    breaker(failure_rate = 0, probes = 0),
    bulkhead(concurrency = 0),
    rate_limit(per_second = 0, burst = 0),
    retry(on = [99, 503], backoff = exponential_jitter(factor = 0)),
)]
pub trait Users {
    #[get("/users/{id}")]
    #[hedge(delay = "50ms", max = 1)]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
