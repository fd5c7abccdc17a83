use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(
        &self,
        #[query] id: u64,
        #[header] token: &str,
        #[path] org: &str,
        #[query]
        #[header("X-Page")]
        page: u32,
    ) -> Result<String, ApiError>;
}

fn main() {}
