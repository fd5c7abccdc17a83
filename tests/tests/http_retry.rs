//! Wiremock tier: retries, timeouts and broken connections over real sockets on
//! loopback, on the real clock (S8, S9, and the wire-level edges: truncated bodies,
//! `Retry-After`, idempotency keys).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use resilient_api::{ApiError, ErrorKind, TimeoutKind, resilient_api};
use serde::{Deserialize, Serialize};
use tests::received;
use tokio::io::AsyncWriteExt;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Doc {
    id: u64,
    name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Order {
    sku: String,
    qty: u32,
}

#[resilient_api(
    timeout(attempt = "5s"),
    retry(max = 2, backoff = fixed(delay = "5ms"), on = [503])
)]
trait Retrying {
    #[get("/flaky")]
    async fn flaky(&self) -> Result<String, ApiError>;

    #[get("/doc")]
    async fn doc(&self) -> Result<Doc, ApiError>;

    #[post("/doc")]
    async fn post_doc(&self, #[body] doc: &Doc) -> Result<Doc, ApiError>;

    #[post("/orders")]
    #[idempotency_key]
    async fn order(&self, #[body] order: &Order) -> Result<(), ApiError>;

    #[get("/limited")]
    #[retry(max = 1, backoff = fixed(delay = "5ms"), on = [429])]
    async fn limited(&self) -> Result<String, ApiError>;
}

#[resilient_api(timeout(attempt = "100ms"), retry(max = 0))]
trait Timed {
    #[get("/slow")]
    async fn slow(&self) -> Result<String, ApiError>;

    #[get("/fast")]
    async fn fast(&self) -> Result<String, ApiError>;
}

fn retrying(base: &str) -> RetryingClient {
    RetryingClient::builder()
        .base_url(base)
        .build()
        .expect("client builds")
}

/// Answers from a list by arrival (the last answer repeats) and records when each
/// request arrived.
struct Sequence {
    answers: Vec<ResponseTemplate>,
    arrivals: Arc<Mutex<Vec<Instant>>>,
}

impl Sequence {
    fn new(answers: Vec<ResponseTemplate>) -> (Self, Arc<Mutex<Vec<Instant>>>) {
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        (
            Sequence {
                answers,
                arrivals: arrivals.clone(),
            },
            arrivals,
        )
    }
}

impl Respond for Sequence {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        let mut arrivals = self.arrivals.lock().expect("not poisoned");
        arrivals.push(Instant::now());
        let i = (arrivals.len() - 1).min(self.answers.len() - 1);
        self.answers[i].clone()
    }
}

// ---------------------------------------------------------------------------------
// Conformance S8 and S9
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn s8_http_retry() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/flaky"))
        .respond_with(ResponseTemplate::new(503).set_body_string("busy"))
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/flaky"))
        .respond_with(ResponseTemplate::new(200).set_body_string("ready"))
        .with_priority(2)
        .mount(&server)
        .await;
    let api = retrying(&server.uri());

    assert_eq!(api.flaky().await.unwrap(), "ready");
    assert_eq!(received(&server).await.len(), 3);

    // Healthy follow-up: one more request, answered at once.
    assert_eq!(api.flaky().await.unwrap(), "ready");
    assert_eq!(received(&server).await.len(), 4);
}

#[tokio::test]
async fn s9_http_timeout() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/slow"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_string("late")
                .set_delay(Duration::from_secs(1)),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/fast"))
        .respond_with(ResponseTemplate::new(200).set_body_string("quick"))
        .mount(&server)
        .await;
    let api = TimedClient::builder()
        .base_url(server.uri())
        .build()
        .unwrap();

    let start = Instant::now();
    let err = api.slow().await.unwrap_err();
    let took = start.elapsed();
    assert_eq!(err.kind(), ErrorKind::AttemptTimeout);
    assert_eq!(err.timeout(), Some(TimeoutKind::Attempt));
    assert_eq!(err.attempts(), 1);
    assert_eq!(err.endpoint(), "slow");
    // Real clock: not before the 100 ms limit, and well before the 1 s answer.
    assert!(took >= Duration::from_millis(100), "{took:?}");
    assert!(took < Duration::from_millis(800), "{took:?}");

    assert_eq!(api.fast().await.unwrap(), "quick");
    let reqs = received(&server).await;
    assert_eq!(reqs.iter().filter(|r| r.url.path() == "/slow").count(), 1);
    assert_eq!(reqs.iter().filter(|r| r.url.path() == "/fast").count(), 1);
}

// ---------------------------------------------------------------------------------
// Retries counted at the server
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn retry_503_then_200_counts_arrivals() {
    let server = MockServer::start().await;
    let (seq, arrivals) = Sequence::new(vec![
        ResponseTemplate::new(503).set_body_string("busy"),
        ResponseTemplate::new(200).set_body_string("ready"),
    ]);
    Mock::given(method("GET"))
        .and(path("/flaky"))
        .respond_with(seq)
        .mount(&server)
        .await;
    let api = retrying(&server.uri());

    assert_eq!(api.flaky().await.unwrap(), "ready");
    let times = arrivals.lock().unwrap().clone();
    assert_eq!(times.len(), 2);
    // The 5 ms backoff was waited (real clock: a lower bound only).
    assert!(times[1] - times[0] >= Duration::from_millis(5));
}

