//! The wire: a trait that sends one HTTP request, and its reqwest implementation.
//!
//! # When to use
//! The default transport is reqwest with one shared connection pool per client. Pass
//! your own `reqwest::Client` with [`ClientBuilder::reqwest_client`] to tune TLS,
//! proxies or pool sizes, or implement [`Transport`] to put something else on the wire
//! (the [`testing`](crate::testing) module's scripted transport does).
//!
//! # Defaults
//! A `reqwest::Client` with redirects turned off: redirects are followed by the
//! pipeline, which bounds them, counts them against the deadline and drops credentials
//! when the origin changes.
//!
//! # Example
//! ```
//! use resilient_api::transport::{HttpRequest, HttpResponse, Transport, TransportError};
//! use std::{future::Future, pin::Pin};
//!
//! /// A transport that answers every request with 204.
//! struct NoContent;
//! impl Transport for NoContent {
//!     fn send(&self, _req: HttpRequest)
//!         -> Pin<Box<dyn Future<Output = Result<HttpResponse, TransportError>> + Send>> {
//!         Box::pin(async { Ok(HttpResponse::new(http::StatusCode::NO_CONTENT, http::HeaderMap::new())) })
//!     }
//! }
//! ```
//!
//! [`ClientBuilder::reqwest_client`]: crate::ClientBuilder::reqwest_client

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_core::Stream;
use http::{HeaderMap, Method, StatusCode};
use url::Url;

use crate::error::BoxError;
use crate::request::RequestBody;

/// A future returned by [`Transport::send`].
///
/// Box the `async` block that does the work:
///
/// ```
/// use resilient_api::transport::{HttpRequest, SendFuture, Transport, TransportError};
/// use resilient_api::{resilient_api, ApiError};
///
/// struct Offline;
/// impl Transport for Offline {
///     fn send(&self, _request: HttpRequest) -> SendFuture {
///         Box::pin(async { Err(TransportError::connect("the network is off")) })
///     }
/// }
///
/// #[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
/// pub trait Api { #[get("/ping")] async fn ping(&self) -> Result<(), ApiError>; }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
/// let api = ApiClient::builder().base_url("http://api.test").transport(Offline).build()?;
/// let err = api.ping().await.err();
/// assert!(err.is_some_and(|e| e.is_connect()));
/// # Ok(()) }
/// ```
pub type SendFuture = Pin<Box<dyn Future<Output = Result<HttpResponse, TransportError>> + Send>>;

/// Sends one HTTP request and returns the response head with a body to read.
///
/// Dropping the returned future, or the response body, must abort the request.
///
/// `send` is called as the attempt starts, inside the call's `http.client` span; the
/// returned future is polled inside the attempt's `http.attempt` span. Do the work in
/// the future.
///
/// A minimal transport, answering from memory, and a client that uses it:
///
/// ```
/// use resilient_api::transport::{HttpRequest, HttpResponse, ResponseBody, SendFuture, Transport};
/// use resilient_api::{resilient_api, ApiError};
///
/// /// Answers every request with its own path.
/// struct Echo;
/// impl Transport for Echo {
///     fn send(&self, request: HttpRequest) -> SendFuture {
///         Box::pin(async move {
///             let mut response = HttpResponse::new(http::StatusCode::OK, http::HeaderMap::new());
///             response.body = ResponseBody::full(request.url.path().to_owned().into());
///             Ok(response)
///         })
///     }
/// }
///
/// #[resilient_api(timeout(attempt = "1s"))]
/// pub trait Api { #[get("/hello/{name}")] async fn hello(&self, name: &str) -> Result<String, ApiError>; }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
/// let api = ApiClient::builder().base_url("http://echo.test").transport(Echo).build()?;
/// assert_eq!(api.hello("world").await?, "/hello/world");
/// # Ok(()) }
/// ```
pub trait Transport: Send + Sync + 'static {
    /// Send `request`.
    ///
    /// A transport that wraps another one:
    ///
    /// ```
    /// use resilient_api::testing::{ScriptedTransport, Step};
    /// use resilient_api::transport::{HttpRequest, SendFuture, Transport};
    /// use resilient_api::{resilient_api, ApiError};
    ///
    /// /// Tags every request, then lets `T` send it.
    /// struct Tagged<T>(T);
    /// impl<T: Transport> Transport for Tagged<T> {
    ///     fn send(&self, mut request: HttpRequest) -> SendFuture {
    ///         request.headers.insert("x-client", http::HeaderValue::from_static("docs"));
    ///         self.0.send(request)
    ///     }
    /// }
    ///
    /// #[resilient_api(timeout(attempt = "1s"))]
    /// pub trait Api { #[get("/ping")] async fn ping(&self) -> Result<(), ApiError>; }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
    /// let t = ScriptedTransport::new([Step::status(204)]);
    /// let api = ApiClient::builder().base_url("http://api.test").transport(Tagged(t.clone())).build()?;
    /// api.ping().await?;
    /// assert_eq!(t.requests()[0].headers["x-client"], "docs");
    /// # Ok(()) }
    /// ```
    fn send(&self, request: HttpRequest) -> SendFuture;
}

