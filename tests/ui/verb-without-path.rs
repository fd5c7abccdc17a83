// A verb attribute needs its path template.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get]
    async fn users(&self) -> Result<String, ApiError>;
}

fn main() {}
