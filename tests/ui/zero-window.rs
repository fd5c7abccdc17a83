// The failure-rate breaker's `window` must be longer than zero.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"), breaker(failure_rate = 0.5, window = "0s"))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
