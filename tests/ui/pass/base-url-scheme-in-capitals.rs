//! A URL's scheme is read in any case (RFC 3986 §3.1), as the client's `build()`
//! reads it: `HTTPS://` is an `https://` base URL.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(base_url = "HTTPS://api.example.com/v1", timeout(attempt = "1s"))]
pub trait Shouting {
    #[get("/a")]
    async fn a(&self) -> Result<String, ApiError>;
}

#[resilient_api(base_url = "Http://localhost:8080", timeout(attempt = "1s"))]
pub trait Mixed {
    #[get("/a")]
    async fn a(&self) -> Result<String, ApiError>;
}

fn main() {
    let api = ShoutingClient::builder().build().expect("a valid base URL");
    let _ = api;
    let _ = MixedClient::builder().build().expect("a valid base URL");
}
