use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"), retry(max = 2, on = [503, 301]))]
pub trait Users {
    #[get("/users/{id}")]
    #[retry(on = [200])]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
