// A suffix on a string literal is refused, as on an integer: the macro reads the
// string's value, so `"3s"ms` would silently be three seconds and the suffix lost.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"ms), base_url = "https://api.example.com"x)]
pub trait Users {
    #[get("/users/{id}"p)]
    #[partition("users"x)]
    async fn user(&self, id: u64, #[header("X-Trace"h)] trace: &str) -> Result<String, ApiError>;
}

fn main() {}
