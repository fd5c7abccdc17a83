// A provided method (a body of its own, not an endpoint) named like a method of the
// client is never reached by `client.name()`: the client's own method is called, or
// the call is ambiguous with a trait the client implements. A provided function
// without `self` is not called that way, and may share a name.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Status {
    #[get("/health")]
    async fn health(&self) -> Result<String, ApiError>;

    fn circuit_state(&self) -> &'static str {
        "mine"
    }

    fn clone(&self) -> u8 {
        0
    }

    fn builder() -> u8 {
        0
    }
}

fn main() {}
