// `Content-Length` and `Transfer-Encoding` frame the body: the client sets them from
// the body it sends, so neither can be declared, in `headers(...)` or as a parameter.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"), headers("Content-Length" = "0"))]
pub trait Uploads {
    #[put("/files/{id}")]
    async fn put(
        &self,
        id: u64,
        #[body] data: Vec<u8>,
        #[header("transfer-encoding")] te: &str,
    ) -> Result<(), ApiError>;
}

fn main() {}
