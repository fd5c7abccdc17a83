// Zero where zero makes no sense: a breaker that closes as it opens, a hedge that
// starts every attempt at once.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"), breaker(reset = "0s"))]
pub trait Search {
    #[get("/search")]
    #[hedge(delay = "0ms", max = 3)]
    async fn search(&self, #[query] q: &str) -> Result<String, ApiError>;

    #[get("/suggest")]
    #[breaker(failures = 3, reset = "0ms")]
    async fn suggest(&self, #[query] q: &str) -> Result<String, ApiError>;
}

fn main() {}
