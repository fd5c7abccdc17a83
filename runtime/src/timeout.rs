//! Time limits: one per attempt, one for the whole call.
//!
//! # When to use
//! Every endpoint has an attempt timeout (the compiler insists; `attempt = "none"`
//! says no limit on purpose) and may have a total deadline:
//!
//! - The **attempt timeout** covers connecting, sending, the response head *and* the
//!   body read of one attempt, redirects included. When it fires, the attempt ends
//!   with [`ErrorKind::AttemptTimeout`](crate::ErrorKind::AttemptTimeout), which is
//!   retried for idempotent endpoints.
//! - The **total deadline** covers the whole call: queue waits, rate-limit waits,
//!   backoffs and `Retry-After` waits included. When it passes, everything the call
//!   started is dropped at once and the call ends with
//!   [`ErrorKind::Deadline`](crate::ErrorKind::Deadline), never retried. A caller can
//!   shorten it per call with [`CallOptions::deadline`](crate::CallOptions::deadline).
//!
//! Both read time only through `tokio::time`, so under a paused clock they fire at
//! exactly their instant, never a millisecond early or late. There is one deadline
//! timer per call, not one per step. For a [`ResponseStream`](crate::ResponseStream)
//! result, reading the body after the call returned stays bounded by the total
//! deadline and by an idle limit between chunks (the attempt timeout).
//!
//! # Defaults
//! No default: the trait or the method declares `timeout(attempt = "...")`; `total`
//! is optional.
//!
//! # Example
//! ```no_run
//! use resilient_api::{resilient_api, ApiError, ErrorKind, TimeoutKind};
//!
//! #[resilient_api(base_url = "http://127.0.0.1:8080", timeout(attempt = "100ms", total = "1s"))]
//! pub trait Slow {
//!     #[get("/slow")]
//!     async fn slow(&self) -> Result<String, ApiError>;
//! }
//!
//! # async fn run(api: SlowClient) {
//! match api.slow().await {
//!     Err(e) if e.timeout() == Some(TimeoutKind::Attempt) => { /* every attempt was slow */ }
//!     Err(e) if e.kind() == ErrorKind::Deadline => { /* the whole call ran out of time */ }
//!     _ => {}
//! }
//! # }
//! ```
