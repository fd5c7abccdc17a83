//! A streamed result read after the call returned: bounded by the total deadline
//! (which wins a tie, as everywhere), by the idle limit between chunks (which a chunk
//! landing exactly on it beats), and by the call's cancellation token; a stream that
//! failed for good lets its transfer go at once.

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{
    ApiError, CallOptions, CancellationToken, ErrorKind, ResponseStream, resilient_api,
};
use tests::{Clock, assert_nothing_leaked, ms, scripted};

/// Idle limit 80 ms (the attempt timeout), total deadline 100 ms.
#[resilient_api(timeout(attempt = "80ms", total = "100ms"), retry(max = 0))]
pub trait Streams {
    #[get("/download")]
    async fn download(&self) -> Result<ResponseStream, ApiError>;
}

/// Idle limit and deadline both 100 ms.
#[resilient_api(timeout(attempt = "100ms", total = "100ms"), retry(max = 0))]
pub trait Tie {
    #[get("/download")]
    async fn download(&self) -> Result<ResponseStream, ApiError>;
}

/// Idle limit 50 ms, long deadline.
#[resilient_api(timeout(attempt = "50ms", total = "10s"), retry(max = 0))]
pub trait Idle {
    #[get("/download")]
    async fn download(&self) -> Result<ResponseStream, ApiError>;
}

/// Long limits: only the caller's token can end the read early.
#[resilient_api(timeout(attempt = "1s", total = "10s"), retry(max = 0))]
pub trait Patient {
    #[get("/download")]
    async fn download(&self) -> Result<ResponseStream, ApiError>;
}

/// Retried once on a 503; a body limit of 8 bytes.
#[resilient_api(
    timeout(attempt = "1s", total = "10s"),
    retry(max = 1, backoff = fixed(delay = "10ms"))
)]
pub trait Retried {
    #[get("/download")]
    #[max_body("8")]
    async fn download(&self) -> Result<ResponseStream, ApiError>;
}

fn kind<T: std::fmt::Debug>(r: &Result<T, ApiError>) -> Option<ErrorKind> {
    r.as_ref().err().map(ApiError::kind)
}

/// Regression: a chunk that was ready when asked for was handed out after the
/// deadline (`tokio::time::timeout` polls its future before its timer).
#[tokio::test(start_paused = true)]
async fn a_ready_chunk_is_refused_after_the_deadline() {
    let t = ScriptedTransport::new([Step::status(200).chunks([(ms(0), "a"), (ms(0), "b")])]);
    let clock = Clock::start();
    let api = scripted::<StreamsClient>(&t);
    let mut body = api.download().await.unwrap();
    tokio::time::sleep(ms(150)).await; // the caller is busy past the deadline
    let r = body.chunk().await;
    assert_eq!((clock.now_ms(), kind(&r)), (150, Some(ErrorKind::Deadline)));
    // Whole-body reads too.
    let t = ScriptedTransport::new([Step::status(200).body("all of it")]);
    let api = scripted::<StreamsClient>(&t);
    let body = api.download().await.unwrap();
    tokio::time::sleep(ms(500)).await;
    assert_eq!(kind(&body.text().await), Some(ErrorKind::Deadline));
}

/// Regression: a chunk landing at the deadline's own instant was returned.
#[tokio::test(start_paused = true)]
async fn the_deadline_wins_a_tie_with_a_chunk() {
    let t = ScriptedTransport::new([Step::status(200).chunks([(ms(100), "late")])]);
    let clock = Clock::start();
    let api = scripted::<TieClient>(&t);
    let mut body = api.download().await.unwrap();
    let r = body.chunk().await;
    assert_eq!((clock.now_ms(), kind(&r)), (100, Some(ErrorKind::Deadline)));
}

