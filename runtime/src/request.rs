//! What an endpoint is, and how one call's request is built from its arguments.
//!
//! # When to use
//! Generated code builds every request through this module; users meet it only
//! through the errors it reports. A path parameter is percent-encoded as exactly one
//! segment (`/`, `?`, `#` and `%` included, so nothing is decoded twice), and a value
//! that is empty, `.` or `..`, or holds CR, LF or TAB is refused before anything is
//! sent, and so is a request built without exactly one value for each `{name}`. Header values holding CR, LF or NUL are refused the same way. Errors name the
//! parameter, never its value.
//!
//! # Defaults
//! JSON bodies are sent with `content-type: application/json`, forms with
//! `application/x-www-form-urlencoded`, raw bytes with `application/octet-stream`.
//!
//! # Example
//! ```
//! use resilient_api::request::encode_path_segment;
//! assert_eq!(encode_path_segment("a/b?x=1#y%2e").unwrap(), "a%2Fb%3Fx=1%23y%252e");
//! assert!(encode_path_segment("..").is_err());
//! ```

use std::fmt;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures_core::Stream;
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use serde::Serialize;

use crate::bulkhead::BulkheadConfig;
use crate::circuit_breaker::state::BreakerConfig;
use crate::rate_limit::RateLimitConfig;
use crate::retry::RetryPolicy;

/// The HTTP verb of an endpoint.
///
/// ```
/// use resilient_api::request::Verb;
///
/// assert_eq!(Verb::Delete.as_str(), "DELETE");
/// assert!(Verb::Delete.is_idempotent());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verb {
    /// `GET`
    Get,
    /// `POST`
    Post,
    /// `PUT`
    Put,
    /// `PATCH`
    Patch,
    /// `DELETE`
    Delete,
    /// `HEAD`
    Head,
    /// `OPTIONS`
    Options,
}

impl Verb {
    /// The `http` method.
    ///
    /// ```
    /// use resilient_api::request::Verb;
    ///
    /// assert_eq!(Verb::Patch.method(), http::Method::PATCH);
    /// ```
    pub fn method(self) -> Method {
        match self {
            Verb::Get => Method::GET,
            Verb::Post => Method::POST,
            Verb::Put => Method::PUT,
            Verb::Patch => Method::PATCH,
            Verb::Delete => Method::DELETE,
            Verb::Head => Method::HEAD,
            Verb::Options => Method::OPTIONS,
        }
    }

    /// Whether repeating the request is safe by the method's own semantics (RFC 9110).
    ///
    /// ```
    /// use resilient_api::request::Verb;
    ///
    /// assert!(Verb::Put.is_idempotent());
    /// assert!(!Verb::Post.is_idempotent()); // unless `#[idempotent]` or `#[idempotency_key]`
    /// ```
    pub const fn is_idempotent(self) -> bool {
        !matches!(self, Verb::Post | Verb::Patch)
    }

    /// The method's name, e.g. `"GET"`.
    ///
    /// ```
    /// use resilient_api::request::Verb;
    ///
    /// assert_eq!(Verb::Options.as_str(), Verb::Options.method().as_str());
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::Post => "POST",
            Verb::Put => "PUT",
            Verb::Patch => "PATCH",
            Verb::Delete => "DELETE",
            Verb::Head => "HEAD",
            Verb::Options => "OPTIONS",
        }
    }
}

/// One piece of a path template, split at compile time.
///
/// ```
/// use resilient_api::request::PathPart;
///
/// // "/users/{id}/posts/{post}"
/// const PATH: &[PathPart] = &[
///     PathPart::Lit("/users/"),
///     PathPart::Param(0),
///     PathPart::Lit("/posts/"),
///     PathPart::Param(1),
/// ];
/// assert_eq!(PATH.iter().filter(|p| matches!(p, PathPart::Param(_))).count(), 2);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathPart {
    /// Literal text, sent as written.
    Lit(&'static str),
    /// The value of the parameter at this index of the call's path arguments.
    Param(usize),
}

/// Hedging settings of an endpoint (see [`crate::hedge`]).
///
/// ```
/// use resilient_api::request::{HedgeConfig, Policy};
/// use std::time::Duration;
///
/// // As `#[hedge(delay = "50ms", max = 2)]` declares it.
/// let hedge = HedgeConfig { delay: Duration::from_millis(50), max: 2 };
/// let policy = Policy { hedge: Some(hedge), ..Policy::DEFAULT };
/// assert_eq!(policy.hedge.map(|h| h.max), Some(2));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HedgeConfig {
    /// How long to wait for an answer before launching another attempt.
    pub delay: Duration,
    /// Attempts in flight at most, the first one included.
    pub max: u32,
}

