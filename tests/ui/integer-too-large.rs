// Counts are `u32`: a larger integer is refused at the literal.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"), retry(max = 5000000000))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