/// One request as it goes on the wire.
///
/// A transport gets one, and so does a middleware, just before it is sent:
///
/// ```
/// use resilient_api::testing::{ScriptedTransport, Step};
/// use resilient_api::transport::HttpRequest;
/// use resilient_api::{resilient_api, ApiError};
///
/// #[resilient_api(timeout(attempt = "1s"))]
/// pub trait Api { #[get("/ping")] async fn ping(&self) -> Result<(), ApiError>; }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
/// let t = ScriptedTransport::new([Step::status(204)]);
/// let api = ApiClient::builder().base_url("http://api.test").transport(t.clone())
///     .middleware(|req: &mut HttpRequest| {
///         let signature = format!("{} {}", req.method, req.url.path());
///         req.headers.insert("x-signature", signature.parse()?);
///         Ok(())
///     })
///     .build()?;
/// api.ping().await?;
/// assert_eq!(t.requests()[0].headers["x-signature"], "GET /ping");
/// # Ok(()) }
/// ```
pub struct HttpRequest {
    /// The method.
    pub method: Method,
    /// The full URL, query included.
    pub url: Url,
    /// Every header (secret ones are marked sensitive).
    pub headers: HeaderMap,
    /// The body.
    pub body: RequestBody,
}

impl fmt::Debug for HttpRequest {
    /// Secret headers and every query value are shown as `[redacted]`, and the body by
    /// its length alone (`body: 12 bytes`, or `body: stream`), so a logging
    /// middleware can print the request.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpRequest")
            .field("method", &self.method)
            .field("url", &crate::observe::redact_url(self.url.as_str()))
            .field("headers", &crate::observe::Redacted(&self.headers))
            .field("body", &self.body)
            .finish()
    }
}

/// The head of a response and its body, still to be read.
///
/// What a [`Transport`] returns, built field by field:
///
/// ```
/// use resilient_api::transport::{HttpResponse, ResponseBody};
/// use resilient_api::Bytes;
///
/// let mut headers = http::HeaderMap::new();
/// headers.insert("content-type", http::HeaderValue::from_static("text/plain"));
/// let body = ResponseBody::full(Bytes::from_static(b"hello"));
/// let response = HttpResponse { status: http::StatusCode::OK, headers, body };
/// assert_eq!(response.status, 200);
/// ```
pub struct HttpResponse {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: ResponseBody,
}

impl fmt::Debug for HttpResponse {
    /// Secret headers (`Set-Cookie` among them) are shown as `[redacted]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpResponse")
            .field("status", &self.status)
            .field("headers", &crate::observe::Redacted(&self.headers))
            .field("body", &self.body)
            .finish()
    }
}

impl HttpResponse {
    /// A response with an empty body.
    ///
    /// ```
    /// use resilient_api::transport::HttpResponse;
    ///
    /// let response = HttpResponse::new(http::StatusCode::NO_CONTENT, http::HeaderMap::new());
    /// assert_eq!(response.status, 204);
    /// ```
    pub fn new(status: StatusCode, headers: HeaderMap) -> Self {
        HttpResponse {
            status,
            headers,
            body: ResponseBody::empty(),
        }
    }
}