/// The effective policy of one endpoint: the trait's defaults merged with the
/// method's own attributes, field by field, at compile time.
///
/// ```
/// use resilient_api::request::Policy;
/// use resilient_api::retry::RetryPolicy;
/// use std::time::Duration;
///
/// // `timeout(attempt = "2s", total = "10s")` and `#[retry(max = 0)]`.
/// const QUICK: Policy = Policy {
///     attempt_timeout: Some(Duration::from_secs(2)),
///     total_timeout: Some(Duration::from_secs(10)),
///     retry: RetryPolicy { max: 0, ..RetryPolicy::DEFAULT },
///     ..Policy::DEFAULT
/// };
/// assert!(QUICK.breaker.is_none()); // the client's default breaker
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Policy {
    /// Limit for one attempt (connect, headers and body). `None` only when the
    /// endpoint says `attempt = "none"`.
    pub attempt_timeout: Option<Duration>,
    /// Deadline for the whole call, queue waits and backoffs included.
    pub total_timeout: Option<Duration>,
    /// Retry settings.
    pub retry: RetryPolicy,
    /// Circuit breaker; `None` uses the client's default breaker.
    pub breaker: Option<BreakerConfig>,
    /// Bulkhead; `None` uses the client's default bulkhead.
    pub bulkhead: Option<BulkheadConfig>,
    /// Rate limit; `None` means no rate limit.
    pub rate_limit: Option<RateLimitConfig>,
    /// Hedging; `None` means attempts are never hedged.
    pub hedge: Option<HedgeConfig>,
    /// Whether identical concurrent calls share one execution.
    pub coalesce: bool,
    /// The compartment this endpoint's stateful policies live in; `None` is the
    /// client's default partition.
    pub partition: Option<&'static str>,
    /// Whether `partition` is the method's own (`Trait::method`, named because the
    /// method has a breaker, bulkhead or rate limit of its own): its API's alone. A
    /// name given with `#[partition("...")]` is shared by the clients on one engine.
    pub own_partition: bool,
    /// Largest response body accepted, in bytes; `None` uses the client's limit.
    pub max_body: Option<u64>,
}

impl Policy {
    /// The policy of an endpoint that declares nothing (attempt timeout aside): a
    /// 30 s attempt timeout, no total deadline, [`RetryPolicy::DEFAULT`], the client's
    /// breaker, bulkhead and size limit, no rate limit, no hedging, no coalescing.
    ///
    /// ```
    /// use resilient_api::request::Policy;
    /// use std::time::Duration;
    ///
    /// assert_eq!(Policy::DEFAULT.attempt_timeout, Some(Duration::from_secs(30)));
    /// assert_eq!(Policy::DEFAULT.total_timeout, None);
    /// ```
    pub const DEFAULT: Policy = Policy {
        attempt_timeout: Some(Duration::from_secs(30)),
        total_timeout: None,
        retry: RetryPolicy::DEFAULT,
        breaker: None,
        bulkhead: None,
        rate_limit: None,
        hedge: None,
        coalesce: false,
        partition: None,
        own_partition: false,
        max_body: None,
    };
}

/// Everything known about one endpoint at compile time. Generated code puts one
/// in a `static` per method.
///
/// ```
/// use resilient_api::request::{EndpointSpec, PathPart, Policy, Verb};
///
/// // `#[get("/users/{id}")] async fn user(&self, id: u64)`, roughly.
/// static USER: EndpointSpec = EndpointSpec {
///     index: 0,
///     name: "user",
///     verb: Verb::Get,
///     template: "/users/{id}",
///     path: &[PathPart::Lit("/users/"), PathPart::Param(0)],
///     idempotent: Verb::Get.is_idempotent(),
///     idempotency_key: None,
///     secrets: &[],
///     policy: Policy::DEFAULT,
/// };
/// assert!(USER.idempotent);
/// ```
#[derive(Debug)]
pub struct EndpointSpec {
    /// Position in [`ApiSpec::endpoints`].
    pub index: usize,
    /// The method's name, e.g. `"user"`.
    pub name: &'static str,
    /// The HTTP verb.
    pub verb: Verb,
    /// The path template as written, e.g. `"/users/{id}"` (the OpenTelemetry
    /// `url.template`).
    pub template: &'static str,
    /// The template split into literal text and parameters.
    pub path: &'static [PathPart],
    /// Safe to repeat: by its verb, by `#[idempotent]` or by `#[idempotency_key]`.
    pub idempotent: bool,
    /// Header that carries one generated key per logical call, if any.
    pub idempotency_key: Option<&'static str>,
    /// Names of the header and query parameters declared secret.
    pub secrets: &'static [&'static str],
    /// The effective policy.
    pub policy: Policy,
}

