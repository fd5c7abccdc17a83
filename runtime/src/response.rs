//! What a call returns: decoded values, a wrapper with status and headers, or a
//! streamed body.
//!
//! # When to use
//! Declare the result type on the trait method: any `DeserializeOwned` type (JSON),
//! `()`, `String`, [`Bytes`], [`Response<T>`] for the status and headers too, or
//! [`ResponseStream`] to read a large body chunk by chunk after the call returns.
//!
//! # Defaults
//! A JSON endpoint accepts `application/json`, `text/json`, any `+json` type (such
//! as `application/problem+json`), `text/plain`, `application/octet-stream`, or no
//! content type, in any case and with any parameters; a non-empty body of any other
//! (an HTML error page) is [`ErrorKind::UnexpectedContentType`] (an empty body is no
//! value, whatever its type: `None` for an `Option` result). A `String` result is read
//! in the encoding its byte order mark names, else in the charset the content type
//! names, else in UTF-8; a byte that encoding cannot hold is a decode error, never a
//! replacement character. A streamed body stays bounded by the call's total deadline
//! and by an idle limit between chunks (the attempt timeout, or 30 s), and ends with
//! the call's cancellation token.
//!
//! A streamed result's attempt ends with its head: the breaker judges it then, its
//! bulkhead permit goes back then, and a failure of the body read afterwards (cut
//! short, idle) is the caller's to see, not the breaker's to count. Limit concurrent
//! downloads yourself if a slow body must hold a slot.
//!
//! # Example
//! ```no_run
//! use resilient_api::{resilient_api, ApiError, Response, ResponseStream};
//!
//! #[resilient_api(base_url = "http://127.0.0.1:8080", timeout(attempt = "5s"))]
//! pub trait Files {
//!     #[get("/files/{name}")]
//!     async fn download(&self, name: &str) -> Result<ResponseStream, ApiError>;
//!     #[get("/files/{name}/meta")]
//!     async fn meta(&self, name: &str) -> Result<Response<String>, ApiError>;
//! }
//!
//! # async fn run(api: FilesClient) -> Result<(), ApiError> {
//! let mut file = api.download("report.csv").await?;
//! while let Some(chunk) = file.chunk().await? {
//!     let _ = chunk.len();
//! }
//! let meta = api.meta("report.csv").await?;
//! println!("{} {:?}", meta.status(), meta.headers().get("etag"));
//! # Ok(()) }
//! ```

use std::fmt;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use http::{HeaderMap, StatusCode};
use tokio::time::Instant;

use crate::error::{ApiError, ErrorKind};
use crate::transport::ResponseBody;

/// A decoded value with the response's status and headers.
///
/// A call gives a `Response<T>` for a success (2xx) and for a 3xx that is not
/// followed (a 304, say, or any 3xx when redirects are off). Any other status (a
/// 4xx or 5xx, and also a 1xx or one above 599) is never decoded as `T`: the call
/// fails with [`ErrorKind::Status`], whose [`ApiError::status`],
/// [`ApiError::headers`] and [`ApiError::body`] hold what the server sent. A 204 or
/// 304 has no body, so declare `Response<Option<T>>` (or `Response<()>`) where a
/// server may answer with one: an empty body is `None`, and any other JSON `T` fails
/// to decode it ([`ErrorKind::Decode`]).
///
/// ```
/// use resilient_api::Response;
/// # use resilient_api::testing::{ScriptedTransport, Step};
/// # use resilient_api::{resilient_api, ApiError};
/// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "1s"))]
/// # pub trait Tags {
/// #     #[get("/tags")]
/// #     async fn tags(&self) -> Result<Response<Vec<String>>, ApiError>;
/// # }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), ApiError> {
/// let reply = Step::status(200).header("x-total-count", "42").body(r#"["a","b"]"#);
/// let t = ScriptedTransport::new([reply]);
/// let api = TagsClient::builder().transport(t).build()?;
/// let page: Response<Vec<String>> = api.tags().await?; // the trait method's result type
/// assert_eq!(page.status(), 200);
/// assert_eq!(page.headers().get("x-total-count").and_then(|v| v.to_str().ok()), Some("42"));
/// assert_eq!(page.into_value(), ["a", "b"]);
/// # Ok(()) }
/// ```
///
/// A conditional request, where the server may answer 304 or an error:
///
/// ```
/// use resilient_api::{ErrorKind, Response};
/// # use resilient_api::testing::{ScriptedTransport, Step};
/// # use resilient_api::{resilient_api, ApiError};
/// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "1s"))]
/// # pub trait Tags {
/// #     #[get("/tags")]
/// #     async fn tags_since(&self, #[header("If-None-Match")] etag: &str) -> Result<Response<Option<Vec<String>>>, ApiError>;
/// #     #[get("/tags")]
/// #     async fn tags(&self) -> Result<Response<Vec<String>>, ApiError>;
/// # }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), ApiError> {
/// let t = ScriptedTransport::new([Step::status(304), Step::status(404), Step::status(204)]);
/// let api = TagsClient::builder().transport(t).build()?;
/// let same = api.tags_since("\"v1\"").await?; // `Response<Option<Vec<String>>>`
/// assert_eq!((same.status().as_u16(), same.value()), (304, &None)); // not modified: keep the copy
/// let missing = api.tags_since("\"v1\"").await.unwrap_err(); // an error status is an error
/// assert_eq!((missing.kind(), missing.status()), (ErrorKind::Status, Some(404)));
/// let empty = api.tags().await.unwrap_err(); // a 204 has no list to decode
/// assert_eq!(empty.kind(), ErrorKind::Decode);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Response<T> {
    status: StatusCode,
    headers: HeaderMap,
    value: T,
}

impl<T: fmt::Debug> fmt::Debug for Response<T> {
    /// Secret headers (`Set-Cookie` among them) are shown as `[redacted]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Response")
            .field("status", &self.status)
            .field("headers", &crate::observe::Redacted(&self.headers))
            .field("value", &self.value)
            .finish()
    }
}

