// A check needs a value to look at: a `()` result has none, and a streamed result's
// body is read after the call returns, so neither can be checked.
use resilient_api::{ApiError, Response, ResponseStream, resilient_api};

fn check<T>(_: &T) -> Result<(), String> {
    Ok(())
}

#[resilient_api(timeout(attempt = "3s"))]
pub trait Files {
    #[delete("/file")]
    #[parse(with = check)]
    async fn delete(&self) -> Result<(), ApiError>;

    #[get("/file")]
    #[parse(with = check)]
    async fn download(&self) -> Result<ResponseStream, ApiError>;

    #[get("/file")]
    #[parse(with = check)]
    async fn download_with_headers(&self) -> Result<Response<ResponseStream>, ApiError>;
}

fn main() {}
