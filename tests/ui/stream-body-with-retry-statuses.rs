// A streamed body is never retried, so a method with `#[body(stream)]` that names
// retry statuses or a backoff, even without a `max`, asks for what cannot happen.
use resilient_api::{ApiError, BodyStream, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Files {
    #[put("/files/{name}")]
    #[retry(on = [503], backoff = fixed(delay = "1s"))]
    async fn upload(&self, name: &str, #[body(stream)] body: BodyStream) -> Result<(), ApiError>;
}

fn main() {}