impl<T> Response<T> {
    /// The status.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError, Response};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "1s"))]
    /// # pub trait Users {
    /// #     #[put("/users/{id}")]
    /// #     async fn put_user(&self, id: u64) -> Result<Response<()>, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let t = ScriptedTransport::new([Step::status(201)]);
    /// let api = UsersClient::builder().transport(t).build()?;
    /// let created = api.put_user(7).await?.status() == 201; // 200 if it already existed
    /// assert!(created);
    /// # Ok(()) }
    /// ```
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The headers.
    ///
    /// ```
    /// # use resilient_api::Response;
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "1s"))]
    /// # pub trait Tags {
    /// #     #[get("/tags")]
    /// #     async fn tags(&self) -> Result<Response<Vec<String>>, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let reply = Step::status(200).header("x-total-count", "42").body(r#"["a","b"]"#);
    /// let t = ScriptedTransport::new([reply]);
    /// let api = TagsClient::builder().transport(t).build()?;
    /// let page = api.tags().await?;
    /// let total = page.headers().get("x-total-count").and_then(|v| v.to_str().ok());
    /// assert_eq!(total.and_then(|v| v.parse::<u64>().ok()), Some(42));
    /// # Ok(()) }
    /// ```
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The decoded value.
    ///
    /// ```
    /// # use resilient_api::Response;
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "1s"))]
    /// # pub trait Tags {
    /// #     #[get("/tags")]
    /// #     async fn tags(&self) -> Result<Response<Vec<String>>, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let t = ScriptedTransport::new([Step::status(200).body(r#"["a","b"]"#)]);
    /// let api = TagsClient::builder().transport(t).build()?;
    /// let page = api.tags().await?;
    /// assert_eq!(page.value().len(), 2); // borrowed: the status and headers stay usable
    /// # Ok(()) }
    /// ```
    pub fn value(&self) -> &T {
        &self.value
    }

    /// The decoded value, by value.
    ///
    /// ```
    /// # use resilient_api::Response;
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "1s"))]
    /// # pub trait Tags {
    /// #     #[get("/tags")]
    /// #     async fn tags(&self) -> Result<Response<Vec<String>>, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let t = ScriptedTransport::new([Step::status(200).body(r#"["a","b"]"#)]);
    /// let api = TagsClient::builder().transport(t).build()?;
    /// let tags: Vec<String> = api.tags().await?.into_value();
    /// assert_eq!(tags, ["a", "b"]);
    /// # Ok(()) }
    /// ```
    pub fn into_value(self) -> T {
        self.value
    }
}

/// A response whose body is read after the call returned, chunk by chunk.
///
/// Reading stays bounded by the call's total deadline (which wins a tie with a
/// chunk, and with an idle limit that fires in the deadline's own timer tick), by an
/// idle limit between chunks (which a chunk landing exactly on it beats), and by the
/// call's cancellation tokens (which win a tie with the deadline, as everywhere in a
/// call); dropping it aborts the transfer, and so does its first error or its end.
/// Those limits are seen when the stream is read: the client runs no task of its own,
/// so a stream that is held but not read keeps its connection open past a cancel or
/// the deadline, until its next read (which then ends with that error) or its drop.
///
/// ```
/// use resilient_api::{Bytes, ErrorKind, ResponseStream};
/// # use resilient_api::testing::{ScriptedTransport, Step};
/// # use resilient_api::{resilient_api, ApiError};
/// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "1s"))]
/// # pub trait Exports {
/// #     #[get("/export")]
/// #     async fn export(&self) -> Result<ResponseStream, ApiError>;
/// # }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), ApiError> {
/// use std::time::Duration;
/// let ms = Duration::from_millis;
/// let stalls = Step::status(200).chunks([(ms(10), "a,b\n"), (ms(5000), "c,d\n")]);
/// let t = ScriptedTransport::new([stalls]);
/// let api = ExportsClient::builder().transport(t.clone()).build()?;
/// let mut export: ResponseStream = api.export().await?; // the head is here, the body not yet
/// assert_eq!(export.chunk().await?, Some(Bytes::from("a,b\n")));
/// let stalled = export.chunk().await; // nothing within the 1 s attempt timeout
/// assert_eq!(stalled.err().map(|e| e.kind()), Some(ErrorKind::AttemptTimeout));
/// drop(export);
/// assert_eq!(t.open_bodies(), 0); // the transfer was aborted
/// # Ok(()) }
/// ```
pub struct ResponseStream {
    status: StatusCode,
    headers: HeaderMap,
    body: ResponseBody,
    deadline: Option<Instant>,
    idle: Duration,
    limit: u64,
    read: u64,
    end: End,
    endpoint: &'static str,
    /// How many attempts the call made, for errors (as a decoder's error has it).
    attempts: u32,
    /// The call's cancellation token, if it was given one.
    cancel: crate::client::Tokens,
}

/// Whether a [`ResponseStream`] may still be read from.
#[derive(Clone, Copy)]
enum End {
    Open,
    Done,
    Failed(ErrorKind),
}

impl ResponseStream {
    pub(crate) fn new(
        status: StatusCode,
        headers: HeaderMap,
        body: ResponseBody,
        deadline: Option<Instant>,
        idle: Duration,
        limit: u64,
        endpoint: &'static str,
    ) -> Self {
        ResponseStream {
            status,
            headers,
            body,
            deadline,
            idle,
            limit,
            read: 0,
            end: End::Open,
            endpoint,
            attempts: 0,
            cancel: crate::client::Tokens::default(),
        }
    }

    /// Ends reads with [`ErrorKind::Cancelled`] once one of `tokens` is cancelled.
    pub(crate) fn cancel_on(&mut self, tokens: crate::client::Tokens) {
        self.cancel = tokens;
    }

