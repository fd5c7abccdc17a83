// An attribute that takes one string, given none or two: said as what it expects,
// not as syn's "unexpected end of input" or "unexpected token".
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get()]
    async fn users(&self) -> Result<String, ApiError>;

    #[get("/users/{id}", "/people/{id}")]
    #[partition()]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
