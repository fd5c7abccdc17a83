// `#[hedge]` without its list is one mistake, reported as that alone: "`hedge` needs a
// delay" would only repeat it (as `#[hedge(delay)]` and a syntax error in the list
// are reported alone).
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{id}")]
    #[hedge]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
