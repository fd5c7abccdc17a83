//! The default reqwest transport against misbehaving raw HTTP/1.1 servers on loopback,
//! real clock: what `http_sockets.rs` does not pin (a trickling head, 1xx answers,
//! bytes past a response's end, a late answer after a timeout, resets, hedges and
//! redirects to servers that hang). Times are bounded from below exactly and from above
//! loosely (a shared 2-core machine).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use resilient_api::{ApiError, ErrorKind, Response, ResponseStream, resilient_api};
use tests::{Conn, Raw, raw};
use tokio::net::TcpListener;
use tokio::time::Instant;

#[resilient_api(
    timeout(attempt = "300ms"),
    retry(max = 1, backoff = fixed(delay = "20ms"))
)]
trait Hunt {
    #[get("/r")]
    async fn get(&self) -> Result<String, ApiError>;

    #[post("/r")]
    async fn post(&self, #[body(raw)] data: &[u8]) -> Result<String, ApiError>;

    #[get("/r")]
    async fn stream(&self) -> Result<ResponseStream, ApiError>;
}

#[resilient_api(timeout(attempt = "300ms"), retry(max = 0))]
trait Once {
    #[get("/r")]
    async fn get(&self) -> Result<Response<String>, ApiError>;
}

fn once(base: &str) -> OnceClient {
    OnceClient::builder()
        .base_url(base)
        .build()
        .expect("client builds")
}

async fn answer_each(answer: &'static [u8]) -> Raw {
    raw(move |mut c| async move {
        while c.request().await {
            if !c.write(answer).await {
                return;
            }
        }
    })
    .await
}

fn client(base: &str) -> HuntClient {
    HuntClient::builder()
        .base_url(base)
        .build()
        .expect("client builds")
}

fn limited(base: &str, max: u64) -> HuntClient {
    HuntClient::builder()
        .base_url(base)
        .max_body_size(max)
        .build()
        .expect("client builds")
}

async fn quiet() {
    tokio::time::sleep(Duration::from_millis(100)).await;
}

fn within(took: Duration, lo: u64, hi: u64) {
    assert!(
        took >= Duration::from_millis(lo) && took < Duration::from_millis(hi),
        "took {took:?}, expected {lo}..{hi} ms"
    );
}

#[resilient_api(
    timeout(attempt = "300ms", total = "500ms"),
    retry(max = 3, backoff = fixed(delay = "20ms"))
)]
trait Total {
    #[get("/r")]
    async fn get(&self) -> Result<String, ApiError>;
}

#[resilient_api(timeout(attempt = "2s"), retry(max = 0))]
trait Hedged {
    #[get("/h")]
    #[hedge(delay = "50ms", max = 2)]
    async fn get(&self) -> Result<String, ApiError>;
}

/// A failure after the send, from `server` on every request: `Transport`, a GET
/// retried once, a POST not (it may have run); the server read all three requests.
async fn a_get_is_retried_once_and_a_post_not(server: &Raw) {
    let api = client(&server.base);
    assert_eq!(kind_attempts(api.get().await), (ErrorKind::Transport, 2));
    assert_eq!(
        kind_attempts(api.post(b"x").await),
        (ErrorKind::Transport, 1)
    );
    quiet().await;
    assert_eq!(server.requests(), 3);
}

/// A single call that must fail, with its kind and attempts.
fn kind_attempts<T: std::fmt::Debug>(r: Result<T, ApiError>) -> (ErrorKind, u32) {
    let e = r.expect_err("the call fails");
    (e.kind(), e.attempts())
}

