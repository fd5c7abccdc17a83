//! A type of the user's own that shares a name the macro reads (`Response`, `Bytes`)
//! is decoded from JSON like any other when it is named by a path from the crate's
//! root or the module; the library's types are read through any other path, a
//! renamed crate's included.

use resilient_api as ra;
use resilient_api::{ApiError, resilient_api};
use serde::Deserialize;

/// The API's own envelope: `{"data": ...}`.
#[derive(Debug, Deserialize)]
pub struct Response<T> {
    pub data: T,
}

#[derive(Debug, Deserialize)]
pub struct User {
    pub id: u64,
}

pub mod deps {
    pub use ::resilient_api;
}

pub mod api {
    /// A byte count the API reports.
    #[derive(Debug, serde::Deserialize)]
    pub struct Bytes {
        pub total: u64,
    }
}

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<self::Response<User>, ApiError>;

    #[get("/users")]
    async fn users(&self) -> Result<crate::Response<Vec<User>>, ApiError>;

    #[get("/usage")]
    async fn usage(&self) -> Result<crate::api::Bytes, ApiError>;

    // The library's, named by its path: a wrapper with the status and headers.
    #[get("/users/{id}/raw")]
    async fn raw(&self, id: u64) -> Result<resilient_api::Response<resilient_api::Bytes>, ApiError>;

    #[get("/users/{id}/text")]
    async fn text(&self, id: u64) -> Result<ra::Response<std::string::String>, ApiError>;

    #[get("/users/{id}/bytes")]
    async fn bytes(&self, id: u64) -> Result<ra::Bytes, ApiError>;

    // Through the user's crate, but by way of the library's name: the library's.
    #[get("/users/{id}/head")]
    async fn head(&self, id: u64) -> Result<crate::deps::resilient_api::Response<()>, ApiError>;
}

async fn used(api: UsersClient) -> Result<(), ApiError> {
    let user: Response<User> = api.user(1).await?;
    let users: Response<Vec<User>> = api.users().await?;
    let usage: api::Bytes = api.usage().await?;
    let raw = api.raw(1).await?;
    let _: ra::Response<String> = api.text(1).await?;
    let _: ra::Bytes = api.bytes(1).await?;
    let _: ra::Response<()> = api.head(1).await?;
    let _: (u64, usize, u64, u16) = (user.data.id, users.data.len(), usage.total, raw.status().as_u16());
    Ok(())
}

fn main() {
    let _ = used;
}
