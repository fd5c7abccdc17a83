// `client` and `crate` take strings: a literal of another kind is said in plain words.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"), client = 5, crate = true)]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
