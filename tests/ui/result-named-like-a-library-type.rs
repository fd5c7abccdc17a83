// A bare `Response<T>` in a result is read as `resilient_api::Response<T>`: a type of
// the user's own named so fails at the type, saying how to name it. Before, the error
// was a mismatch inside the generated code ("similar names, but distinct types").
use resilient_api::{ApiError, resilient_api};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Response<T> {
    pub data: T,
}

pub mod models {
    #[derive(Debug, serde::Deserialize)]
    pub struct Bytes(pub u64);
}

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<Response<u64>, ApiError>;

    // Through a module of the user's, not from the crate's root: read as the
    // library's too (a renamed crate is named so).
    #[get("/users/{id}/usage")]
    async fn usage(&self, id: u64) -> Result<models::Bytes, ApiError>;
}

fn main() {}
