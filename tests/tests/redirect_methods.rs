//! What a redirect does to the method and the body: 307 and 308 send the same method
//! and bytes again; 301, 302 and 303 turn a POST into a bodiless GET (a PUT, PATCH or
//! DELETE keeps its method and bytes on a 301 or 302: `resend_rules`); a streamed body,
//! sent once, cannot follow a 307. Only those five statuses are followed, and only to an
//! `http` or `https` URL.

use bytes::Bytes;
use resilient_api::testing::{RecordedRequest, ScriptedTransport, Step};
use resilient_api::{ApiError, BodyStream, ErrorKind, resilient_api};
use tests::{assert_nothing_leaked, scripted};

/// A POST with bytes, and one with a stream.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Posting {
    #[post("/form")]
    async fn send(&self, #[body(raw)] payload: &[u8]) -> Result<String, ApiError>;

    #[post("/upload")]
    async fn upload(&self, #[body(stream)] payload: BodyStream) -> Result<String, ApiError>;
}

const PAYLOAD: &[u8] = b"one=1&two=2";

fn stream() -> BodyStream {
    let chunks: Vec<Result<Bytes, std::io::Error>> = vec![Ok(Bytes::from_static(PAYLOAD))];
    BodyStream::new(futures_util::stream::iter(chunks))
}

/// The POST answered with `status` and a `Location` to `/next`, then 200: every
/// request the transport saw (two, asserted).
async fn sent_after(status: u16) -> Vec<RecordedRequest> {
    let t = ScriptedTransport::new([
        Step::status(status).header("location", "/next"),
        Step::status(200).body("done"),
    ]);
    let api: PostingClient = scripted(&t);
    assert_eq!(api.send(PAYLOAD).await.expect("followed"), "done");
    assert_nothing_leaked(&t);
    let requests = t.requests();
    assert_eq!(requests.len(), 2, "{status}");
    assert_eq!(requests[0].method, http::Method::POST, "{status}");
    assert_eq!(requests[1].url, "https://example.test/next", "{status}");
    requests
}

#[tokio::test(start_paused = true)]
async fn a_307_or_308_sends_the_same_method_and_body_again() {
    for status in [307u16, 308] {
        let requests = sent_after(status).await;
        assert_eq!(requests[1].method, http::Method::POST, "{status}");
        assert_eq!(requests[1].body, Bytes::from_static(PAYLOAD), "{status}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_301_302_or_303_turns_a_post_into_a_bodiless_get() {
    for status in [301u16, 302, 303] {
        let requests = sent_after(status).await;
        let next = &requests[1];
        assert_eq!(next.method, http::Method::GET, "{status}");
        assert!(next.body.is_empty(), "{status}");
        assert!(!next.headers.contains_key("content-type"), "{status}");
        assert!(!next.headers.contains_key("content-length"), "{status}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_streamed_body_cannot_follow_a_307() {
    let t = ScriptedTransport::new([Step::status(307).header("location", "/again")]);
    let api: PostingClient = scripted(&t);
    let e = api.upload(stream()).await.expect_err("not replayable");
    assert_eq!(e.kind(), ErrorKind::Redirect);
    assert_eq!(e.attempts(), 1);
    assert_eq!(t.attempts(), 1);
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn a_streamed_body_may_follow_a_303_as_a_get() {
    let t = ScriptedTransport::new([
        Step::status(303).header("location", "/status"),
        Step::status(200).body("stored"),
    ]);
    let api: PostingClient = scripted(&t);
    assert_eq!(api.upload(stream()).await.expect("followed"), "stored");
    let requests = t.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body, Bytes::from_static(PAYLOAD));
    assert_eq!(requests[1].method, http::Method::GET);
    assert!(requests[1].body.is_empty());
    assert_nothing_leaked(&t);
}

/// 300, 304, 305 and 306 are answers, not redirects, even with a `Location`.
#[tokio::test(start_paused = true)]
async fn other_3xx_statuses_are_not_followed() {
    for status in [300u16, 304, 305, 306] {
        let t = ScriptedTransport::new([Step::status(status).header("location", "/next")]);
        let api: PostingClient = scripted(&t);
        // Not an error status, and not followed: the method gets the (empty) answer.
        assert_eq!(api.send(PAYLOAD).await.expect("an answer"), "", "{status}");
        assert_eq!(t.attempts(), 1, "{status}");
        assert_nothing_leaked(&t);
    }
}

#[tokio::test(start_paused = true)]
async fn a_redirect_to_another_scheme_is_refused_before_it_is_sent() {
    for (location, scheme) in [
        ("file:///etc/passwd", "file"),
        ("ftp://example.test/next", "ftp"),
    ] {
        let t = ScriptedTransport::new([Step::status(302).header("location", location)]);
        let api: PostingClient = scripted(&t);
        let e = api.send(PAYLOAD).await.expect_err("refused");
        assert_eq!(e.kind(), ErrorKind::Redirect, "{location}");
        // Refused for its scheme, not only as a way down from https.
        let refused = format!("a redirect to a `{scheme}:` URL was refused");
        assert!(e.to_string().contains(&refused), "{e}");
        assert_eq!(t.attempts(), 1, "{location}");
        assert_nothing_leaked(&t);
    }
}

/// Regression: a POST turned into a bodiless GET by a 303 got its body and
/// `Content-Type` back at a later 307 or 308, which repeats the request it redirects
/// (the GET), not the original POST.
#[tokio::test(start_paused = true)]
async fn a_body_dropped_by_a_303_stays_dropped_after_a_307() {
    for kept in [307u16, 308] {
        let t = ScriptedTransport::new([
            Step::status(303).header("location", "/result"),
            Step::status(kept).header("location", "/result/v2"),
            Step::status(200).body("done"),
        ]);
        let api: PostingClient = scripted(&t);
        assert_eq!(api.send(PAYLOAD).await.expect("followed"), "done");
        assert_nothing_leaked(&t);
        let requests = t.requests();
        assert_eq!(requests.len(), 3, "{kept}");
        let last = &requests[2];
        assert_eq!(last.url, "https://example.test/result/v2", "{kept}");
        assert_eq!(last.method, http::Method::GET, "{kept}");
        assert!(
            last.body.is_empty(),
            "the POST's body came back after {kept}"
        );
        assert!(
            !last.headers.contains_key("content-type"),
            "the POST's content-type came back after {kept}"
        );
    }
}
