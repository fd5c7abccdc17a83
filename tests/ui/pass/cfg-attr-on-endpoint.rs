//! A `#[cfg_attr(...)]` on an endpoint, such as a doc line or a lint level that depends
//! on a feature, never removes the method: it is not a `#[cfg]`, and the client still
//! implements every method of the trait. Such attributes stay on the trait's method,
//! as other attributes that are not the macro's do.
#![allow(unexpected_cfgs)]

use resilient_api::{ApiError, resilient_api};

#[resilient_api(timeout(attempt = "3s"))]
pub trait Users {
    /// One user.
    #[get("/users/{id}")]
    #[cfg_attr(docsrs, doc = "Available with the `admin` feature.")]
    #[cfg_attr(not(any()), allow(clippy::needless_lifetimes))]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

fn main() {
    let _ = UsersClient::builder();
}
