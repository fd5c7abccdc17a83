//! What an `ApiError` carries (status, headers, attempts, endpoint, retry time, source
//! chain) and what its message may hold, when the server is hostile: every accessor
//! after hedges, coalesced calls and refusals, and no server-controlled text copied
//! into an error's `Display` (and so into the "call failed" event) without a bound.

use std::error::Error as _;
use std::time::Duration;

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, resilient_api};
use tests::{assert_nothing_leaked, ms, scripted};
use tokio::time::Instant;

/// Longest message an error may print about one response: a hostile server's text is
/// cut, as the unknown-charset message already cuts the charset to 40 characters.
const MESSAGE_BOUND: usize = 512;

/// One answer, no retry.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Hostile {
    #[get("/text")]
    async fn text(&self) -> Result<String, ApiError>;

    #[get("/json")]
    async fn json(&self) -> Result<Vec<u32>, ApiError>;

    #[get("/small")]
    #[max_body("10B")]
    async fn small(&self) -> Result<String, ApiError>;

    #[get("/small-stream")]
    #[max_body("10B")]
    async fn small_stream(&self) -> Result<resilient_api::ResponseStream, ApiError>;
}

/// Regression: a decode error's message copied the response's whole `Content-Type`
/// into `Display`, unbounded: a 5,000-byte content type made a 5,000-byte message. The
/// unknown-charset text cut the charset to 40 characters, and the same message then
/// repeated it in full.
#[tokio::test(start_paused = true)]
async fn a_decode_error_message_bounds_a_hostile_content_type() {
    let junk = "x".repeat(5000);
    let charset = format!("text/plain; charset={junk}");
    let html = format!("text/html; note={junk}");
    let t = ScriptedTransport::new([
        Step::status(200)
            .header("content-type", &charset)
            .body("hi"),
        Step::status(200).header("content-type", &html).body("<p>"),
    ]);
    let api: HostileClient = scripted(&t);

    let e = api.text().await.expect_err("an unknown charset");
    assert_eq!((e.kind(), e.status()), (ErrorKind::Decode, Some(200)));
    let shown = e.to_string();
    assert!(
        shown.contains(&format!("an unknown charset \"{}...\"", "x".repeat(40))),
        "{shown}"
    );
    assert!(
        shown.len() <= MESSAGE_BOUND,
        "a {}-byte Display for a {}-byte content type",
        shown.len(),
        charset.len()
    );

    let e = api.json().await.expect_err("HTML on a JSON endpoint");
    assert_eq!(
        (e.kind(), e.status()),
        (ErrorKind::UnexpectedContentType, Some(200))
    );
    let shown = e.to_string();
    assert!(
        shown.starts_with(
            "unexpected content type 200 in `json`: expected JSON (content type text/html; note=xxx"
        ),
        "{shown}"
    );
    assert!(
        shown.len() <= MESSAGE_BOUND,
        "a {}-byte Display for a {}-byte content type",
        shown.len(),
        html.len()
    );
    assert_nothing_leaked(&t);
}

/// Regression: a content type that is not ASCII (an `obs-text` byte, which `http`
/// accepts) was reported as "content type none", which is the one content type a
/// JSON endpoint accepts: the message contradicted the error it explains.
#[tokio::test(start_paused = true)]
async fn a_content_type_that_is_not_ascii_is_not_reported_as_none() {
    let t = ScriptedTransport::new([Step::status(200)
        .header_bytes("content-type", b"text/html; title=caf\xe9")
        .body("<p>hi</p>")]);
    let api: HostileClient = scripted(&t);
    let e = api.json().await.expect_err("HTML on a JSON endpoint");
    assert_eq!(
        (e.kind(), e.status()),
        (ErrorKind::UnexpectedContentType, Some(200))
    );
    let shown = e.to_string();
    assert!(
        !shown.contains("content type none"),
        "the response had a content type: {shown}"
    );
    assert!(shown.contains("text/html"), "{shown}");
}

/// Regression: a body over the method's limit failed with `BodyTooLarge` and no
/// status, though a response is at fault: `ApiError::status` is `None` only "when no
/// response is at fault (a timeout, a connection error, a policy's refusal)", and a
/// decode error keeps the status of the answer it could not use.
#[tokio::test(start_paused = true)]
async fn a_body_too_large_keeps_the_status_of_its_response() {
    let t = ScriptedTransport::new([
        // `Content-Length: 14` over a 10-byte limit: refused from the head.
        Step::status(200).body("0123456789abcd"),
        // No length: refused while reading.
        Step::status(203).chunks([(ms(1), "012345"), (ms(1), "6789abcd")]),
    ]);
    let api: HostileClient = scripted(&t);
    for expected in [200, 203] {
        let e = api.small().await.expect_err("over the 10-byte limit");
        assert_eq!(e.kind(), ErrorKind::BodyTooLarge);
        assert_eq!((e.attempts(), e.endpoint()), (1, "small"));
        assert!(e.body().is_none(), "a success's body is never kept");
        assert_eq!(e.status(), Some(expected), "{e:?}");
    }
    assert_nothing_leaked(&t);

    // A streamed result read after the call returned: the same, at the chunk that
    // goes over.
    let t =
        ScriptedTransport::new([Step::status(206).chunks([(ms(1), "012345"), (ms(1), "6789a")])]);
    let api: HostileClient = scripted(&t);
    let mut body = api
        .small_stream()
        .await
        .expect("the head is within the limit");
    assert_eq!(
        body.chunk().await.ok().flatten().as_deref(),
        Some(&b"012345"[..])
    );
    let e = body.chunk().await.expect_err("over the 10-byte limit");
    assert_eq!(
        (e.kind(), e.status(), e.attempts(), e.endpoint()),
        (ErrorKind::BodyTooLarge, Some(206), 1, "small_stream")
    );
    drop(body);
    assert_nothing_leaked(&t);
}

