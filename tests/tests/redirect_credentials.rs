//! Credentials never come back once a redirect chain has left the origin.

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, resilient_api};

/// A GET with a declared secret header.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Moved {
    #[get("/start")]
    async fn start(&self, #[header("X-Api-Key", secret)] key: &str) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn credentials_stay_dropped_after_the_chain_leaves_the_origin() {
    let t = ScriptedTransport::new([
        Step::status(302).header("location", "https://other.test/a"),
        Step::status(307).header("location", "/b"),
        Step::status(200).body("done"),
    ]);
    let api: MovedClient = tests::scripted_builder(&t)
        .bearer_auth("token-123")
        .build()
        .expect("builds");
    assert_eq!(api.start("key-456").await.expect("followed"), "done");
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
