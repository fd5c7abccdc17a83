//! A scripted transport for tests: each attempt gets the next step of a script.
//!
//! # When to use
//! In your own tests of code that uses a generated client, and in ours. Together
//! with `#[tokio::test(start_paused = true)]` and [`Jitter::fixed`](crate::Jitter::fixed),
//! every scenario runs at exact milliseconds: the transport waits with `tokio::time`,
//! and records every dispatch with its time and bytes.
//!
//! # Defaults
//! A step answers at once, with no headers and an empty body, unless told otherwise.
//! A full body gets a `content-length` header unless the step sets one. An attempt with
//! no step left panics with a message saying so (its method and redacted URL): a test
//! that dispatches more than it scripted is wrong, loudly. That dispatch is neither
//! counted nor recorded, so after [`ScriptedTransport::push`] the records go on in
//! step. The script and the records share one lock, so from any number of threads
//! `requests()[k]` is the request that was answered with step `k`.
//!
//! # Example
//! ```
//! use resilient_api::testing::{ScriptedTransport, Step};
//! use std::time::Duration;
//! let ms = Duration::from_millis;
//! let t = ScriptedTransport::new([
//!     Step::status(503).body("busy"),
//!     Step::status(200).body("ready").delay(ms(20)),
//!     Step::status(200).chunks([(ms(20), "win"), (ms(20), "ner")]),
//!     Step::hang(),
//!     Step::connect_error(),
//!     Step::reset(),
//! ]);
//! assert_eq!(t.attempts(), 0);
//! ```

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use tokio::time::{Instant, sleep, sleep_until};

use crate::request::RequestBody;
use crate::transport::{
    HttpRequest, HttpResponse, ResponseBody, SendFuture, Transport, TransportError,
};

/// What one attempt gets.
///
/// Script one step per attempt the call should make, then check what was sent and when:
///
/// ```
/// use resilient_api::{resilient_api, testing::{ScriptedTransport, Step}, ApiError};
/// use std::time::Duration;
///
/// #[resilient_api(timeout(attempt = "1s"), retry(max = 2, backoff = fixed(delay = "10ms")))]
/// pub trait Api { #[get("/status")] async fn status(&self) -> Result<String, ApiError>; }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
/// let t = ScriptedTransport::new([
///     Step::connect_error(),                        // retried after the 10 ms backoff
///     Step::status(503).header("retry-after", "2"), // retried after the server's 2 s
///     Step::status(200).body("up"),
/// ]);
/// let api = ApiClient::builder().base_url("http://api.test").transport(t.clone()).build()?;
/// assert_eq!(api.status().await?, "up");
/// assert_eq!(t.attempts(), 3);
/// assert_eq!(t.dispatch_times(), [0, 10, 2010].map(Duration::from_millis));
/// assert!(t.requests().iter().all(|r| r.url == "http://api.test/status"));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Step {
    action: Action,
    delay: Duration,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: StepBody,
    cut_after: Option<Duration>,
}

#[derive(Clone, Debug)]
enum Action {
    Respond(StatusCode),
    Hang,
    ConnectError,
    Reset,
}

#[derive(Clone, Debug)]
enum StepBody {
    Full(Bytes),
    Chunks(Vec<(Duration, Bytes)>),
}

impl Step {
    fn of(action: Action) -> Self {
        Step {
            action,
            delay: Duration::ZERO,
            headers: Vec::new(),
            body: StepBody::Full(Bytes::new()),
            cut_after: None,
        }
    }

    /// Answer with `status`.
    ///
    /// ```
    /// use resilient_api::{resilient_api, testing::{ScriptedTransport, Step}, ApiError};
    ///
    /// #[resilient_api(timeout(attempt = "1s"))]
    /// pub trait Api { #[get("/users/{id}")] async fn user(&self, id: u64) -> Result<String, ApiError>; }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
    /// let t = ScriptedTransport::new([Step::status(404).body("no such user")]);
    /// let api = ApiClient::builder().base_url("http://api.test").transport(t.clone()).build()?;
    /// let err = api.user(7).await.err();
    /// assert_eq!(err.and_then(|e| e.status()), Some(404));
    /// assert_eq!(t.attempts(), 1); // a 404 is not retried
    /// # Ok(()) }
    /// ```
    pub fn status(status: u16) -> Self {
        match StatusCode::from_u16(status) {
            Ok(status) => Step::of(Action::Respond(status)),
            // A script is the test's own code: a mistake in it fails the test loudly.
            Err(_) => panic!("Step::status: {status} is not an HTTP status"),
        }
    }

