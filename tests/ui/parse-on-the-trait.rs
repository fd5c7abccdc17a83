// A check is of one method's result: it belongs on the method.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"), parse(with = check))]
pub trait Docs {
    #[get("/a")]
    async fn a(&self) -> Result<String, ApiError>;
}

fn main() {}
