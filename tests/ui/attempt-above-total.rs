use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s", total = "15s"))]
pub trait Reports {
    #[get("/reports/{id}")]
    #[timeout(attempt = "1m")]
    async fn report(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
