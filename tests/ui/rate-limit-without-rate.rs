// A trait-level `rate_limit` must give `per_second`.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"), rate_limit(burst = 5))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