/// Everything known about an annotated trait at compile time.
///
/// Every generated client has one, as [`GeneratedClient::API`](crate::client::GeneratedClient::API).
///
/// ```
/// use resilient_api::client::GeneratedClient;
/// use resilient_api::{resilient_api, ApiError};
///
/// #[resilient_api(base_url = "https://api.test", timeout(attempt = "1s"))]
/// pub trait Users {
///     #[get("/users/{id}")]
///     async fn user(&self, id: u64) -> Result<String, ApiError>;
/// }
///
/// let api = <UsersClient as GeneratedClient>::API;
/// assert_eq!((api.name, api.base_url), ("Users", Some("https://api.test")));
/// assert_eq!(api.endpoints[0].template, "/users/{id}");
/// ```
#[derive(Debug)]
pub struct ApiSpec {
    /// The trait's name.
    pub name: &'static str,
    /// `base_url` from the attribute, if given.
    pub base_url: Option<&'static str>,
    /// `headers(...)` from the attribute: sent on every request.
    pub headers: &'static [(&'static str, &'static str)],
    /// The endpoints, in declaration order.
    pub endpoints: &'static [&'static EndpointSpec],
}

/// A streamed request body: never replayed, so endpoints taking one are never retried.
///
/// A chunk the stream fails to give (a file that cannot be read) ends the call with
/// [`ErrorKind::Transport`](crate::ErrorKind::Transport), whose message says the
/// request body stream failed and whose source chain holds the stream's own error. It
/// is the caller's failure, not the upstream's: the circuit breaker does not count it.
/// A [`Transport`](crate::transport::Transport) of one's own reads the body as a
/// [`Stream`] of chunks.
///
/// An endpoint takes one with `#[body(stream)]`:
///
/// ```
/// use resilient_api::testing::{ScriptedTransport, Step};
/// use resilient_api::{resilient_api, ApiError, BodyStream, Bytes};
///
/// #[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
/// pub trait Files {
///     #[put("/files/{name}")]
///     async fn upload(&self, name: &str, #[body(stream)] data: BodyStream) -> Result<(), ApiError>;
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
/// let t = ScriptedTransport::new([Step::status(201)]);
/// let api = FilesClient::builder().base_url("http://api.test").transport(t.clone()).build()?;
/// let chunks = futures_util::stream::iter([Ok(Bytes::from("hello, ")), Ok(Bytes::from("world"))]);
/// api.upload("greeting.txt", BodyStream::new(chunks)).await?;
/// assert_eq!(t.requests()[0].body, "hello, world");
/// # Ok(()) }
/// ```
pub struct BodyStream {
    pub(crate) inner: Pin<Box<dyn Stream<Item = Result<Bytes, std::io::Error>> + Send>>,
}

impl BodyStream {
    /// Wrap any stream of byte chunks.
    ///
    /// ```
    /// use resilient_api::request::BodyStream;
    /// let chunks = futures_util::stream::iter(vec![Ok(bytes::Bytes::from_static(b"hi"))]);
    /// let body = BodyStream::new(chunks);
    /// # let _ = body;
    /// ```
    pub fn new<S>(stream: S) -> Self
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
    {
        use futures_util::TryStreamExt as _;
        // Marked, so that the pipeline can tell the stream's failure, as the transport
        // hands it back, from the upstream's; the error's kind is kept.
        let marked = stream.map_err(|e| std::io::Error::new(e.kind(), BodyFailed(e)));
        BodyStream {
            inner: Box::pin(marked),
        }
    }
}

/// The chunks, for a transport of one's own to send.
///
/// ```
/// use futures_util::StreamExt as _;
/// use resilient_api::request::BodyStream;
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let chunks = futures_util::stream::iter(vec![Ok(bytes::Bytes::from_static(b"hi"))]);
/// let mut body = BodyStream::new(chunks);
/// assert_eq!(body.next().await.map(Result::ok), Some(Some(bytes::Bytes::from_static(b"hi"))));
/// assert!(body.next().await.is_none());
/// # }
/// ```
impl Stream for BodyStream {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

/// A request body stream's own error, as its chunk's error carries it: the caller's
/// failure, which the transport hands back inside its own error.
#[derive(Debug)]
struct BodyFailed(std::io::Error);

impl fmt::Display for BodyFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the request body stream failed: {}", self.0)
    }
}

impl std::error::Error for BodyFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// Whether `error`, or an error in its source chain, is a request body stream's own
/// failure (see [`BodyStream::new`]).
pub(crate) fn body_stream_failed(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        let marked = e
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
            .is_some_and(|inner| inner.is::<BodyFailed>());
        if marked || e.is::<BodyFailed>() {
            return true;
        }
        next = e.source();
    }
    false
}

impl fmt::Debug for BodyStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BodyStream(..)")
    }
}

