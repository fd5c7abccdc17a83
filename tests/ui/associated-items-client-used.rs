// Associated consts and types are refused, each at itself (an endpoint attribute on
// one included), and nothing else: the stub client still implements the trait, so
// code calling its endpoints type-checks.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    type Id;

    #[get("/version")]
    const VERSION: u32;

    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

async fn use_it(api: &UsersClient) {
    let _ = api.user(1).await;
}

fn main() {
    let _ = use_it;
}