/// A response body: a stream of chunks that ends, fails, or is dropped.
///
/// Read it as a [`Stream`]:
///
/// ```
/// use futures_util::StreamExt;
/// use resilient_api::transport::ResponseBody;
/// use resilient_api::Bytes;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), resilient_api::transport::TransportError> {
/// let chunks = [Ok(Bytes::from("hel")), Ok(Bytes::from("lo"))];
/// let mut body = ResponseBody::stream(futures_util::stream::iter(chunks));
/// let mut read = Vec::new();
/// while let Some(chunk) = body.next().await {
///     read.extend_from_slice(&chunk?); // an `Err` means the body was cut short
/// }
/// assert_eq!(read, b"hello");
/// # Ok(()) }
/// ```
pub struct ResponseBody {
    inner: BodyInner,
}

enum BodyInner {
    Full(Option<Bytes>),
    Stream(Pin<Box<dyn Stream<Item = Result<Bytes, TransportError>> + Send>>),
    /// reqwest's own body, polled in place: no extra box per response.
    #[cfg(feature = "reqwest")]
    Reqwest(reqwest::Body),
}

impl ResponseBody {
    /// No body.
    ///
    /// ```
    /// use futures_util::StreamExt;
    /// use resilient_api::transport::ResponseBody;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), resilient_api::transport::TransportError> {
    /// let mut body = ResponseBody::empty();
    /// assert!(body.next().await.is_none());
    /// # Ok(()) }
    /// ```
    pub fn empty() -> Self {
        ResponseBody {
            inner: BodyInner::Full(None),
        }
    }

    /// A body that is already in memory.
    ///
    /// ```
    /// use futures_util::StreamExt;
    /// use resilient_api::transport::ResponseBody;
    /// use resilient_api::Bytes;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), resilient_api::transport::TransportError> {
    /// let mut body = ResponseBody::full(Bytes::from("hello"));
    /// assert_eq!(body.next().await.transpose()?, Some(Bytes::from("hello")));
    /// assert!(body.next().await.is_none());
    /// # Ok(()) }
    /// ```
    pub fn full(bytes: Bytes) -> Self {
        ResponseBody {
            inner: BodyInner::Full(Some(bytes)),
        }
    }

    /// A body read chunk by chunk; an `Err` item means it was cut short.
    ///
    /// ```
    /// use futures_util::StreamExt;
    /// use resilient_api::transport::{ResponseBody, TransportError};
    /// use resilient_api::Bytes;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), resilient_api::transport::TransportError> {
    /// let chunks = [Ok(Bytes::from("par")), Err(TransportError::io("connection reset"))];
    /// let mut body = ResponseBody::stream(futures_util::stream::iter(chunks));
    /// assert_eq!(body.next().await.transpose()?, Some(Bytes::from("par")));
    /// assert!(body.next().await.is_some_and(|chunk| chunk.is_err()));
    /// # Ok(()) }
    /// ```
    pub fn stream<S>(stream: S) -> Self
    where
        S: Stream<Item = Result<Bytes, TransportError>> + Send + 'static,
    {
        ResponseBody {
            inner: BodyInner::Stream(Box::pin(stream)),
        }
    }
}

impl ResponseBody {
    /// Whether the body is known to be over without another poll: every byte of a
    /// `Content-Length` read, or nothing left in memory.
    pub(crate) fn is_end(&self) -> bool {
        match &self.inner {
            BodyInner::Full(b) => b.is_none(),
            BodyInner::Stream(_) => false,
            #[cfg(feature = "reqwest")]
            BodyInner::Reqwest(body) => http_body::Body::is_end_stream(body),
        }
    }

    /// The length reqwest already parsed from `Content-Length`, saving a second parse.
    pub(crate) fn declared_len(&self) -> Option<u64> {
        match &self.inner {
            #[cfg(feature = "reqwest")]
            BodyInner::Reqwest(body) => http_body::Body::size_hint(body).exact(),
            _ => None,
        }
    }
}

impl Stream for ResponseBody {
    type Item = Result<Bytes, TransportError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match &mut self.get_mut().inner {
            BodyInner::Full(b) => Poll::Ready(b.take().filter(|b| !b.is_empty()).map(Ok)),
            BodyInner::Stream(s) => s.as_mut().poll_next(cx),
            #[cfg(feature = "reqwest")]
            BodyInner::Reqwest(body) => loop {
                use http_body::Body as _;
                match std::task::ready!(Pin::new(&mut *body).poll_frame(cx)) {
                    None => return Poll::Ready(None),
                    Some(Err(e)) => return Poll::Ready(Some(Err(reqwest_transport::classify(e)))),
                    Some(Ok(frame)) => {
                        // Trailers carry no body bytes.
                        if let Ok(data) = frame.into_data() {
                            return Poll::Ready(Some(Ok(data)));
                        }
                    }
                }
            },
        }
    }
}

