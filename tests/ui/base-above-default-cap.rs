// A `base` above the default cap (30 s) needs a `cap` of its own.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"), retry(backoff = exponential(base = "1m")))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