    /// Never answer: only dropping the attempt ends it.
    ///
    /// ```
    /// use resilient_api::{resilient_api, testing::{ScriptedTransport, Step}, ApiError, TimeoutKind};
    /// use std::time::Duration;
    ///
    /// #[resilient_api(timeout(attempt = "100ms"), retry(max = 0))]
    /// pub trait Api { #[get("/slow")] async fn slow(&self) -> Result<String, ApiError>; }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
    /// let t = ScriptedTransport::new([Step::hang()]);
    /// let api = ApiClient::builder().base_url("http://api.test").transport(t.clone()).build()?;
    /// let start = tokio::time::Instant::now();
    /// let err = api.slow().await.err();
    /// assert_eq!(err.and_then(|e| e.timeout()), Some(TimeoutKind::Attempt));
    /// assert_eq!(start.elapsed(), Duration::from_millis(100));
    /// assert_eq!(t.in_flight(), 0); // the timeout dropped the attempt
    /// # Ok(()) }
    /// ```
    pub fn hang() -> Self {
        Step::of(Action::Hang)
    }

    /// Fail before the request was sent (connection refused).
    ///
    /// ```
    /// use resilient_api::{resilient_api, testing::{ScriptedTransport, Step}, ApiError};
    ///
    /// #[resilient_api(timeout(attempt = "1s"), retry(max = 1, backoff = fixed(delay = "10ms")))]
    /// pub trait Api { #[post("/orders")] async fn create(&self) -> Result<String, ApiError>; }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
    /// // Never sent, so retried even on a plain POST.
    /// let t = ScriptedTransport::new([Step::connect_error(), Step::status(201).body("created")]);
    /// let api = ApiClient::builder().base_url("http://api.test").transport(t.clone()).build()?;
    /// assert_eq!(api.create().await?, "created");
    /// assert_eq!(t.attempts(), 2);
    /// # Ok(()) }
    /// ```
    pub fn connect_error() -> Self {
        Step::of(Action::ConnectError)
    }

    /// Fail after the request was sent (connection reset).
    ///
    /// ```
    /// use resilient_api::{resilient_api, testing::{ScriptedTransport, Step}, ApiError, ErrorKind};
    ///
    /// #[resilient_api(timeout(attempt = "1s"), retry(max = 1, backoff = fixed(delay = "10ms")))]
    /// pub trait Api { #[post("/orders")] async fn create(&self) -> Result<String, ApiError>; }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
    /// // It may have run, so a plain POST is not retried.
    /// let t = ScriptedTransport::new([Step::reset()]);
    /// let api = ApiClient::builder().base_url("http://api.test").transport(t.clone()).build()?;
    /// let err = api.create().await.err();
    /// assert_eq!(err.map(|e| e.kind()), Some(ErrorKind::Transport));
    /// assert_eq!(t.attempts(), 1);
    /// # Ok(()) }
    /// ```
    pub fn reset() -> Self {
        Step::of(Action::Reset)
    }

