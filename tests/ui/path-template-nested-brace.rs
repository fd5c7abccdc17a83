// `{` cannot open inside `{...}` in a path template.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{{id}}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
