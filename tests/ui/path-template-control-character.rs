// URL parsers drop tab, newline and carriage return, so a template holding one is not
// the path that is sent: here `.\t.` would become a `..` segment after the check.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(base_url = "https://api.example.com/v1/", timeout(attempt = "3s"))]
pub trait Admin {
    #[get("/a/.\t./admin")]
    async fn admin(&self) -> Result<String, ApiError>;
}

fn main() {}