impl fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner {
            BodyInner::Full(b) => write!(
                f,
                "ResponseBody({} bytes)",
                b.as_ref().map_or(0, Bytes::len)
            ),
            BodyInner::Stream(_) => f.write_str("ResponseBody(stream)"),
            #[cfg(feature = "reqwest")]
            BodyInner::Reqwest(_) => f.write_str("ResponseBody(reqwest)"),
        }
    }
}

/// Where a transport failure happened, which decides whether it may be retried.
///
/// ```
/// use resilient_api::transport::{TransportError, TransportErrorKind};
///
/// let e = TransportError::io("connection reset");
/// let safe_to_resend = match e.kind() {
///     TransportErrorKind::Connect => true, // it never ran
///     TransportErrorKind::Io => false,     // it may have run: resend only if idempotent
/// };
/// assert!(!safe_to_resend);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransportErrorKind {
    /// Before the request was sent (connect refused, DNS failure): it never ran.
    Connect,
    /// After the request was sent (reset, broken pipe, body cut short): it may have run.
    Io,
}

/// A failure on the wire.
///
/// A custom transport turns its own errors into one:
///
/// ```
/// use resilient_api::transport::{TransportError, TransportErrorKind};
/// use std::io;
///
/// /// Sort a socket error by whether the request was sent.
/// fn classify(e: io::Error) -> TransportError {
///     let error = match e.kind() {
///         io::ErrorKind::ConnectionRefused => TransportError::connect("connection refused"),
///         _ => TransportError::io("connection failed"),
///     };
///     error.with_source(e)
/// }
/// let refused = classify(io::ErrorKind::ConnectionRefused.into());
/// assert_eq!(refused.kind(), TransportErrorKind::Connect);
/// assert_eq!(classify(io::ErrorKind::ConnectionReset.into()).kind(), TransportErrorKind::Io);
/// ```
#[derive(Debug)]
pub struct TransportError {
    kind: TransportErrorKind,
    message: &'static str,
    source: Option<BoxError>,
}

impl TransportError {
    /// The request was never sent.
    ///
    /// ```
    /// use resilient_api::transport::{TransportError, TransportErrorKind};
    ///
    /// let e = TransportError::connect("connection refused");
    /// assert_eq!(e.kind(), TransportErrorKind::Connect); // retried on any method
    /// assert_eq!(e.to_string(), "connection refused");
    /// ```
    pub fn connect(message: &'static str) -> Self {
        TransportError {
            kind: TransportErrorKind::Connect,
            message,
            source: None,
        }
    }

    /// The connection failed after the request was sent.
    ///
    /// ```
    /// use resilient_api::transport::{TransportError, TransportErrorKind};
    ///
    /// let e = TransportError::io("connection reset");
    /// assert_eq!(e.kind(), TransportErrorKind::Io); // retried only when idempotent
    /// assert_eq!(e.to_string(), "connection reset");
    /// ```
    pub fn io(message: &'static str) -> Self {
        TransportError {
            kind: TransportErrorKind::Io,
            message,
            source: None,
        }
    }

    /// Attach the underlying cause.
    ///
    /// ```
    /// use resilient_api::transport::TransportError;
    /// use std::{error::Error as _, io};
    ///
    /// let cause = io::Error::from(io::ErrorKind::ConnectionReset);
    /// let e = TransportError::io("connection reset").with_source(cause);
    /// let source = e.source().and_then(|s| s.downcast_ref::<io::Error>());
    /// assert_eq!(source.map(io::Error::kind), Some(io::ErrorKind::ConnectionReset));
    /// ```
    pub fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Where it failed.
    ///
    /// ```
    /// use resilient_api::transport::{TransportError, TransportErrorKind};
    ///
    /// let e = TransportError::connect("dns lookup failed");
    /// assert_eq!(e.kind(), TransportErrorKind::Connect);
    /// ```
    pub fn kind(&self) -> TransportErrorKind {
        self.kind
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message)
    }
}

