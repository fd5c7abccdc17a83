// A streamed body cannot be replayed: a method with `#[body(stream)]` cannot be hedged.
use resilient_api::{ApiError, BodyStream, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Files {
    #[put("/files/{name}")]
    #[hedge(delay = "50ms")]
    async fn upload(&self, name: &str, #[body(stream)] body: BodyStream) -> Result<(), ApiError>;
}

fn main() {}
