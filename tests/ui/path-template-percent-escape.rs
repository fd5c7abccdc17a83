use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Files {
    // `%{a}%{b}` filled with `2e` and `2e` would be sent as `%2e%2e`: `..`.
    #[get("/v1/x/%{a}%{b}/y")]
    async fn file(&self, a: &str, b: &str) -> Result<String, ApiError>;
}

fn main() {}
