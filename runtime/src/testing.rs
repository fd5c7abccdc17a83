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
//! no step left panics with a message saying so: a test that dispatches more than it
//! scripted is wrong, loudly.
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
use tokio::time::{Instant, sleep};

use crate::request::RequestBody;
use crate::transport::{
    HttpRequest, HttpResponse, ResponseBody, SendFuture, Transport, TransportError,
};

/// What one attempt gets.
#[derive(Clone, Debug)]
pub struct Step {
    action: Action,
    delay: Duration,
    headers: Vec<(String, String)>,
    body: StepBody,
    cut_after: Option<Duration>,
}

#[derive(Clone, Debug)]
enum Action {
    Respond(u16),
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
    pub fn status(status: u16) -> Self {
        Step::of(Action::Respond(status))
    }

    /// Never answer: only dropping the attempt ends it.
    pub fn hang() -> Self {
        Step::of(Action::Hang)
    }

    /// Fail before the request was sent (connection refused).
    pub fn connect_error() -> Self {
        Step::of(Action::ConnectError)
    }

    /// Fail after the request was sent (connection reset).
    pub fn reset() -> Self {
        Step::of(Action::Reset)
    }

    /// The whole body, delivered with the head.
    #[must_use]
    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = StepBody::Full(body.into());
        self
    }

    /// A streamed body: each chunk arrives its delay after the previous one.
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
    #[must_use]
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Wait this long before answering (or failing).
    #[must_use]
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// After the last chunk, wait this long, then cut the body short.
    #[must_use]
    pub fn cut_after(mut self, after: Duration) -> Self {
        self.cut_after = Some(after);
        self
    }
}

/// One dispatch, as the transport saw it.
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
#[derive(Clone)]
pub struct ScriptedTransport {
    shared: Arc<Shared>,
}

struct Shared {
    start: Instant,
    script: Mutex<VecDeque<Step>>,
    requests: Mutex<Vec<RecordedRequest>>,
    attempts: AtomicUsize,
    in_flight: AtomicUsize,
    open_bodies: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ScriptedTransport {
    /// A transport that plays `steps` in order, one per attempt.
    pub fn new(steps: impl IntoIterator<Item = Step>) -> Self {
        ScriptedTransport {
            shared: Arc::new(Shared {
                start: Instant::now(),
                script: Mutex::new(steps.into_iter().collect()),
                requests: Mutex::new(Vec::new()),
                attempts: AtomicUsize::new(0),
                in_flight: AtomicUsize::new(0),
                open_bodies: AtomicUsize::new(0),
            }),
        }
    }

    /// Add steps at the end of the script.
    pub fn push(&self, steps: impl IntoIterator<Item = Step>) {
        lock(&self.shared.script).extend(steps);
    }

    /// Dispatches so far.
    pub fn attempts(&self) -> usize {
        self.shared.attempts.load(Ordering::SeqCst)
    }

    /// Attempts not yet answered, failed or dropped.
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::SeqCst)
    }

    /// Response bodies not yet read to the end or dropped.
    pub fn open_bodies(&self) -> usize {
        self.shared.open_bodies.load(Ordering::SeqCst)
    }

    /// Every dispatch so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The times of every dispatch so far, since the transport was created.
    pub fn dispatch_times(&self) -> Vec<Duration> {
        lock(&self.shared.requests).iter().map(|r| r.at).collect()
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
        let n = shared.attempts.fetch_add(1, Ordering::SeqCst) + 1;
        let at = shared.start.elapsed();
        let step = lock(&shared.script).pop_front();
        let in_flight = Count::new(&shared, |s| &s.in_flight);
        Box::pin(async move {
            let HttpRequest {
                method,
                url,
                headers,
                body,
            } = request;
            let body = match body {
                RequestBody::Empty => Bytes::new(),
                RequestBody::Bytes(b) => b,
                RequestBody::Stream(mut s) => {
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
                    buf.freeze()
                }
            };
            lock(&shared.requests).push(RecordedRequest {
                method,
                url: url.to_string(),
                headers,
                body,
                at,
            });
            let Some(step) = step else {
                panic!("ScriptedTransport: attempt {n} has no step left in the script");
            };
            if !step.delay.is_zero() {
                sleep(step.delay).await;
            }
            let status = match step.action {
                Action::Respond(s) => s,
                Action::Hang => std::future::pending::<u16>().await,
                Action::ConnectError => {
                    return Err(TransportError::connect("connection refused (scripted)"));
                }
                Action::Reset => return Err(TransportError::io("connection reset (scripted)")),
            };
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut head = HeaderMap::new();
            for (k, v) in &step.headers {
                if let (Ok(k), Ok(v)) = (
                    HeaderName::from_bytes(k.as_bytes()),
                    HeaderValue::from_str(v),
                ) {
                    head.append(k, v);
                }
            }
            let open = Count::new(&shared, |s| &s.open_bodies);
            let body = match step.body {
                StepBody::Full(b) => {
                    if !head.contains_key(http::header::CONTENT_LENGTH) {
                        head.insert(http::header::CONTENT_LENGTH, HeaderValue::from(b.len()));
                    }
                    let chunks = vec![(Duration::ZERO, b)];
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

fn body_stream(
    chunks: Vec<(Duration, Bytes)>,
    cut_after: Option<Duration>,
    open: Count,
) -> ResponseBody {
    let stream = futures_util::stream::unfold(
        (chunks.into_iter(), cut_after, Some(open)),
        |(mut chunks, cut, mut open)| async move {
            if let Some((delay, bytes)) = chunks.next() {
                if !delay.is_zero() {
                    sleep(delay).await;
                }
                return Some((Ok(bytes), (chunks, cut, open)));
            }
            if let Some(after) = cut {
                if !after.is_zero() {
                    sleep(after).await;
                }
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
