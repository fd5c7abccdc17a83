use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Reports {
    // A `%` starts a percent-encoded byte: `/100%/x` is no valid URI.
    #[get("/reports/100%/{id}")]
    async fn report(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
