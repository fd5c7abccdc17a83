use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Payments {
    /// A key makes retries safe, not sharing one charge between two callers.
    #[post("/charges")]
    #[idempotency_key]
    #[coalesce]
    async fn charge(&self, #[body] amount: &u64) -> Result<String, ApiError>;
}

fn main() {}