/// A chunk landing exactly on the idle limit is delivered; one a millisecond later
/// is not.
#[tokio::test(start_paused = true)]
async fn a_chunk_on_the_idle_limit_is_delivered() {
    let t = ScriptedTransport::new([Step::status(200).chunks([
        (ms(20), "a"),
        (ms(50), "b"),
        (ms(51), "c"),
    ])]);
    let clock = Clock::start();
    let api = scripted::<IdleClient>(&t);
    let mut body = api.download().await.unwrap();
    assert_eq!(body.chunk().await.unwrap().as_deref(), Some(&b"a"[..]));
    assert_eq!(body.chunk().await.unwrap().as_deref(), Some(&b"b"[..]));
    assert_eq!(clock.now_ms(), 70);
    let r = body.chunk().await;
    assert_eq!(
        (clock.now_ms(), kind(&r)),
        (120, Some(ErrorKind::AttemptTimeout))
    );
}

/// Regression: the call's cancellation token did not reach its streamed body, which
/// went on until the next chunk (510 ms).
#[tokio::test(start_paused = true)]
async fn the_calls_token_ends_the_body_read() {
    let t = ScriptedTransport::new([Step::status(200).chunks([(ms(10), "a"), (ms(500), "b")])]);
    let clock = Clock::start();
    let token = CancellationToken::new();
    let api =
        scripted::<PatientClient>(&t).with_options(CallOptions::new().cancel_on(token.clone()));
    let mut body = api.download().await.unwrap();
    assert_eq!(body.chunk().await.unwrap().as_deref(), Some(&b"a"[..]));
    let cancel = async {
        tokio::time::sleep(ms(20)).await;
        token.cancel();
    };
    let (r, ()) = tokio::join!(body.chunk(), cancel);
    assert_eq!((clock.now_ms(), kind(&r)), (30, Some(ErrorKind::Cancelled)));
    assert_eq!(t.open_bodies(), 0, "the transfer is let go at once");
    // And it stays cancelled.
    assert_eq!(kind(&body.chunk().await), Some(ErrorKind::Cancelled));
}

/// A client given two tokens, one after the other: either one ends the body read.
#[tokio::test(start_paused = true)]
async fn either_of_two_tokens_ends_the_body_read() {
    for which in 0..2 {
        let t = ScriptedTransport::new([Step::status(200).chunks([(ms(10), "a"), (ms(500), "b")])]);
        let clock = Clock::start();
        let (outer, inner) = (CancellationToken::new(), CancellationToken::new());
        let api = scripted::<PatientClient>(&t)
            .with_options(CallOptions::new().cancel_on(outer.clone()))
            .with_options(CallOptions::new().cancel_on(inner.clone()));
        let mut body = api.download().await.unwrap();
        assert_eq!(body.chunk().await.unwrap().as_deref(), Some(&b"a"[..]));
        let token = [&outer, &inner][which];
        let cancel = async {
            tokio::time::sleep(ms(20)).await;
            token.cancel();
        };
        let (r, ()) = tokio::join!(body.chunk(), cancel);
        assert_eq!(
            (clock.now_ms(), kind(&r)),
            (30, Some(ErrorKind::Cancelled)),
            "{which}"
        );
        assert_eq!(t.open_bodies(), 0);
    }
}

/// Regression: a stream that failed for good kept its transfer open until the caller
/// dropped it.
#[tokio::test(start_paused = true)]
async fn a_failed_stream_lets_its_transfer_go() {
    let t = ScriptedTransport::new([Step::status(200).chunks([(ms(30), "a"), (ms(500), "b")])]);
    let clock = Clock::start();
    let api = scripted::<StreamsClient>(&t);
    let mut body = api.download().await.unwrap();
    assert_eq!(body.chunk().await.unwrap().as_deref(), Some(&b"a"[..]));
    let e = body.chunk().await.unwrap_err();
    assert_eq!((clock.now_ms(), e.kind()), (100, ErrorKind::Deadline));
    assert_eq!(t.open_bodies(), 0);
    assert_eq!(kind(&body.chunk().await), Some(ErrorKind::Deadline));
    drop(body);
    assert_nothing_leaked(&t);
}