/// The body of an outgoing request.
///
/// What a [`Transport`](crate::Transport) or a middleware finds in
/// [`HttpRequest::body`](crate::transport::HttpRequest::body):
///
/// ```
/// use resilient_api::request::RequestBody;
/// use resilient_api::Bytes;
///
/// /// How many bytes a request sends, if that is known before sending.
/// fn known_len(body: &RequestBody) -> Option<usize> {
///     match body {
///         RequestBody::Empty => Some(0),
///         RequestBody::Bytes(bytes) => Some(bytes.len()), // the same on every attempt
///         RequestBody::Stream(_) => None,                 // read once, as it is sent
///     }
/// }
/// assert_eq!(known_len(&RequestBody::Bytes(Bytes::from("{}"))), Some(2));
/// assert_eq!(known_len(&RequestBody::default()), Some(0));
/// ```
///
/// Its `Debug` shows the body's length, never its bytes (a body can hold a password
/// or a token), or `stream` for a stream:
///
/// ```
/// use resilient_api::request::RequestBody;
/// use resilient_api::Bytes;
///
/// let login = RequestBody::Bytes(Bytes::from(r#"{"password":"hunter2"}"#));
/// assert_eq!(format!("{login:?}"), "22 bytes");
/// assert_eq!(format!("{:?}", RequestBody::Empty), "0 bytes");
/// ```
#[derive(Default)]
pub enum RequestBody {
    /// No body.
    #[default]
    Empty,
    /// Bytes, identical on every attempt.
    Bytes(Bytes),
    /// A stream that can be sent once.
    Stream(BodyStream),
}

impl fmt::Debug for RequestBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestBody::Empty => f.write_str("0 bytes"),
            RequestBody::Bytes(b) => write!(f, "{} bytes", b.len()),
            RequestBody::Stream(_) => f.write_str("stream"),
        }
    }
}

/// Why a request could not be built. Names the parameter, never its value.
///
/// It is the source of an [`ErrorKind::InvalidRequest`](crate::ErrorKind::InvalidRequest) error:
///
/// ```
/// use resilient_api::request::InvalidRequest;
/// use resilient_api::testing::ScriptedTransport;
/// use resilient_api::{resilient_api, ApiError, ErrorKind};
/// use std::error::Error as _;
///
/// #[resilient_api(timeout(attempt = "1s"))]
/// pub trait Api { #[get("/files/{name}")] async fn file(&self, name: &str) -> Result<String, ApiError>; }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
/// let t = ScriptedTransport::new([]);
/// let api = ApiClient::builder().base_url("http://api.test").transport(t.clone()).build()?;
/// let err = api.file("..").await.err();
/// assert_eq!(err.as_ref().map(|e| e.kind()), Some(ErrorKind::InvalidRequest));
/// let invalid = err.as_ref().and_then(|e| e.source()?.downcast_ref::<InvalidRequest>());
/// assert_eq!(invalid.map(|i| i.name.as_str()), Some("name"));
/// assert_eq!(t.attempts(), 0); // nothing was sent
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidRequest {
    /// The parameter or header at fault.
    pub name: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl fmt::Display for InvalidRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid `{}`: {}", self.name, self.reason)
    }
}

impl std::error::Error for InvalidRequest {}

/// Characters escaped in one path segment: everything but RFC 3986 unreserved
/// characters and the sub-delimiters that are safe inside a segment.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'\\')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}')
    .add(b'[')
    .add(b']');

/// Percent-encode one path segment, refusing values that would change the path's
/// shape: empty, `.`, `..`, or holding CR, LF or TAB.
///
/// ```
/// use resilient_api::request::encode_path_segment;
///
/// assert_eq!(encode_path_segment("café au lait").as_deref(), Ok("caf%C3%A9%20au%20lait"));
/// assert_eq!(encode_path_segment("a/b").as_deref(), Ok("a%2Fb")); // still one segment
/// assert!(encode_path_segment("..").is_err());
/// ```
pub fn encode_path_segment(value: &str) -> Result<String, &'static str> {
    if value.is_empty() {
        return Err("a path segment cannot be empty");
    }
    if value == "." || value == ".." {
        return Err("a path segment cannot be `.` or `..`");
    }
    if value.bytes().any(|b| matches!(b, b'\r' | b'\n' | b'\t')) {
        return Err("a path segment cannot hold CR, LF or TAB");
    }
    Ok(utf8_percent_encode(value, SEGMENT).to_string())
}

/// Check a header value: CR, LF and NUL are refused, never stripped.
///
/// ```
/// use resilient_api::request::header_value;
///
/// assert!(header_value("Bearer abc123").is_ok());
/// assert!(header_value("abc\r\nSet-Cookie: session=evil").is_err());
/// ```
pub fn header_value(value: &str) -> Result<HeaderValue, &'static str> {
    if value.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0)) {
        return Err("a header value cannot hold CR, LF or NUL");
    }
    HeaderValue::from_str(value).map_err(|_| "not a valid header value")
}

