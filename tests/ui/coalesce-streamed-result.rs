// A streamed result is read once, by one caller: it cannot be shared. The runtime
// never coalesces a call whose result is a `ResponseStream` (two identical concurrent
// calls are two dispatches), so `#[coalesce]` on such a method is refused, as it is
// with a `#[body(stream)]`, instead of compiling into a method whose generated docs
// say "identical concurrent calls share one execution" and whose calls never do.
use resilient_api::{ApiError, ResponseStream, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Feed {
    #[get("/feed")]
    #[coalesce]
    async fn feed(&self) -> Result<ResponseStream, ApiError>;
}

fn main() {}
