//! The one error type of every generated call.
//!
//! # When to use
//! Match on [`ApiError::kind`] to decide what to do; ask [`ApiError::status`],
//! [`ApiError::body`], [`ApiError::attempts`] and [`ApiError::endpoint`] for details,
//! and walk [`std::error::Error::source`] for the cause. Nothing needs parsing a message.
//!
//! # Defaults
//! An error response's body is kept up to 64 KiB, or up to the call's body limit if
//! that is lower. It and the response's headers are copies of their own, never slices
//! of the transport's read buffer, so an error kept for long holds only what it shows.
//! An answer that could not be decoded ([`ErrorKind::Decode`],
//! [`ErrorKind::UnexpectedContentType`]) leaves its status, never its body or headers:
//! a success's body is the caller's data. `Display` is short, lowercase, and never
//! holds a secret: no request header values, no query string, no request body (a
//! decode error names the response's content type, as it should).
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
///
/// ```
/// # use resilient_api::testing::{ScriptedTransport, Step};
/// # use resilient_api::{resilient_api, ApiError};
/// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"), retry(max = 0))]
/// # pub trait Users {
/// #     #[get("/users/{id}")]
/// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
/// # }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), ApiError> {
/// use resilient_api::{error::BoxError, transport::HttpRequest, ErrorKind};
/// fn require_https(req: &mut HttpRequest) -> Result<(), BoxError> {
///     match req.url.scheme() {
///         "https" => Ok(()),
///         _ => Err("refusing plain http".into()), // any error converts, with `.into()` or `?`
///     }
/// }
/// let builder = UsersClient::builder().base_url("http://api.test").middleware(require_https);
/// # let builder = builder.transport(ScriptedTransport::new([]));
/// let Err(e) = builder.build()?.user(7).await else { unreachable!() };
/// assert_eq!(e.kind(), ErrorKind::Hook);
/// let cause = std::error::Error::source(&e).map(|s| s.to_string());
/// assert_eq!(cause.as_deref(), Some("refusing plain http"));
/// # Ok(()) }
/// ```
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// What went wrong, for a `match`.
///
/// ```
/// # use resilient_api::testing::{ScriptedTransport, Step};
/// # use resilient_api::{resilient_api, ApiError};
/// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"), retry(max = 0))]
/// # pub trait Users {
/// #     #[get("/users/{id}")]
/// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
/// # }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), ApiError> {
/// use resilient_api::ErrorKind;
/// let t = ScriptedTransport::new([Step::connect_error()]); // the trait has `retry(max = 0)`
/// let api = UsersClient::builder().transport(t).build()?;
/// let Err(e) = api.user(7).await else { unreachable!() };
/// let try_another_region = match e.kind() {
///     ErrorKind::Connect | ErrorKind::CircuitOpen => true,
///     _ => false, // the enum is non-exhaustive: new kinds may come
/// };
/// assert!(try_another_region);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The server answered with a status that is not a success.
    Status,
    /// One attempt took longer than its attempt timeout. An error status whose head
    /// came in time and whose body did not is that [`Status`](ErrorKind::Status)
    /// instead, its body cut short.
    AttemptTimeout,
    /// The call's total deadline passed.
    Deadline,
    /// The circuit breaker refused the call.
    CircuitOpen,
    /// The bulkhead's queue was full. (A wait in the queue that outlasts the deadline
    /// ends as [`ErrorKind::Deadline`].)
    BulkheadFull,
    /// No rate-limit token could be had before the deadline.
    RateLimited,
    /// The retry budget did not allow another attempt.
    BudgetExhausted,
    /// The connection could not be made, or closed before the request was written:
    /// the request was never sent.
    Connect,
    /// The connection failed after the request was sent (reset, broken pipe, body cut short).
    Transport,
    /// The response body could not be decoded. The error keeps the response's status
    /// (the message names its content type and length), never its body.
    Decode,
    /// The response's content type cannot be what the endpoint returns. The error keeps
    /// the response's status, never its body.
    UnexpectedContentType,
    /// The response body was larger than the limit.
    BodyTooLarge,
    /// The request could not be built from the arguments; nothing was sent.
    InvalidRequest,
    /// The caller cancelled the call.
    Cancelled,
    /// Every hedged attempt failed; the source is the last one to fail.
    AllHedgesFailed,
    /// A redirect was refused: too many, from https to http, to a scheme other than
    /// http or https, or a 3xx to follow whose `Location` is missing or unreadable.
    Redirect,
    /// A user hook (retry predicate, on-retry callback, middleware) returned an error.
    Hook,
    /// The client could not be built from its configuration.
    Builder,
}