/// One call's request, built from its arguments by generated code.
///
/// Mistakes are collected, not thrown: the first one is reported by the call as an
/// [`ErrorKind::InvalidRequest`](crate::ErrorKind::InvalidRequest) before anything is
/// sent.
///
/// ```
/// # use resilient_api::request::{EndpointSpec, PathPart, Policy, RequestBuilder, Verb};
/// # static USER: EndpointSpec = EndpointSpec {
/// #     index: 0, name: "user", verb: Verb::Put, template: "/users/{id}",
/// #     path: &[PathPart::Lit("/users/"), PathPart::Param(0)], idempotent: true,
/// #     idempotency_key: None, secrets: &[], policy: Policy::DEFAULT,
/// # };
/// let mut request = RequestBuilder::new(&USER); // `USER`: an `EndpointSpec` for `/users/{id}`
/// request.path("id", &"..").header("x-trace", &"a\r\nb"); // two mistakes
/// let shown = format!("{request:?}");
/// assert!(shown.contains("cannot be `.` or `..`")); // the first is the one reported
/// assert!(!shown.contains("CR, LF"));
/// ```
pub struct RequestBuilder {
    pub(crate) spec: &'static EndpointSpec,
    pub(crate) path_values: Vec<String>,
    pub(crate) query: String,
    /// The names a secret query parameter's value was sent under when it is a struct,
    /// flattened into its fields: dropped, as the declared names are, from a redirect
    /// to another origin. Empty (and not allocated) for every other call.
    pub(crate) secret_query: Vec<String>,
    /// `None` until a header is added: most calls add none.
    pub(crate) headers: Option<HeaderMap>,
    pub(crate) body: RequestBody,
    /// The body's own content type, sent unless a header names one (the call's, or
    /// the client's): added when the request is prepared, so that an explicit one
    /// given before or after the body, or by the client, replaces it.
    pub(crate) body_type: Option<&'static str>,
    pub(crate) error: Option<InvalidRequest>,
}

impl fmt::Debug for RequestBuilder {
    /// Every query value and every secret header is shown as `[redacted]`, and the
    /// body by its length alone (`body: 12 bytes`, or `body: stream`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut query = String::with_capacity(self.query.len());
        crate::observe::push_redacted_query(&mut query, &self.query);
        f.debug_struct("RequestBuilder")
            .field("endpoint", &self.spec.name)
            .field("path_values", &self.path_values)
            .field("query", &query)
            .field(
                "headers",
                &self.headers.as_ref().map(crate::observe::Redacted),
            )
            .field("body", &self.body)
            .field("body_type", &self.body_type)
            .field("error", &self.error)
            .finish()
    }
}

impl RequestBuilder {
    /// Start the request of `spec`.
    ///
    /// ```
    /// # use resilient_api::request::{EndpointSpec, PathPart, Policy, RequestBuilder, Verb};
    /// # static USER: EndpointSpec = EndpointSpec {
    /// #     index: 0, name: "user", verb: Verb::Put, template: "/users/{id}",
    /// #     path: &[PathPart::Lit("/users/"), PathPart::Param(0)], idempotent: true,
    /// #     idempotency_key: None, secrets: &["x-api-key"], policy: Policy::DEFAULT,
    /// # };
    /// let request = RequestBuilder::new(&USER);
    /// assert!(format!("{request:?}").contains(r#"endpoint: "user""#));
    /// ```
    pub fn new(spec: &'static EndpointSpec) -> Self {
        RequestBuilder {
            spec,
            path_values: Vec::new(),
            query: String::new(),
            secret_query: Vec::new(),
            headers: None,
            body: RequestBody::Empty,
            body_type: None,
            error: None,
        }
    }

    /// Whether a header of this name is the call's idempotency key: the standard
    /// `Idempotency-Key`, or the endpoint's own key header.
    fn is_key_header(&self, name: &str) -> bool {
        name.eq_ignore_ascii_case("idempotency-key")
            || self
                .spec
                .idempotency_key
                .is_some_and(|k| k.eq_ignore_ascii_case(name))
    }

    fn fail(&mut self, name: &str, reason: &'static str) {
        if self.error.is_none() {
            self.error = Some(InvalidRequest {
                name: name.to_owned(),
                reason,
            });
        }
    }

    /// The next path parameter, in template order. Every `{name}` of the template
    /// needs one, and nothing else takes one: a call with fewer is refused as
    /// [`ErrorKind::InvalidRequest`](crate::ErrorKind::InvalidRequest) naming the first
    /// without a value, and a call with more names the first extra one by its
    /// position (`#1` past a template's single `{name}`), before anything is sent.
    ///
    /// ```
    /// # use resilient_api::request::{EndpointSpec, PathPart, Policy, RequestBuilder, Verb};
    /// # static USER: EndpointSpec = EndpointSpec {
    /// #     index: 0, name: "user", verb: Verb::Put, template: "/users/{id}",
    /// #     path: &[PathPart::Lit("/users/"), PathPart::Param(0)], idempotent: true,
    /// #     idempotency_key: None, secrets: &["x-api-key"], policy: Policy::DEFAULT,
    /// # };
    /// let mut request = RequestBuilder::new(&USER);
    /// request.path("id", &"a/b?c"); // one segment, whatever it holds
    /// assert!(format!("{request:?}").contains(r#"path_values: ["a%2Fb%3Fc"]"#));
    /// ```
    pub fn path(&mut self, name: &str, value: &dyn fmt::Display) -> &mut Self {
        match encode_path_segment(&value.to_string()) {
            Ok(seg) => self.path_values.push(seg),
            Err(reason) => {
                self.path_values.push(String::new());
                self.fail(name, reason);
            }
        }
        self
    }

