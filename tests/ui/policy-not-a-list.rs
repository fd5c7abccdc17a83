// A policy on a method is a list of keys: `#[retry]` alone says nothing.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{id}")]
    #[retry]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
