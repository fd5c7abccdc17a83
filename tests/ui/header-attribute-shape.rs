// `#[header(...)]` takes the header's name and `secret`: not `#[header = ...]`.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64, #[header = "X-Trace"] trace: &str) -> Result<String, ApiError>;
}

fn main() {}
