use resilient_api::{ApiError, resilient_api};

#[resilient_api(
    timeout(attempt = "3s"),
    retry(backoff = exponential(base = "1s", factor = 2, cap = "500ms")),
)]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
