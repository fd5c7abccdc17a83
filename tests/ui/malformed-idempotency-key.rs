// A malformed `#[idempotency_key(...)]` is one mistake, reported at its argument. The
// method still asks for a key: "not idempotent: ... add `#[idempotency_key]`" on its
// hedge asks for the attribute that is already there.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Payments {
    #[post("/charges")]
    #[idempotency_key(X-Charge-Key)]
    #[hedge(delay = "50ms")]
    async fn charge(&self) -> Result<String, ApiError>;
}

fn main() {}
