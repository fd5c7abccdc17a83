//! What a response becomes: JSON into the method's result type, an empty body as
//! "no value" (`None` for an `Option` result), and a decode error that keeps the
//! response it could not decode.

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

/// One method per kind of JSON result; no retries.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Docs {
    #[get("/value")]
    async fn value(&self) -> Result<serde_json::Value, ApiError>;

    #[get("/user")]
    async fn user(&self) -> Result<User, ApiError>;

    #[get("/maybe")]
    async fn maybe(&self) -> Result<Option<User>, ApiError>;

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

/// A body that cannot be decoded comes with the response it came in: its status,
/// its headers (a request id for the bug report) and its body, up to 64 KiB, so the
/// caller can see the login page that came instead of JSON.
#[tokio::test(start_paused = true)]
async fn a_decode_error_carries_the_response_it_could_not_decode() {
    let page = format!("<h1>Sign in</h1>{}", "x".repeat(70 * 1024));
    let t = ScriptedTransport::new([
        Step::status(200)
            .header("content-type", "application/json")
            .header("x-request-id", "req-1")
            .body("{not json"),
        Step::status(203)
            .header("content-type", "text/html")
            .header("x-request-id", "req-2")
            .body(page.clone()),
    ]);
    let api = scripted::<DocsClient>(&t);

    let e = api.value().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Decode);
    assert_eq!(e.status(), Some(200));
    let id = |e: &resilient_api::ApiError| {
        e.headers()
            .and_then(|h| h.get("x-request-id")?.to_str().ok().map(str::to_owned))
    };
    assert_eq!(id(&e).as_deref(), Some("req-1"));
    assert_eq!(e.body_text().as_deref(), Some("{not json"));
    assert_eq!(
        e.to_string(),
        "decode failed 200 in `value`: invalid JSON at line 1 column 2 (content type application/json, 9 bytes)"
    );

    let e = api.value().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnexpectedContentType);
    assert_eq!(e.status(), Some(203));
    assert_eq!(id(&e).as_deref(), Some("req-2"));
    assert_eq!(e.body().map(|b| b.len()), Some(64 * 1024));
    assert!(
        e.body_text()
            .is_some_and(|b| b.starts_with("<h1>Sign in</h1>"))
    );
    assert_eq!(t.attempts(), 2);
}
