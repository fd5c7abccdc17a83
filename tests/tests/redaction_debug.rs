//! Scripted tier of redaction (DESIGN §3.9: secrets are redacted in every `Debug`):
//! what a middleware sees of the request, and a `Response<T>` with its headers.

use std::sync::{Arc, Mutex};

use resilient_api::response::{RawBody, RawResponse};
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::transport::{HttpRequest, SendFuture, Transport};
use resilient_api::{ApiError, Bytes, Response, ResponseStream, resilient_api};
use tests::scripted_builder;

const CANARY: &str = "CANARY-51c2";

/// A declared secret header and query parameter, and a response with its headers.
#[resilient_api(base_url = "https://api.test", timeout(attempt = "1s"), retry(max = 0))]
pub trait Secrets {
    #[get("/data")]
    async fn data(
        &self,
        #[header("x-api-key", secret)] key: &str,
        #[query("api_key", secret)] api_key: &str,
    ) -> Result<String, ApiError>;

    #[get("/login")]
    async fn login(&self) -> Result<Response<String>, ApiError>;

    /// A declared secret header the call may leave to the client's default.
    #[get("/keyed")]
    async fn keyed(
        &self,
        #[header("x-api-key", secret)] key: Option<&str>,
    ) -> Result<String, ApiError>;