    /// The whole body, delivered with the head.
    ///
    /// ```
    /// use resilient_api::{resilient_api, testing::{ScriptedTransport, Step}, ApiError};
    ///
    /// #[resilient_api(timeout(attempt = "1s"))]
    /// pub trait Api { #[get("/users/{id}")] async fn user(&self, id: u64) -> Result<serde_json::Value, ApiError>; }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
    /// let t = ScriptedTransport::new([Step::status(200).body(r#"{"id":7,"name":"Ada"}"#)]);
    /// let api = ApiClient::builder().base_url("http://api.test").transport(t.clone()).build()?;
    /// let user = api.user(7).await?;
    /// assert_eq!(user["name"], "Ada");
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = StepBody::Full(body.into());
        self
    }

    /// A streamed body: each chunk arrives its delay after the previous one (the
    /// first, after the head), at fixed times however fast or slow the reader is.
    ///
    /// ```
    /// use resilient_api::{resilient_api, testing::{ScriptedTransport, Step}, ApiError};
    /// use std::time::Duration;
    ///
    /// #[resilient_api(timeout(attempt = "1s"))]
    /// pub trait Api { #[get("/feed")] async fn feed(&self) -> Result<String, ApiError>; }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
    /// let ms = Duration::from_millis;
    /// let t = ScriptedTransport::new([Step::status(200).chunks([(ms(0), "hel"), (ms(30), "lo")])]);
    /// let api = ApiClient::builder().base_url("http://api.test").transport(t.clone()).build()?;
    /// let start = tokio::time::Instant::now();
    /// assert_eq!(api.feed().await?, "hello");
    /// assert_eq!(start.elapsed(), ms(30)); // the text waits for the last chunk
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn chunks<I, B>(mut self, chunks: I) -> Self
    where
        I: IntoIterator<Item = (Duration, B)>,
        B: Into<Bytes>,
    {
        self.body = StepBody::Chunks(chunks.into_iter().map(|(d, b)| (d, b.into())).collect());
        self
    }

    /// A response header.
    ///
    /// ```
    /// use resilient_api::{resilient_api, testing::{ScriptedTransport, Step}, ApiError};
    /// use std::time::Duration;
    ///
    /// #[resilient_api(timeout(attempt = "1s"))]
    /// pub trait Api { #[get("/")] async fn get(&self) -> Result<String, ApiError>; }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
    /// let t = ScriptedTransport::new([
    ///     Step::status(503).header("retry-after", "3"),
    ///     Step::status(200).body("ok"),
    /// ]);
    /// let api = ApiClient::builder().base_url("http://api.test").transport(t.clone()).build()?;
    /// assert_eq!(api.get().await?, "ok");
    /// assert_eq!(t.dispatch_times(), [Duration::ZERO, Duration::from_secs(3)]);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn header(self, name: &str, value: &str) -> Self {
        self.header_bytes(name, value.as_bytes())
    }

    /// Add a response header whose value is raw bytes, for what [`Step::header`]'s
    /// `&str` cannot carry: a value that is not UTF-8 (obs-text, as some servers send).
    ///
    /// ```
    /// use resilient_api::{resilient_api, testing::{ScriptedTransport, Step}, ApiError, ErrorKind};
    ///
    /// #[resilient_api(timeout(attempt = "1s"))]
    /// pub trait Api { #[get("/")] async fn get(&self) -> Result<String, ApiError>; }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
    /// // A redirect to a Latin-1 `Location`: no URL the client can read.
    /// let t = ScriptedTransport::new([Step::status(302).header_bytes("location", b"/caf\xe9")]);
    /// let api = ApiClient::builder().base_url("http://api.test").transport(t.clone()).build()?;
    /// assert_eq!(api.get().await.unwrap_err().kind(), ErrorKind::Redirect);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn header_bytes(mut self, name: &str, value: &[u8]) -> Self {
        let Ok(header) = HeaderName::from_bytes(name.as_bytes()) else {
            panic!("Step::header: {name:?} is not a header name");
        };
        let Ok(value) = HeaderValue::from_bytes(value) else {
            let value = String::from_utf8_lossy(value);
            panic!("Step::header: {value:?} is not a valid value for {name}");
        };
        self.headers.push((header, value));
        self
    }

    /// Wait this long before answering (or failing).
    ///
    /// ```
    /// use resilient_api::{resilient_api, testing::{ScriptedTransport, Step}, ApiError};
    /// use std::time::Duration;
    ///
    /// #[resilient_api(timeout(attempt = "1s"), retry(max = 1, backoff = fixed(delay = "10ms")))]
    /// pub trait Api { #[get("/")] async fn get(&self) -> Result<String, ApiError>; }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
    /// let t = ScriptedTransport::new([
    ///     Step::status(200).body("slow").delay(Duration::from_secs(5)), // past the attempt timeout
    ///     Step::status(200).body("fast").delay(Duration::from_millis(20)),
    /// ]);
    /// let api = ApiClient::builder().base_url("http://api.test").transport(t.clone()).build()?;
    /// let start = tokio::time::Instant::now();
    /// assert_eq!(api.get().await?, "fast");
    /// assert_eq!(start.elapsed(), Duration::from_millis(1000 + 10 + 20));
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// This long after the last chunk is due, cut the body short. A whole body
    /// ([`Step::body`]) that will be cut declares no `content-length`.
    ///
    /// ```
    /// use resilient_api::{resilient_api, testing::{ScriptedTransport, Step}, ApiError, ErrorKind};
    /// use std::time::Duration;
    ///
    /// #[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
    /// pub trait Api { #[get("/")] async fn get(&self) -> Result<String, ApiError>; }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
    /// let ms = Duration::from_millis;
    /// let t = ScriptedTransport::new([Step::status(200).chunks([(ms(0), "par")]).cut_after(ms(5))]);
    /// let api = ApiClient::builder().base_url("http://api.test").transport(t.clone()).build()?;
    /// let err = api.get().await.err();
    /// assert_eq!(err.map(|e| e.kind()), Some(ErrorKind::Transport));
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn cut_after(mut self, after: Duration) -> Self {
        self.cut_after = Some(after);
        self
    }
}