impl StdError for TransportError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_ref()
            .map(|s| &**s as &(dyn StdError + 'static))
    }
}

#[cfg(feature = "reqwest")]
pub use self::reqwest_transport::ReqwestTransport;

/// How the pipeline reaches the network: the built-in reqwest transport held as it
/// is, so its future is polled in place without a box per request, or any other
/// [`Transport`].
pub(crate) enum Dispatcher {
    #[cfg(feature = "reqwest")]
    Reqwest(reqwest::Client),
    Custom(Arc<dyn Transport>),
}

impl fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            #[cfg(feature = "reqwest")]
            Dispatcher::Reqwest(_) => "reqwest",
            Dispatcher::Custom(_) => "custom",
        })
    }
}

impl Dispatcher {
    /// Start sending `request`: reqwest's request is held in place, a custom
    /// transport's future stays in its box.
    #[cfg(feature = "reqwest")]
    pub(crate) fn send(
        &self,
        request: HttpRequest,
    ) -> InFlight<
        impl Future<Output = Result<reqwest::Response, reqwest::Error>> + Send + Unpin + use<>,
    > {
        match self {
            Dispatcher::Reqwest(client) => {
                InFlight::Reqwest(reqwest_transport::start(client, request))
            }
            Dispatcher::Custom(transport) => {
                InFlight::Custom(transport.send(request), std::marker::PhantomData)
            }
        }
    }

    /// Start sending `request` through the custom transport.
    #[cfg(not(feature = "reqwest"))]
    pub(crate) fn send(&self, request: HttpRequest) -> InFlight<std::future::Pending<()>> {
        match self {
            Dispatcher::Custom(transport) => {
                InFlight::Custom(transport.send(request), std::marker::PhantomData)
            }
        }
    }
}

/// A request on its way, up to the response's head, through either dispatcher. `F` is
/// reqwest's own pending request.
pub(crate) enum InFlight<F> {
    #[cfg(feature = "reqwest")]
    Reqwest(reqwest_transport::Sending<F>),
    /// `F` is unused here; the marker keeps it a parameter without the `reqwest`
    /// feature.
    Custom(SendFuture, std::marker::PhantomData<fn() -> F>),
}

#[cfg(feature = "reqwest")]
impl<F> Future for InFlight<F>
where
    F: Future<Output = Result<reqwest::Response, reqwest::Error>> + Unpin,
{
    type Output = Result<HttpResponse, TransportError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            InFlight::Reqwest(sending) => Pin::new(sending).poll(cx),
            InFlight::Custom(send, _) => send.as_mut().poll(cx),
        }
    }
}

#[cfg(not(feature = "reqwest"))]
impl<F> Future for InFlight<F> {
    type Output = Result<HttpResponse, TransportError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            InFlight::Custom(send, _) => send.as_mut().poll(cx),
        }
    }
}

#[cfg(feature = "reqwest")]
mod reqwest_transport {
    use super::*;

    /// The reqwest transport as a [`Transport`], to wrap or to pass on explicitly: one
    /// `reqwest::Client` (one connection pool). A client built without
    /// `.transport(...)` sends through the same code, without boxing its future.
    ///
    /// Passed to the builder explicitly, with reqwest's defaults and redirects off:
    ///
    /// ```
    /// use resilient_api::transport::ReqwestTransport;
    /// use resilient_api::{resilient_api, ApiError};
    ///
    /// #[resilient_api(base_url = "http://127.0.0.1:8080", timeout(attempt = "1s"))]
    /// pub trait Api { #[get("/ping")] async fn ping(&self) -> Result<(), ApiError>; }
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let transport = ReqwestTransport::new(ReqwestTransport::default_client()?);
    /// let api = ApiClient::builder().transport(transport).build()?;
    /// # let _ = api;
    /// # Ok(()) }
    /// ```
    #[derive(Clone, Debug)]
    pub struct ReqwestTransport {
        client: reqwest::Client,
    }

