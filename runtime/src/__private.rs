//! Items generated code needs. Not a public API: names and shapes change freely.

pub use core::time::Duration;

pub use crate::bulkhead::BulkheadConfig;
pub use crate::circuit_breaker::state::{BreakerConfig, BreakerMode};
pub use crate::client::{GeneratedClient, Handle};
pub use crate::error::BoxError;
pub use crate::rate_limit::RateLimitConfig;
pub use crate::request::{
    ApiSpec, BodyStream, EndpointSpec, HedgeConfig, PathPart, Policy, RequestBuilder, Verb,
};
pub use crate::response::decode::{
    Check, Checked, Decoder, Json, RawBytes, Streamed, Text, Unit, Wrapped,
};
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

// Checks that a result type the macro read by its name (`Response<T>`, `Bytes`,
// `ResponseStream`, `String`, written bare) is the type it took it for. The macro
// cannot resolve names: a bare `Response<T>` of the user's own would otherwise fail
// as a mismatch inside the generated code, with no word on the way out. Each check is
// an empty function, gone once compiled.

/// A type read as `resilient_api::Response<T>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is read as `resilient_api::Response<T>` by its name, and it is another type",
    note = "to decode a type of your own named `Response` from JSON, name it by a path from the crate's root or this module: `crate::api::Response<T>`, `self::Response<T>`"
)]
pub trait ResponseByName {}
impl<T> ResponseByName for crate::Response<T> {}
/// Fails to compile unless `T` is `resilient_api::Response<_>`.
#[inline(always)]
pub fn response_by_name<T: ResponseByName>() {}

/// A type read as `resilient_api::Bytes`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is read as `resilient_api::Bytes` by its name, and it is another type",
    note = "to decode a type of your own named `Bytes` from JSON, name it by a path from the crate's root or this module: `crate::api::Bytes`, `self::Bytes`"
)]
pub trait BytesByName {}
impl BytesByName for crate::Bytes {}
/// Fails to compile unless `T` is `resilient_api::Bytes`.
#[inline(always)]
pub fn bytes_by_name<T: BytesByName>() {}

/// A type read as `resilient_api::ResponseStream`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is read as `resilient_api::ResponseStream` by its name, and it is another type",
    note = "to decode a type of your own named `ResponseStream` from JSON, name it by a path from the crate's root or this module: `self::ResponseStream`"
)]
pub trait StreamByName {}
impl StreamByName for crate::ResponseStream {}
/// Fails to compile unless `T` is `resilient_api::ResponseStream`.
#[inline(always)]
pub fn stream_by_name<T: StreamByName>() {}

/// A type read as `String`, the body's text.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is read as `String` by its name, and it is another type",
    note = "to decode a type of your own named `String` from JSON, name it by a path from the crate's root or this module: `self::String`"
)]
pub trait StringByName {}
impl StringByName for String {}
/// Fails to compile unless `T` is `String`.
#[inline(always)]
pub fn string_by_name<T: StringByName>() {}
