// `{...}` in a path template names a parameter: an identifier.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{1st}")]
    async fn user(&self) -> Result<String, ApiError>;
}

fn main() {}
