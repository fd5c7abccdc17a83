// A result that borrows (a method's lifetime, a reference) is one clear error at the
// type: a decoded value is the caller's to keep after the call. Before, it was
// "lifetime may not live long enough" from inside the generated code.
use std::borrow::Cow;

use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Names {
    #[get("/names/{id}")]
    async fn name<'a>(&'a self, id: u64) -> Result<Cow<'a, str>, ApiError>;

    #[get("/names")]
    async fn all(&self) -> Result<Vec<&str>, ApiError>;

    #[get("/names/short")]
    async fn short(&self) -> Result<Cow<str>, ApiError>;

    #[get("/names/iter")]
    async fn iter(&self) -> Result<Box<dyn Iterator<Item = &str> + Send>, ApiError>;

    #[get("/names/item")]
    async fn item(&self) -> Result<<Vec<&str> as IntoIterator>::Item, ApiError>;

    // Owned: accepted (the `&` of a length is no reference).
    #[get("/names/mask")]
    async fn mask(&self) -> Result<[u8; 3 & 7], ApiError>;

    #[get("/names/first")]
    async fn first(&self) -> Result<Cow<'static, str>, ApiError>;
}

fn main() {}
