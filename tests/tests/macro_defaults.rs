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

/// Endpoints sharing a partition must configure it alike; the macro compares them
/// with the defaults it repeats filled in (`reset = "30s"` is the default reset, and
/// `queue = 256` the default queue), so those must be the runtime's, or two
/// declarations the macro accepts as equal would differ at run time.
#[resilient_api(timeout(attempt = "1s"))]
pub trait Shared {
    #[get("/a")]
    #[partition("p")]
    #[breaker(failures = 3, reset = "30s", probes = 1)]
    #[bulkhead(concurrency = 4, queue = 256)]
    async fn written_out(&self) -> Result<(), ApiError>;

    #[get("/b")]
    #[partition("p")]
    #[breaker(failures = 3)]
    #[bulkhead(concurrency = 4)]
    async fn left_out(&self) -> Result<(), ApiError>;

    #[get("/c")]
    #[partition("q")]
    #[breaker(reset = "30s")]
    #[bulkhead(concurrency = 64, queue = 256)]
    async fn every_default_written_out(&self) -> Result<(), ApiError>;
}

#[test]
fn defaults_written_out_are_the_defaults_left_out() {
    use resilient_api::bulkhead::BulkheadConfig;
    let [written, left, every] = [0, 1, 2].map(|i| SharedClient::API.endpoints[i].policy);
    assert_eq!(written.breaker, left.breaker);
    assert_eq!(written.bulkhead, left.bulkhead);
    assert_eq!(every.breaker, Some(BreakerConfig::DEFAULT));
    assert_eq!(every.bulkhead, Some(BulkheadConfig::DEFAULT));
}
