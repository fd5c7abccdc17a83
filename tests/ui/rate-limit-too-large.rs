// A rate too large for an `f64` is refused as too large, not as "not above zero".
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"), rate_limit(per_second = 1e400))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
