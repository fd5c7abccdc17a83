// `#[cfg]` on an endpoint's parameter is refused.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users")]
    async fn users(&self, #[cfg(unix)] #[query] page: u32) -> Result<String, ApiError>;
}

fn main() {}
