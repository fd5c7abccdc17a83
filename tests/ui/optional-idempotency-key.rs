use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"), retry(max = 2))]
pub trait Payments {
    #[post("/charges")]
    async fn charge(
        &self,
        #[header("Idempotency-Key")] key: Option<String>,
        #[body] amount: &u64,
    ) -> Result<String, ApiError>;
}

fn main() {}
