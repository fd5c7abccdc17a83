// A query parameter's name cannot be empty.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Search {
    #[get("/search")]
    async fn search(&self, #[query("")] q: &str) -> Result<String, ApiError>;
}

fn main() {}
