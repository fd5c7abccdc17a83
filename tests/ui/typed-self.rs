// An endpoint takes `&self`: a typed receiver such as `self: Box<Self>` is refused.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(self: Box<Self>, id: u64) -> Result<String, ApiError>;
}

fn main() {}
