//! The one error type of every generated call.
//!
//! # When to use
//! Match on [`ApiError::kind`] to decide what to do; ask [`ApiError::status`],
//! [`ApiError::body`], [`ApiError::attempts`] and [`ApiError::endpoint`] for details,
//! and walk [`std::error::Error::source`] for the cause. Nothing needs parsing a message.
//!
//! # Defaults
//! An error response's body is kept up to 64 KiB. `Display` is short, lowercase, and
//! never holds a secret: no header values, no query string, no request body.
//!
//! # Example
//! ```
//! use resilient_api::{ApiError, ErrorKind};
//! fn describe(e: &ApiError) -> &'static str {
//!     match e.kind() {
//!         ErrorKind::Status if e.status() == Some(404) => "not found",
//!         ErrorKind::CircuitOpen | ErrorKind::BulkheadFull => "shed, try later",
//!         ErrorKind::Cancelled => "cancelled",
//!         _ => "failed",
//!     }
//! }
//! # let _ = describe;
//! ```

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use serde::de::DeserializeOwned;
use tokio::time::Instant;

/// A boxed error that can cross threads.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// What went wrong, for a `match`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The server answered with a status that is not a success.
    Status,
    /// One attempt took longer than its attempt timeout.
    AttemptTimeout,
    /// The call's total deadline passed.
    Deadline,
    /// The circuit breaker refused the call.
    CircuitOpen,
    /// The bulkhead's queue was full (or its wait could not fit the deadline).
    BulkheadFull,
    /// No rate-limit token could be had before the deadline.
    RateLimited,
    /// The retry budget did not allow another attempt.
    BudgetExhausted,
    /// The connection could not be made: the request was never sent.
    Connect,
    /// The connection failed after the request was sent (reset, broken pipe, body cut short).
    Transport,
    /// The response body could not be decoded.
    Decode,
    /// The response's content type cannot be what the endpoint returns.
    UnexpectedContentType,
    /// The response body was larger than the limit.
    BodyTooLarge,
    /// The request could not be built from the arguments; nothing was sent.
    InvalidRequest,
    /// The caller cancelled the call.
    Cancelled,
    /// Every hedged attempt failed; the source is the last one to fail.
    AllHedgesFailed,
    /// A redirect was refused (too many, or from https to http).
    Redirect,
    /// A user hook (retry predicate, on-retry callback, middleware) returned an error.
    Hook,
    /// The client could not be built from its configuration.
    Builder,
}

impl ErrorKind {
    /// A stable snake-case name, e.g. `"circuit_open"`, for metrics and logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Status => "status",
            ErrorKind::AttemptTimeout => "attempt_timeout",
            ErrorKind::Deadline => "deadline",
            ErrorKind::CircuitOpen => "circuit_open",
            ErrorKind::BulkheadFull => "bulkhead_full",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::BudgetExhausted => "budget_exhausted",
            ErrorKind::Connect => "connect",
            ErrorKind::Transport => "transport",
            ErrorKind::Decode => "decode",
            ErrorKind::UnexpectedContentType => "unexpected_content_type",
            ErrorKind::BodyTooLarge => "body_too_large",
            ErrorKind::InvalidRequest => "invalid_request",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::AllHedgesFailed => "all_hedges_failed",
            ErrorKind::Redirect => "redirect",
            ErrorKind::Hook => "hook",
            ErrorKind::Builder => "builder",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            ErrorKind::Status => "error status",
            ErrorKind::AttemptTimeout => "attempt timed out",
            ErrorKind::Deadline => "deadline passed",
            ErrorKind::CircuitOpen => "circuit open",
            ErrorKind::BulkheadFull => "bulkhead full",
            ErrorKind::RateLimited => "rate limited",
            ErrorKind::BudgetExhausted => "retry budget exhausted",
            ErrorKind::Connect => "connect failed",
            ErrorKind::Transport => "transport failed",
            ErrorKind::Decode => "decode failed",
            ErrorKind::UnexpectedContentType => "unexpected content type",
            ErrorKind::BodyTooLarge => "response body too large",
            ErrorKind::InvalidRequest => "invalid request",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::AllHedgesFailed => "all hedged attempts failed",
            ErrorKind::Redirect => "redirect refused",
            ErrorKind::Hook => "hook failed",
            ErrorKind::Builder => "invalid client configuration",
        }
    }
}

