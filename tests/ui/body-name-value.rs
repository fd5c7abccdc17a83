// `#[body = ...]` is not a form of `#[body]`.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Files {
    #[put("/files")]
    async fn upload(&self, #[body = "form"] body: String) -> Result<(), ApiError>;
}

fn main() {}