    /// A body that holds a password.
    #[post("/session")]
    async fn sign_in(&self, #[body] login: &serde_json::Value) -> Result<String, ApiError>;

    /// A token, streamed.
    #[post("/token")]
    async fn token_stream(&self) -> Result<ResponseStream, ApiError>;
}

/// What a middleware printed of each request the client sent.
fn printing(t: &ScriptedTransport) -> (SecretsClient, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let api: SecretsClient = scripted_builder(t)
        .header("x-api-key", CANARY)
        .middleware({
            let seen = Arc::clone(&seen);
            move |req| {
                seen.lock().expect("not poisoned").push(format!("{req:?}"));
                Ok(())
            }
        })
        .build()
        .expect("the client builds");
    (api, seen)
}

/// Regression: a header the endpoint declares secret was marked sensitive only when
/// the call gave its value; one that came from the client's `header()` (the
/// builder's default) was printed in clear by the request's `Debug`.
#[tokio::test(start_paused = true)]
async fn a_declared_secret_header_from_the_client_default_is_redacted() {
    let t = ScriptedTransport::new([Step::status(200).body("ok"), Step::status(200).body("ok")]);
    let (api, seen) = printing(&t);
    assert_eq!(api.keyed(None).await.unwrap(), "ok");
    assert_eq!(api.keyed(Some("CANARY-call")).await.unwrap(), "ok");
    let printed = seen.lock().unwrap().clone();
    assert_eq!(printed.len(), 2);
    for p in &printed {
        assert!(p.contains(r#""x-api-key": "[redacted]""#), "{p}");
        assert!(!p.contains("CANARY"), "leaked: {p}");
    }
    // The server still got each value, the client's and the call's.
    let sent: Vec<_> = t
        .requests()
        .iter()
        .map(|r| r.headers["x-api-key"].clone())
        .collect();
    assert_eq!(sent, [CANARY, "CANARY-call"]);
    assert!(sent.iter().all(http::HeaderValue::is_sensitive));
}

/// Regression: `HttpRequest`'s `Debug` printed the request body as it was sent, a
/// password in a login's JSON included; it shows the body's length only.
#[tokio::test(start_paused = true)]
async fn a_request_body_printed_shows_its_length_only() {
    let t = ScriptedTransport::new([Step::status(200).body("ok")]);
    let (api, seen) = printing(&t);
    let login = serde_json::json!({ "user": "ada", "password": "CANARY-pw" });
    assert_eq!(api.sign_in(&login).await.unwrap(), "ok");
    let printed = seen.lock().unwrap().clone();
    let sent = t.requests()[0].body.clone();
    assert_eq!(sent.len(), 37);
    assert!(printed[0].contains("body: 37 bytes"), "{}", printed[0]);
    assert!(!printed[0].contains("CANARY-pw"), "leaked: {}", printed[0]);
}

/// Regression: `HttpRequest` derived `Debug`, and `Url`'s `Debug` shows the query, so a
/// logging middleware printed the declared-secret query value.
#[tokio::test(start_paused = true)]
async fn a_request_printed_by_a_middleware_shows_no_secret() {
    let t = ScriptedTransport::new([Step::status(200).body("ok")]);
    let seen = Arc::new(Mutex::new(String::new()));
    let api: SecretsClient = scripted_builder(&t)
        .middleware({
            let seen = Arc::clone(&seen);
            move |req| {
                *seen.lock().unwrap() = format!("{req:?}");
                Ok(())
            }
        })
        .build()
        .unwrap();
    assert_eq!(api.data(CANARY, CANARY).await.unwrap(), "ok");
    let printed = seen.lock().unwrap().clone();
    assert!(printed.contains("/data?api_key=[redacted]"), "{printed}");
    assert!(!printed.contains(CANARY), "leaked: {printed}");
    // The server still got both.
    let sent = &t.requests()[0];
    assert!(sent.url.ends_with(&format!("api_key={CANARY}")));
}

/// Regression: `Response<T>` derived `Debug` and printed `Set-Cookie` as it came.
#[tokio::test(start_paused = true)]
async fn a_response_printed_shows_no_cookie() {
    let t = ScriptedTransport::new([Step::status(200)
        .header("set-cookie", &format!("session={CANARY}; HttpOnly"))
        .header("x-request-id", "r-1")
        .body("hi")]);
    let api: SecretsClient = scripted_builder(&t).build().unwrap();
    let response = api.login().await.unwrap();
    let printed = format!("{response:?}");
    assert!(!printed.contains(CANARY), "leaked: {printed}");
    assert!(
        printed.contains("\"set-cookie\": \"[redacted]\""),
        "{printed}"
    );
    assert!(
        printed.contains("r-1") && printed.contains("\"hi\""),
        "{printed}"
    );
    assert_eq!(
        response.headers()["set-cookie"],
        format!("session={CANARY}; HttpOnly").as_str()
    );
}

/// A transport that logs every response head it passes on, as a user's wrapper might.
struct Logging {
    inner: ScriptedTransport,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Transport for Logging {
    fn send(&self, request: HttpRequest) -> SendFuture {
        let sent = self.inner.send(request);
        let seen = Arc::clone(&self.seen);
        Box::pin(async move {
            let response = sent.await?;
            seen.lock()
                .expect("not poisoned")
                .push(format!("{response:?}"));
            Ok(response)
        })
    }
}

/// `login()` over `t` through [`Logging`], answered `hi`: the response heads it logged.
async fn login_through_a_logger(t: &ScriptedTransport) -> Vec<String> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let api: SecretsClient = scripted_builder(t)
        .transport(Logging {
            inner: t.clone(),
            seen: Arc::clone(&seen),
        })
        .build()
        .expect("builds");
    assert_eq!(api.login().await.expect("answered").into_value(), "hi");
    seen.lock().expect("not poisoned").clone()
}

/// Regression: `HttpResponse` derived `Debug` and printed `Set-Cookie` as it came,
/// so a transport wrapper logging the responses it passes on leaked the session.
#[tokio::test(start_paused = true)]
async fn a_transport_response_printed_shows_no_cookie() {
    let t = ScriptedTransport::new([Step::status(200)
        .header("set-cookie", &format!("session={CANARY}; HttpOnly"))
        .header("x-request-id", "r-1")
        .body("hi")]);
    let printed = login_through_a_logger(&t).await.join("\n");
    assert!(printed.contains("r-1"), "{printed}");
    assert!(!printed.contains(CANARY), "leaked: {printed}");
}

/// Regression: a response's `Debug` printed its `Location` whole, so a transport
/// wrapper logging the responses it passes on logged a redirect's user info, query
/// and fragment; it shows the URL without them (the hop is still followed).
#[tokio::test(start_paused = true)]
async fn a_redirect_printed_shows_its_location_redacted() {
    let t = ScriptedTransport::new([
        Step::status(302).header(
            "location",
            "https://ada:CANARY-pw@example.test/login?token=CANARY-q#state=CANARY-f",
        ),
        Step::status(200).header("x-request-id", "r-2").body("hi"),
    ]);
    let printed = login_through_a_logger(&t).await;
    assert_eq!(printed.len(), 2);
    assert!(
        printed[0].contains(r#""location": "https://example.test/login?[redacted]#[redacted]""#),
        "{}",
        printed[0]
    );
    assert!(!printed[0].contains("CANARY"), "leaked: {}", printed[0]);
    assert!(!printed[0].contains("ada"), "leaked: {}", printed[0]);
    assert_eq!(
        t.requests()[1].url,
        "https://example.test/login?token=CANARY-q#state=CANARY-f"
    );
}

/// Regression: `RawResponse`'s `Debug` (what a decoder is handed) printed its body
/// whole, an OAuth token response's access token included, through `RawBody`'s
/// derived `Debug`; both show the body's length only ("N bytes", or "stream"), as a
/// request's body does.
#[tokio::test(start_paused = true)]
async fn a_raw_response_printed_shows_its_body_length_only() {
    let token = format!(r#"{{"access_token":"{CANARY}","token_type":"bearer"}}"#);
    assert_eq!(token.len(), 52);
    let mut headers = http::HeaderMap::new();
    headers.insert("content-type", "application/json".parse().expect("a value"));
    headers.insert(
        "set-cookie",
        format!("session={CANARY}").parse().expect("a value"),
    );
    let raw = RawResponse {
        status: http::StatusCode::OK,
        headers,
        body: RawBody::Buffered(Bytes::from(token)),
        endpoint: "token",
        attempts: 1,
    };
    assert_eq!(
        format!("{raw:?}"),
        r#"RawResponse { status: 200, headers: {"content-type": "application/json", "set-cookie": "[redacted]"}, body: 52 bytes, endpoint: "token", attempts: 1 }"#
    );
    assert_eq!(format!("{:?}", raw.body), "52 bytes");
    assert_eq!(format!("{:?}", RawBody::Buffered(Bytes::new())), "0 bytes");

    // A streamed body, still to read, prints as `stream`.
    let t = ScriptedTransport::new([Step::status(200).body(format!("token={CANARY}"))]);
    let api: SecretsClient = scripted_builder(&t).build().expect("builds");
    let stream = api.token_stream().await.expect("answered");
    let raw = RawResponse {
        status: http::StatusCode::OK,
        headers: http::HeaderMap::new(),
        body: RawBody::Streaming(Box::new(stream)),
        endpoint: "token_stream",
        attempts: 1,
    };
    assert_eq!(
        format!("{raw:?}"),
        r#"RawResponse { status: 200, headers: {}, body: stream, endpoint: "token_stream", attempts: 1 }"#
    );
    assert_eq!(format!("{:?}", raw.body), "stream");
}

/// Regression: the builder's `Debug` redacted the base URL as raw text, before it is
/// parsed, and a password holding a `#`, a `?` or a `/` (typed unencoded) ends the
/// text's authority early, so the password was printed in clear. `build` refuses
/// such a base URL (and any with credentials); until then the builder shows a base URL
/// only once it parses, redacted, and otherwise says it is not one.
#[test]
fn a_builder_printed_shows_no_password_of_its_base_url() {
    for raw in [
        format!("https://ada:{CANARY}#x@api.test"),
        format!("https://ada:{CANARY}?x@api.test/v1"),
        format!("https://ada:x/{CANARY}@api.test"),
        format!("https://ada:{CANARY}@api.test/v1?k=v"),
    ] {
        let shown = format!("{:?}", SecretsClient::builder().base_url(raw.as_str()));
        assert!(!shown.contains(CANARY), "{raw} shown as {shown}");
    }
    assert_eq!(
        format!(
            "{:?}",
            SecretsClient::builder().base_url(format!("https://ada:{CANARY}@api.test/v1?k=v"))
        ),
        r#"ClientBuilder { base_url: Some("https://ada:[redacted]@api.test/v1?k=[redacted]"), headers: [], max_body: 4194304, .. }"#
    );
    assert_eq!(
        format!(
            "{:?}",
            SecretsClient::builder().base_url(format!("https://ada:{CANARY}#x@api.test"))
        ),
        r#"ClientBuilder { base_url: Some("[not a URL]"), headers: [], max_body: 4194304, .. }"#
    );
    assert_eq!(
        format!(
            "{:?}",
            SecretsClient::builder().base_url("http://127.0.0.1:8080/v2")
        ),
        r#"ClientBuilder { base_url: Some("http://127.0.0.1:8080/v2"), headers: [], max_body: 4194304, .. }"#
    );
}
