// A method attribute is written once: a second `#[retry]` is refused, not merged.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{id}")]
    #[retry(max = 1)]
    #[retry(max = 3)]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
