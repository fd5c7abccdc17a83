// A body has one encoding.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Files {
    #[put("/files")]
    async fn upload(&self, #[body(form, raw)] body: Vec<u8>) -> Result<(), ApiError>;
}

fn main() {}
