// A `failure_rate` of the wrong literal kind is one mistake, reported at the literal.
// The `window` beside it is no second mistake: "add `failure_rate = 0.5`" asks for a
// key that is already there.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(
    timeout(attempt = "3s"),
    breaker(failure_rate = "0.5", window = "5s")
)]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
