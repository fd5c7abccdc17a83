use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Blog {
    #[get("/users/{id}/posts/{post}")]
    async fn post(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
