use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Repos {
    #[post("/repos/{id}/clone")]
    #[idempotent]
    async fn clone(&self, id: u64) -> Result<(), ApiError>;

    #[get("/repos/{id}/format")]
    async fn fmt(&self, id: u64) -> Result<String, ApiError>;

    #[get("/repos/{id}")]
    async fn clone_from(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
