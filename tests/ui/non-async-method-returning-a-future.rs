// An endpoint written as `fn ... -> impl Future<Output = R>` is not `async`: that is
// the one error. Its result `R` is read for the other rules, and code calling the
// client adds no error.
use resilient_api::{ApiError, resilient_api};
use std::future::Future;

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{id}")]
    fn user(&self, id: u64) -> impl Future<Output = Result<String, ApiError>> + Send;

    #[get("/users")]
    async fn users(&self) -> Result<Vec<String>, ApiError>;
}

async fn use_it(api: &UsersClient) {
    let _ = api.user(1).await;
    let _ = api.users().await;
}

fn main() {
    let _ = use_it;
}
