// A `fixed` backoff has no default delay: it must say one.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"), retry(backoff = fixed))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