/// DESIGN §3.4 / README: the attempt timeout covers the head. A head sent one byte
/// per 20 ms never completes: each attempt ends at its 300 ms; a GET is retried once,
/// a POST not.
#[tokio::test]
async fn a_head_trickling_byte_by_byte_ends_at_the_attempt_timeout() {
    let server = raw(|mut c| async move {
        if c.request().await {
            let head = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nx-pad: ";
            for b in head.iter().chain(std::iter::repeat_n(&b'a', 1000)) {
                if !c.write(std::slice::from_ref(b)).await {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    })
    .await;
    let api = client(&server.base);
    let start = Instant::now();
    assert_eq!(
        kind_attempts(api.get().await),
        (ErrorKind::AttemptTimeout, 2)
    );
    within(start.elapsed(), 620, 2500);
    let start = Instant::now();
    assert_eq!(
        kind_attempts(api.post(b"x").await),
        (ErrorKind::AttemptTimeout, 1)
    );
    within(start.elapsed(), 300, 2000);
    quiet().await;
    assert_eq!(server.requests(), 3);
}

/// The same for a close-delimited body (no length, no chunks) that never ends.
#[tokio::test]
async fn a_close_delimited_body_trickling_forever_ends_at_the_attempt_timeout() {
    let server = raw(|mut c| async move {
        if c.request().await
            && c.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\n")
                .await
        {
            for _ in 0..1000 {
                tokio::time::sleep(Duration::from_millis(20)).await;
                if !c.write(b"x").await {
                    return;
                }
            }
        }
    })
    .await;
    let start = Instant::now();
    assert_eq!(
        kind_attempts(client(&server.base).get().await),
        (ErrorKind::AttemptTimeout, 2)
    );
    within(start.elapsed(), 620, 2500);
}

/// Interim 1xx answers (100, 103) are skipped; a server that sends 102 every 20 ms and
/// nothing else ends at the attempt timeout, not never.
#[tokio::test]
async fn informational_answers_are_skipped_and_do_not_extend_the_attempt() {
    let server = answer_each(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n\
          HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\n\r\nhello",
    )
    .await;
    let api = client(&server.base);
    assert_eq!(api.get().await.unwrap(), "hello");
    assert_eq!(api.post(b"x").await.unwrap(), "hello");
    assert_eq!(api.get().await.unwrap(), "hello");

    let server = raw(|mut c| async move {
        if c.request().await {
            for _ in 0..200 {
                if !c.write(b"HTTP/1.1 102 Processing\r\n\r\n").await {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    })
    .await;
    let start = Instant::now();
    assert_eq!(
        kind_attempts(client(&server.base).get().await),
        (ErrorKind::AttemptTimeout, 2)
    );
    within(start.elapsed(), 620, 2500);
}

/// Bytes past a response's end (a `Content-Length` smaller than what was sent, a body
/// after a 204) never answer the next call: every call gets its own answer.
#[tokio::test]
async fn bytes_past_a_responses_end_never_answer_the_next_call() {
    let server = answer_each(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nokGARBAGE",
    )
    .await;
    let api = client(&server.base);
    assert_eq!(api.get().await.unwrap(), "ok");
    assert_eq!(api.get().await.unwrap(), "ok");
    quiet().await;
    assert_eq!(api.post(b"1").await.unwrap(), "ok");
    assert_eq!(api.post(b"2").await.unwrap(), "ok");
    assert_eq!(server.requests(), 4);

    // A 204 followed by a whole second answer on the same connection.
    let server = raw(|mut c| async move {
        let mut first = true;
        while c.request().await {
            let a: &[u8] = if first {
                b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nevil"
            } else {
                b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nok"
            };
            first = false;
            if !c.write(a).await {
                return;
            }
        }
    })
    .await;
    let api = once(&server.base);
    for _ in 0..3 {
        let r = api.get().await.unwrap();
        assert_eq!((r.status().as_u16(), r.value().as_str()), (204, ""));
    }
}

/// An answer that arrives after its attempt timed out is not taken as the next call's.
#[tokio::test]
async fn a_late_answer_after_a_timeout_does_not_answer_the_next_call() {
    let server = raw(|mut c| async move {
        let mut first = c.n == 0;
        while c.request().await {
            let a: &[u8] = if first {
                tokio::time::sleep(Duration::from_millis(400)).await;
                b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 4\r\n\r\nlate"
            } else {
                b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\n\r\nfresh"
            };
            first = false;
            if !c.write(a).await {
                return;
            }
        }
    })
    .await;
    let api = once(&server.base);
    assert_eq!(
        kind_attempts(api.get().await),
        (ErrorKind::AttemptTimeout, 1)
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(api.get().await.unwrap().into_value(), "fresh");
    assert_eq!(api.get().await.unwrap().into_value(), "fresh");
}

/// An unsolicited 408 on an idle keep-alive connection, then a close (as some servers
/// do at their idle timeout): the next POST goes on a new connection and succeeds.
#[tokio::test]
async fn an_idle_408_then_close_does_not_fail_the_next_post() {
    let server = raw(|mut c| async move {
        if c.request().await {
            c.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nok")
                .await;
            tokio::time::sleep(Duration::from_millis(10)).await;
            c.write(
                b"HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n",
            )
            .await;
        }
    })
    .await;
    let api = client(&server.base);
    assert_eq!(api.post(b"1").await.unwrap(), "ok");
    quiet().await;
    assert_eq!(api.post(b"2").await.unwrap(), "ok");
    assert_eq!((server.accepted(), server.requests()), (2, 2));
}

/// HTTP/1.0, no length: the body ends with the connection; the size limit holds
/// without a `Content-Length` (DESIGN §3.9: "enforced while streaming").
#[tokio::test]
async fn a_close_delimited_http10_body_is_read_whole_and_bounded() {
    let server = raw(|mut c| async move {
        if c.request().await {
            c.write(b"HTTP/1.0 200 OK\r\ncontent-type: text/plain\r\n\r\nhello world")
                .await;
        }
    })
    .await;
    assert_eq!(client(&server.base).get().await.unwrap(), "hello world");
    assert_eq!(
        limited(&server.base, 11).get().await.unwrap(),
        "hello world"
    );
    assert_eq!(
        kind_attempts(limited(&server.base, 10).get().await),
        (ErrorKind::BodyTooLarge, 1)
    );
}

/// The limit on a chunked streamed result: the first chunk within it is handed out,
/// the one that goes over fails `BodyTooLarge` with the status; a body exactly at the
/// limit is whole. After a 503 and a retry, a body over the limit says 2 attempts.
#[tokio::test]
async fn the_body_limit_on_chunked_streams_and_after_a_retry() {
    let server = answer_each(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n\
          3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
    )
    .await;
    let mut s = limited(&server.base, 4).stream().await.unwrap();
    assert_eq!(s.chunk().await.unwrap().unwrap(), "abc");
    let e = s.chunk().await.unwrap_err();
    assert_eq!(
        (e.kind(), e.status(), e.attempts()),
        (ErrorKind::BodyTooLarge, Some(200), 1)
    );
    assert_eq!(
        limited(&server.base, 5)
            .stream()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap(),
        "abcde"
    );
    assert_eq!(limited(&server.base, 5).get().await.unwrap(), "abcde");

    let server = raw(|mut c| async move {
        let first = c.n == 0;
        if c.request().await {
            let a: &[u8] = if first {
                b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            } else {
                b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n\
                  5\r\nhello\r\n0\r\n\r\n"
            };
            c.write(a).await;
        }
    })
    .await;
    let e = limited(&server.base, 4).get().await.unwrap_err();
    assert_eq!(
        (e.kind(), e.status(), e.attempts()),
        (ErrorKind::BodyTooLarge, Some(200), 2)
    );
}

/// Invalid chunk framing is a transport failure after the send: retried for a GET,
/// not for a POST.
#[tokio::test]
async fn invalid_chunked_framing_is_a_transport_failure() {
    let server = answer_each(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n\
          zz\r\nhello\r\n0\r\n\r\n",
    )
    .await;
    a_get_is_retried_once_and_a_post_not(&server).await;
}

/// A reset at accept (SO_LINGER 0) hands the request back unwritten: `Connect`, retried
/// for a POST. A reset after the request was read: `Transport`, a GET retried, a POST
/// not.
#[tokio::test]
async fn resets_before_and_after_the_request() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let accepted = Arc::new(AtomicUsize::new(0));
    let a = accepted.clone();
    let task = tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            a.fetch_add(1, Ordering::SeqCst);
            #[allow(deprecated)] // linger 0: a reset at once, nothing to block on
            let _ = sock.set_linger(Some(Duration::ZERO));
            drop(sock);
        }
    });
    let e = client(&format!("http://{addr}"))
        .post(b"x")
        .await
        .unwrap_err();
    assert_eq!((e.kind(), e.attempts()), (ErrorKind::Connect, 2), "{e:?}");
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    task.abort();

    let server = raw(|mut c| async move {
        if c.request().await {
            #[allow(deprecated)] // linger 0: a reset at once, nothing to block on
            let _ = c.sock.set_linger(Some(Duration::ZERO));
        }
    })
    .await;
    a_get_is_retried_once_and_a_post_not(&server).await;
}

/// A redirect to a server that never answers: the hop is inside the attempt timeout
/// (GET: 2 attempts, POST: 1) and inside the total deadline (`Deadline` at 500 ms).
#[tokio::test]
async fn a_redirect_to_a_hanging_server_is_bounded_by_both_timeouts() {
    let hang = raw(|mut c| async move {
        if c.request().await {
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
    })
    .await;
    let answer = format!(
        "HTTP/1.1 302 Found\r\nlocation: {}/x\r\ncontent-length: 0\r\n\r\n",
        hang.base
    );
    let answer: &'static [u8] = Box::leak(answer.into_bytes().into_boxed_slice());
    let front = answer_each(answer).await;
    let api = client(&front.base);
    let start = Instant::now();
    assert_eq!(
        kind_attempts(api.get().await),
        (ErrorKind::AttemptTimeout, 2)
    );
    within(start.elapsed(), 620, 2500);
    let start = Instant::now();
    assert_eq!(
        kind_attempts(api.post(b"x").await),
        (ErrorKind::AttemptTimeout, 1)
    );
    within(start.elapsed(), 300, 2000);
    quiet().await;
    assert_eq!((front.requests(), hang.requests()), (3, 3));

    let api = TotalClient::builder()
        .base_url(&front.base)
        .build()
        .expect("builds");
    let start = Instant::now();
    let e = api.get().await.unwrap_err();
    within(start.elapsed(), 500, 2000);
    assert_eq!(
        (e.kind(), e.attempts(), e.timeout()),
        (
            ErrorKind::Deadline,
            2,
            Some(resilient_api::TimeoutKind::Total)
        )
    );
}

/// A 307 to a POST sends the same method and bytes to the target, over the wire; a
/// chunked answer with a chunk extension and trailers is read as its data.
#[tokio::test]
async fn a_307_resends_the_post_and_trailers_are_not_data() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let server = raw(move |mut c| {
        let s2 = s2.clone();
        async move {
            while let Ok(r) = tests::read_request(&mut c.sock).await {
                if r.is_empty() {
                    return;
                }
                let s = String::from_utf8_lossy(&r).into_owned();
                let redirect = s.starts_with("POST /r ");
                s2.lock().unwrap().push(s);
                let a: &[u8] = if redirect {
                    b"HTTP/1.1 307 Temporary Redirect\r\nlocation: /moved\r\ncontent-length: 5\r\n\r\nmoved"
                } else {
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\
                      trailer: x-t\r\n\r\n3;ext=1\r\nabc\r\n0\r\nx-t: 1\r\n\r\n"
                };
                if !c.write(a).await {
                    return;
                }
            }
        }
    })
    .await;
    assert_eq!(client(&server.base).post(b"payload").await.unwrap(), "abc");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(
        seen[1].starts_with("POST /moved ") && seen[1].ends_with("payload"),
        "{seen:?}"
    );
}

/// When the server saw the client end the connection, from `start`.
async fn eof_after(c: &mut Conn, start: Instant) -> Option<Duration> {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(Duration::from_secs(3), c.sock.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Some(start.elapsed()),
            Ok(Ok(_)) => continue,
            Err(_) => return None,
        }
    }
}

/// DESIGN §3.4: dropping the call aborts the request in flight, and dropping a
/// streamed result aborts its transfer: the server sees its connection end then, not
/// when it answers.
#[tokio::test]
async fn dropping_a_call_or_its_stream_ends_the_connection_at_once() {
    let seen = Arc::new(std::sync::Mutex::new(None));
    let s2 = seen.clone();
    let t0 = Instant::now();
    let server = raw(move |mut c| {
        let s2 = s2.clone();
        async move {
            if c.request().await {
                *s2.lock().unwrap() = eof_after(&mut c, t0).await;
            }
        }
    })
    .await;
    let api = once(&server.base);
    assert!(
        tokio::time::timeout(Duration::from_millis(100), api.get())
            .await
            .is_err()
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let at = seen
        .lock()
        .unwrap()
        .take()
        .expect("the server saw the connection end");
    within(at, 100, 1_000);

    let seen = Arc::new(std::sync::Mutex::new(None));
    let s2 = seen.clone();
    let t0 = Instant::now();
    let server = raw(move |mut c| {
        let s2 = s2.clone();
        async move {
            if c.request().await
                && c.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n")
                    .await
            {
                *s2.lock().unwrap() = eof_after(&mut c, t0).await;
            }
        }
    })
    .await;
    let mut s = client(&server.base).stream().await.unwrap();
    assert_eq!(s.chunk().await.unwrap().unwrap(), "abc");
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(s);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let at = seen
        .lock()
        .unwrap()
        .take()
        .expect("the server saw the connection end");
    within(at, 100, 1_000);
}

/// A hedge (DESIGN §3.7): a first branch whose head came but whose body trickles has
/// not answered, so the hedge goes at 50 ms and wins; a first branch cut short does
/// not win over the one still pending.
#[tokio::test]
async fn a_hedge_wins_over_a_trickling_body_and_a_cut_branch_does_not_win() {
    let server = raw(|mut c| async move {
        let first = c.n == 0;
        while c.request().await {
            if first {
                if !c.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 100\r\n\r\n").await {
                    return;
                }
                for _ in 0..100 {
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    if !c.write(b"s").await {
                        return;
                    }
                }
            } else if !c.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 4\r\n\r\nfast").await {
                return;
            }
        }
    })
    .await;
    let api = HedgedClient::builder()
        .base_url(&server.base)
        .build()
        .expect("builds");
    let start = Instant::now();
    assert_eq!(api.get().await.unwrap(), "fast");
    within(start.elapsed(), 50, 1000);

    let server = raw(|mut c| async move {
        let first = c.n == 0;
        if c.request().await {
            if first {
                tokio::time::sleep(Duration::from_millis(100)).await;
                c.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 100\r\n\r\nab",
                )
                .await;
            } else {
                tokio::time::sleep(Duration::from_millis(300)).await;
                c.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 4\r\n\r\nlate",
                )
                .await;
            }
        }
    })
    .await;
    let api = HedgedClient::builder()
        .base_url(&server.base)
        .build()
        .expect("builds");
    let start = Instant::now();
    assert_eq!(api.get().await.unwrap(), "late");
    within(start.elapsed(), 350, 1500);
}

