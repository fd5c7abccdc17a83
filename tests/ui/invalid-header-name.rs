// A header name in `headers(...)` must be an RFC 9110 token.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"), headers("User Agent" = "my-app/1.0"))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
