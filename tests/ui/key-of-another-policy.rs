// A key written in the wrong list: the unknown key also says which list it belongs in.
use resilient_api::{ApiError, resilient_api};

#[resilient_api(attempt = "3s", retry(failures = 3))]
pub trait Users {
    #[get("/users/{id}")]
    #[retry(delay = "1s")]
    #[hedge(delay = "50ms", attempt = "1s")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {}
