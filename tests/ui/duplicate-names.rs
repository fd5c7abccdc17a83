use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Search {
    #[get("/search")]
    async fn search(
        &self,
        #[query] q: &str,
        #[query("q")] other: &str,
        #[header("X-Trace")] trace: &str,
        #[header("x-trace")] again: &str,
    ) -> Result<String, ApiError>;
}

#[resilient_api(timeout(attempt = "3s"), headers("Idempotency-Key" = "fixed"))]
pub trait Charges {
    #[post("/charges")]
    #[idempotency_key]
    async fn charge(&self, #[body(raw)] body: &[u8]) -> Result<String, ApiError>;
}

fn main() {}
