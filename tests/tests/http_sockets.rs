//! Real sockets, real clock: the default reqwest transport against raw loopback
//! servers that misbehave in ways wiremock cannot (close before answering, cut a
//! chunked body short, stall after the head, trickle, never answer, redirect to a URL
//! the wire cannot carry), and how the pipeline classifies what reqwest reports.
//!
//! Every server listens on 127.0.0.1 port 0 and counts what it received; every task it
//! starts ends when the test drops it. Times are asserted from below exactly and from
//! above loosely (a slow, shared 2-core machine).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use resilient_api::{ApiError, ErrorKind, resilient_api};
use tests::{Raw, raw};
use tokio::net::TcpListener;
use tokio::time::Instant;

/// Trait-level retries: on a POST they apply to never-sent failures only (README:
/// "never-sent failures retried for any method; after-send failures and statuses only
/// when idempotent").
#[resilient_api(
    timeout(attempt = "3s"),
    retry(max = 2, backoff = fixed(delay = "20ms"))
)]
trait Sock {
    #[get("/doc")]
    async fn get_text(&self) -> Result<String, ApiError>;

    #[post("/doc")]
    async fn post_text(&self, #[body(raw)] data: &[u8]) -> Result<String, ApiError>;
}

#[resilient_api(
    timeout(attempt = "300ms"),
    retry(max = 1, backoff = fixed(delay = "20ms"))
)]
trait Slow {
    #[get("/slow")]
    async fn get(&self) -> Result<String, ApiError>;

    #[post("/slow")]
    async fn post(&self, #[body(raw)] data: &[u8]) -> Result<String, ApiError>;
}

// ---------------------------------------------------------------------------------
// Raw loopback servers
// ---------------------------------------------------------------------------------

/// A server that reads one request and writes `answer`, as it is, then closes.
async fn answer_once(answer: &'static [u8]) -> Raw {
    raw(move |mut c| async move {
        if c.request().await {
            c.write(answer).await;
        }
    })
    .await
}

/// A server that closes every connection the moment it accepts it, in the accept
/// loop itself, before it could read a byte.
async fn closing_at_accept() -> Raw {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let accepted = Arc::new(AtomicUsize::new(0));
    let a = accepted.clone();
    let task = tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            a.fetch_add(1, Ordering::SeqCst);
            drop(sock);
        }
    });
    Raw {
        base: format!("http://{addr}"),
        accepted,
        requests: Arc::new(AtomicUsize::new(0)),
        task,
    }
}

fn sock(base: &str) -> SockClient {
    SockClient::builder()
        .base_url(base)
        .build()
        .expect("client builds")
}

