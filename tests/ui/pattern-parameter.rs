use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, ref id: u64) -> Result<String, ApiError>;

    #[get("/search")]
    async fn search(&self, #[query] ref mut q: String) -> Result<String, ApiError>;

    #[get("/pairs")]
    async fn pairs(&self, #[query] (a, b): (u32, u32)) -> Result<String, ApiError>;
}

fn main() {}
