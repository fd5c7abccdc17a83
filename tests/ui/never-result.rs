// An endpoint that returns `!` is refused as not returning a `Result`, and only so:
// not also as the experimental `!` type of a future's output.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Jobs {
    #[post("/jobs/run-forever")]
    async fn run(&self) -> !;

    #[get("/jobs")]
    async fn jobs(&self) -> Result<String, ApiError>;
}

fn main() {}