    /// The status.
    ///
    /// ```
    /// # use resilient_api::ResponseStream;
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "1s"))]
    /// # pub trait Exports {
    /// #     #[get("/export")]
    /// #     async fn export(&self) -> Result<ResponseStream, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let t = ScriptedTransport::new([Step::status(206).body("c,d\n")]);
    /// let api = ExportsClient::builder().transport(t).build()?;
    /// let export = api.export().await?;
    /// assert_eq!(export.status(), 206); // known before any of the body is read
    /// # Ok(()) }
    /// ```
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The headers.
    ///
    /// ```
    /// # use resilient_api::ResponseStream;
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "1s"))]
    /// # pub trait Exports {
    /// #     #[get("/export")]
    /// #     async fn export(&self) -> Result<ResponseStream, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let t = ScriptedTransport::new([Step::status(200).body("a,b\nc,d\n")]);
    /// let api = ExportsClient::builder().transport(t).build()?;
    /// let export = api.export().await?;
    /// // E.g. to size a progress bar before reading.
    /// let size = export.headers().get("content-length").and_then(|v| v.to_str().ok());
    /// assert_eq!(size, Some("8"));
    /// # Ok(()) }
    /// ```
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    fn fail(&self, kind: ErrorKind, message: &'static str) -> ApiError {
        let mut e = ApiError::new(kind).with_message(message);
        e.set_endpoint(self.endpoint);
        e.set_attempts(self.attempts);
        // A body over the limit is this response's fault, on every read that says so.
        if kind == ErrorKind::BodyTooLarge {
            e.set_status(self.status.as_u16());
        }
        e
    }

    /// The next chunk, or `None` at the end.
    ///
    /// After the end it keeps returning `None`, and after an error it returns an
    /// error of the same kind, without reading from the transfer again.
    ///
    /// ```
    /// # use resilient_api::ResponseStream;
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "1s"))]
    /// # pub trait Exports {
    /// #     #[get("/export")]
    /// #     async fn export(&self) -> Result<ResponseStream, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// # let ms = std::time::Duration::from_millis;
    /// let reply = Step::status(200).chunks([(ms(10), "a,b\n"), (ms(10), "c,d\n")]);
    /// let api = ExportsClient::builder().transport(ScriptedTransport::new([reply])).build()?;
    /// let mut export = api.export().await?;
    /// let mut rows = 0;
    /// while let Some(chunk) = export.chunk().await? {
    ///     rows += chunk.iter().filter(|&&b| b == b'\n').count();
    /// }
    /// assert_eq!(rows, 2);
    /// assert_eq!(export.chunk().await?, None); // still the end
    /// # Ok(()) }
    /// ```
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, ApiError> {
        match self.end {
            End::Open => {}
            End::Done => return Ok(None),
            End::Failed(kind) => return Err(self.fail(kind, "the streamed body already failed")),
        }
        let next = self.next_chunk().await;
        self.end = match &next {
            Ok(Some(_)) => End::Open,
            Ok(None) => End::Done,
            Err(e) => End::Failed(e.kind()),
        };
        if !matches!(self.end, End::Open) {
            // Never read again: let the transfer (and its connection) go now, not
            // when the caller drops the stream.
            self.body = ResponseBody::empty();
        }
        next
    }

    async fn next_chunk(&mut self) -> Result<Option<Bytes>, ApiError> {
        const AT_DEADLINE: &str = "while reading the streamed body";
        let now = Instant::now();
        // Asked before the body, which may have data ready: a cancelled call, or a
        // deadline that has passed, ends the read whatever is waiting. The caller's
        // own word first, as at every step of the call.
        if self.cancel.is_cancelled() {
            return Err(self.fail(ErrorKind::Cancelled, "the call was cancelled"));
        }
        if self.deadline.is_some_and(|d| d <= now) {
            return Err(self.fail(ErrorKind::Deadline, AT_DEADLINE));
        }
        // An idle limit too far away to count is no limit, as everywhere else. The
        // earlier of the two limits is the one that can fire.
        let idle_end = now.checked_add(self.idle);
        let (deadline, idle_end) = match (self.deadline, idle_end) {
            (Some(d), Some(i)) if d <= i => (Some(d), None),
            (Some(d), None) => (Some(d), None),
            (_, i) => (None, i),
        };
        let until = |at: Option<Instant>| async move {
            match at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let cancelled = self.cancel.cancelled();
        // In this order: the caller's token wins a tie with the deadline, the deadline
        // wins a tie with a chunk (as they do everywhere in a call), and a chunk wins
        // a tie with the idle limit (as a body does with the attempt timeout).
        let next = tokio::select! {
            biased;
            () = cancelled => Err(ErrorKind::Cancelled),
            () = until(deadline) => Err(ErrorKind::Deadline),
            next = self.body.next() => Ok(next),
            () = until(idle_end) => Err(ErrorKind::AttemptTimeout),
        };
        match next {
            Err(ErrorKind::Deadline) => Err(self.fail(ErrorKind::Deadline, AT_DEADLINE)),
            Err(ErrorKind::Cancelled) => {
                Err(self.fail(ErrorKind::Cancelled, "the call was cancelled"))
            }
            // An idle limit that fired in the deadline's own timer tick, just before
            // it, is the deadline: it wins the tie, as an attempt's limit does in the
            // call (the timer rounds up to its tick, where the deadline is due too).
            Err(_) if crate::timeout::deadline_due(self.deadline) => {
                Err(self.fail(ErrorKind::Deadline, AT_DEADLINE))
            }
            Err(kind) => Err(self.fail(
                kind,
                "no data within the idle limit while reading the streamed body",
            )),
            Ok(None) => Ok(None),
            Ok(Some(Err(e))) => Err(self
                .fail(ErrorKind::Transport, "while reading the streamed body")
                .with_source(e)),
            Ok(Some(Ok(bytes))) => {
                self.read = self.read.saturating_add(bytes.len() as u64);
                if self.read > self.limit {
                    return Err(self.fail(ErrorKind::BodyTooLarge, "streamed body over the limit"));
                }
                Ok(Some(bytes))
            }
        }
    }

    /// Read the rest of the body into memory (still bounded by the size limit).
    ///
    /// ```
    /// # use resilient_api::ResponseStream;
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "1s"))]
    /// # pub trait Exports {
    /// #     #[get("/export")]
    /// #     async fn export(&self) -> Result<ResponseStream, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let t = ScriptedTransport::new([Step::status(200).body("a,b\nc,d\n")]);
    /// let api = ExportsClient::builder().transport(t).build()?;
    /// let export = api.export().await?;
    /// assert_eq!(export.bytes().await?, "a,b\nc,d\n");
    /// # Ok(()) }
    /// ```
    pub async fn bytes(mut self) -> Result<Bytes, ApiError> {
        let mut buf = BytesMut::new();
        while let Some(c) = self.chunk().await? {
            buf.extend_from_slice(&c);
        }
        Ok(buf.freeze())
    }

    /// Read the rest of the body as text, as the [`Text`](decode::Text) decoder reads
    /// a `String` result: in the encoding a byte order mark names, else in the charset
    /// the content type names, else in UTF-8.
    ///
    /// ```
    /// # use resilient_api::ResponseStream;
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "1s"))]
    /// # pub trait Exports {
    /// #     #[get("/export")]
    /// #     async fn export(&self) -> Result<ResponseStream, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let t = ScriptedTransport::new([Step::status(200).body("a,b\nc,d\n")]);
    /// let api = ExportsClient::builder().transport(t).build()?;
    /// let csv = api.export().await?.text().await?;
    /// assert_eq!(csv.lines().count(), 2);
    /// # Ok(()) }
    /// ```
    pub async fn text(mut self) -> Result<String, ApiError> {
        let (status, endpoint, attempts) = (self.status(), self.endpoint, self.attempts);
        // Reading needs none of the headers: the charset and a decode error's content
        // type are read from them afterwards.
        let headers = std::mem::take(&mut self.headers);
        let b = self.bytes().await?;
        text_from(&b, &headers).map_err(|what| {
            let mut e = decode_failure(
                ErrorKind::Decode,
                status,
                headers.get(http::header::CONTENT_TYPE),
                b.len(),
                what,
            );
            e.set_endpoint(endpoint);
            e.set_attempts(attempts);
            e
        })
    }
}

