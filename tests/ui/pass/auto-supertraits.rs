//! The client is `Send + Sync + Clone + Debug`: those supertraits hold for it.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users: Send + Sync + Clone + std::fmt::Debug {
    #[get("/users")]
    async fn list(&self) -> Result<String, ApiError>;
}

fn main() {
    fn shared<T: Users + 'static>(_: T) {}
    shared(UsersClient::builder().base_url("http://h.test").build().expect("builds"));
}
