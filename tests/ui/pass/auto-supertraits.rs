//! The client is a sized `'static` struct that is `Send + Sync + Unpin + Clone +
//! Debug`: those supertraits hold for it, and so do `Sized` and `Any`.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users: Send + Sync + Unpin + Clone + std::fmt::Debug {
    #[get("/users")]
    async fn list(&self) -> Result<String, ApiError>;
}

#[resilient_api(timeout(attempt = "3s"))]
pub trait Accounts: Sized + std::any::Any {
    #[get("/accounts")]
    async fn list(&self) -> Result<String, ApiError>;
}

fn main() {
    fn shared<T: Users + 'static>(_: T) {}
    shared(UsersClient::builder().base_url("http://h.test").build().expect("builds"));
    fn sized<T: Accounts>(_: T) {}
    sized(AccountsClient::builder().base_url("http://h.test").build().expect("builds"));
}
