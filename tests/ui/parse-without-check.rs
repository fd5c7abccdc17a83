// `#[parse]` needs its check: without the list, with an empty list, with an unknown
// key or a string for a path (serde's `deserialize_with = "..."` takes one), each is
// one error at the token.
use resilient_api::{ApiError, resilient_api};

fn check(_: &String) -> Result<(), String> {
    Ok(())
}

#[resilient_api(timeout(attempt = "3s"))]
pub trait Docs {
    #[get("/a")]
    #[parse]
    async fn a(&self) -> Result<String, ApiError>;

    #[get("/b")]
    #[parse()]
    async fn b(&self) -> Result<String, ApiError>;

    #[get("/c")]
    #[parse(using = check)]
    async fn c(&self) -> Result<String, ApiError>;

    #[get("/d")]
    #[parse(with = "check")]
    async fn d(&self) -> Result<String, ApiError>;

    #[get("/e")]
    #[parse(with = 3)]
    async fn e(&self) -> Result<String, ApiError>;
}

fn main() {}