    /// A query parameter: a scalar under `name`, an `Option` (left out when `None`),
    /// a sequence (`name` repeated for each element: `ids=1&ids=2`), or a `Serialize`
    /// struct (flattened, `name` unused; a sequence field repeats its own name).
    ///
    /// A sequence is a `Vec`, a slice or a set. A fixed-size array such as `[u32; 2]`
    /// is a tuple to serde and cannot be encoded: the call fails with
    /// [`ErrorKind::InvalidRequest`](crate::ErrorKind::InvalidRequest).
    ///
    /// ```
    /// # use resilient_api::request::{EndpointSpec, PathPart, Policy, RequestBuilder, Verb};
    /// # static USER: EndpointSpec = EndpointSpec {
    /// #     index: 0, name: "user", verb: Verb::Put, template: "/users/{id}",
    /// #     path: &[PathPart::Lit("/users/"), PathPart::Param(0)], idempotent: true,
    /// #     idempotency_key: None, secrets: &["x-api-key"], policy: Policy::DEFAULT,
    /// # };
    /// let mut request = RequestBuilder::new(&USER);
    /// request.query("ids", &vec![1, 2]).query("page", &None::<u32>);
    /// assert!(format!("{request:?}").contains("ids=[redacted]&ids=[redacted]")); // no `page`
    /// let mut array = RequestBuilder::new(&USER);
    /// array.query("ids", &[1, 2]); // a tuple to serde, not a sequence
    /// assert!(format!("{array:?}").contains("cannot be encoded as a query parameter"));
    /// ```
    pub fn query<T: Serialize + ?Sized>(&mut self, name: &str, value: &T) -> &mut Self {
        let pair = serde_html_form::to_string([(name, value)]);
        let flattened = pair.is_err();
        let encoded = match pair {
            Ok(s) => Ok(s),
            Err(_) => serde_html_form::to_string(value),
        };
        match encoded {
            Ok(s) if s.is_empty() => {}
            Ok(s) => {
                // A secret struct is sent under its fields' names, not its own.
                if flattened && self.spec.secrets.contains(&name) {
                    let names = url::form_urlencoded::parse(s.as_bytes()).map(|(k, _)| k);
                    self.secret_query.extend(names.map(|k| k.into_owned()));
                }
                if !self.query.is_empty() {
                    self.query.push('&');
                }
                self.query.push_str(&s);
            }
            Err(_) => self.fail(name, "cannot be encoded as a query parameter"),
        }
        self
    }

    /// A header; `Option` values that are `None` are left out by generated code.
    ///
    /// ```
    /// # use resilient_api::request::{EndpointSpec, PathPart, Policy, RequestBuilder, Verb};
    /// # static USER: EndpointSpec = EndpointSpec {
    /// #     index: 0, name: "user", verb: Verb::Put, template: "/users/{id}",
    /// #     path: &[PathPart::Lit("/users/"), PathPart::Param(0)], idempotent: true,
    /// #     idempotency_key: None, secrets: &["x-api-key"], policy: Policy::DEFAULT,
    /// # };
    /// let mut request = RequestBuilder::new(&USER);
    /// request.header("x-api-key", &"s3cret"); // declared secret by `USER`
    /// assert!(!format!("{request:?}").contains("s3cret"));
    /// request.header("x-note", &"a\r\nSet-Cookie: x=1"); // refused, never sent
    /// assert!(format!("{request:?}").contains("CR, LF or NUL"));
    /// ```
    ///
    /// An idempotency key (an `Idempotency-Key` header, or the endpoint's
    /// `#[idempotency_key("...")]` header) that is empty, or blanks only, which a
    /// server reads as empty, is no key: it is refused, never sent, and the call ends
    /// before any attempt (a caller's key is what makes a POST retryable).
    ///
    /// ```
    /// # use resilient_api::request::{EndpointSpec, PathPart, Policy, RequestBuilder, Verb};
    /// # static CHARGE: EndpointSpec = EndpointSpec {
    /// #     index: 0, name: "charge", verb: Verb::Post, template: "/charges",
    /// #     path: &[PathPart::Lit("/charges")], idempotent: true,
    /// #     idempotency_key: None, secrets: &[], policy: Policy::DEFAULT,
    /// # };
    /// let mut request = RequestBuilder::new(&CHARGE);
    /// request.header("Idempotency-Key", &"");
    /// assert!(format!("{request:?}").contains("an idempotency key cannot be empty"));
    /// ```
    pub fn header(&mut self, name: &'static str, value: &dyn fmt::Display) -> &mut Self {
        let header_name = match HeaderName::from_bytes(name.as_bytes()) {
            Ok(n) => n,
            Err(_) => {
                self.fail(name, "not a valid header name");
                return self;
            }
        };
        let value = value.to_string();
        if value.trim_matches([' ', '\t']).is_empty() && self.is_key_header(name) {
            self.fail(name, "an idempotency key cannot be empty");
            return self;
        }
        match header_value(&value) {
            Ok(mut v) => {
                if self
                    .spec
                    .secrets
                    .iter()
                    .any(|s| s.eq_ignore_ascii_case(name))
                {
                    v.set_sensitive(true);
                }
                self.headers
                    .get_or_insert_with(HeaderMap::new)
                    .append(header_name, v);
            }
            Err(reason) => self.fail(name, reason),
        }
        self
    }