/// Uploads under a breaker that one failure opens.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 0),
    breaker(failures = 1, reset = "10s")
)]
trait Uploads {
    #[put("/u")]
    async fn put(
        &self,
        #[body(stream)] data: resilient_api::BodyStream,
    ) -> Result<String, ApiError>;

    #[get("/u")]
    async fn get(&self) -> Result<String, ApiError>;
}

/// Over reqwest too, a request body stream that fails on the caller's side ends the
/// call as `Transport`, saying the body stream failed, and is no breaker failure: the
/// next call to the same (healthy) server goes out and succeeds.
#[tokio::test]
async fn a_failing_upload_stream_over_reqwest_is_no_breaker_failure() {
    let server =
        answer_each(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nok")
            .await;
    let api = UploadsClient::builder()
        .base_url(&server.base)
        .build()
        .expect("client builds");
    let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = vec![
        Ok(bytes::Bytes::from_static(b"abc")),
        Err(std::io::Error::other("disk read failed")),
    ];
    let body = resilient_api::BodyStream::new(futures_util::stream::iter(chunks));
    let e = api.put(body).await.expect_err("the stream failed");
    assert_eq!((e.kind(), e.attempts()), (ErrorKind::Transport, 1), "{e:?}");
    assert!(e.to_string().contains("request body stream failed"), "{e}");
    assert_eq!(
        api.circuit_state().phase,
        resilient_api::circuit_breaker::state::Phase::Closed
    );
    assert_eq!(api.get().await.expect("the server is healthy"), "ok");
}

/// A status past 599 off the wire (`HTTP/1.1 799 Odd`) is an answer, as a 4xx is:
/// `Status` with its code and body, a GET not retried, and no breaker failure: six
/// in a row against the default breaker (five failures trip it) are six requests,
/// none refused. Before, the breaker judged it a 5xx and refused the sixth.
#[tokio::test]
async fn a_799_off_the_wire_is_an_answer_not_retried_and_no_breaker_failure() {
    let server = answer_each(b"HTTP/1.1 799 Odd\r\ncontent-length: 3\r\n\r\nodd").await;
    let api = client(&server.base);
    for _ in 0..6 {
        let e = api.get().await.expect_err("799 is no success");
        assert_eq!(
            (e.kind(), e.status(), e.attempts()),
            (ErrorKind::Status, Some(799), 1)
        );
        assert_eq!(e.body_text().as_deref(), Some("odd"));
    }
    quiet().await;
    assert_eq!(server.requests(), 6);
}
