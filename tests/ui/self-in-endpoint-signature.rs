// `Self` in an endpoint's types is the generated client, neither sent nor decoded:
// one error at `Self`, and code using the client adds none.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/me")]
    async fn me(&self) -> Result<Self, ApiError>;

    #[put("/users/me")]
    async fn update(&self, #[body] user: &Self) -> Result<(), ApiError>;
}

async fn use_it(api: &UsersClient) {
    let _ = api.me().await;
}

fn main() {
    let _ = use_it;
}
