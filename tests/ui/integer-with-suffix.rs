// An integer with a suffix is the wrong kind of literal: `queue = 1k` is read as a
// queue of 1 (the suffix is dropped), not of a thousand, and `max = 3s` as 3 retries.
// Each is refused at the literal, as `max = "3"` is.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"), bulkhead(concurrency = 8, queue = 1k))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