/// Which time limit fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeoutKind {
    /// The per-attempt timeout.
    Attempt,
    /// The call's total deadline.
    Total,
}

/// The error of a generated call. Cheap to move (one box); `Send + Sync`.
pub struct ApiError {
    inner: Box<Inner>,
}

struct Inner {
    kind: ErrorKind,
    endpoint: &'static str,
    attempts: u32,
    status: Option<u16>,
    headers: Option<HeaderMap>,
    body: Option<Bytes>,
    retry_at: Option<Instant>,
    retry_after: Option<Duration>,
    not_replayable: bool,
    message: Option<String>,
    source: Option<BoxError>,
}

impl ApiError {
    pub(crate) fn new(kind: ErrorKind) -> Self {
        ApiError {
            inner: Box::new(Inner {
                kind,
                endpoint: "",
                attempts: 0,
                status: None,
                headers: None,
                body: None,
                retry_at: None,
                retry_after: None,
                not_replayable: false,
                message: None,
                source: None,
            }),
        }
    }

    pub(crate) fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        self.inner.source = Some(source.into());
        self
    }

    pub(crate) fn with_message(mut self, message: impl Into<String>) -> Self {
        self.inner.message = Some(message.into());
        self
    }

    pub(crate) fn with_status(mut self, status: u16, headers: HeaderMap, body: Bytes) -> Self {
        self.inner.status = Some(status);
        self.inner.headers = Some(headers);
        self.inner.body = Some(body);
        self
    }

    pub(crate) fn set_endpoint(&mut self, endpoint: &'static str) {
        self.inner.endpoint = endpoint;
    }

    pub(crate) fn set_attempts(&mut self, attempts: u32) {
        self.inner.attempts = attempts;
    }

    pub(crate) fn set_retry_at(&mut self, at: Instant, after: Duration) {
        self.inner.retry_at = Some(at);
        self.inner.retry_after = Some(after);
    }

    pub(crate) fn set_not_replayable(&mut self) {
        self.inner.not_replayable = true;
    }

    /// An owned copy of an error shared by coalesced callers; its source is the
    /// shared error's source.
    pub(crate) fn shared_copy(shared: std::sync::Arc<ApiError>) -> Self {
        let i = &shared.inner;
        let copy = Inner {
            kind: i.kind,
            endpoint: i.endpoint,
            attempts: i.attempts,
            status: i.status,
            headers: i.headers.clone(),
            body: i.body.clone(),
            retry_at: i.retry_at,
            retry_after: i.retry_after,
            not_replayable: i.not_replayable,
            message: i.message.clone(),
            source: None,
        };
        let source = i
            .source
            .is_some()
            .then(|| Box::new(SharedSource(shared.clone())) as BoxError);
        ApiError {
            inner: Box::new(Inner { source, ..copy }),
        }
    }

    pub(crate) fn builder(message: impl Into<String>) -> Self {
        ApiError::new(ErrorKind::Builder).with_message(message)
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.inner.kind
    }

    /// The status of the error response, when there was one.
    pub fn status(&self) -> Option<u16> {
        self.inner.status
    }

    /// The headers of the error response, when there was one.
    pub fn headers(&self) -> Option<&HeaderMap> {
        self.inner.headers.as_ref()
    }

    /// The error response's body, up to 64 KiB.
    pub fn body(&self) -> Option<&Bytes> {
        self.inner.body.as_ref()
    }

    /// The error response's body as text (lossy), when there was one.
    pub fn body_text(&self) -> Option<String> {
        self.inner
            .body
            .as_ref()
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }

    /// Decode the error response's body as JSON, e.g. into the API's error type.
    ///
    /// Returns `None` when there was no error response.
    pub fn decode_body<T: DeserializeOwned>(&self) -> Option<Result<T, serde_json::Error>> {
        self.inner.body.as_ref().map(|b| serde_json::from_slice(b))
    }

    /// Attempts made before the call ended (hedges included).
    pub fn attempts(&self) -> u32 {
        self.inner.attempts
    }

    /// The name of the endpoint (the trait method), e.g. `"user"`.
    pub fn endpoint(&self) -> &'static str {
        self.inner.endpoint
    }

    /// When the server (or an open breaker) said a new attempt may be made.
    pub fn retry_at(&self) -> Option<Instant> {
        self.inner.retry_at
    }

    /// How long the server asked to wait (its `Retry-After`, capped), if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        self.inner.retry_after
    }

    /// True when the request body was a stream, so the call could not be retried.
    pub fn body_not_replayable(&self) -> bool {
        self.inner.not_replayable
    }

    /// Which time limit fired, for the two timeout kinds.
    pub fn timeout(&self) -> Option<TimeoutKind> {
        match self.inner.kind {
            ErrorKind::AttemptTimeout => Some(TimeoutKind::Attempt),
            ErrorKind::Deadline => Some(TimeoutKind::Total),
            _ => None,
        }
    }

    /// True for either timeout.
    pub fn is_timeout(&self) -> bool {
        self.timeout().is_some()
    }

    /// True when the connection could not be made (the request never ran).
    pub fn is_connect(&self) -> bool {
        self.inner.kind == ErrorKind::Connect
    }

    /// True when a policy shed the call (breaker, bulkhead, rate limit, budget).
    pub fn is_rejection(&self) -> bool {
        matches!(
            self.inner.kind,
            ErrorKind::CircuitOpen
                | ErrorKind::BulkheadFull
                | ErrorKind::RateLimited
                | ErrorKind::BudgetExhausted
        )
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        f.write_str(i.kind.describe())?;
        if let Some(status) = i.status {
            write!(f, " {status}")?;
        }
        if !i.endpoint.is_empty() {
            write!(f, " in `{}`", i.endpoint)?;
        }
        if i.attempts > 1 {
            write!(f, " after {} attempts", i.attempts)?;
        }
        if let Some(m) = &i.message {
            write!(f, ": {m}")?;
        }
        if i.not_replayable {
            f.write_str(" (the streamed request body could not be replayed)")?;
        }
        Ok(())
    }
}

