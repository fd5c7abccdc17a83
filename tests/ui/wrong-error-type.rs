use resilient_api::{ApiError, resilient_api};

#[derive(Debug)]
pub struct MyError;

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, MyError>;

    #[get("/me")]
    async fn me(&self) -> Result<String, resilient_api::ApiError>;

    #[get("/health")]
    async fn health(&self) -> Result<(), ApiError>;
}

fn main() {}
