use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[put("/users/{id}")]
    async fn update(
        &self,
        id: u64,
        #[body] name: &str,
        #[body] email: &str,
    ) -> Result<(), ApiError>;
}

fn main() {}