/// One dispatch, as the transport saw it.
///
/// ```
/// use resilient_api::{resilient_api, testing::{ScriptedTransport, Step}, ApiError};
///
/// #[resilient_api(timeout(attempt = "1s"))]
/// pub trait Api { #[get("/me")] async fn me(&self) -> Result<String, ApiError>; }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
/// let t = ScriptedTransport::new([Step::status(200)]);
/// let api = ApiClient::builder().base_url("http://api.test").bearer_auth("s3cr3t").transport(t.clone());
/// let api = api.build()?;
/// api.me().await?;
/// let sent = &t.requests()[0];
/// assert_eq!(sent.headers["authorization"], "Bearer s3cr3t");
/// assert!(!format!("{sent:?}").contains("s3cr3t")); // its `Debug` redacts secrets
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RecordedRequest {
    /// The method.
    pub method: Method,
    /// The full URL.
    pub url: String,
    /// The headers.
    pub headers: HeaderMap,
    /// The body bytes (a streamed body is read whole first).
    pub body: Bytes,
    /// Time since the transport was created.
    pub at: Duration,
}

impl fmt::Debug for RecordedRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordedRequest")
            .field("method", &self.method)
            .field("url", &crate::observe::redact_url(&self.url))
            .field("headers", &crate::observe::Redacted(&self.headers))
            .field("body_len", &self.body.len())
            .field("at", &self.at)
            .finish()
    }
}

/// A transport that answers each attempt with the next [`Step`]. Cheap to clone:
/// clones share the script and the records.
///
/// Script the answers, run the code under test, then check what it sent and when:
///
/// ```
/// use resilient_api::{resilient_api, testing::{ScriptedTransport, Step}, ApiError};
/// use std::time::Duration;
///
/// #[resilient_api(timeout(attempt = "1s"), retry(backoff = fixed(delay = "50ms")))]
/// pub trait Notes {
///     #[put("/notes/{id}")]
///     async fn save(&self, id: u32, #[body(raw)] text: &str) -> Result<(), ApiError>;
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
/// let t = ScriptedTransport::new([Step::status(503), Step::status(204)]);
/// let api = NotesClient::builder().base_url("http://api.test").transport(t.clone()).build()?;
/// api.save(7, "hello").await?;
/// assert_eq!(t.attempts(), 2);
/// assert_eq!(t.dispatch_times(), [0, 50].map(Duration::from_millis));
/// let last = &t.requests()[1];
/// assert_eq!((last.method.as_str(), last.url.as_str()), ("PUT", "http://api.test/notes/7"));
/// assert_eq!(last.body, "hello"); // the same bytes on every attempt
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ScriptedTransport {
    shared: Arc<Shared>,
}

struct Shared {
    start: Instant,
    /// The script and the records under one lock: a dispatch takes its step and is
    /// recorded in one step, so `requests()[k]` is the request that got step `k`, and
    /// the attempts counted are the dispatches recorded, from any number of threads.
    state: Mutex<State>,
    in_flight: AtomicUsize,
    open_bodies: AtomicUsize,
}

