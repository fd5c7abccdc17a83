// `#[hedge]` needs the delay before the next attempt.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{id}")]
    #[hedge(max = 2)]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