impl ErrorKind {
    /// A stable snake-case name, e.g. `"circuit_open"`, for metrics and logs.
    ///
    /// ```
    /// use resilient_api::ErrorKind;
    /// assert_eq!(ErrorKind::CircuitOpen.as_str(), "circuit_open");
    /// assert_eq!(ErrorKind::AttemptTimeout.as_str(), "attempt_timeout");
    /// ```
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
///
/// ```
/// # use resilient_api::testing::{ScriptedTransport, Step};
/// # use resilient_api::{resilient_api, ApiError};
/// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "1s"), retry(max = 0))]
/// # pub trait Users {
/// #     #[get("/users/{id}")]
/// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
/// # }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), ApiError> {
/// use resilient_api::TimeoutKind;
/// let t = ScriptedTransport::new([Step::hang()]);
/// let api = UsersClient::builder().transport(t).build()?;
/// let Err(e) = api.user(7).await else { unreachable!() };
/// assert_eq!(e.timeout(), Some(TimeoutKind::Attempt)); // `timeout(attempt = "1s")`
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeoutKind {
    /// The per-attempt timeout.
    Attempt,
    /// The call's total deadline.
    Total,
}

/// The error of a generated call. Cheap to move (one box); `Send + Sync`.
///
/// ```
/// # use resilient_api::testing::{ScriptedTransport, Step};
/// # use resilient_api::{resilient_api, ApiError};
/// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
/// # pub trait Users {
/// #     #[get("/users/{id}")]
/// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
/// # }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), ApiError> {
/// use resilient_api::ErrorKind;
/// let t = ScriptedTransport::new([Step::status(404).body("no user 7")]);
/// let api = UsersClient::builder().transport(t).build()?;
/// let Err(e) = api.user(7).await else { unreachable!() };
/// assert_eq!(e.to_string(), "error status 404 in `user`"); // short, no secrets
/// assert_eq!((e.kind(), e.status()), (ErrorKind::Status, Some(404)));
/// assert_eq!(e.body_text().as_deref(), Some("no user 7"));
/// # Ok(()) }
/// ```
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
    source: Option<Source>,
}

/// Where an error's source lives.
enum Source {
    /// Its own.
    Own(BoxError),
    /// A coalesced caller's copy: the shared error's source, reached through the
    /// shared error, so that it downcasts to its own type (an [`ApiError`], a
    /// [`TransportError`](crate::transport::TransportError)) as it would on a call of
    /// one's own.
    Shared(std::sync::Arc<ApiError>),
}

