use resilient_api::{ApiError, resilient_api};

/// A required key named without a value is reported as that alone: "needs a rate" or
/// "needs a delay" would be wrong, the key is there.
#[resilient_api(timeout(attempt = "3s"), rate_limit(per_second))]
pub trait Search {
    #[get("/search")]
    #[hedge(delay)]
    async fn search(&self) -> Result<String, ApiError>;
}

fn main() {}
