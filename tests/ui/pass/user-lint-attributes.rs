//! A lint the user silences on the trait or on a method stays silent on the client
//! generated from it: the client's name comes from the trait's, and its methods repeat
//! the parameters' names and types.
#![deny(warnings, rust_2018_idioms)]

use std::borrow::Cow;

use resilient_api::{ApiError, resilient_api};
use serde::Serialize;

#[deprecated = "use `New`"]
#[derive(Serialize)]
pub struct Old {
    pub a: u32,
}

#[resilient_api(timeout(attempt = "3s"))]
#[allow(non_camel_case_types)]
pub trait users {
    #[get("/users/{userId}")]
    #[allow(non_snake_case, deprecated)]
    async fn user(&self, userId: u64, #[query] old: &Old) -> Result<String, ApiError>;

    #[get("/search")]
    #[expect(elided_lifetimes_in_paths, reason = "the query is borrowed for the call")]
    async fn search(&self, #[query] q: Cow<str>) -> Result<String, ApiError>;
}

fn main() {
    let _ = usersClient::builder();
}
