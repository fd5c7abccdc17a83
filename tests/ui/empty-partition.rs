// A partition name cannot be empty.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{id}")]
    #[partition("")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
