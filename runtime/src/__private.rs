//! Items generated code needs. Not a public API: names and shapes change freely.

pub use core::time::Duration;

pub use crate::bulkhead::BulkheadConfig;
pub use crate::circuit_breaker::state::{BreakerConfig, BreakerMode};
pub use crate::client::{GeneratedClient, Handle};
pub use crate::rate_limit::RateLimitConfig;
pub use crate::request::{
    ApiSpec, BodyStream, EndpointSpec, HedgeConfig, PathPart, Policy, RequestBuilder, Verb,
};
pub use crate::response::decode::{Decoder, Json, RawBytes, Streamed, Text, Unit, Wrapped};
pub use crate::retry::backoff::Backoff;
pub use crate::retry::retry_after::DEFAULT_RETRY_AFTER_CAP;
pub use crate::retry::{DEFAULT_RETRY_ON, RetryPolicy};

/// How many coalescing keys the client of `handle` holds: one per shared execution
/// with a caller still waiting on it. For tests.
pub fn coalescing_keys(handle: &Handle) -> usize {
    handle.inner.coalescer.len()
}

/// A duration of `ms` milliseconds, for generated statics.
pub const fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}