/// A hedged read, no retries.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0, on = [503]))]
pub trait Hedged {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;
}

/// The same, with one slot and no queue: the hedge is refused.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 0, on = [503]),
    bulkhead(concurrency = 1, queue = 0)
)]
pub trait Narrow {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;
}

/// The source error, as an `ApiError`.
fn api_source(e: &ApiError) -> &ApiError {
    e.source()
        .and_then(|s| s.downcast_ref::<ApiError>())
        .expect("an ApiError as source")
}

/// `e`'s source, an `ApiError`, is about the response of `status` with `body`, and
/// names `endpoint` and `attempts` as the call's own error would.
fn assert_source(e: &ApiError, status: Option<u16>, body: &str, endpoint: &str, attempts: u32) {
    let source = api_source(e);
    assert_eq!(
        (source.status(), source.body_text().as_deref()),
        (status, Some(body)),
        "the source: {source:?}"
    );
    assert_eq!(
        (source.endpoint(), source.attempts()),
        (endpoint, attempts),
        "the source: {source:?}"
    );
}

/// Regression: the error a hedged round puts in the source chain (the last branch's
/// 503 under `AllHedgesFailed`, or what the sent branch got under the hedge's refusal)
/// said `attempts() == 0` and `endpoint() == ""`, though it is the answer to a sent
/// attempt of `search`. A plain call's refused retry stamps its source (`next_wait`
/// sets the endpoint and the attempts before the failure becomes a source); the hedged
/// path now does the same.
#[tokio::test(start_paused = true)]
async fn a_hedged_rounds_source_names_its_endpoint_and_attempts() {
    // Both branches fail: the last one's 503 is the source.
    let t = ScriptedTransport::new([
        Step::status(503).body("first").delay(ms(5)),
        Step::status(503).body("second").delay(ms(5)),
    ]);
    let api: HedgedClient = scripted(&t);
    let e = api.search().await.expect_err("every branch failed");
    assert_eq!(e.kind(), ErrorKind::AllHedgesFailed);
    assert_eq!((e.attempts(), e.endpoint()), (2, "search"));
    assert_eq!(
        (e.status(), e.body_text().as_deref()),
        (Some(503), Some("second"))
    );
    assert_source(&e, Some(503), "second", "search", 2);

    // The hedge is refused by the full bulkhead; the sent branch's 503 is the source.
    let t = ScriptedTransport::new([Step::status(503).body("busy").delay(ms(30))]);
    let api: NarrowClient = scripted(&t);
    let e = api
        .search()
        .await
        .expect_err("refused hedge, failed branch");
    assert_eq!(e.kind(), ErrorKind::BulkheadFull);
    assert_eq!((e.attempts(), e.endpoint()), (1, "search"));
    assert_source(&e, Some(503), "busy", "search", 1);
    assert_nothing_leaked(&t);
}

/// A coalesced read; 429 is not retried.
#[resilient_api(timeout(attempt = "1s"), retry(max = 2, backoff = fixed(delay = "10ms"), on = [503]))]
pub trait Shared {
    #[get("/config")]
    #[coalesce]
    async fn config(&self) -> Result<String, ApiError>;
}

/// Every coalesced caller gets the whole error of the shared execution, not only its
/// status: the headers, the body, the server's `Retry-After` as it asked (past the
/// 60 s cap), the instant it names, the attempts and the endpoint.
#[tokio::test(start_paused = true)]
async fn every_coalesced_caller_gets_the_whole_error_with_its_retry_time() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy").delay(ms(5)),
        Step::status(429)
            .header("retry-after", "120")
            .header("x-request-id", "req-9")
            .body(r#"{"code":"slow_down"}"#)
            .delay(ms(5)),
    ]);
    let api: SharedClient = scripted(&t);
    let start = Instant::now();
    let (a, b) = tokio::join!(api.config(), api.config());
    assert_eq!(t.attempts(), 2, "one shared execution, one retry");
    for e in [a.expect_err("429"), b.expect_err("429")] {
        assert_eq!((e.kind(), e.status()), (ErrorKind::Status, Some(429)));
        assert_eq!((e.attempts(), e.endpoint()), (2, "config"));
        assert_eq!(
            e.to_string(),
            "error status 429 in `config` after 2 attempts"
        );
        let id = e.headers().and_then(|h| h.get("x-request-id"));
        assert_eq!(id.and_then(|v| v.to_str().ok()), Some("req-9"));
        assert_eq!(e.body_text().as_deref(), Some(r#"{"code":"slow_down"}"#));
        let code = e
            .decode_body::<serde_json::Value>()
            .and_then(Result::ok)
            .and_then(|v| v["code"].as_str().map(str::to_owned));
        assert_eq!(code.as_deref(), Some("slow_down"));
        assert_eq!(e.retry_after(), Some(Duration::from_secs(120)));
        assert_eq!(
            e.retry_at(),
            Some(start + ms(20) + Duration::from_secs(120))
        );
        assert!(e.source().is_none());
    }
    assert_nothing_leaked(&t);
}
