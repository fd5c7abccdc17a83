//! Credentials never come back once a redirect chain has left the origin.

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, resilient_api};

/// A GET with a declared secret header.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Moved {
    #[get("/start")]
    async fn start(&self, #[header("X-Api-Key", secret)] key: &str) -> Result<String, ApiError>;

    #[get("/search")]
    async fn search(&self, #[query("api_key", secret)] key: &str) -> Result<String, ApiError>;
}

/// `start("key-456")` with a bearer token, over a script of two redirects and a
/// `done`: the transport, to read what each hop sent.
async fn start_with_credentials(steps: [Step; 3]) -> ScriptedTransport {
    let t = ScriptedTransport::new(steps);
    let api: MovedClient = tests::scripted_builder(&t)
        .bearer_auth("token-123")
        .build()
        .expect("builds");
    assert_eq!(api.start("key-456").await.expect("followed"), "done");
    t
}

#[tokio::test(start_paused = true)]
async fn credentials_stay_dropped_after_the_chain_leaves_the_origin() {
    let t = start_with_credentials([
        Step::status(302).header("location", "https://other.test/a"),
        Step::status(307).header("location", "/b"),
        Step::status(200).body("done"),
    ])
    .await;
    let requests = t.requests();
    let urls: Vec<&str> = requests.iter().map(|r| r.url.as_str()).collect();
    assert_eq!(
        urls,
        [
            "https://example.test/start",
            "https://other.test/a",
            "https://other.test/b"
        ]
    );
    assert!(requests[0].headers.contains_key("authorization"));
    assert!(requests[0].headers.contains_key("x-api-key"));
    for r in &requests[1..] {
        assert!(!r.headers.contains_key("authorization"), "{}", r.url);
        assert!(!r.headers.contains_key("x-api-key"), "{}", r.url);
    }
    tests::assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn https_to_http_is_refused() {
    let t =
        ScriptedTransport::new([Step::status(302).header("location", "http://example.test/plain")]);
    let api: MovedClient = tests::scripted(&t);
    let e = api.start("k").await.expect_err("downgrade");
    assert_eq!(e.kind(), resilient_api::ErrorKind::Redirect);
    assert_eq!(t.attempts(), 1);
}

/// Regression: a declared secret query parameter reached another origin when the
/// redirect's `Location` carried it (a server that keeps the query when it moves a
/// host, as `return 301 https://new$request_uri` does) or a middleware added it to
/// every hop; only secret headers were dropped.
#[tokio::test(start_paused = true)]
async fn a_secret_query_parameter_is_dropped_when_the_origin_changes() {
    let t = ScriptedTransport::new([
        Step::status(301).header(
            "location",
            "https://other.test/search?api_key=key-456&page=2",
        ),
        Step::status(200).body("done"),
        Step::status(302).header("location", "https://other.test/next"),
        Step::status(200).body("done"),
    ]);
    let api: MovedClient = tests::scripted_builder(&t)
        // Signs every request that has no query yet with the same secret parameter.
        .middleware(|req| {
            if req.url.query().is_none() {
                req.url.set_query(Some("api_key=key-789"));
            }
            Ok(())
        })
        .build()
        .expect("builds");
    assert_eq!(api.search("key-456").await.expect("followed"), "done");
    assert_eq!(api.search("key-456").await.expect("followed"), "done");
    let urls: Vec<String> = t.requests().into_iter().map(|r| r.url).collect();
    assert_eq!(
        urls,
        [
            "https://example.test/search?api_key=key-456",
            "https://other.test/search?page=2",
            "https://example.test/search?api_key=key-456",
            "https://other.test/next",
        ]
    );
    tests::assert_nothing_leaked(&t);
}

/// Regression: a `Location` with user info (`https://user:pass@host/...`) was followed
/// with that user info in the next hop's URL, which the request carried (and
/// reqwest's and hyper's traces printed); the hop drops it, on the origin or off it.
#[tokio::test(start_paused = true)]
async fn a_location_with_user_info_is_followed_without_it() {
    let t = start_with_credentials([
        Step::status(302).header("location", "https://ada:pass-789@example.test/b?page=2"),
        Step::status(307).header("location", "https://bob:pass-012@other.test/c"),
        Step::status(200).body("done"),
    ])
    .await;
    let requests = t.requests();
    let urls: Vec<&str> = requests.iter().map(|r| r.url.as_str()).collect();
    assert_eq!(
        urls,
        [
            "https://example.test/start",
            "https://example.test/b?page=2",
            "https://other.test/c"
        ]
    );
    // The same origin keeps the client's own credentials, and gains none.
    assert_eq!(requests[1].headers["authorization"], "Bearer token-123");
    assert_eq!(requests[1].headers["x-api-key"], "key-456");
    assert_eq!(requests[1].headers.len(), 2);
    assert!(requests[2].headers.is_empty(), "{:?}", requests[2].headers);
    for r in &requests {
        assert!(!r.url.contains("pass-"), "{}", r.url);
        assert!(!r.url.contains('@'), "{}", r.url);
    }
    tests::assert_nothing_leaked(&t);
}
