use resilient_api::{ApiError, resilient_api};

#[resilient_api(base_url = "https://api.example.com/tenant/42", timeout(attempt = "3s"))]
pub trait Users {
    #[delete("/../../admin/users/{id}")]
    async fn remove(&self, id: u64) -> Result<(), ApiError>;

    #[get("/files\\{name}")]
    async fn file(&self, name: &str) -> Result<String, ApiError>;
}

fn main() {}
