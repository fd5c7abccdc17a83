//! What a response becomes: JSON into the method's result type, an empty body as
//! "no value" (`None` for an `Option` result), and a decode error that carries the
//! status, never the body or the headers.

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, Response, resilient_api};
use serde::Deserialize;
use tests::scripted;

/// A JSON object result.
#[derive(Debug, Deserialize, PartialEq)]
pub struct User {
    /// Its id.
    pub id: u64,
}

/// A unit struct result.
#[derive(Debug, Deserialize)]
pub struct Ack;

/// One method per kind of JSON result; no retries.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Docs {
    #[get("/value")]
    async fn value(&self) -> Result<serde_json::Value, ApiError>;

    #[get("/user")]
    async fn user(&self) -> Result<User, ApiError>;

    #[get("/maybe")]
    async fn maybe(&self) -> Result<Option<User>, ApiError>;

    #[get("/ack")]
    async fn ack(&self) -> Result<Response<Ack>, ApiError>;

    #[get("/tags")]
    async fn tags_since(
        &self,
        #[header("If-None-Match")] etag: &str,
    ) -> Result<Response<Option<Vec<String>>>, ApiError>;
}

/// An empty body (a 204's, a 304's, an empty 200's) is no JSON value: an `Option`
/// result takes it as `None`, so one method can say "here it is" and "nothing", and
/// a conditional request can get a 200's body or a 304's nothing.
#[tokio::test(start_paused = true)]
async fn an_empty_body_is_none_for_an_option_result() {
    let t = ScriptedTransport::new([
        Step::status(204),
        Step::status(200).header("content-type", "application/json"),
        Step::status(200)
            .header("content-type", "application/json")
            .body("null"),
        Step::status(200)
            .header("content-type", "application/json")
            .body(r#"{"id":7}"#),
    ]);
    let api = scripted::<DocsClient>(&t);
    for _ in 0..3 {
        assert_eq!(api.maybe().await.unwrap(), None);
    }
    assert_eq!(api.maybe().await.unwrap(), Some(User { id: 7 }));

    t.push([
        Step::status(200)
            .header("content-type", "application/json")
            .header("etag", "\"v2\"")
            .body(r#"["a","b"]"#),
        Step::status(304).header("etag", "\"v2\""),
    ]);
    let fresh = api.tags_since("\"v1\"").await.unwrap();
    let tags = Some(vec![String::from("a"), String::from("b")]);
    assert_eq!((fresh.status().as_u16(), fresh.value()), (200, &tags));
    let same = api.tags_since("\"v2\"").await.unwrap();
    assert_eq!((same.status().as_u16(), same.value()), (304, &None));
    assert_eq!(t.attempts(), 6);
}

/// Any other result type cannot be made from nothing: a decode error that says the
/// body was empty.
#[tokio::test(start_paused = true)]
async fn an_empty_body_is_a_decode_error_for_any_other_result() {
    let t = ScriptedTransport::new([Step::status(204)]);
    let api = scripted::<DocsClient>(&t);
    let e = api.user().await.unwrap_err();
    assert_eq!((e.kind(), e.status()), (ErrorKind::Decode, Some(204)));
    assert_eq!(
        e.to_string(),
        "decode failed 204 in `user`: an empty body, and the result is no `Option` (content type none, 0 bytes)"
    );
}

/// A body that cannot be decoded gives an error with the status, and a message with
/// the content type, the length and where decoding failed: never the body, nor the
/// other headers (DESIGN §3.9: a success's body is the caller's data, and an error is
/// made to be logged).
#[tokio::test(start_paused = true)]
async fn a_decode_error_carries_the_status_never_the_body() {
    let t = ScriptedTransport::new([
        Step::status(200)
            .header("content-type", "application/json")
            .header("set-cookie", "session=s3cr3t")
            .body("{not json, token: s3cr3t"),
        Step::status(203)
            .header("content-type", "text/html")
            .body("<h1>Sign in</h1> s3cr3t"),
    ]);
    let api = scripted::<DocsClient>(&t);

    let e = api.value().await.unwrap_err();
    assert_eq!((e.kind(), e.status()), (ErrorKind::Decode, Some(200)));
    assert_eq!(
        e.to_string(),
        "decode failed 200 in `value`: invalid JSON at line 1 column 2 (content type application/json, 24 bytes)"
    );
    assert!(e.body().is_none() && e.headers().is_none());
    // `Debug` shows neither message text from the body nor headers today; this keeps
    // it so.
    assert!(!format!("{e:?}").contains("s3cr3t"), "{e:?}");

    let e = api.value().await.unwrap_err();
    assert_eq!(
        (e.kind(), e.status()),
        (ErrorKind::UnexpectedContentType, Some(203))
    );
    assert_eq!(
        e.to_string(),
        "unexpected content type 203 in `value`: expected JSON (content type text/html, 23 bytes)"
    );
    assert!(e.body().is_none() && e.headers().is_none());
    assert_eq!(t.attempts(), 2);
}

/// Some servers put a default content type on a 204 (Django: `text/html`): an empty
/// body has no content to be of the wrong type, so it is still `None`.
#[tokio::test(start_paused = true)]
async fn an_empty_body_is_none_whatever_its_content_type() {
    let t = ScriptedTransport::new([
        Step::status(204).header("content-type", "text/html; charset=utf-8")
    ]);
    let api = scripted::<DocsClient>(&t);
    assert_eq!(api.maybe().await.unwrap(), None);
}

/// An empty body is no JSON `null`: a `serde_json::Value` or a unit struct cannot be
/// made from it either.
#[tokio::test(start_paused = true)]
async fn an_empty_body_is_no_null() {
    let t = ScriptedTransport::new([
        Step::status(200).header("content-type", "application/json"),
        Step::status(204),
    ]);
    let api = scripted::<DocsClient>(&t);
    assert_eq!(api.value().await.unwrap_err().kind(), ErrorKind::Decode);
    assert_eq!(api.ack().await.unwrap_err().kind(), ErrorKind::Decode);
}

/// An `Option` result is `None` for an empty success only: a 404 (or any error
/// status) is never read as "no value", empty or not; it is a `Status` error with the
/// server's body, whatever the result type could have made of it.
#[tokio::test(start_paused = true)]
async fn a_404_is_a_status_error_for_an_option_result_never_none() {
    let t = ScriptedTransport::new([
        Step::status(404),
        Step::status(404)
            .header("content-type", "application/json")
            .body("null"),
        Step::status(410).body(""),
        Step::status(204),
    ]);
    let api: DocsClient = scripted(&t);
    let seen = |e: ApiError| (e.kind(), e.status(), e.body().map(|b| b.to_vec()));
    let e = api.maybe().await.expect_err("a 404 is an error");
    assert_eq!(seen(e), (ErrorKind::Status, Some(404), Some(Vec::new())));
    let e = api.maybe().await.expect_err("a 404's `null` is no `None`");
    assert_eq!(
        seen(e),
        (ErrorKind::Status, Some(404), Some(b"null".to_vec()))
    );
    let e = api.maybe().await.expect_err("a 410 is an error");
    assert_eq!(seen(e), (ErrorKind::Status, Some(410), Some(Vec::new())));
    assert_eq!(api.maybe().await.expect("a 204 is no value"), None);
    assert_eq!(t.attempts(), 4, "no retries");
    tests::assert_nothing_leaked(&t);
}
