use resilient_api::{resilient_api, ApiError};

#[resilient_api(timeout(attempt = "1s"))]
pub trait Files {
    #[get("/file")]
    #[max_body("4 megabytes")]
    async fn file(&self) -> Result<String, ApiError>;
}

fn main() {}
