use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Files {
    #[post("/files")]
    async fn upload(&self, #[body(raw = "bytes")] bytes: Vec<u8>) -> Result<(), ApiError>;

    #[post("/forms")]
    async fn form(&self, #[body(form(strict))] form: &[(&str, &str)]) -> Result<(), ApiError>;
}

fn main() {}