impl fmt::Debug for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        let mut d = f.debug_struct("ApiError");
        d.field("kind", &i.kind);
        if !i.endpoint.is_empty() {
            d.field("endpoint", &i.endpoint);
        }
        d.field("attempts", &i.attempts);
        if let Some(s) = i.status {
            d.field("status", &s);
        }
        if let Some(b) = &i.body {
            d.field("body_len", &b.len());
        }
        if let Some(m) = &i.message {
            d.field("message", m);
        }
        if let Some(s) = &i.source {
            d.field("source", s);
        }
        d.finish()
    }
}

impl StdError for ApiError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.inner
            .source
            .as_ref()
            .map(|s| &**s as &(dyn StdError + 'static))
    }
}

/// The source of a shared error, seen through one of its copies.
struct SharedSource(std::sync::Arc<ApiError>);

impl fmt::Debug for SharedSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0.inner.source {
            Some(s) => fmt::Debug::fmt(s, f),
            None => f.write_str("None"),
        }
    }
}

impl fmt::Display for SharedSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0.inner.source {
            Some(s) => fmt::Display::fmt(s, f),
            None => Ok(()),
        }
    }
}

impl StdError for SharedSource {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.0.inner.source.as_ref().and_then(|s| s.source())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync + 'static>() {}

    #[test]
    fn error_is_send_sync_and_small() {
        assert_send_sync::<ApiError>();
        assert_eq!(
            std::mem::size_of::<ApiError>(),
            std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn display_is_short_and_lowercase() {
        let mut e = ApiError::new(ErrorKind::Status).with_status(
            503,
            HeaderMap::new(),
            Bytes::from_static(b"busy"),
        );
        e.set_endpoint("user");
        e.set_attempts(3);
        assert_eq!(e.to_string(), "error status 503 in `user` after 3 attempts");
        assert_eq!(e.body_text().as_deref(), Some("busy"));
    }
}
