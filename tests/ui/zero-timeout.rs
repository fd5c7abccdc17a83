// A zero timeout would fail every call: `"none"` is how to say no limit.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "0s"))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
