use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Payments {
    #[post("/charges")]
    #[retry(max = 3, on = [503])]
    async fn charge(&self, #[body] amount: &u64) -> Result<String, ApiError>;
}

fn main() {}
