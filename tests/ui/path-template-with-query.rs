// A path template has no query or fragment: `#[query]` parameters make the query.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Search {
    #[get("/search?q=rust")]
    async fn search(&self) -> Result<String, ApiError>;
}

fn main() {}
