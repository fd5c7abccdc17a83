// A backoff is one of the named kinds, not a string.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"), retry(backoff = "exponential"))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
