//! `crate = "..."` points generated code at a re-export of the runtime, and a
//! private trait gets a private client; `attempt = "none"` is an explicit choice.

mod runtime {
    pub use ::resilient_api::*;
}

mod api {
    use crate::runtime::{ApiError, resilient_api};

    #[resilient_api(crate = "crate::runtime", client = "Health")]
    pub(crate) trait HealthApi {
        #[get("/health")]
        #[timeout(attempt = "none")]
        async fn health(&self) -> Result<(), ApiError>;

        #[get("/version")]
        #[timeout(attempt = "250ms", total = "1s")]
        async fn version(&self) -> Result<String, ApiError>;

        // The runtime's types, named through the `crate` path.
        #[get("/status")]
        #[timeout(attempt = "1s")]
        async fn status(&self) -> Result<crate::runtime::Response<crate::runtime::Bytes>, ApiError>;
    }

    pub(crate) fn client() -> crate::runtime::ClientBuilder<Health> {
        Health::builder()
    }
}

fn main() {
    let _ = api::client();
}
