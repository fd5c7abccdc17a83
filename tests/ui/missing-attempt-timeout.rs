use resilient_api::{ApiError, resilient_api};

#[resilient_api(base_url = "https://api.example.com", timeout(total = "15s"))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