/// `body` as text: in the encoding its byte order mark names, if it starts with one
/// (the mark is not part of the text), else in the charset its content type names,
/// else in UTF-8, as the WHATWG Encoding Standard decodes, and browsers and reqwest
/// with it (so `iso-8859-1` is read as windows-1252, its superset). Strict: a byte the
/// encoding cannot hold is an error, never a replacement character. The error says
/// what went wrong, for a decode error's message.
fn text_from(body: &[u8], headers: &HeaderMap) -> Result<String, String> {
    let (encoding, body) = match encoding_rs::Encoding::for_bom(body) {
        Some((encoding, mark)) => (encoding, &body[mark..]),
        None => {
            let label = headers.get(http::header::CONTENT_TYPE).and_then(charset);
            let encoding = match label {
                None => encoding_rs::UTF_8,
                Some(label) => encoding_rs::Encoding::for_label(label).ok_or_else(|| {
                    let shown = crate::error::excerpt(&String::from_utf8_lossy(label), 40);
                    format!("an unknown charset \"{shown}\"")
                })?,
            };
            (encoding, body)
        }
    };
    if encoding == encoding_rs::UTF_8 {
        return match std::str::from_utf8(body) {
            Ok(text) => Ok(text.to_owned()),
            Err(e) => Err(format!("not UTF-8 at byte {}", e.valid_up_to())),
        };
    }
    encoding
        .decode_without_bom_handling_and_without_replacement(body)
        .map(std::borrow::Cow::into_owned)
        .ok_or_else(|| format!("not valid {}", encoding.name()))
}

/// The `charset` parameter of a content type, without its quotes, if it has one.
/// Parameters are split at the `;`s outside quoted values.
fn charset(content_type: &http::HeaderValue) -> Option<&[u8]> {
    let (mut quoted, mut escaped) = (false, false);
    let params = content_type.as_bytes().split(|&b| {
        match b {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b';' => return !quoted,
            _ => {}
        }
        false
    });
    // The first piece is the media type itself.
    params.skip(1).find_map(|param| {
        let (name, value) = param.split_at(param.iter().position(|&b| b == b'=')?);
        let value = value[1..].trim_ascii();
        let value = value
            .strip_prefix(b"\"")
            .and_then(|v| v.strip_suffix(b"\""))
            .unwrap_or(value);
        name.trim_ascii()
            .eq_ignore_ascii_case(b"charset")
            .then_some(value)
    })
}

/// A `kind` error about a response that could not be decoded: the message says what
/// went wrong, with the content type and the length, and the error carries the
/// status. Never the body, nor the other headers (DESIGN §3.9): a success's body and
/// headers are the caller's data, which may hold tokens or personal data, and an
/// error is made to be logged.
fn decode_failure(
    kind: ErrorKind,
    status: StatusCode,
    content_type: Option<&http::HeaderValue>,
    len: usize,
    what: String,
) -> ApiError {
    // As the server sent it, bytes that are not text shown as such, and cut: a
    // content type the server made long is not copied whole into every log.
    let ct = content_type.map_or_else(
        || "none".to_owned(),
        |v| crate::error::excerpt(&String::from_utf8_lossy(v.as_bytes()), 100),
    );
    let mut e =
        ApiError::new(kind).with_message(format!("{what} (content type {ct}, {len} bytes)"));
    e.set_status(status.as_u16());
    e
}

impl fmt::Debug for ResponseStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseStream")
            .field("status", &self.status)
            .field("headers", &crate::observe::Redacted(&self.headers))
            .finish_non_exhaustive()
    }
}

/// A response as the pipeline hands it to a decoder.
///
/// Only a success or an unfollowed 3xx gets here: an error status has already ended
/// the call with [`ErrorKind::Status`].
///
/// ```
/// use resilient_api::response::{RawBody, RawResponse};
/// use resilient_api::response::decode::{Decoder, Text};
/// use resilient_api::Bytes;
///
/// let raw = RawResponse {
///     status: http::StatusCode::OK,
///     headers: http::HeaderMap::new(),
///     body: RawBody::Buffered(Bytes::from("pong")),
///     endpoint: "ping",
///     attempts: 1,
/// };
/// assert_eq!(Text::decode(raw)?, "pong");
/// # Ok::<(), resilient_api::ApiError>(())
/// ```
pub struct RawResponse {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: RawBody,
    /// The endpoint's name, for errors.
    pub endpoint: &'static str,
    /// How many attempts the call made, for errors: a decoder's error is given it.
    pub attempts: u32,
}

impl fmt::Debug for RawResponse {
    /// Secret headers are shown as `[redacted]`, and the body as its length only (see
    /// [`RawBody`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawResponse")
            .field("status", &self.status)
            .field("headers", &crate::observe::Redacted(&self.headers))
            .field("body", &self.body)
            .field("endpoint", &self.endpoint)
            .field("attempts", &self.attempts)
            .finish()
    }
}

/// A body, read whole or still streaming.
///
/// It is [`Streaming`](RawBody::Streaming) only for a decoder whose
/// [`STREAMING`](decode::Decoder::STREAMING) is `true`. Its `Debug` shows the body's
/// length only (`N bytes`, or `stream` for one still to read), never its bytes, which
/// may hold a secret (a token response, a session), as a request body's does.
///
/// ```
/// use resilient_api::response::RawBody;
/// use resilient_api::Bytes;
///
/// let body = RawBody::Buffered(Bytes::from_static(b"{}"));
/// assert!(matches!(body, RawBody::Buffered(ref b) if b.len() == 2));
/// assert_eq!(format!("{body:?}"), "2 bytes");
/// ```
pub enum RawBody {
    /// Read whole (bounded by the size limit).
    Buffered(Bytes),
    /// Still to read. Boxed: the rare case should not make every response (moved up
    /// through each layer of the pipeline) larger.
    Streaming(Box<ResponseStream>),
}

impl fmt::Debug for RawBody {
    /// The body's length (`N bytes`), or `stream`: never its bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RawBody::Buffered(b) => write!(f, "{} bytes", b.len()),
            RawBody::Streaming(_) => f.write_str("stream"),
        }
    }
}

