use resilient_api::{ApiError, resilient_api};

#[resilient_api(base_url = "api.example.com", timeout(attempt = "1s"))]
pub trait Relative {
    #[get("/a")]
    async fn a(&self) -> Result<(), ApiError>;
}

#[resilient_api(base_url = "https://api.example.com/v1?key=abc", timeout(attempt = "1s"))]
pub trait Query {
    #[get("/a")]
    async fn a(&self) -> Result<(), ApiError>;
}

#[resilient_api(base_url = "https://ada:hunter2@api.example.com", timeout(attempt = "1s"))]
pub trait Credentials {
    #[get("/a")]
    async fn a(&self) -> Result<(), ApiError>;
}

#[resilient_api(base_url = "https://api.example.com/users/@me", timeout(attempt = "1s"))]
pub trait AtInPath {
    #[get("/a")]
    async fn a(&self) -> Result<(), ApiError>;
}

fn main() {
    let _ = AtInPathClient::builder();
}