/// A whole 200 answer with a `content-length`, keeping the connection.
fn ok(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Give a wrongful retry time to arrive before the server's counts are read.
async fn quiet() {
    tokio::time::sleep(Duration::from_millis(100)).await;
}

// ---------------------------------------------------------------------------------
// Bugs
// ---------------------------------------------------------------------------------

/// Regression: a connection the server closes before the client wrote a byte of the
/// request was classified as "request failed after it was sent" (`Transport`), so a
/// POST was not retried. hyper knows better: it hands the request back unwritten
/// (hyper's h1 dispatcher: "the message was never even started, so it's safe to tell
/// the user that the request was completely canceled"), and hyper-util itself
/// re-sends it when the connection came from the pool. On a fresh connection it
/// returns the error, which `classify` (runtime/src/transport.rs) now reads as never
/// sent.
/// DESIGN §3.2: "connect refused, DNS failure (request never sent) | any method | it
/// never ran"; README: "never-sent failures retried for any method".
///
/// On the current-thread runtime the close always reaches the client before its
/// connection task first runs, so hyper never starts writing (100 of 100 runs).
#[tokio::test]
async fn a_connection_closed_before_the_request_was_written_is_retried_for_post() {
    let server = closing_at_accept().await;
    let api = sock(&server.base);

    let err = api.post_text(b"charge").await.unwrap_err();
    quiet().await;
    assert_eq!(
        (err.kind(), err.attempts(), server.accepted()),
        (ErrorKind::Connect, 3, 3),
        "never sent, so retried like a refused connection: {err:?}"
    );
}

/// Regression: a base URL that `url` parses but `http::Uri` refuses (here an unfilled
/// template, `{{host}}`) passed `build()`; every call then failed as a `Transport`
/// error "request failed after it was sent", was retried (3 attempts, with backoffs)
/// and counted as a breaker failure, although reqwest refused to build the request
/// (`reqwest::Error { kind: Builder }`) and nothing reached any socket. `build()` now
/// refuses it, as a `Builder` error (hostile_inputs: "`build()` is `Ok` or an
/// `ErrorKind::Builder` error"; DESIGN §3.2: a failure that repeats the same way is
/// never retried).
#[tokio::test]
async fn a_base_url_reqwest_cannot_send_to_is_refused_not_sent_three_times() {
    let refused = SockClient::builder()
        .base_url("http://{{host}}:8080")
        .build()
        .expect_err("no request can be sent to that URL");
    assert_eq!(refused.kind(), ErrorKind::Builder, "{refused:?}");
}

/// Regression: a redirect whose `Location` joins into a URL the transport cannot carry
/// (`http://{{host}}/x`: reqwest refuses it, `Builder` kind) ended the call as a
/// `Transport` error "while following a redirect", retried on a GET: the server got
/// 3 requests and answered 3 redirects nobody could follow. `follow`
/// (runtime/src/pipeline.rs) now refuses the target before sending. README/`ErrorKind::Redirect`: "a 3xx to follow whose `Location` is missing
/// or unreadable" is a `Redirect` error, which is final.
#[tokio::test]
async fn a_redirect_to_a_url_reqwest_cannot_send_to_is_a_redirect_error() {
    let server = raw(|mut c| async move {
        while c.request().await {
            let answer = "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://{{host}}/x\r\n\
                          content-length: 0\r\n\r\n";
            if !c.write(answer.as_bytes()).await {
                return;
            }
        }
    })
    .await;
    let api = sock(&server.base);

    let err = api.get_text().await.unwrap_err();
    quiet().await;
    assert_eq!(
        (err.kind(), err.attempts(), server.requests()),
        (ErrorKind::Redirect, 1, 1),
        "{err:?}"
    );
}

/// Regression: a chunked response that also carries a `Content-Length` was judged by
/// that header: a 5-byte body with `Content-Length: 100000000` failed `BodyTooLarge`
/// under a 1 KiB limit. RFC 9112 §6.3: "the Transfer-Encoding overrides the
/// Content-Length", and hyper reads the body as chunked (its size hint is not exact),
/// but the pipeline fell back to parsing the header (`content_length` in the
/// `Exchange`'s head check, runtime/src/pipeline.rs). `ErrorKind::BodyTooLarge`: "The
/// response body was larger than the limit". It was not.
#[tokio::test]
async fn transfer_encoding_overrides_content_length_for_the_body_limit() {
    let server = answer_once(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\
          content-length: 100000000\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    )
    .await;
    let api = SockClient::builder()
        .base_url(&server.base)
        .max_body_size(1024)
        .build()
        .expect("client builds");

    let got = api.get_text().await.map_err(|e| e.kind());
    assert_eq!(got, Ok("hello".to_owned()));
    assert_eq!(server.requests(), 1);
}

// ---------------------------------------------------------------------------------
// Behaviour pinned down over real sockets
// ---------------------------------------------------------------------------------

/// A port with no listener: `Connect`, retried for a POST too (it never ran), each
/// retry after its backoff.
#[tokio::test]
async fn a_refused_connection_is_connect_and_retried_for_post() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    drop(listener);
    let api = sock(&format!("http://{addr}"));

    let start = Instant::now();
    let err = api.post_text(b"charge").await.unwrap_err();
    let took = start.elapsed();
    assert_eq!(
        (err.kind(), err.attempts()),
        (ErrorKind::Connect, 3),
        "{err:?}"
    );
    assert!(err.is_connect());
    // Two backoffs of 20 ms.
    assert!(took >= Duration::from_millis(40), "{took:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
}

/// A request the server read, then closed without answering: it may have run, so a
/// GET is retried and a POST is not; both end as `Transport` (counted at the server).
#[tokio::test]
async fn a_request_read_then_closed_is_retried_for_get_only() {
    let read_then_close = || {
        raw(|mut c| async move {
            c.request().await;
        })
    };

    let server = read_then_close().await;
    let err = sock(&server.base).get_text().await.unwrap_err();
    quiet().await;
    assert_eq!(
        (err.kind(), err.attempts(), server.requests()),
        (ErrorKind::Transport, 3, 3),
        "{err:?}"
    );

    let server = read_then_close().await;
    let err = sock(&server.base).post_text(b"charge").await.unwrap_err();
    quiet().await;
    assert_eq!(
        (err.kind(), err.attempts(), server.requests()),
        (ErrorKind::Transport, 1, 1),
        "{err:?}"
    );
}

/// A `Content-Length` over the limit is refused from the head alone: the server sends
/// the head and 3 bytes, then stalls for longer than the test; the call fails at
/// once, not at the 3 s attempt timeout, and is not retried.
#[tokio::test]
async fn a_content_length_over_the_limit_is_refused_before_the_body_arrives() {
    let server = raw(|mut c| async move {
        if c.request().await {
            c.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100000000\r\n\r\nabc")
                .await;
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
    })
    .await;
    let api = SockClient::builder()
        .base_url(&server.base)
        .max_body_size(1024)
        .build()
        .expect("client builds");

    let start = Instant::now();
    let err = api.get_text().await.unwrap_err();
    let took = start.elapsed();
    quiet().await;
    assert_eq!(
        (err.kind(), err.status(), err.attempts(), server.requests()),
        (ErrorKind::BodyTooLarge, Some(200), 1, 1),
        "{err:?}"
    );
    assert!(took < Duration::from_secs(2), "{took:?}");
}

/// A chunked body cut short (one chunk, then the connection closes without the last
/// chunk) is a transport failure, not a decode error and not `Ok` with what arrived:
/// retried on a GET, every attempt counted at the server.
#[tokio::test]
async fn a_chunked_body_cut_short_is_a_transport_failure() {
    let server = answer_once(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\
          transfer-encoding: chunked\r\n\r\n5\r\nhello\r\n",
    )
    .await;

    let err = sock(&server.base).get_text().await.unwrap_err();
    quiet().await;
    assert_eq!(
        (err.kind(), err.attempts(), server.requests()),
        (ErrorKind::Transport, 3, 3),
        "{err:?}"
    );
}

/// The attempt timeout covers the head and the body: a server that never answers and
/// one whose body trickles (1 byte per 50 ms of a promised 100) both end at 300 ms per
/// attempt; a GET's retry makes it two attempts (and two requests), a POST's timeout is
/// not retried.
#[tokio::test]
async fn a_silent_server_and_a_trickling_body_end_at_the_attempt_timeout() {
    let silent = raw(|mut c| async move {
        if c.request().await {
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
    })
    .await;
    let trickling = raw(|mut c| async move {
        if c.request().await
            && c.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n")
                .await
        {
            for _ in 0..100 {
                tokio::time::sleep(Duration::from_millis(50)).await;
                if !c.write(b"x").await {
                    return;
                }
            }
        }
    })
    .await;

    for server in [&silent, &trickling] {
        let api = SlowClient::builder()
            .base_url(&server.base)
            .build()
            .expect("client builds");

        let start = Instant::now();
        let err = api.get().await.unwrap_err();
        let took = start.elapsed();
        assert_eq!((err.kind(), err.attempts()), (ErrorKind::AttemptTimeout, 2));
        // Two attempts of 300 ms and a 20 ms backoff.
        assert!(took >= Duration::from_millis(620), "{took:?}");
        assert!(took < Duration::from_millis(2500), "{took:?}");

        let start = Instant::now();
        let err = api.post(b"x").await.unwrap_err();
        let took = start.elapsed();
        assert_eq!((err.kind(), err.attempts()), (ErrorKind::AttemptTimeout, 1));
        assert!(took >= Duration::from_millis(300), "{took:?}");
        assert!(took < Duration::from_millis(2000), "{took:?}");
        quiet().await;
        assert_eq!(server.requests(), 3);
    }
}

/// A keep-alive connection the server closes right after its answer (no
/// `connection: close`) is not reused for the next call: a POST made at once, and
/// one made later, both succeed on new connections.
#[tokio::test]
async fn a_keep_alive_connection_closed_by_the_server_does_not_fail_the_next_post() {
    let server = raw(|mut c| async move {
        if c.request().await {
            c.write(ok("one").as_bytes()).await;
        }
        // Dropped: the connection closes.
    })
    .await;
    let api = sock(&server.base);

    assert_eq!(api.post_text(b"1").await.unwrap(), "one");
    assert_eq!(api.post_text(b"2").await.unwrap(), "one");
    quiet().await;
    assert_eq!(api.post_text(b"3").await.unwrap(), "one");
    assert_eq!((server.requests(), server.accepted()), (3, 3));
}