/// Regression: an error read from a streamed body (cut short, over the limit, not
/// UTF-8) said the call made 0 attempts, as if nothing had been sent, where a decode
/// error of a buffered result carries the call's count.
#[tokio::test(start_paused = true)]
async fn a_streamed_body_error_carries_the_calls_attempts() {
    let t = ScriptedTransport::new([
        Step::status(503),
        Step::status(200).chunks([(ms(0), "abc")]).cut_after(ms(5)),
        Step::status(503),
        Step::status(200).chunks([(ms(0), "12345"), (ms(5), "6789")]),
        Step::status(503),
        // Not UTF-8 (and no byte order mark: `ff fe` would be UTF-16's).
        Step::status(200).body(vec![b'a', 0xff_u8, 0xfe]),
    ]);
    let api = scripted::<RetriedClient>(&t);
    let mut body = api.download().await.unwrap();
    assert_eq!(body.chunk().await.unwrap().as_deref(), Some(&b"abc"[..]));
    let e = body.chunk().await.unwrap_err();
    assert_eq!((e.kind(), e.attempts()), (ErrorKind::Transport, 2));
    assert!(e.to_string().contains("after 2 attempts"), "{e}");
    // The same error asked for again keeps the count.
    assert_eq!(body.chunk().await.unwrap_err().attempts(), 2);
    drop(body);

    let e = api.download().await.unwrap().bytes().await.unwrap_err();
    assert_eq!((e.kind(), e.attempts()), (ErrorKind::BodyTooLarge, 2));

    let e = api.download().await.unwrap().text().await.unwrap_err();
    assert_eq!((e.kind(), e.attempts()), (ErrorKind::Decode, 2));
    assert_nothing_leaked(&t);
}

/// Regression: a streamed body read with `text()` that is not UTF-8 said only "body is
/// not UTF-8", where a buffered `String` result's decode error gives the status, the
/// content type and the length, as DESIGN.md asks of every decode error.
#[tokio::test(start_paused = true)]
async fn a_streamed_text_decode_error_says_what_it_read() {
    let t = ScriptedTransport::new([Step::status(200)
        .header("content-type", "text/csv")
        .body(vec![b'a', b'b', 0xff_u8, 0xfe])]);
    let api = scripted::<StreamsClient>(&t);
    let e = api.download().await.unwrap().text().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Decode);
    let message = e.to_string();
    assert!(
        message.contains("not UTF-8 at byte 2 (content type text/csv, 4 bytes)"),
        "{message}"
    );
    // The status is the error's own (shown first by `Display`); the body is not kept
    // (DESIGN §3.9).
    assert_eq!(e.status(), Some(200));
    assert!(
        message.starts_with("decode failed 200 in `download`"),
        "{message}"
    );
    assert!(e.body().is_none() && e.headers().is_none());
    assert_nothing_leaked(&t);
}

/// A streamed body read with `text()` is read in the charset its content type names,
/// as a buffered `String` result is; a byte that charset cannot hold is a decode error
/// that names the charset, never a replacement character.
#[tokio::test(start_paused = true)]
async fn a_streamed_text_is_read_in_its_charset() {
    let t = ScriptedTransport::new([
        Step::status(200)
            .header("content-type", "text/csv; charset=shift_jis")
            .body(&b"\x82\xa0,b\n"[..]),
        Step::status(200)
            .header("content-type", "text/csv; charset=shift_jis")
            .body(&b"a,\x82"[..]),
    ]);
    let api = scripted::<StreamsClient>(&t);
    let text = api.download().await.unwrap().text().await.unwrap();
    assert_eq!(text, "あ,b\n");
    let e = api.download().await.unwrap().text().await.unwrap_err();
    assert_eq!((e.kind(), e.status()), (ErrorKind::Decode, Some(200)));
    let message = e.to_string();
    assert!(
        message.contains("not valid Shift_JIS (content type text/csv; charset=shift_jis, 3 bytes)"),
        "{message}"
    );
    assert_nothing_leaked(&t);
}