    /// A JSON body.
    ///
    /// ```
    /// # use resilient_api::request::{EndpointSpec, PathPart, Policy, RequestBuilder, Verb};
    /// # static USER: EndpointSpec = EndpointSpec {
    /// #     index: 0, name: "user", verb: Verb::Put, template: "/users/{id}",
    /// #     path: &[PathPart::Lit("/users/"), PathPart::Param(0)], idempotent: true,
    /// #     idempotency_key: None, secrets: &["x-api-key"], policy: Policy::DEFAULT,
    /// # };
    /// let mut request = RequestBuilder::new(&USER);
    /// request.json("user", &serde_json::json!({ "name": "Ada" }));
    /// assert!(format!("{request:?}").contains("application/json"));
    /// ```
    pub fn json<T: Serialize + ?Sized>(&mut self, name: &str, value: &T) -> &mut Self {
        match serde_json::to_vec(value) {
            Ok(v) => self.set_body(Bytes::from(v), "application/json"),
            Err(_) => self.fail(name, "cannot be encoded as JSON"),
        }
        self
    }

    /// A form body (`application/x-www-form-urlencoded`).
    ///
    /// ```
    /// # use resilient_api::request::{EndpointSpec, PathPart, Policy, RequestBuilder, Verb};
    /// # static USER: EndpointSpec = EndpointSpec {
    /// #     index: 0, name: "user", verb: Verb::Put, template: "/users/{id}",
    /// #     path: &[PathPart::Lit("/users/"), PathPart::Param(0)], idempotent: true,
    /// #     idempotency_key: None, secrets: &["x-api-key"], policy: Policy::DEFAULT,
    /// # };
    /// let mut request = RequestBuilder::new(&USER);
    /// request.form("login", &[("user", "ada"), ("remember", "yes")]);
    /// assert!(format!("{request:?}").contains("application/x-www-form-urlencoded"));
    /// ```
    pub fn form<T: Serialize + ?Sized>(&mut self, name: &str, value: &T) -> &mut Self {
        match serde_html_form::to_string(value) {
            Ok(v) => self.set_body(Bytes::from(v), "application/x-www-form-urlencoded"),
            Err(_) => self.fail(name, "cannot be encoded as a form"),
        }
        self
    }

    /// Raw bytes, sent as they are.
    ///
    /// ```
    /// # use resilient_api::request::{EndpointSpec, PathPart, Policy, RequestBuilder, Verb};
    /// # static USER: EndpointSpec = EndpointSpec {
    /// #     index: 0, name: "user", verb: Verb::Put, template: "/users/{id}",
    /// #     path: &[PathPart::Lit("/users/"), PathPart::Param(0)], idempotent: true,
    /// #     idempotency_key: None, secrets: &["x-api-key"], policy: Policy::DEFAULT,
    /// # };
    /// let mut request = RequestBuilder::new(&USER);
    /// request.raw(b"\x89PNG");
    /// assert!(format!("{request:?}").contains("application/octet-stream"));
    /// ```
    pub fn raw(&mut self, value: impl AsRef<[u8]>) -> &mut Self {
        self.set_body(
            Bytes::copy_from_slice(value.as_ref()),
            "application/octet-stream",
        );
        self
    }

    /// A streamed body: sent once, never replayed.
    ///
    /// ```
    /// # use resilient_api::request::{EndpointSpec, PathPart, Policy, RequestBuilder, Verb};
    /// # static USER: EndpointSpec = EndpointSpec {
    /// #     index: 0, name: "user", verb: Verb::Put, template: "/users/{id}",
    /// #     path: &[PathPart::Lit("/users/"), PathPart::Param(0)], idempotent: true,
    /// #     idempotency_key: None, secrets: &["x-api-key"], policy: Policy::DEFAULT,
    /// # };
    /// use resilient_api::{BodyStream, Bytes};
    ///
    /// let chunks = futures_util::stream::iter([Ok::<_, std::io::Error>(Bytes::from("a,b\n"))]);
    /// let mut request = RequestBuilder::new(&USER);
    /// request.stream(BodyStream::new(chunks));
    /// assert!(format!("{request:?}").contains("body: stream")); // never its chunks
    /// ```
    pub fn stream(&mut self, value: BodyStream) -> &mut Self {
        self.body = RequestBody::Stream(value);
        self
    }