pub mod decode {
    //! How a response becomes the method's result type. Chosen by the macro from the
    //! syntax of the result type.

    use super::*;
    use crate::error::BoxError;
    use serde::de::DeserializeOwned;
    use std::marker::PhantomData;

    /// Turns a response into a value.
    ///
    /// The macro picks the decoder from the method's result type; a failure is an
    /// [`ErrorKind::Decode`] (or [`ErrorKind::UnexpectedContentType`]) error, never
    /// retried, whose message names the content type and length, never the body; the
    /// error carries the status (DESIGN §3.9).
    ///
    /// ```
    /// use resilient_api::response::decode::{Decoder, Json};
    /// use resilient_api::response::{RawBody, RawResponse};
    /// use resilient_api::{Bytes, ErrorKind};
    ///
    /// let raw = |body: &'static str| RawResponse {
    ///     status: http::StatusCode::OK,
    ///     headers: http::HeaderMap::new(),
    ///     body: RawBody::Buffered(Bytes::from(body)),
    ///     endpoint: "ids",
    ///     attempts: 1,
    /// };
    /// assert_eq!(Json::<Vec<u32>>::decode(raw("[1,2]"))?, [1, 2]);
    /// let cut = Json::<Vec<u32>>::decode(raw("[1,")).unwrap_err();
    /// assert_eq!(cut.kind(), ErrorKind::Decode);
    /// # Ok::<(), resilient_api::ApiError>(())
    /// ```
    pub trait Decoder {
        /// The value.
        type Output: Send + 'static;
        /// Whether the body is handed over unread (default `false`: it is read whole,
        /// within the size limit, before [`decode`](Decoder::decode)).
        const STREAMING: bool = false;
        /// Decode `raw` into the method's result.
        ///
        /// ```
        /// use resilient_api::response::decode::{Decoder, Unit};
        /// use resilient_api::response::{RawBody, RawResponse};
        /// use resilient_api::Bytes;
        ///
        /// let raw = RawResponse {
        ///     status: http::StatusCode::NO_CONTENT,
        ///     headers: http::HeaderMap::new(),
        ///     body: RawBody::Buffered(Bytes::new()),
        ///     endpoint: "delete_user",
        ///     attempts: 1,
        /// };
        /// assert_eq!(Unit::decode(raw)?, ());
        /// # Ok::<(), resilient_api::ApiError>(())
        /// ```
        fn decode(raw: RawResponse) -> Result<Self::Output, ApiError>;
    }

    /// A `kind` error about `raw`, which could not be decoded (see
    /// [`decode_failure`](super::decode_failure)).
    fn decode_error(kind: ErrorKind, raw: &RawResponse, what: String) -> ApiError {
        let len = buffered(&raw.body).len();
        let mut e = super::decode_failure(
            kind,
            raw.status,
            raw.headers.get(http::header::CONTENT_TYPE),
            len,
            what,
        );
        e.set_endpoint(raw.endpoint);
        e
    }

    /// What an empty body is to serde: no value. An `Option` takes it as `None`; any
    /// other type refuses it, `serde_json::Value` and unit structs included (an empty
    /// body is not JSON `null`).
    struct NoValue;

    impl<'de> serde::Deserializer<'de> for NoValue {
        type Error = serde::de::value::Error;

        fn deserialize_any<V: serde::de::Visitor<'de>>(
            self,
            _: V,
        ) -> Result<V::Value, Self::Error> {
            Err(serde::de::Error::custom("no value"))
        }

