// A header is set once in `headers(...)`, names compared without case.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"), headers("X-Client" = "a", "x-client" = "b"))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
