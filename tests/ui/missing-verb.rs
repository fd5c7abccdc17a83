use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    /// The path is there, the verb is not.
    async fn user(&self, #[query] id: u64) -> Result<String, ApiError>;
}

fn main() {}
