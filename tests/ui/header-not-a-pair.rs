// Each entry of `headers(...)` is `"Name" = "value"`.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"), headers("User-Agent"))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
