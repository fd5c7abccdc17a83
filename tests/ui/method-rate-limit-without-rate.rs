// A method's `#[rate_limit]` needs `per_second`, from the method or the trait.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{id}")]
    #[rate_limit(burst = 5)]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
