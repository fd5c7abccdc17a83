use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Reports {
    /// Every call has its own key: no two calls are identical, and two keys are two
    /// reports.
    #[get("/reports/daily")]
    #[idempotency_key]
    #[coalesce]
    async fn daily(&self) -> Result<String, ApiError>;
}

fn main() {}
