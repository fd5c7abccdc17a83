// `#[idempotency_key]` makes the key anew for every call: a parameter that also sets
// that header would give the request two keys.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Charges {
    #[post("/charges")]
    #[idempotency_key]
    async fn charge(
        &self,
        #[header("idempotency-key")] key: &str,
        #[body(raw)] body: &[u8],
    ) -> Result<String, ApiError>;
}

fn main() {}