    fn set_body(&mut self, bytes: Bytes, content_type: &'static str) {
        self.body_type = Some(content_type);
        self.body = RequestBody::Bytes(bytes);
    }

    /// Append the path with every parameter filled in (no base URL, no query).
    pub(crate) fn render_path_into(&self, out: &mut String) {
        for part in self.spec.path {
            match part {
                PathPart::Lit(s) => out.push_str(s),
                PathPart::Param(i) => {
                    if let Some(v) = self.path_values.get(*i) {
                        out.push_str(v);
                    }
                }
            }
        }
    }
}

/// The name of the path parameter at `index`: the `index`-th `{name}` of `template`
/// (a raw `{r#type}` by its bare name), or `#index` if the template has none there.
pub(crate) fn placeholder_name(template: &str, index: usize) -> String {
    template
        .split('{')
        .skip(1)
        .filter_map(|rest| rest.split_once('}').map(|(name, _)| name))
        .nth(index)
        .map_or_else(
            || format!("#{index}"),
            |name| name.strip_prefix("r#").unwrap_or(name).to_owned(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholder_names_are_read_from_the_template_in_order() {
        let t = "/b/{x}/{r#type}.json";
        assert_eq!(placeholder_name(t, 0), "x");
        assert_eq!(placeholder_name(t, 1), "type");
        assert_eq!(placeholder_name(t, 2), "#2");
        assert_eq!(placeholder_name("/users", 0), "#0");
    }

    #[test]
    fn segment_encodes_reserved_characters_once() {
        assert_eq!(
            encode_path_segment("a/b?x=1#y%2e"),
            Ok("a%2Fb%3Fx=1%23y%252e".into())
        );
        assert_eq!(encode_path_segment("café"), Ok("caf%C3%A9".into()));
        assert_eq!(encode_path_segment("a b"), Ok("a%20b".into()));
        assert_eq!(encode_path_segment("..."), Ok("...".into()));
    }

    #[test]
    fn segment_refuses_shape_changing_values() {
        for bad in ["", ".", "..", "a\rb", "a\nb", "a\tb"] {
            assert!(encode_path_segment(bad).is_err(), "{bad:?}");
        }
    }

    static SECRETS: EndpointSpec = EndpointSpec {
        index: 0,
        name: "data",
        verb: Verb::Get,
        template: "/data",
        path: &[PathPart::Lit("/data")],
        idempotent: true,
        idempotency_key: None,
        secrets: &["api_key", "x-api-key"],
        policy: Policy::DEFAULT,
    };

    /// Regression: `RequestBuilder` derived `Debug`, which printed the query string
    /// as built (a declared secret query value included) and an undeclared
    /// `Authorization` header as given.
    #[test]
    fn a_request_builder_printed_shows_no_secret() {
        let mut r = RequestBuilder::new(&SECRETS);
        r.query("api_key", "CANARY-q")
            .query("page", &2)
            .header("x-api-key", &"CANARY-h")
            .header("authorization", &"Bearer CANARY-a")
            .header("accept", &"application/json");
        let printed = format!("{r:?}");
        assert!(!printed.contains("CANARY"), "leaked: {printed}");
        assert!(printed.contains("api_key=[redacted]"), "{printed}");
        assert!(printed.contains("application/json"), "{printed}");
    }

    /// Regression: `RequestBuilder`'s `Debug` printed its body as given (a form's
    /// password, a JSON token); it shows the body's length, or that it is a stream.
    #[test]
    fn a_request_builder_printed_shows_its_body_length_only() {
        let mut r = RequestBuilder::new(&SECRETS);
        r.form("login", &[("user", "ada"), ("password", "CANARY-pw")]);
        let printed = format!("{r:?}");
        assert!(!printed.contains("CANARY"), "leaked: {printed}");
        assert!(printed.contains("body: 27 bytes,"), "{printed}");
        let chunks = futures_util::stream::iter([Ok(Bytes::from("CANARY-chunk"))]);
        r.stream(BodyStream::new(chunks));
        let printed = format!("{r:?}");
        assert!(printed.contains("body: stream,"), "{printed}");
        let empty = format!("{:?}", RequestBuilder::new(&SECRETS));
        assert!(empty.contains("body: 0 bytes,"), "{empty}");
    }

    #[test]
    fn header_refuses_crlf_and_nul() {
        assert!(header_value("ok value").is_ok());
        for bad in ["a\rb", "a\nb", "a\0b"] {
            assert!(header_value(bad).is_err());
        }
    }
}
