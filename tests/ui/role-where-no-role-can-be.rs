// A parameter role on `self`, or on a parameter of a provided method (not an
// endpoint), is the macro's error at the attribute, not rustc's "cannot find
// attribute".
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users")]
    async fn users(#[query] &self) -> Result<String, ApiError>;

    fn page_size(&self, #[query] size: u32) -> u32 {
        size
    }
}

fn main() {}