struct State {
    script: VecDeque<Step>,
    requests: Vec<RecordedRequest>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ScriptedTransport {
    /// A transport that plays `steps` in order, one per attempt.
    ///
    /// ```
    /// use resilient_api::{resilient_api, testing::{ScriptedTransport, Step}, ApiError};
    ///
    /// #[resilient_api(timeout(attempt = "1s"))]
    /// pub trait Api { #[get("/")] async fn get(&self) -> Result<String, ApiError>; }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
    /// let t = ScriptedTransport::new([Step::status(200).body("ok")]);
    /// let api = ApiClient::builder().base_url("http://api.test").transport(t.clone()).build()?;
    /// assert_eq!(api.get().await?, "ok");
    /// assert_eq!(t.attempts(), 1); // the client's clone and `t` share the records
    /// # Ok(()) }
    /// ```
    pub fn new(steps: impl IntoIterator<Item = Step>) -> Self {
        ScriptedTransport {
            shared: Arc::new(Shared {
                start: Instant::now(),
                state: Mutex::new(State {
                    script: steps.into_iter().collect(),
                    requests: Vec::new(),
                }),
                in_flight: AtomicUsize::new(0),
                open_bodies: AtomicUsize::new(0),
            }),
        }
    }

    /// Add steps at the end of the script.
    ///
    /// ```
    /// use resilient_api::{resilient_api, testing::{ScriptedTransport, Step}, ApiError};
    ///
    /// #[resilient_api(timeout(attempt = "1s"))]
    /// pub trait Api { #[get("/")] async fn get(&self) -> Result<String, ApiError>; }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
    /// let t = ScriptedTransport::new([Step::status(200).body("first")]);
    /// let api = ApiClient::builder().base_url("http://api.test").transport(t.clone()).build()?;
    /// assert_eq!(api.get().await?, "first");
    /// t.push([Step::status(200).body("second")]);
    /// assert_eq!(api.get().await?, "second");
    /// # Ok(()) }
    /// ```
    pub fn push(&self, steps: impl IntoIterator<Item = Step>) {
        lock(&self.shared.state).script.extend(steps);
    }

    /// Dispatches so far.
    ///
    /// ```
    /// use resilient_api::{resilient_api, testing::{ScriptedTransport, Step}, ApiError};
    ///
    /// #[resilient_api(timeout(attempt = "1s"))]
    /// pub trait Api { #[get("/")] async fn get(&self) -> Result<String, ApiError>; }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
    /// let t = ScriptedTransport::new([Step::status(503), Step::status(503), Step::status(503)]);
    /// let api = ApiClient::builder().base_url("http://api.test").transport(t.clone()).build()?;
    /// let err = api.get().await.err();
    /// assert_eq!(err.and_then(|e| e.status()), Some(503));
    /// assert_eq!(t.attempts(), 3); // the first and the default 2 retries
    /// # Ok(()) }
    /// ```
    pub fn attempts(&self) -> usize {
        lock(&self.shared.state).requests.len()
    }

    /// Attempts not yet answered, failed or dropped.
    ///
    /// ```
    /// use resilient_api::{resilient_api, testing::{ScriptedTransport, Step}, ApiError};
    /// use std::time::Duration;
    ///
    /// #[resilient_api(timeout(attempt = "1s"))]
    /// pub trait Api { #[get("/")] async fn get(&self) -> Result<String, ApiError>; }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
    /// let t = ScriptedTransport::new([Step::hang()]);
    /// let api = ApiClient::builder().base_url("http://api.test").transport(t.clone()).build()?;
    /// let call = tokio::spawn(async move { api.get().await });
    /// tokio::time::sleep(Duration::from_millis(10)).await;
    /// assert_eq!(t.in_flight(), 1);
    /// call.abort(); // dropping the call drops its attempt
    /// let _ = call.await;
    /// assert_eq!(t.in_flight(), 0);
    /// # Ok(()) }
    /// ```
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::SeqCst)
    }

    /// Response bodies not yet read to the end or dropped.
    ///
    /// ```
    /// use resilient_api::{resilient_api, testing::{ScriptedTransport, Step}, ApiError, ResponseStream};
    /// use std::time::Duration;
    ///
    /// #[resilient_api(timeout(attempt = "1s"))]
    /// pub trait Api { #[get("/feed")] async fn feed(&self) -> Result<ResponseStream, ApiError>; }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
    /// let ms = Duration::from_millis;
    /// let t = ScriptedTransport::new([Step::status(200).chunks([(ms(0), "a"), (ms(10), "b")])]);
    /// let api = ApiClient::builder().base_url("http://api.test").transport(t.clone()).build()?;
    /// let stream = api.feed().await?;
    /// assert_eq!(t.open_bodies(), 1); // the caller holds the body
    /// drop(stream);
    /// assert_eq!(t.open_bodies(), 0);
    /// # Ok(()) }
    /// ```
    pub fn open_bodies(&self) -> usize {
        self.shared.open_bodies.load(Ordering::SeqCst)
    }

    /// Every dispatch so far, in order.
    ///
    /// ```
    /// use resilient_api::{resilient_api, testing::{ScriptedTransport, Step}, ApiError};
    ///
    /// #[resilient_api(timeout(attempt = "1s"))]
    /// pub trait Api {
    ///     #[get("/search")]
    ///     async fn search(&self, #[query] q: &str, #[header("x-request-id")] id: &str) -> Result<String, ApiError>;
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
    /// let t = ScriptedTransport::new([Step::status(200)]);
    /// let api = ApiClient::builder().base_url("http://api.test").transport(t.clone()).build()?;
    /// api.search("rust", "req-1").await?;
    /// let sent = t.requests();
    /// assert_eq!(sent[0].url, "http://api.test/search?q=rust");
    /// assert_eq!(sent[0].headers["x-request-id"], "req-1");
    /// # Ok(()) }
    /// ```
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.state).requests.clone()
    }

    /// The times of every dispatch so far, since the transport was created.
    ///
    /// ```
    /// use resilient_api::{resilient_api, testing::{ScriptedTransport, Step}, ApiError};
    /// use std::time::Duration;
    ///
    /// #[resilient_api(timeout(attempt = "1s"), retry(max = 2, backoff = exponential(base = "100ms")))]
    /// pub trait Api { #[get("/")] async fn get(&self) -> Result<String, ApiError>; }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
    /// let t = ScriptedTransport::new([Step::status(503), Step::status(503), Step::status(200)]);
    /// let api = ApiClient::builder().base_url("http://api.test").transport(t.clone()).build()?;
    /// api.get().await?;
    /// assert_eq!(t.dispatch_times(), [0, 100, 300].map(Duration::from_millis)); // waits of 100, then 200 ms
    /// # Ok(()) }
    /// ```
    pub fn dispatch_times(&self) -> Vec<Duration> {
        lock(&self.shared.state)
            .requests
            .iter()
            .map(|r| r.at)
            .collect()
    }
}