    impl ReqwestTransport {
        /// Use `client` as it is. Turn its redirects off
        /// (`redirect::Policy::none()`) to let the pipeline handle them.
        ///
        /// ```
        /// use resilient_api::transport::ReqwestTransport;
        ///
        /// # fn main() -> Result<(), reqwest::Error> {
        /// let client = reqwest::Client::builder()
        ///     .redirect(reqwest::redirect::Policy::none()) // the pipeline follows redirects
        ///     .pool_max_idle_per_host(8)
        ///     .build()?;
        /// let transport = ReqwestTransport::new(client);
        /// # let _ = transport;
        /// # Ok(()) }
        /// ```
        pub fn new(client: reqwest::Client) -> Self {
            ReqwestTransport { client }
        }

        /// A client with redirects turned off and otherwise reqwest's defaults.
        ///
        /// ```
        /// use resilient_api::transport::ReqwestTransport;
        /// use resilient_api::{resilient_api, ApiError};
        ///
        /// #[resilient_api(base_url = "http://127.0.0.1:8080", timeout(attempt = "1s"))]
        /// pub trait Api { #[get("/ping")] async fn ping(&self) -> Result<(), ApiError>; }
        ///
        /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
        /// let client = ReqwestTransport::default_client()?;
        /// let api = ApiClient::builder().reqwest_client(client).build()?; // one pool per reqwest client
        /// # let _ = api;
        /// # Ok(()) }
        /// ```
        pub fn default_client() -> Result<reqwest::Client, reqwest::Error> {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
        }
    }

    pub(super) fn classify(e: reqwest::Error) -> TransportError {
        // reqwest's error holds the URL, query string included, and with it any
        // secret query parameter: never let it reach a log.
        let e = e.without_url();
        if crate::request::body_stream_failed(&e) {
            TransportError::io("the request body stream failed").with_source(e)
        } else if e.is_connect() {
            TransportError::connect("connection failed").with_source(e)
        } else if never_written(&e) {
            TransportError::connect("the connection closed before the request was sent")
                .with_source(e)
        } else if e.is_body() || e.is_decode() {
            TransportError::io("response body cut short").with_source(e)
        } else {
            TransportError::io("request failed after it was sent").with_source(e)
        }
    }

    /// Whether hyper gave the request back unwritten: a connection that closed (or
    /// was reset) before the request was started hands it back canceled, and hyper
    /// says then that it is safe to tell the request was not sent. hyper's own pool
    /// sends such a request again on a kept-alive connection, but not on a new one.
    fn never_written(e: &reqwest::Error) -> bool {
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            if s.downcast_ref::<hyper::Error>()
                .is_some_and(hyper::Error::is_canceled)
            {
                return true;
            }
            source = s.source();
        }
        false
    }

    /// Send `request` with `client`: built as it is and handed to the client now, so
    /// the future holds reqwest's small pending handle, not a builder. Owns nothing
    /// borrowed, so the pipeline can hold it in place and [`ReqwestTransport`] can box it.
    pub(crate) fn start(
        client: &reqwest::Client,
        request: HttpRequest,
    ) -> Sending<impl Future<Output = Result<reqwest::Response, reqwest::Error>> + Send + use<>>
    {
        let mut req = reqwest::Request::new(request.method, request.url);
        *req.headers_mut() = request.headers;
        *req.body_mut() = match request.body {
            RequestBody::Empty => None,
            RequestBody::Bytes(b) => Some(b.into()),
            RequestBody::Stream(s) => Some(reqwest::Body::wrap_stream(s.inner)),
        };
        Sending {
            pending: client.execute(req),
        }
    }

    /// A request reqwest is sending, up to the response's head. Polled by hand rather
    /// than written as an `async` block: one state machine fewer on every poll.
    pub(crate) struct Sending<F> {
        pending: F,
    }

    impl<F> Future for Sending<F>
    where
        F: Future<Output = Result<reqwest::Response, reqwest::Error>> + Unpin,
    {
        type Output = Result<HttpResponse, TransportError>;

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            let response =
                std::task::ready!(Pin::new(&mut self.pending).poll(cx)).map_err(classify)?;
            let (head, body) = http::Response::from(response).into_parts();
            Poll::Ready(Ok(HttpResponse {
                status: head.status,
                headers: head.headers,
                body: ResponseBody {
                    inner: BodyInner::Reqwest(body),
                },
            }))
        }
    }

    impl Transport for ReqwestTransport {
        fn send(&self, request: HttpRequest) -> SendFuture {
            Box::pin(start(&self.client, request))
        }
    }
}
