// A duration of an integer and a unit that does not fit (in milliseconds, a `u64`) is
// too large: "malformed: expected an integer and a unit" tells the user to write what
// they wrote. `int` says "expected an integer in `0..=4294967295`" and `per_second`
// "is too large" in the same case.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s", total = "99999999999999999999ms"))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