impl fmt::Debug for ScriptedTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedTransport")
            .field("attempts", &self.attempts())
            .field("in_flight", &self.in_flight())
            .field("open_bodies", &self.open_bodies())
            .finish()
    }
}

/// Decrements a counter when dropped.
struct Count(Arc<Shared>, fn(&Shared) -> &AtomicUsize);

impl Count {
    fn new(shared: &Arc<Shared>, field: fn(&Shared) -> &AtomicUsize) -> Self {
        field(shared).fetch_add(1, Ordering::SeqCst);
        Count(shared.clone(), field)
    }
}

impl Drop for Count {
    fn drop(&mut self) {
        (self.1)(&self.0).fetch_sub(1, Ordering::SeqCst);
    }
}

impl Transport for ScriptedTransport {
    fn send(&self, request: HttpRequest) -> SendFuture {
        let shared = self.shared.clone();
        let HttpRequest {
            method,
            url,
            headers,
            body,
        } = request;
        let (body, stream) = match body {
            RequestBody::Empty => (Bytes::new(), None),
            RequestBody::Bytes(b) => (b, None),
            RequestBody::Stream(s) => (Bytes::new(), Some(s)),
        };
        let url = url.to_string();
        // Taken and recorded now, in dispatch order, even if the future is dropped
        // before its first poll; a dispatch past the end of the script fails now, and
        // is neither counted nor recorded (`push` more steps and go on).
        let (step, index) = {
            let mut state = lock(&shared.state);
            let index = state.requests.len();
            let Some(step) = state.script.pop_front() else {
                drop(state);
                panic!(
                    "ScriptedTransport: attempt {} has no step left in the script ({method} {})",
                    index + 1,
                    crate::observe::redact_url(&url)
                );
            };
            let at = shared.start.elapsed();
            state.requests.push(RecordedRequest {
                method,
                url,
                headers,
                body,
                at,
            });
            (step, index)
        };
        let in_flight = Count::new(&shared, |s| &s.in_flight);
        Box::pin(async move {
            // A streamed body is read as a server would, and its bytes recorded then.
            if let Some(mut s) = stream {
                let mut buf = BytesMut::new();
                while let Some(chunk) = s.inner.next().await {
                    match chunk {
                        Ok(c) => buf.extend_from_slice(&c),
                        Err(e) => {
                            return Err(
                                TransportError::io("request body stream failed").with_source(e)
                            );
                        }
                    }
                }
                if let Some(recorded) = lock(&shared.state).requests.get_mut(index) {
                    recorded.body = buf.freeze();
                }
            }
            if !step.delay.is_zero() {
                sleep(step.delay).await;
            }
            let status = match step.action {
                Action::Respond(s) => s,
                Action::Hang => std::future::pending::<StatusCode>().await,
                Action::ConnectError => {
                    return Err(TransportError::connect("connection refused (scripted)"));
                }
                Action::Reset => return Err(TransportError::io("connection reset (scripted)")),
            };
            let mut head = HeaderMap::new();
            for (k, v) in step.headers {
                head.append(k, v);
            }
            let open = Count::new(&shared, |s| &s.open_bodies);
            let body = match step.body {
                StepBody::Full(b) => {
                    // A body that will be cut short declares no length it will not send.
                    if step.cut_after.is_none() && !head.contains_key(http::header::CONTENT_LENGTH)
                    {
                        head.insert(http::header::CONTENT_LENGTH, HeaderValue::from(b.len()));
                    }
                    // An empty body ends at once, without an empty chunk.
                    let chunks = if b.is_empty() {
                        Vec::new()
                    } else {
                        vec![(Duration::ZERO, b)]
                    };
                    body_stream(chunks, step.cut_after, open)
                }
                StepBody::Chunks(chunks) => body_stream(chunks, step.cut_after, open),
            };
            drop(in_flight);
            Ok(HttpResponse {
                status,
                headers: head,
                body,
            })
        })
    }
}