        fn deserialize_option<V: serde::de::Visitor<'de>>(
            self,
            visitor: V,
        ) -> Result<V::Value, Self::Error> {
            visitor.visit_none()
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf unit unit_struct newtype_struct seq tuple tuple_struct map struct
            enum identifier ignored_any
        }
    }

    fn buffered(body: &RawBody) -> &[u8] {
        match body {
            RawBody::Buffered(b) => b,
            RawBody::Streaming(_) => &[],
        }
    }

    fn json_content_type(headers: &HeaderMap) -> bool {
        let Some(ct) = headers.get(http::header::CONTENT_TYPE) else {
            return true;
        };
        // The common answer, without splitting or trimming: first as servers spell it
        // (one plain comparison, some 40 instructions fewer per call than the
        // case-insensitive one), then in any case.
        let ct_bytes = ct.as_bytes();
        if ct_bytes == b"application/json" || ct_bytes.eq_ignore_ascii_case(b"application/json") {
            return true;
        }
        // The media type alone: a parameter may hold bytes that are not text (obs-text
        // in a quoted value), which says nothing about the type.
        let essence = ct_bytes.split(|&b| b == b';').next().unwrap_or_default();
        let Ok(essence) = std::str::from_utf8(essence.trim_ascii()) else {
            return false;
        };
        let is = |m: &str| essence.eq_ignore_ascii_case(m);
        // `type/name+json`: a type and a name before the suffix.
        let suffix_json = essence.split_once('/').is_some_and(|(kind, sub)| {
            !kind.is_empty()
                && sub
                    .len()
                    .checked_sub(5)
                    .filter(|&at| at > 0)
                    .and_then(|at| sub.get(at..))
                    .is_some_and(|tail| tail.eq_ignore_ascii_case("+json"))
        });
        essence.is_empty()
            || is("application/json")
            || suffix_json
            || is("text/json")
            || is("text/plain")
            || is("application/octet-stream")
    }

    /// JSON into `T`, for any `DeserializeOwned` result type.
    ///
    /// The content type must be JSON-like (see the [module docs](super)); anything
    /// else, such as an HTML error page, is [`ErrorKind::UnexpectedContentType`]. An
    /// empty body (a 204's or a 304's, whatever its content type) holds no value:
    /// `None` for an `Option` result, [`ErrorKind::Decode`] for any other (an empty body
    /// is not JSON `null`: not a `serde_json::Value`, nor a unit struct).
    ///
    /// ```
    /// use resilient_api::response::decode::{Decoder, Json};
    /// use resilient_api::response::{RawBody, RawResponse};
    /// use resilient_api::{Bytes, ErrorKind};
    ///
    /// let mut headers = http::HeaderMap::new();
    /// headers.insert("content-type", http::HeaderValue::from_static("text/html"));
    /// let raw = RawResponse {
    ///     status: http::StatusCode::OK,
    ///     headers: headers,
    ///     body: RawBody::Buffered(Bytes::from_static(b"<html>")),
    ///     endpoint: "e",
    ///     attempts: 1,
    /// };
    /// let html = Json::<u32>::decode(raw).unwrap_err();
    /// assert_eq!(html.kind(), ErrorKind::UnexpectedContentType);
    /// # Ok::<(), resilient_api::ApiError>(())
    /// ```
    pub struct Json<T>(PhantomData<fn() -> T>);

    impl<T: DeserializeOwned + Send + 'static> Decoder for Json<T> {
        type Output = T;
        fn decode(raw: RawResponse) -> Result<T, ApiError> {
            let body = buffered(&raw.body);
            // An empty body (a 204's, a 304's) holds no value, whatever content type a
            // server put on it: an `Option` result takes it as `None`; any other type
            // cannot be made from it.
            if body.is_empty() {
                return T::deserialize(NoValue).map_err(|_| {
                    let what = "an empty body, and the result is no `Option`".to_owned();
                    decode_error(ErrorKind::Decode, &raw, what)
                });
            }
            if !json_content_type(&raw.headers) {
                let what = "expected JSON".to_owned();
                return Err(decode_error(ErrorKind::UnexpectedContentType, &raw, what));
            }
            match serde_json::from_slice(body) {
                Ok(value) => Ok(value),
                Err(e) => {
                    let what = match e.classify() {
                        serde_json::error::Category::Io => "i/o error",
                        serde_json::error::Category::Syntax => "invalid JSON",
                        serde_json::error::Category::Data => "JSON of the wrong shape",
                        serde_json::error::Category::Eof => "JSON cut short",
                    };
                    let what = format!("{what} at line {} column {}", e.line(), e.column());
                    Err(decode_error(ErrorKind::Decode, &raw, what))
                }
            }
        }
    }

    /// Text, for a `String` result, whatever the content type: in the encoding a byte
    /// order mark at its start names (the mark is not text), else in the charset the
    /// content type names (`text/plain; charset=shift_jis`), else in UTF-8.
    /// A byte the encoding cannot hold, or a charset no one knows, is
    /// [`ErrorKind::Decode`]. The charset's labels are the WHATWG Encoding Standard's,
    /// as browsers and reqwest read them: `iso-8859-1` is read as windows-1252.
    ///
    /// ```
    /// use resilient_api::response::decode::{Decoder, Text};
    /// use resilient_api::response::{RawBody, RawResponse};
    /// use resilient_api::{Bytes, ErrorKind};
    ///
    /// let raw = RawResponse {
    ///     status: http::StatusCode::OK,
    ///     headers: http::HeaderMap::new(),
    ///     body: RawBody::Buffered(Bytes::from_static(b"caf\xc3")),
    ///     endpoint: "e",
    ///     attempts: 1,
    /// };
    /// let cut = Text::decode(raw).unwrap_err(); // a character cut in half
    /// assert_eq!(cut.kind(), ErrorKind::Decode);
    ///
    /// let mut headers = http::HeaderMap::new();
    /// let latin1 = http::HeaderValue::from_static("text/plain; charset=ISO-8859-1");
    /// headers.insert(http::header::CONTENT_TYPE, latin1);
    /// let raw = RawResponse {
    ///     status: http::StatusCode::OK,
    ///     headers,
    ///     body: RawBody::Buffered(Bytes::from_static(b"caf\xe9")),
    ///     endpoint: "e",
    ///     attempts: 1,
    /// };
    /// assert_eq!(Text::decode(raw)?, "café");
    /// # Ok::<(), resilient_api::ApiError>(())
    /// ```
    pub struct Text;

    impl Decoder for Text {
        type Output = String;
        fn decode(raw: RawResponse) -> Result<String, ApiError> {
            text_from(buffered(&raw.body), &raw.headers)
                .map_err(|what| decode_error(ErrorKind::Decode, &raw, what))
        }
    }

    /// The body's bytes, for a [`Bytes`] result. The decoder never fails; a body over
    /// the size limit fails the call before it, with `BodyTooLarge`.
    ///
    /// ```
    /// use resilient_api::response::decode::{Decoder, RawBytes};
    /// use resilient_api::response::{RawBody, RawResponse};
    /// use resilient_api::{Bytes, ErrorKind};
    ///
    /// let raw = RawResponse {
    ///     status: http::StatusCode::OK,
    ///     headers: http::HeaderMap::new(),
    ///     body: RawBody::Buffered(Bytes::from_static(b"\x89PNG")),
    ///     endpoint: "e",
    ///     attempts: 1,
    /// };
    /// assert_eq!(RawBytes::decode(raw)?, &b"\x89PNG"[..]);
    /// # let _ = ErrorKind::Decode;
    /// # Ok::<(), resilient_api::ApiError>(())
    /// ```
    pub struct RawBytes;

    impl Decoder for RawBytes {
        type Output = Bytes;
        fn decode(raw: RawResponse) -> Result<Bytes, ApiError> {
            Ok(match raw.body {
                RawBody::Buffered(b) => b,
                RawBody::Streaming(_) => Bytes::new(),
            })
        }
    }

    /// Nothing, for a `()` result: the body is ignored (and still read, within the size
    /// limit, so the connection can be reused). The decoder never fails; a body over
    /// the size limit fails the call before it, with `BodyTooLarge`.
    ///
    /// ```
    /// use resilient_api::response::decode::{Decoder, Unit};
    /// use resilient_api::response::{RawBody, RawResponse};
    /// use resilient_api::{Bytes, ErrorKind};
    ///
    /// let raw = RawResponse {
    ///     status: http::StatusCode::OK,
    ///     headers: http::HeaderMap::new(),
    ///     body: RawBody::Buffered(Bytes::from_static(b"{\"ignored\": true}")),
    ///     endpoint: "e",
    ///     attempts: 1,
    /// };
    /// assert_eq!(Unit::decode(raw)?, ());
    /// # let _ = ErrorKind::Decode;
    /// # Ok::<(), resilient_api::ApiError>(())
    /// ```
    pub struct Unit;

    impl Decoder for Unit {
        type Output = ();
        fn decode(_raw: RawResponse) -> Result<(), ApiError> {
            Ok(())
        }
    }

    /// The body unread, as a [`ResponseStream`], for a `ResponseStream` result.
    ///
    /// Given a body already read, it streams that body back.
    ///
    /// ```
    /// use resilient_api::response::decode::{Decoder, Streamed};
    /// use resilient_api::response::{RawBody, RawResponse};
    /// use resilient_api::Bytes;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), resilient_api::ApiError> {
    /// assert!(Streamed::STREAMING);
    /// let raw = RawResponse {
    ///     status: http::StatusCode::OK,
    ///     headers: http::HeaderMap::new(),
    ///     body: RawBody::Buffered(Bytes::from_static(b"a,b\n")),
    ///     endpoint: "export",
    ///     attempts: 1,
    /// };
    /// assert_eq!(Streamed::decode(raw)?.bytes().await?, "a,b\n");
    /// # Ok(()) }
    /// ```
    pub struct Streamed;

    impl Decoder for Streamed {
        type Output = ResponseStream;
        const STREAMING: bool = true;
        fn decode(raw: RawResponse) -> Result<ResponseStream, ApiError> {
            let mut stream = match raw.body {
                RawBody::Streaming(s) => *s,
                RawBody::Buffered(b) => ResponseStream::new(
                    raw.status,
                    raw.headers,
                    ResponseBody::full(b),
                    None,
                    Duration::from_secs(30),
                    u64::MAX,
                    raw.endpoint,
                ),
            };
            // The body's errors come after the call returned, and still say how many
            // attempts it made.
            stream.attempts = raw.attempts;
            Ok(stream)
        }
    }

    /// `D`'s value with the status and headers, for a [`Response<T>`] result (including
    /// `Response<ResponseStream>`). It fails where `D` fails.
    ///
    /// ```
    /// use resilient_api::response::decode::{Decoder, Unit, Wrapped};
    /// use resilient_api::response::{RawBody, RawResponse};
    /// use resilient_api::Bytes;
    ///
    /// let raw = RawResponse {
    ///     status: http::StatusCode::NOT_MODIFIED,
    ///     headers: http::HeaderMap::new(),
    ///     body: RawBody::Buffered(Bytes::new()),
    ///     endpoint: "tags",
    ///     attempts: 1,
    /// };
    /// let response = Wrapped::<Unit>::decode(raw)?;
    /// assert_eq!(response.status(), 304);
    /// # Ok::<(), resilient_api::ApiError>(())
    /// ```
    pub struct Wrapped<D>(PhantomData<fn() -> D>);

    impl<D: Decoder> Decoder for Wrapped<D> {
        type Output = Response<D::Output>;
        const STREAMING: bool = D::STREAMING;
        fn decode(raw: RawResponse) -> Result<Self::Output, ApiError> {
            let status = raw.status;
            let headers = raw.headers.clone();
            let value = D::decode(raw)?;
            Ok(Response {
                status,
                headers,
                value,
            })
        }
    }

    /// A user's check of a decoded value, named by `#[parse(with = path)]`: the macro
    /// implements it for each such method, calling `path(&value)`.
    ///
    /// ```
    /// use resilient_api::error::BoxError;
    /// use resilient_api::response::decode::Check;
    ///
    /// struct Positive;
    /// impl Check<i64> for Positive {
    ///     const NAME: &'static str = "positive";
    ///     fn check(value: &i64) -> Result<(), BoxError> {
    ///         if *value > 0 { Ok(()) } else { Err("not positive".into()) }
    ///     }
    /// }
    /// assert!(Positive::check(&-1).is_err());
    /// ```
    pub trait Check<T> {
        /// The check's path as the user wrote it, for the error's message.
        const NAME: &'static str;
        /// `Ok` if `value` may be the call's result.
        fn check(value: &T) -> Result<(), BoxError>;
    }

    /// `D`'s value, once `C` accepts it (`#[parse(with = path)]`).
    ///
    /// A value `C` refuses is an [`ErrorKind::Decode`] error: never retried (the
    /// server answered, and would answer the same), carrying the status, with the
    /// check's own error as its [`source`](std::error::Error::source). Its message
    /// names the check, the content type and the length, never the body or the
    /// check's text, which may quote the body.
    ///
    /// ```
    /// use resilient_api::error::BoxError;
    /// use resilient_api::response::decode::{Check, Checked, Decoder, Json};
    /// use resilient_api::response::{RawBody, RawResponse};
    /// use resilient_api::{Bytes, ErrorKind};
    ///
    /// struct Positive;
    /// impl Check<i64> for Positive {
    ///     const NAME: &'static str = "positive";
    ///     fn check(value: &i64) -> Result<(), BoxError> {
    ///         if *value > 0 { Ok(()) } else { Err("not positive".into()) }
    ///     }
    /// }
    /// let raw = |body: &'static str| RawResponse {
    ///     status: http::StatusCode::OK,
    ///     headers: http::HeaderMap::new(),
    ///     body: RawBody::Buffered(Bytes::from(body)),
    ///     endpoint: "balance",
    ///     attempts: 1,
    /// };
    /// assert_eq!(Checked::<Json<i64>, Positive>::decode(raw("7"))?, 7);
    /// let refused = Checked::<Json<i64>, Positive>::decode(raw("-7")).unwrap_err();
    /// assert_eq!(refused.kind(), ErrorKind::Decode);
    /// assert_eq!(refused.status(), Some(200));
    /// let why = std::error::Error::source(&refused).map(|e| e.to_string());
    /// assert_eq!(why.as_deref(), Some("not positive"));
    /// # Ok::<(), resilient_api::ApiError>(())
    /// ```
    pub struct Checked<D, C>(PhantomData<fn() -> (D, C)>);

    impl<D: Decoder, C: Check<D::Output>> Decoder for Checked<D, C> {
        type Output = D::Output;
        const STREAMING: bool = D::STREAMING;
        fn decode(raw: RawResponse) -> Result<Self::Output, ApiError> {
            let (status, endpoint) = (raw.status, raw.endpoint);
            let len = buffered(&raw.body).len();
            // Kept for the rare refusal only: a header value is a shared buffer.
            let content_type = raw.headers.get(http::header::CONTENT_TYPE).cloned();
            let value = D::decode(raw)?;
            match C::check(&value) {
                Ok(()) => Ok(value),
                Err(why) => {
                    let what = format!("refused by `{}`", C::NAME);
                    let ct = content_type.as_ref();
                    let mut e = super::decode_failure(ErrorKind::Decode, status, ct, len, what)
                        .with_source(why);
                    e.set_endpoint(endpoint);
                    Err(e)
                }
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::json_content_type;
        use http::HeaderMap;
        use http::header::{CONTENT_TYPE, HeaderValue};

        fn with(ct: &'static str) -> HeaderMap {
            let mut h = HeaderMap::new();
            h.insert(CONTENT_TYPE, HeaderValue::from_static(ct));
            h
        }

        #[test]
        fn json_and_its_kin_are_accepted_in_any_case_and_with_parameters() {
            assert!(json_content_type(&HeaderMap::new()));
            for ct in [
                "application/json",
                "Application/JSON",
                "APPLICATION/JSON",
                "application/json; charset=utf-8",
                " application/json ;charset=UTF-8",
                "application/problem+json",
                "application/VND.ACME+JSON; v=2",
                "text/json",
                "text/plain; charset=utf-8",
                "application/octet-stream",
                "",
            ] {
                assert!(json_content_type(&with(ct)), "{ct:?} refused");
            }
        }

        #[test]
        fn other_types_are_refused() {
            for ct in [
                "text/html",
                "application/jsonx",
                "application/xml",
                "json",
                "+json",
                "application/+json",
                "/vnd.acme+json",
                "application/json-seq",
                "text/html; profile=application/json",
            ] {
                assert!(!json_content_type(&with(ct)), "{ct:?} accepted");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::text_from;
    use http::HeaderMap;
    use http::header::{CONTENT_TYPE, HeaderValue};

    fn text(ct: Option<&'static str>, body: &[u8]) -> Result<String, String> {
        let mut h = HeaderMap::new();
        if let Some(ct) = ct {
            h.insert(CONTENT_TYPE, HeaderValue::from_static(ct));
        }
        text_from(body, &h)
    }

    #[test]
    fn no_charset_is_utf8_and_strict() {
        assert_eq!(text(None, "café".as_bytes()).as_deref(), Ok("café"));
        assert_eq!(
            text(Some("text/plain"), b"caf\xc3\xa9").as_deref(),
            Ok("café")
        );
        assert_eq!(
            text(Some("text/plain"), b"caf\xe9"),
            Err("not UTF-8 at byte 3".to_owned())
        );
        assert_eq!(
            text(Some("text/plain; charset=UTF-8"), b"caf\xe9"),
            Err("not UTF-8 at byte 3".to_owned())
        );
    }

    #[test]
    fn the_named_charset_is_read_in_any_spelling() {
        for ct in [
            "text/plain; charset=iso-8859-1",
            "text/plain;charset=ISO-8859-1",
            "text/plain; format=flowed; Charset=\"latin1\"",
            "text/csv ; CHARSET = windows-1252 ",
        ] {
            assert_eq!(text(Some(ct), b"caf\xe9").as_deref(), Ok("café"), "{ct}");
        }
        // windows-1252 is a superset of Latin-1: 0x80 is the euro sign.
        let ct = Some("text/plain; charset=iso-8859-1");
        assert_eq!(text(ct, b"\x80 5").as_deref(), Ok("€ 5"));
        let sjis = Some("text/plain; charset=Shift_JIS");
        assert_eq!(text(sjis, b"\x82\xa0").as_deref(), Ok("あ"));
        let utf16 = Some("text/plain; charset=utf-16le");
        assert_eq!(text(utf16, b"h\x00i\x00").as_deref(), Ok("hi"));
    }

    #[test]
    fn a_byte_the_charset_cannot_hold_is_an_error_not_a_replacement() {
        let sjis = Some("text/plain; charset=shift_jis");
        assert_eq!(text(sjis, b"\x82"), Err("not valid Shift_JIS".to_owned()));
        let utf16 = Some("text/plain; charset=utf-16be");
        assert_eq!(
            text(utf16, b"\xd8\x00"),
            Err("not valid UTF-16BE".to_owned())
        );
    }

    #[test]
    fn a_byte_order_mark_names_the_encoding_and_is_not_text() {
        // A big-endian mark under a label that says little-endian (WHATWG's `utf-16`).
        let utf16 = Some("text/plain; charset=utf-16");
        assert_eq!(text(utf16, b"\xfe\xff\x00h\x00i").as_deref(), Ok("hi"));
        assert_eq!(text(utf16, b"\xff\xfeh\x00i\x00").as_deref(), Ok("hi"));
        assert_eq!(
            text(None, b"\xef\xbb\xbfcaf\xc3\xa9").as_deref(),
            Ok("café")
        );
        let latin1 = Some("text/plain; charset=iso-8859-1");
        assert_eq!(text(latin1, b"\xef\xbb\xbfhi").as_deref(), Ok("hi"));
        // Without a mark, the label decides: `\xef\xbb` alone is Latin-1 text.
        assert_eq!(text(latin1, b"\xef\xbb").as_deref(), Ok("ï»"));
    }

    #[test]
    fn a_semicolon_inside_a_quoted_value_separates_nothing() {
        let ct = Some("text/plain; title=\"a;charset=x\"; charset=latin1");
        assert_eq!(text(ct, b"caf\xe9").as_deref(), Ok("café"));
        let ct = Some("text/plain; title=\"a\\\";charset=x\"");
        assert_eq!(text(ct, b"hi").as_deref(), Ok("hi"));
        let ct = Some("text/plain; title=\"a;charset=x\"");
        assert_eq!(text(ct, b"hi").as_deref(), Ok("hi"));
    }

    /// Content types made of the bytes that steer the parser (quotes, escapes, `;`,
    /// `=`, the parameter's name), in every order a small generator gives: the parser
    /// never panics, and whatever it finds is a slice of the value.
    #[test]
    fn any_content_type_parses_without_a_panic() {
        const PIECES: [&[u8]; 9] = [
            b";",
            b"\"",
            b"\\",
            b"=",
            b"charset",
            b" ",
            b"x",
            b"utf-16",
            b"text/plain",
        ];
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            let mut value = Vec::new();
            for _ in 0..(state % 12) {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1);
                value.extend_from_slice(PIECES[(state >> 33) as usize % PIECES.len()]);
            }
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let Ok(header) = HeaderValue::from_bytes(&value) else {
                continue;
            };
            if let Some(found) = super::charset(&header) {
                assert!(found.len() <= value.len());
            }
            let mut h = HeaderMap::new();
            h.insert(CONTENT_TYPE, header);
            let _ = text_from(b"\xfe\xffhi", &h);
        }
    }

    #[test]
    fn an_unknown_charset_is_named_and_cut_short() {
        assert_eq!(
            text(Some("text/plain; charset=klingon"), b"x"),
            Err("an unknown charset \"klingon\"".to_owned())
        );
        let long = format!("text/plain; charset={}", "x".repeat(100));
        let mut h = HeaderMap::new();
        h.insert(
            CONTENT_TYPE,
            HeaderValue::from_str(&long).unwrap_or_else(|_| unreachable!()),
        );
        let err = text_from(b"x", &h).unwrap_err();
        assert_eq!(err, format!("an unknown charset \"{}...\"", "x".repeat(40)));
        // An empty label names nothing a decoder knows either.
        assert_eq!(
            text(Some("text/plain; charset="), b"x"),
            Err("an unknown charset \"\"".to_owned())
        );
    }
}
