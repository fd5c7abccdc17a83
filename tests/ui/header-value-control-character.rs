use resilient_api::{ApiError, resilient_api};

// Every one of these would make the client's `build()` fail.
#[resilient_api(
    timeout(attempt = "3s"),
    headers(
        "X-Bell" = "ring\u{7}",
        "X-Delete" = "\u{7f}",
        "X-Newline" = "a\nb",
        "X-Tab" = "a\tb",
        "X-Latin" = "café",
    )
)]
pub trait Users {
    #[get("/users")]
    async fn list(&self) -> Result<String, ApiError>;
}

fn main() {}
