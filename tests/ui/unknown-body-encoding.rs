// A body encoding is `json`, `form`, `raw` or `stream`: an unknown one lists them.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Files {
    #[put("/files")]
    async fn upload(&self, #[body(xml)] body: String) -> Result<(), ApiError>;
}

fn main() {}
