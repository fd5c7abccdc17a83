// An endpoint takes `&self`: the client is shared, never borrowed mutably.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&mut self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
