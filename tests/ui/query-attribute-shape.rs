// `#[query(...)]` takes a name and `secret`, nothing else.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Search {
    #[get("/search")]
    async fn search(&self, #[query("q", public)] q: &str) -> Result<String, ApiError>;
}

fn main() {}