/// Wait until `at`, if it is still ahead; `None` is never.
async fn wait_until(at: Option<Instant>) {
    match at {
        Some(at) if at > Instant::now() => sleep_until(at).await,
        Some(_) => {}
        None => std::future::pending().await,
    }
}

/// A body whose chunks arrive at fixed times from now (the head), each its delay
/// after the one before, however fast or slow the reader is, as from a server.
fn body_stream(
    chunks: Vec<(Duration, Bytes)>,
    cut_after: Option<Duration>,
    open: Count,
) -> ResponseBody {
    // `None`: too far away to add to the clock (`Duration::MAX`): never.
    let mut due = Some(Instant::now());
    let chunks: Vec<(Option<Instant>, Bytes)> = chunks
        .into_iter()
        .map(|(delay, bytes)| {
            due = due.and_then(|d| d.checked_add(delay));
            (due, bytes)
        })
        .collect();
    let cut = cut_after.map(|after| due.and_then(|d| d.checked_add(after)));
    let stream = futures_util::stream::unfold(
        (chunks.into_iter(), cut, Some(open)),
        |(mut chunks, cut, mut open)| async move {
            if let Some((due, bytes)) = chunks.next() {
                wait_until(due).await;
                return Some((Ok(bytes), (chunks, cut, open)));
            }
            if let Some(at) = cut {
                wait_until(at).await;
                open.take();
                return Some((
                    Err(TransportError::io("response body cut short (scripted)")),
                    (chunks, None, None),
                ));
            }
            open.take();
            None
        },
    );
    ResponseBody::stream(stream)
}
