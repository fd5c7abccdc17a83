// The attribute language written on the trait itself, after `#[resilient_api]`: each
// one says where it belongs (rustc alone would say "cannot find attribute").
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
#[retry(max = 2)]
#[base_url = "https://api.example.com"]
#[idempotent]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
