// `#[cfg]` on an endpoint is refused: the client implements every method of the trait.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{id}")]
    #[cfg(feature = "admin")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
