//! Generated code names everything by absolute path and hides its locals: local
//! modules named `core` and `std`, and types or parameters named like the generated
//! code's own items, change nothing.
#![allow(dead_code, non_camel_case_types)]

mod core {}
mod std {}

// Names the expansion must not pick up by accident.
struct Option;
struct Some;
struct None;
struct Future;
struct Send;
struct Clone;
struct Debug;
struct Handle;
struct RequestBuilder;
trait GeneratedClient {}
fn ms() {}

type Result<T, E> = ::core::result::Result<T, E>;

#[resilient_api::resilient_api(timeout(attempt = "3s"), retry(max = 1))]
pub trait Users {
    #[get("/users/{__req}")]
    async fn user(
        &self,
        __req: u64,
        #[query] __handle: &str,
        #[header("X-Value")] __value: ::core::option::Option<&str>,
    ) -> Result<::std::string::String, resilient_api::ApiError>;
}

fn main() {
    let _ = UsersClient::builder();
}
