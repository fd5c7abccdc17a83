//! `build()` reports a bad base URL as a typed `Builder` error, never a panic, and
//! never with a secret in its message.

use resilient_api::testing::ScriptedTransport;
use resilient_api::{ApiError, ErrorKind, resilient_api};

/// No base URL on the attribute: the builder must supply one.
#[resilient_api(timeout(attempt = "1s"))]
pub trait Anywhere {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

fn build(base: Option<&str>) -> Result<AnywhereClient, ApiError> {
    let builder = AnywhereClient::builder().transport(ScriptedTransport::new([]));
    match base {
        Some(base) => builder.base_url(base).build(),
        None => builder.build(),
    }
}

fn refused(base: Option<&str>) -> String {
    match build(base) {
        Ok(_) => panic!("{base:?} was accepted"),
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Builder, "{base:?}");
            e.to_string()
        }
    }
}

#[test]
fn a_bad_base_url_is_a_builder_error() {
    assert!(refused(None).contains("no base URL"));
    assert!(refused(Some("not a url")).contains("not a valid URL"));
    assert!(refused(Some("ftp://files.test/")).contains("http or https"));
    assert!(refused(Some("https://api.test/v1?key=abc")).contains("query or fragment"));
    assert!(refused(Some("https://api.test/v1#top")).contains("query or fragment"));
    assert!(build(Some("https://api.test/v1/")).is_ok());
}

/// Regression: credentials in the base URL were accepted and then silently not sent
/// (the transport builds requests from a parsed URL, which skips reqwest's user-info
/// step). They are refused, and the message does not repeat them.
#[test]
fn credentials_in_the_base_url_are_refused_without_repeating_them() {
    for base in [
        "https://ada:hunter2@api.test/",
        "https://token-abc123@api.test/",
        "http://ada:@api.test",
    ] {
        let message = refused(Some(base));
        assert!(
            message.contains("cannot hold credentials"),
            "{base}: {message}"
        );
        for secret in ["hunter2", "token-abc123", "ada"] {
            assert!(!message.contains(secret), "{base}: {message}");
        }
    }
    // An `@` in the path is not user info.
    assert!(build(Some("https://api.test/users/@me/")).is_ok());
}

/// The client frames the body itself: a `Content-Length` or `Transfer-Encoding` set on
/// the builder would contradict it (a server waiting for bytes that never come), so
/// `build()` refuses it, as the attribute does at compile time. Other headers pass.
#[test]
fn a_header_that_frames_the_body_is_refused() {
    for name in [
        "content-length",
        "Content-Length",
        "transfer-encoding",
        "TRANSFER-ENCODING",
    ] {
        for secret in [false, true] {
            let builder = AnywhereClient::builder()
                .transport(ScriptedTransport::new([]))
                .base_url("https://api.test/");
            let builder = if secret {
                builder.secret_header(name, "5")
            } else {
                builder.header(name, "5")
            };
            let e = builder.build().expect_err(name);
            assert_eq!(e.kind(), ErrorKind::Builder, "{name}");
            assert!(e.to_string().contains("frames the body"), "{name}: {e}");
        }
    }
    let ok = AnywhereClient::builder()
        .transport(ScriptedTransport::new([]))
        .base_url("https://api.test/")
        .header("host", "api.internal")
        .header("content-type", "application/json")
        .build();
    assert!(ok.is_ok());
}
