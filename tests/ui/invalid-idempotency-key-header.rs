// The header named by `#[idempotency_key("...")]` must be a valid header name.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Charges {
    #[post("/charges")]
    #[idempotency_key("Idempotency Key")]
    async fn charge(&self, #[body] amount: u64) -> Result<String, ApiError>;
}

fn main() {}
