// An endpoint cannot have an ABI.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{id}")]
    async extern "C" fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
