// `timeout = "3s"` is one mistake (the policy is a list of keys): reported as that
// alone, not once more per method as "has no attempt timeout", which only repeats it
// (an `attempt` may well be what the user meant to write there).
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout = "3s")]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;

    #[get("/users")]
    async fn users(&self) -> Result<String, ApiError>;
}

fn main() {}