impl Source {
    fn get(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Source::Own(source) => Some(&**source),
            Source::Shared(shared) => shared.source(),
        }
    }
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
        self.inner.source = Some(Source::Own(source.into()));
        self
    }

    /// This refusal by a policy, with `cause` (the failure whose retry it refused) as
    /// its source, saying when to come back: its own time (an open breaker's end, the
    /// next token) or the server's `Retry-After` on `cause`, whichever is later; the
    /// server's alone for a refusal without a time (the budget, the bulkhead).
    pub(crate) fn refusing(mut self, cause: ApiError) -> Self {
        if let Some(asked) = cause.inner.retry_at
            && self.inner.retry_at.is_none_or(|own| asked > own)
        {
            self.set_retry_at(asked, asked.saturating_duration_since(Instant::now()));
        }
        self.with_source(cause)
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

    /// The status of a response that is not kept (a decode error's).
    pub(crate) fn set_status(&mut self, status: u16) {
        self.inner.status = Some(status);
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
        let source = i.source.is_some().then(|| Source::Shared(shared.clone()));
        ApiError {
            inner: Box::new(Inner { source, ..copy }),
        }
    }

    pub(crate) fn builder(message: impl Into<String>) -> Self {
        ApiError::new(ErrorKind::Builder).with_message(message)
    }

    /// What went wrong.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Tags {
    /// #     #[get("/tags")]
    /// #     async fn tags(&self) -> Result<Vec<String>, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// use resilient_api::ErrorKind;
    /// let login_page = Step::status(200).header("content-type", "text/html").body("<h1>Hi</h1>");
    /// let api = TagsClient::builder().transport(ScriptedTransport::new([login_page])).build()?;
    /// let Err(e) = api.tags().await else { unreachable!() }; // `tags` returns JSON
    /// assert_eq!(e.kind(), ErrorKind::UnexpectedContentType);
    /// # Ok(()) }
    /// ```
    pub fn kind(&self) -> ErrorKind {
        self.inner.kind
    }

    /// The status of the response the error is about: an error response's, or the
    /// status of an answer that could not be used ([`ErrorKind::Decode`],
    /// [`ErrorKind::UnexpectedContentType`], [`ErrorKind::BodyTooLarge`]). `None` when
    /// no response is at fault (a timeout, a connection error, a policy's refusal); to
    /// tell an error status from the others, ask [`kind`](ApiError::kind).
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let t = ScriptedTransport::new([Step::status(404)]);
    /// let api = UsersClient::builder().transport(t).build()?;
    /// let name = match api.user(7).await {
    ///     Ok(name) => Some(name),
    ///     Err(e) if e.status() == Some(404) => None,
    ///     Err(e) => return Err(e),
    /// };
    /// assert_eq!(name, None);
    /// # Ok(()) }
    /// ```
    pub fn status(&self) -> Option<u16> {
        self.inner.status
    }

    /// The headers of the error response ([`ErrorKind::Status`], or
    /// [`ErrorKind::AllHedgesFailed`] with the last branch's), when there was one;
    /// never a success's.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"), retry(max = 0))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let t = ScriptedTransport::new([Step::status(400).header("x-request-id", "req-81")]);
    /// let api = UsersClient::builder().transport(t).build()?;
    /// let Err(e) = api.user(7).await else { unreachable!() };
    /// let request_id = e.headers().and_then(|h| h.get("x-request-id")?.to_str().ok());
    /// assert_eq!(request_id, Some("req-81")); // for the bug report
    /// # Ok(()) }
    /// ```
    pub fn headers(&self) -> Option<&HeaderMap> {
        self.inner.headers.as_ref()
    }

    /// The error response's body (see [`headers`](ApiError::headers)), up to 64 KiB, or
    /// up to the call's body limit
    /// (`#[max_body]` or the client's `max_body_size`) if that is lower. The rest is
    /// not read.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"), retry(max = 0))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let page = vec![b'x'; 100 * 1024];
    /// let t = ScriptedTransport::new([Step::status(400).body(page)]);
    /// let api = UsersClient::builder().transport(t).build()?;
    /// let Err(e) = api.user(7).await else { unreachable!() };
    /// assert_eq!(e.body().map(|b| b.len()), Some(64 * 1024)); // the rest is dropped
    /// # Ok(()) }
    /// ```
    pub fn body(&self) -> Option<&Bytes> {
        self.inner.body.as_ref()
    }

    /// [`body`](ApiError::body) as text (lossy).
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let t = ScriptedTransport::new([Step::status(409).body("name already taken")]);
    /// let api = UsersClient::builder().transport(t).build()?;
    /// let Err(e) = api.user(7).await else { unreachable!() };
    /// assert_eq!(e.body_text().as_deref(), Some("name already taken"));
    /// # Ok(()) }
    /// ```
    pub fn body_text(&self) -> Option<String> {
        self.inner
            .body
            .as_ref()
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }

    /// Decode the error response's body as JSON, e.g. into the API's error type.
    ///
    /// Returns `None` when the error holds no body (see [`body`](ApiError::body)).
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// #[derive(serde::Deserialize)]
    /// struct Problem { code: String }
    /// let t = ScriptedTransport::new([Step::status(422)
    ///     .header("content-type", "application/json")
    ///     .body(r#"{"code":"name_taken","detail":"try another"}"#)]);
    /// let api = UsersClient::builder().transport(t).build()?;
    /// let Err(e) = api.user(7).await else { unreachable!() };
    /// let problem = e.decode_body::<Problem>().and_then(Result::ok);
    /// assert_eq!(problem.map(|p| p.code).as_deref(), Some("name_taken"));
    /// # Ok(()) }
    /// ```
    pub fn decode_body<T: DeserializeOwned>(&self) -> Option<Result<T, serde_json::Error>> {
        self.inner.body.as_ref().map(|b| serde_json::from_slice(b))
    }

    /// Attempts made before the call ended (hedges included).
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"), retry(max = 2, backoff = fixed(delay = "10ms")))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let t = ScriptedTransport::new([Step::status(503), Step::status(503), Step::status(503)]);
    /// let api = UsersClient::builder().transport(t).build()?;
    /// let Err(e) = api.user(7).await else { unreachable!() };
    /// assert_eq!(e.attempts(), 3); // the first and two retries
    /// assert_eq!(e.to_string(), "error status 503 in `user` after 3 attempts");
    /// # Ok(()) }
    /// ```
    pub fn attempts(&self) -> u32 {
        self.inner.attempts
    }

    /// The name of the endpoint (the trait method), e.g. `"user"`.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let t = ScriptedTransport::new([Step::status(404)]);
    /// let api = UsersClient::builder().transport(t).build()?;
    /// let Err(e) = api.user(7).await else { unreachable!() };
    /// assert_eq!(e.endpoint(), "user"); // a label for logs and metrics
    /// # Ok(()) }
    /// ```
    pub fn endpoint(&self) -> &'static str {
        self.inner.endpoint
    }

    /// When a new attempt may be made: as the server said (`Retry-After`), or when an
    /// open breaker will admit one, or the rate limiter's next token. For a retry
    /// refused by a policy, by the rule given at [`ApiError::retry_after`].
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"), retry(max = 0), breaker(failures = 1, reset = "30s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// use std::time::Duration;
    /// let t = ScriptedTransport::new([Step::status(503)]);
    /// let api = UsersClient::builder().transport(t).build()?;
    /// let start = tokio::time::Instant::now();
    /// let _ = api.user(7).await; // one failure opens the breaker for 30 s
    /// let Err(e) = api.user(7).await else { unreachable!() };
    /// assert!(e.is_rejection());
    /// assert_eq!(e.retry_at(), Some(start + Duration::from_secs(30)));
    /// # Ok(()) }
    /// ```
    pub fn retry_at(&self) -> Option<Instant> {
        self.inner.retry_at
    }

    /// How long to wait before a new attempt, from when the error was made: the
    /// server's `Retry-After` as it asked (the retry policy's cap bounds only the
    /// client's own waits; a wait past what the clock can hold is given capped), or
    /// the time left on an open breaker or until the rate limiter's next token.
    ///
    /// A retry refused by a policy ([`ApiError::is_rejection`], the refused retry's
    /// failure as its `source()`) says the later of two times: the refusal's own (an
    /// open breaker's end, the next token) and the server's `Retry-After` on that
    /// failure; a refusal without a time of its own (the retry budget, the bulkhead)
    /// gives the server's alone, and says nothing when the server named no wait. So a
    /// caller that schedules its own retry from it never comes back before the server
    /// asked, even when the client's cap cut its own wait short. Counted from when the
    /// call ended: zero once the server's instant has passed (a retry refused after
    /// waiting for it).
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s", total = "10s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// use std::time::Duration;
    /// let t = ScriptedTransport::new([Step::status(503).header("retry-after", "30")]);
    /// let api = UsersClient::builder().transport(t).build()?;
    /// let Err(e) = api.user(7).await else { unreachable!() };
    /// // 30 s does not fit the 10 s deadline, so the call ends now and says why.
    /// assert_eq!(e.retry_after(), Some(Duration::from_secs(30)));
    /// assert_eq!(e.attempts(), 1);
    /// # Ok(()) }
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        self.inner.retry_after
    }

    /// True when the request body was a stream, so the call could not send it again:
    /// not as a retry, nor to a 307 or 308 redirect's target.
    ///
    /// ```
    /// use resilient_api::{BodyStream, Bytes};
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Files {
    /// #     #[put("/files/{name}")]
    /// #     #[retry(max = 0)]
    /// #     async fn upload(&self, name: &str, #[body(stream)] body: BodyStream) -> Result<(), ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let t = ScriptedTransport::new([Step::status(503)]); // retryable on a PUT
    /// let api = FilesClient::builder().transport(t).build()?;
    /// let chunks = futures_util::stream::iter([Ok(Bytes::from("a,b\n"))]);
    /// let result = api.upload("report.csv", BodyStream::new(chunks)).await;
    /// let Err(e) = result else { unreachable!() };
    /// assert!(e.body_not_replayable()); // but the stream was spent on the first attempt
    /// # Ok(()) }
    /// ```
    pub fn body_not_replayable(&self) -> bool {
        self.inner.not_replayable
    }

    /// Which time limit fired, for the two timeout kinds.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// use resilient_api::{CallOptions, TimeoutKind};
    /// use std::time::Duration;
    /// let t = ScriptedTransport::new([Step::hang()]);
    /// let api = UsersClient::builder().transport(t).build()?;
    /// let quick = api.with_options(CallOptions::new().deadline(Duration::from_millis(300)));
    /// let Err(e) = quick.user(7).await else { unreachable!() };
    /// let why = match e.timeout() {
    ///     Some(TimeoutKind::Attempt) => "the server was slow",
    ///     Some(TimeoutKind::Total) => "the call ran out of time",
    ///     None => "not a timeout",
    /// };
    /// assert_eq!(why, "the call ran out of time");
    /// # Ok(()) }
    /// ```
    pub fn timeout(&self) -> Option<TimeoutKind> {
        match self.inner.kind {
            ErrorKind::AttemptTimeout => Some(TimeoutKind::Attempt),
            ErrorKind::Deadline => Some(TimeoutKind::Total),
            _ => None,
        }
    }

    /// True for either timeout.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "1s"), retry(max = 0))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// use std::time::Duration;
    /// let slow = Step::status(200).body("ann").delay(Duration::from_secs(2));
    /// let api = UsersClient::builder().transport(ScriptedTransport::new([slow])).build()?;
    /// let Err(e) = api.user(7).await else { unreachable!() };
    /// assert!(e.is_timeout()); // `timeout(attempt = "1s")`
    /// # Ok(()) }
    /// ```
    pub fn is_timeout(&self) -> bool {
        self.timeout().is_some()
    }

    /// True when the connection could not be made (the request never ran).
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"), retry(max = 0))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let t = ScriptedTransport::new([Step::connect_error()]); // the trait has `retry(max = 0)`
    /// let api = UsersClient::builder().transport(t).build()?;
    /// let Err(e) = api.user(7).await else { unreachable!() };
    /// assert!(e.is_connect()); // nothing reached the server: safe to send again, even a POST
    /// # Ok(()) }
    /// ```
    pub fn is_connect(&self) -> bool {
        self.inner.kind == ErrorKind::Connect
    }

    /// True when a policy shed the call (breaker, bulkhead, rate limit, budget).
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"), bulkhead(concurrency = 1, queue = 0))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// use std::time::Duration;
    /// let slow = Step::status(200).body("ann").delay(Duration::from_millis(50));
    /// let t = ScriptedTransport::new([slow]);
    /// let api = UsersClient::builder().transport(t.clone()).build()?;
    /// let (first, second) = tokio::join!(api.user(7), api.user(8));
    /// assert_eq!(first?, "ann");
    /// // `bulkhead(concurrency = 1, queue = 0)` on the trait: the second call is shed.
    /// assert!(second.is_err_and(|e| e.is_rejection()));
    /// assert_eq!(t.attempts(), 1); // the second call was never sent
    /// # Ok(()) }
    /// ```
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

/// At most the first `max_chars` characters of `text`, the server's words quoted in an
/// error's message, with `...` when cut: a hostile server's header is copied into
/// every log that shows the error, so it is never copied whole.
pub(crate) fn excerpt(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
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
        if let Some(s) = i.source.as_ref().and_then(Source::get) {
            d.field("source", &s);
        }
        d.finish()
    }
}

impl StdError for ApiError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.inner.source.as_ref().and_then(Source::get)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync + 'static>() {}

    #[test]
    fn an_excerpt_cuts_at_a_character_and_says_so() {
        assert_eq!(excerpt("text/html", 40), "text/html");
        assert_eq!(excerpt("abcdef", 6), "abcdef");
        assert_eq!(excerpt("abcdefg", 6), "abcdef...");
        // Counted in characters, cut between them: never inside a UTF-8 sequence.
        assert_eq!(excerpt("café au lait", 4), "café...");
        assert_eq!(excerpt("", 0), "");
        assert_eq!(excerpt("x", 0), "...");
    }

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
