use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Search {
    #[get("/search")]
    #[partition("search")]
    #[breaker(failures = 3)]
    async fn search(&self, #[query] q: &str) -> Result<String, ApiError>;

    #[get("/suggest")]
    #[partition("search")]
    #[breaker(failures = 10)]
    async fn suggest(&self, #[query] q: &str) -> Result<String, ApiError>;
}

fn main() {}
