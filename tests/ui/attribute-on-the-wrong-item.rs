// The attribute language on the wrong item of an endpoint: the trait's keys on a
// method, a role on the method, a method's attribute on a parameter. Each says where
// it belongs (rustc alone would say "cannot find attribute").
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users")]
    #[headers("Accept" = "application/json")]
    #[base_url = "https://api.example.com"]
    #[query]
    async fn users(&self, #[retry(max = 1)] #[query] page: u32) -> Result<String, ApiError>;

    #[get("/users/{id}")]
    async fn user(&self, #[idempotent] id: u64) -> Result<String, ApiError>;
}

fn main() {}
