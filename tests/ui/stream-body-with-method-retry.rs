// A streamed body cannot be replayed: a method with `#[body(stream)]` cannot ask for retries.
use resilient_api::{ApiError, BodyStream, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Files {
    #[put("/files/{name}")]
    #[retry(max = 2)]
    async fn upload(&self, name: &str, #[body(stream)] body: BodyStream) -> Result<(), ApiError>;
}

fn main() {}
