use resilient_api::{ApiError, resilient_api};

// Everything after the syntax error is unknown, the attempt timeout included: the
// methods get no "has no attempt timeout" error.
#[resilient_api(base_url = "https://api.example.com" "/v1", timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;

    #[get("/users")]
    #[timeout(total = "10s" "x", attempt = "3s")]
    async fn users(&self) -> Result<String, ApiError>;
}

fn main() {}
