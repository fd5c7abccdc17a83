use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    /// A policy marks an endpoint, so this is one without a verb, and with a body.
    #[retry(max = 1)]
    async fn first(&self) -> Result<String, ApiError> {
        Ok(String::new())
    }
}

fn main() {}
