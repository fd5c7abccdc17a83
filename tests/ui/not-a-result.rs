use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Option<String>;

    #[delete("/users/{id}")]
    async fn remove(&self, id: u64);

    #[get("/me")]
    async fn me(&self) -> Result<String, ApiError>;
}

fn main() {}
