//! User code the expansion must take as it is: methods handed over by another macro's
//! arguments (their `self` is the caller's), a check named from `Self::`, a type named
//! `str` in scope, a deprecated trait, and lint levels inside a method's `cfg_attr`
//! (nested too), none of which may fire on the generated code.
#![deny(warnings)]

use resilient_api::{ApiError, resilient_api};

pub mod macro_rules_methods {
    use super::*;

    macro_rules! api {
        ($name:ident { $($items:tt)* }) => {
            #[resilient_api(timeout(attempt = "1s"))]
            pub trait $name { $($items)* }
        };
    }

    api! {
        Users {
            #[get("/users/{id}")]
            async fn user(&self, id: u64) -> Result<String, ApiError>;
        }
    }

    pub fn build() {
        let _ = UsersClient::builder();
    }
}

pub mod parse_with_self {
    use super::*;

    #[resilient_api(timeout(attempt = "1s"))]
    pub trait Checked {
        #[get("/a")]
        #[parse(with = Self::non_empty)]
        async fn a(&self) -> Result<String, ApiError>;

        fn non_empty(s: &str) -> Result<(), &'static str> {
            if s.is_empty() { Err("empty") } else { Ok(()) }
        }
    }

    pub fn build() {
        let _ = CheckedClient::builder();
    }
}

#[allow(dead_code, non_camel_case_types)]
pub mod shadow_str {
    struct str;

    #[::resilient_api::resilient_api(timeout(attempt = "1s"))]
    pub trait ShadowStr {
        #[get("/a")]
        async fn a(&self) -> Result<String, ::resilient_api::ApiError>;
    }

    pub fn build() {
        let _ = ShadowStrClient::builder();
    }
}

pub mod deprecated_trait {
    use super::*;

    /// The old one.
    #[deprecated = "use `UsersV2`"]
    #[resilient_api(timeout(attempt = "1s"))]
    pub trait UsersV1 {
        #[get("/users/{id}")]
        async fn user(&self, id: u64) -> Result<String, ApiError>;
    }

    pub fn build() {
        let _ = UsersV1Client::builder();
    }
}

pub mod cfg_attr_allow_on_method {
    use super::*;

    #[resilient_api(timeout(attempt = "1s"))]
    pub trait Users {
        #[get("/users/{userId}")]
        #[cfg_attr(all(), allow(non_snake_case))]
        async fn user(&self, userId: u64) -> Result<String, ApiError>;

        #[get("/teams/{teamId}")]
        #[cfg_attr(all(), cfg_attr(not(any()), allow(non_snake_case)))]
        async fn team(&self, teamId: u64) -> Result<String, ApiError>;
    }

    pub fn build() {
        let _ = UsersClient::builder();
    }
}

fn main() {
    macro_rules_methods::build();
    parse_with_self::build();
    shadow_str::build();
    deprecated_trait::build();
    cfg_attr_allow_on_method::build();
}
