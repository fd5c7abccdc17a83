// A `#[cfg]` on a parameter is refused, and taken out: a call that passes the
// argument adds no "this method takes 0 arguments" about the stub client.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Search {
    #[get("/search")]
    async fn search(&self, #[cfg(feature = "never")] #[query] q: &str) -> Result<String, ApiError>;
}

async fn use_it(api: &SearchClient) {
    let _ = api.search("rust").await;
}

fn main() {
    let _ = use_it;
}
