// `retry(on = ...)` takes status codes, as a list or one integer: not a string.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"), retry(on = "503"))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
