use resilient_api::{ApiError, resilient_api};

pub trait Marker {}

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users: Marker {
    #[get("/users")]
    async fn list(&self) -> Result<String, ApiError>;
}

fn main() {}
