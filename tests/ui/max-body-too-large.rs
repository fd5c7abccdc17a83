// A size of a whole number and a unit that does not fit in a `u64` of bytes is too
// large, not malformed: "expected a whole number of bytes with an optional unit" would
// tell the user to write what they wrote.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "1s"))]
pub trait Files {
    #[get("/file")]
    #[max_body("17179869184GiB")]
    async fn file(&self) -> Result<String, ApiError>;
}

fn main() {}
