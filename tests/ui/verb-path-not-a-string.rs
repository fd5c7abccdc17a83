// The path template is a string literal, not a name.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get(users)]
    async fn users(&self) -> Result<String, ApiError>;
}

fn main() {}
