// A parameter fills one `{name}`: the same name twice is refused.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{id}/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
