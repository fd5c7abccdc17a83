use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Payments {
    /// Two callers charging the same amount want two charges, not one shared.
    #[post("/charges")]
    #[coalesce]
    async fn charge(&self, #[body] amount: &u64) -> Result<String, ApiError>;
}

fn main() {}
