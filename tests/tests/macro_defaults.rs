//! The macro repeats the runtime's defaults (it needs them at compile time for its
//! checks and for the generated policy docs). These tests fail if the two drift apart.

use resilient_api::__private::{Backoff, BreakerConfig, RetryPolicy};
use resilient_api::client::GeneratedClient;
use resilient_api::{ApiError, resilient_api};

/// An API that declares nothing but its attempt timeout.
#[resilient_api(timeout(attempt = "1s"))]
pub trait Plain {
    #[get("/a")]
    async fn a(&self) -> Result<(), ApiError>;

    #[get("/b")]
    #[retry(backoff = exponential_jitter(base = "200ms"))]
    #[breaker(failures = 5)]
    async fn b(&self) -> Result<(), ApiError>;
}

#[test]
fn an_endpoint_that_declares_nothing_gets_the_runtime_retry_defaults() {
    let spec = PlainClient::API.endpoints[0];
    assert_eq!(spec.policy.retry, RetryPolicy::DEFAULT);
    assert_eq!(spec.policy.breaker, None);
    assert_eq!(spec.policy.bulkhead, None);
    assert_eq!(spec.policy.total_timeout, None);
}

#[test]
fn fields_left_out_take_the_runtime_defaults() {
    let spec = PlainClient::API.endpoints[1];
    assert_eq!(spec.policy.retry.backoff, Backoff::DEFAULT);
    assert_eq!(spec.policy.retry.max, RetryPolicy::DEFAULT.max);
    assert_eq!(spec.policy.breaker, Some(BreakerConfig::DEFAULT));
}
