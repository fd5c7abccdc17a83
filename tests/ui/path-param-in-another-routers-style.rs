// `:id` and `<id>` are how other routers write a path parameter; here they are text,
// and the parameter's missing role says to write `{id}`.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/:id")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;

    #[get("/teams/<team>/members")]
    async fn members(&self, team: &str) -> Result<String, ApiError>;
}

fn main() {}
