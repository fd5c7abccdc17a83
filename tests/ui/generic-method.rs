use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user<T: std::fmt::Display + Send>(&self, id: T) -> Result<String, ApiError>;
}

fn main() {}
