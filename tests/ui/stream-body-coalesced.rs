// A streamed body cannot be compared or shared: a method with `#[body(stream)]` cannot be coalesced.
use resilient_api::{ApiError, BodyStream, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Files {
    #[put("/files/{name}")]
    #[coalesce]
    async fn upload(&self, name: &str, #[body(stream)] body: BodyStream) -> Result<(), ApiError>;
}

fn main() {}
