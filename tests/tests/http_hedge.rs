//! Hedging over real sockets (wiremock, real clock): when the first request is slow,
//! a second one is sent after the hedge delay and the fast answer wins.

use std::time::{Duration, Instant};

use resilient_api::{ApiError, resilient_api};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A hedged search over real sockets.
#[resilient_api(timeout(attempt = "5s", total = "10s"), retry(max = 0))]
pub trait Search {
    #[get("/search")]
    #[hedge(delay = "50ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;
}

fn client(server: &MockServer) -> SearchClient {
    SearchClient::builder()
        .base_url(server.uri())
        .build()
        .expect("the client builds")
}

/// The first request to arrive is answered after 1 s; later ones at once.
async fn slow_then_fast() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/search"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_string("slow")
                .set_delay(Duration::from_secs(1)),
        )
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/search"))
        .respond_with(ResponseTemplate::new(200).set_body_string("fast"))
        .with_priority(2)
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn http_hedge_fast_second_request_wins() {
    let server = slow_then_fast().await;
    let api = client(&server);

    let started = Instant::now();
    let body = api.search().await.unwrap();
    let elapsed = started.elapsed();
    assert_eq!(body, "fast");
    assert!(
        elapsed >= Duration::from_millis(50),
        "the hedge waits its delay: {elapsed:?}"
    );
    assert!(
        elapsed < Duration::from_millis(500),
        "the fast answer wins well before the slow one's 1 s: {elapsed:?}"
    );
    let seen = server.received_requests().await.unwrap();
    assert_eq!(seen.len(), 2, "the primary and one hedge");
    assert!(seen.iter().all(|r| r.url.path() == "/search"));

    // The same client keeps working (the slow mock is used up: this one is fast and
    // needs no hedge).
    let started = Instant::now();
    assert_eq!(api.search().await.unwrap(), "fast");
    assert!(started.elapsed() < Duration::from_millis(500));
    assert_eq!(server.received_requests().await.unwrap().len(), 3);
}

#[tokio::test]
async fn http_hedge_fast_primary_sends_no_hedge() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/search"))
        .respond_with(ResponseTemplate::new(200).set_body_string("fast"))
        .mount(&server)
        .await;
    let api = client(&server);

    assert_eq!(api.search().await.unwrap(), "fast");
    // Wait past the hedge delay: no hedge is sent once the call is over.
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}
