// A generic trait is refused at its generics, and nothing else: the stub client
// implements it as generic as it is, so code using the client type-checks.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users<'a, T: Clone>
where
    T: Send,
{
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn takes<'a>(_: &impl Users<'a, u8>) {}

async fn use_it(api: &UsersClient) {
    takes(api);
    let _ = Users::<u8>::user(api, 1).await;
}

fn main() {
    let _ = use_it;
}
