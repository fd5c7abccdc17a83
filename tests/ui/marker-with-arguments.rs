// `#[idempotent]` is a marker: it takes no arguments.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Charges {
    #[post("/charges")]
    #[idempotent(true)]
    async fn charge(&self, #[body] amount: u64) -> Result<String, ApiError>;
}

fn main() {}
