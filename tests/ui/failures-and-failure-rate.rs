// `failures` and `failure_rate` are two breaker modes: one list sets one.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"), breaker(failures = 5, failure_rate = 0.5))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
