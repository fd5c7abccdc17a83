// `ToOwned`, `Into` and `TryInto` are in the prelude and implemented for every
// (`Clone`) type, the generated client included, and `Borrow`, `BorrowMut` and `Any`
// are `std`'s for every (`'static`) type: `client.to_owned()` would be
// ambiguous, and `client.into()` would call `Into::into`, as `client.clone()` is
// ambiguous (endpoint-named-like-a-derived-method.rs).
use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Repos {
    #[get("/repos/owned")]
    async fn to_owned(&self) -> Result<String, ApiError>;

    #[get("/repos/into")]
    async fn into(&self) -> Result<String, ApiError>;

    #[get("/repos/try-into")]
    async fn try_into(&self) -> Result<String, ApiError>;

    #[get("/repos/clone-into")]
    async fn clone_into(&self) -> Result<String, ApiError>;

    #[get("/repos/borrow")]
    async fn borrow(&self) -> Result<String, ApiError>;

    #[get("/repos/borrow-mut")]
    async fn borrow_mut(&self) -> Result<String, ApiError>;

    #[get("/repos/type-id")]
    async fn type_id(&self) -> Result<String, ApiError>;
}

fn main() {}
