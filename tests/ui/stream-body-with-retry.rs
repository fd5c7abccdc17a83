use resilient_api::{ApiError, BodyStream, resilient_api};

#[resilient_api(timeout(attempt = "3s"), retry(max = 3))]
pub trait Files {
    #[put("/files/{name}")]
    async fn upload(&self, name: &str, #[body(stream)] body: BodyStream) -> Result<(), ApiError>;
}

fn main() {}
