// An endpoint cannot be an `unsafe fn`.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{id}")]
    async unsafe fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
