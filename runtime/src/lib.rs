//! Typed, resilient HTTP clients from annotated traits.
//!
//! You describe what each endpoint *is* (verb, path, parameters, result type,
//! idempotency and policy) on a trait; `#[resilient_api]` checks it at compile time
//! and generates a client whose every call is retried, bounded, isolated and
//! cancellable correctly.
//!
//! ```no_run
//! use resilient_api::{resilient_api, ApiError};
//! use serde::Deserialize;
//!
//! #[derive(Debug, Deserialize)]
//! pub struct User { pub id: u64, pub name: String }
//!
//! #[resilient_api(base_url = "http://127.0.0.1:8080", timeout(attempt = "3s", total = "15s"))]
//! pub trait Users {
//!     #[get("/users/{id}")]
//!     async fn user(&self, id: u64) -> Result<User, ApiError>;
//! }
//!
//! # async fn run() -> Result<(), ApiError> {
//! let api = UsersClient::builder().build()?;
//! let user = api.user(42).await?; // dropping this future cancels everything it started
//! # let _ = user; Ok(()) }
//! ```
//!
//! The compiler is the first test. A POST that asks for retries on statuses without
//! saying it is safe to repeat does not build, because the request may already have
//! run:
//!
//! ```compile_fail
//! use resilient_api::{resilient_api, ApiError};
//!
//! #[resilient_api(base_url = "http://127.0.0.1:8080", timeout(attempt = "3s"))]
//! pub trait Payments {
//!     #[post("/charges")]
//!     #[retry(on = [503])] // error: mark it `#[idempotent]` or add `#[idempotency_key]`
//!     async fn charge(&self, #[body] amount: &u64) -> Result<(), ApiError>;
//! }
//! ```
//!
//! Nor does an endpoint without an attempt timeout, a path parameter with no
//! argument, or an argument with no role:
//!
//! ```compile_fail
//! use resilient_api::{resilient_api, ApiError};
//!
//! #[resilient_api(base_url = "http://127.0.0.1:8080")] // no `timeout(attempt = ...)`
//! pub trait Users {
//!     #[get("/users/{id}")]
//!     async fn user(&self, user_id: u64) -> Result<String, ApiError>;
//! }
//! ```
//!
//! # One call, in order
//!
//! ```text
//! call
//!  └ total deadline ─ covers everything below, queue waits and backoff included
//!    └ coalesce (optional) ─ join an identical call already in flight
//!      └ retry loop ─ budget check before each retry; a backoff holds no permit
//!        └ hedge (optional) ─ staggered attempts, first acceptable answer wins
//!          └ attempt:
//!              breaker fast check → bulkhead permit → rate-limit token
//!              → breaker admission → attempt timeout → transport → classify
//! ```
//!
//! See [`pipeline`] for why the order is what it is.

pub mod bulkhead;
pub mod circuit_breaker;
pub mod client;
pub mod coalesce;
pub mod error;
pub mod hedge;
pub mod jitter;
pub mod observe;
pub mod pipeline;
pub mod rate_limit;
pub mod request;
pub mod response;
pub mod retry;
pub mod testing;
pub mod timeout;
pub mod transport;

pub use client::{CallOptions, ClientBuilder, Engine};
pub use error::{ApiError, ErrorKind, TimeoutKind};
pub use jitter::Jitter;
pub use request::BodyStream;
pub use resilient_api_macros::resilient_api;
pub use response::{Response, ResponseStream};
pub use transport::Transport;

pub use tokio_util::sync::CancellationToken;

/// Re-exported so that generated code and users name the same `Bytes`.
pub use bytes::Bytes;

#[doc(hidden)]
pub mod __private;