#[tokio::test]
async fn post_503_without_key_is_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/doc"))
        .respond_with(ResponseTemplate::new(503).set_body_string("busy"))
        .mount(&server)
        .await;
    let api = retrying(&server.uri());

    let doc = Doc {
        id: 1,
        name: "x".into(),
    };
    let err = api.post_doc(&doc).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Status);
    assert_eq!(err.status(), Some(503));
    assert_eq!(err.attempts(), 1);
    assert_eq!(err.body_text().as_deref(), Some("busy"));
    assert_eq!(received(&server).await.len(), 1);
}

#[tokio::test]
async fn retry_after_on_429_is_honoured() {
    let server = MockServer::start().await;
    let (seq, arrivals) = Sequence::new(vec![
        ResponseTemplate::new(429)
            .insert_header("retry-after", "1")
            .set_body_string("slow down"),
        ResponseTemplate::new(200).set_body_string("ok"),
    ]);
    Mock::given(method("GET"))
        .and(path("/limited"))
        .respond_with(seq)
        .mount(&server)
        .await;
    let api = retrying(&server.uri());

    assert_eq!(api.limited().await.unwrap(), "ok");
    let times = arrivals.lock().unwrap().clone();
    assert_eq!(times.len(), 2);
    let gap = times[1] - times[0];
    assert!(gap >= Duration::from_secs(1), "retried too early: {gap:?}");
    assert!(
        gap <= Duration::from_millis(1800),
        "retried too late: {gap:?}"
    );
}

fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
        && b[14] == b'4'
        && matches!(b[19], b'8' | b'9' | b'a' | b'b' | b'A' | b'B')
}

#[tokio::test]
async fn idempotency_key_is_the_same_on_every_attempt() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/orders"))
        .respond_with(ResponseTemplate::new(503).set_body_string("busy"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/orders"))
        .respond_with(ResponseTemplate::new(201))
        .with_priority(2)
        .mount(&server)
        .await;
    let api = retrying(&server.uri());

    let order = Order {
        sku: "sku-1".into(),
        qty: 3,
    };
    api.order(&order).await.unwrap();

    let reqs = received(&server).await;
    assert_eq!(reqs.len(), 2, "the keyed POST was retried once");
    let keys: Vec<&str> = reqs
        .iter()
        .map(|r| r.headers.get("idempotency-key").unwrap().to_str().unwrap())
        .collect();
    assert!(is_uuid(keys[0]), "{}", keys[0]);
    assert_eq!(keys[0], keys[1]);
    let body = serde_json::to_vec(&order).unwrap();
    assert_eq!(reqs[0].body, body);
    assert_eq!(reqs[1].body, body);

    // Another logical call gets a fresh key.
    api.order(&order).await.unwrap();
    let reqs = received(&server).await;
    assert_eq!(reqs.len(), 3);
    let third = reqs[2]
        .headers
        .get("idempotency-key")
        .unwrap()
        .to_str()
        .unwrap();
    assert!(is_uuid(third), "{third}");
    assert_ne!(third, keys[0]);
}

// ---------------------------------------------------------------------------------
// Truncated bodies (a raw server: wiremock cannot cut a body short)
// ---------------------------------------------------------------------------------

const WHOLE: &str = r#"{"id":1,"name":"whole"}"#;

/// A raw HTTP/1.1 server. The first `truncated` connections get a head promising
/// `Content-Length: 100`, then 10 bytes of JSON, then the socket is closed; later
/// connections get a whole JSON document. Every answer closes its connection, so
/// connections counted = requests answered.
async fn truncating_server(truncated: usize) -> (String, Arc<AtomicUsize>) {
    tests::raw_server(move |mut sock, n| async move {
        if tests::read_request(&mut sock).await.is_err() {
            return;
        }
        if n < truncated {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                        content-length: 100\r\n\r\n";
            let _ = sock.write_all(head.as_bytes()).await;
            let _ = sock.write_all(&br#"{"id":1,"n"#[..]).await;
            let _ = sock.flush().await;
            // Dropping the socket closes it 90 bytes short.
        } else {
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n{WHOLE}",
                WHOLE.len()
            );
            let _ = sock.write_all(answer.as_bytes()).await;
            let _ = sock.shutdown().await;
        }
    })
    .await
}

fn whole_doc() -> Doc {
    Doc {
        id: 1,
        name: "whole".into(),
    }
}

#[tokio::test]
async fn truncated_body_on_get_is_retried() {
    let (base, connections) = truncating_server(1).await;
    let api = retrying(&base);

    assert_eq!(api.doc().await.unwrap(), whole_doc());
    assert_eq!(connections.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn truncated_body_on_every_get_attempt_is_a_transport_error() {
    let (base, connections) = truncating_server(3).await;
    let api = retrying(&base);

    let err = api.doc().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Transport, "not Decode: {err:?}");
    assert_eq!(err.attempts(), 3);
    assert_eq!(connections.load(Ordering::SeqCst), 3);

    // Healthy follow-up.
    assert_eq!(api.doc().await.unwrap(), whole_doc());
    assert_eq!(connections.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn truncated_body_on_post_without_key_is_not_retried() {
    let (base, connections) = truncating_server(1).await;
    let api = retrying(&base);

    let doc = Doc {
        id: 2,
        name: "posted".into(),
    };
    let err = api.post_doc(&doc).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Transport, "not Decode: {err:?}");
    assert_eq!(err.attempts(), 1);
    // Give a wrongful retry time to show up.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(connections.load(Ordering::SeqCst), 1);

    // Healthy follow-up.
    assert_eq!(api.post_doc(&doc).await.unwrap(), whole_doc());
    assert_eq!(connections.load(Ordering::SeqCst), 2);
}
