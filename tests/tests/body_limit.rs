//! Response size limits: per client and per method, checked against Content-Length
//! first and enforced while streaming; a streamed body that ended or failed stays so.

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, ResponseStream, resilient_api};
use tests::ms;

/// One method with a limit of its own, one with the client's.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Files {
    #[get("/small")]
    #[max_body("16")]
    async fn small(&self) -> Result<String, ApiError>;

    #[get("/small-stream")]
    #[max_body("16")]
    async fn small_stream(&self) -> Result<ResponseStream, ApiError>;

    #[get("/any")]
    async fn any(&self) -> Result<String, ApiError>;

    #[head("/small")]
    #[max_body("16")]
    async fn probe(&self) -> Result<(), ApiError>;

    #[delete("/small")]
    #[max_body("16")]
    async fn remove(&self) -> Result<(), ApiError>;
}

#[tokio::test(start_paused = true)]
async fn a_method_limit_refuses_a_larger_body_by_its_content_length() {
    let t = ScriptedTransport::new([
        Step::status(200).body("twenty bytes of text"),
        Step::status(200).body("twenty bytes of text"),
    ]);
    let api: FilesClient = tests::scripted(&t);
    let e = api.small().await.expect_err("over 16 bytes");
    assert_eq!(e.kind(), ErrorKind::BodyTooLarge);
    // The same body is fine where the client's 4 MiB applies.
    assert_eq!(
        api.any().await.expect("under the client's limit"),
        "twenty bytes of text"
    );
    tests::assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn a_method_limit_is_enforced_while_streaming() {
    // No content-length: chunks of 10 bytes, the second one goes over.
    let t = ScriptedTransport::new([
        Step::status(200).chunks([(ms(0), "0123456789"), (ms(5), "0123456789")])
    ]);
    let api: FilesClient = tests::scripted(&t);
    let e = api.small().await.expect_err("over 16 bytes");
    assert_eq!(e.kind(), ErrorKind::BodyTooLarge);
    tests::assert_nothing_leaked(&t);

    t.push([Step::status(200).chunks([(ms(0), "0123456789"), (ms(5), "0123456789")])]);
    let mut stream = api.small_stream().await.expect("the head is fine");
    assert_eq!(
        stream.chunk().await.expect("first chunk").as_deref(),
        Some(&b"0123456789"[..])
    );
    let e = stream.chunk().await.expect_err("second chunk goes over");
    assert_eq!(e.kind(), ErrorKind::BodyTooLarge);
    let e = stream
        .chunk()
        .await
        .expect_err("still over, not a clean end");
    assert_eq!(e.kind(), ErrorKind::BodyTooLarge);
    drop(stream);
    tests::assert_nothing_leaked(&t);
}

/// Regression: a streamed body over the limit said its response's status on the read
/// that went over, and no status on every read after it (`ApiError::status` is the
/// status of the answer that could not be used, for `BodyTooLarge`). Every read says
/// it now, as it says the kind.
#[tokio::test(start_paused = true)]
async fn a_streamed_body_over_the_limit_keeps_its_status_on_every_read() {
    let t = ScriptedTransport::new([
        Step::status(206).chunks([(ms(0), "0123456789"), (ms(5), "0123456789")])
    ]);
    let api: FilesClient = tests::scripted(&t);
    let mut stream = api.small_stream().await.expect("the head is fine");
    assert_eq!(
        stream.chunk().await.expect("first chunk").map(|c| c.len()),
        Some(10)
    );
    let seen = |e: ApiError| (e.kind(), e.status(), e.attempts(), e.endpoint());
    let over = (ErrorKind::BodyTooLarge, Some(206), 1, "small_stream");
    let e = stream
        .chunk()
        .await
        .expect_err("the second chunk goes over");
    assert_eq!(seen(e), over);
    for _ in 0..2 {
        let e = stream.chunk().await.expect_err("still over");
        assert_eq!(seen(e), over);
    }
    drop(stream);
    tests::assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn the_client_limit_applies_to_methods_without_their_own() {
    let t = ScriptedTransport::new([Step::status(200).body("twenty bytes of text")]);
    let api: FilesClient = tests::scripted_builder(&t)
        .max_body_size(8)
        .build()
        .expect("builds");
    assert_eq!(
        api.any().await.expect_err("over 8 bytes").kind(),
        ErrorKind::BodyTooLarge
    );
}

#[tokio::test(start_paused = true)]
async fn a_streamed_body_read_past_its_end_stays_ended() {
    let t = ScriptedTransport::new([Step::status(200).chunks([(ms(0), "0123"), (ms(5), "4567")])]);
    let api: FilesClient = tests::scripted(&t);
    let mut stream = api.small_stream().await.expect("the head is fine");
    let mut read = Vec::new();
    while let Some(chunk) = stream.chunk().await.expect("a chunk") {
        read.extend_from_slice(&chunk);
    }
    assert_eq!(read, b"01234567");
    // The transport's stream is not asked again once it has ended.
    for _ in 0..3 {
        assert_eq!(stream.chunk().await.expect("the end, again"), None);
    }
    drop(stream);
    tests::assert_nothing_leaked(&t);
}

/// A HEAD's `Content-Length` is the length a GET would get, and a 204's or a 304's
/// describes no body here either: none of them is over a limit.
#[tokio::test(start_paused = true)]
async fn a_content_length_without_a_body_is_not_over_the_limit() {
    let t = ScriptedTransport::new([
        Step::status(200).header("content-length", "1000000"),
        Step::status(204).header("content-length", "1000000"),
        Step::status(200).body("twenty bytes of text"),
    ]);
    let api: FilesClient = tests::scripted(&t);
    api.probe().await.expect("a HEAD has no body");
    api.remove().await.expect("a 204 has no body");
    // The same header on a DELETE's 200 with a body is checked.
    assert_eq!(
        api.remove().await.expect_err("over 16 bytes").kind(),
        ErrorKind::BodyTooLarge
    );
    tests::assert_nothing_leaked(&t);
}

/// Regression: an error response's body is kept up to 64 KiB, but a read that had
/// exactly 64 KiB waited for more bytes only to drop them, so an error page whose
/// first 64 KiB came in whole chunks and whose rest was slow ended as an attempt
/// timeout (1 s) instead of the status error at once.
#[tokio::test(start_paused = true)]
async fn an_error_body_is_not_read_past_the_kept_64_kib() {
    let kept = vec![b'x'; 64 * 1024];
    let t = ScriptedTransport::new([Step::status(500).chunks([
        (ms(0), kept[..32 * 1024].to_vec()),
        (ms(0), kept[32 * 1024..].to_vec()),
        (ms(5000), b"rest".to_vec()),
    ])]);
    let clock = tests::Clock::start();
    let api: FilesClient = tests::scripted(&t);
    let e = api.any().await.expect_err("a 500");
    assert_eq!(
        (clock.now_ms(), e.kind(), e.status()),
        (0, ErrorKind::Status, Some(500))
    );
    assert_eq!(e.body().map(|b| b.len()), Some(64 * 1024));
    tests::assert_nothing_leaked(&t);
}

/// An error body is kept up to the call's own limit when that is below 64 KiB: a
/// client that allows 16 bytes never holds 64 KiB of an error page. The read stops at
/// the limit (the rest, 5 s later, is never waited for) and the status error stays.
#[tokio::test(start_paused = true)]
async fn an_error_body_is_kept_only_up_to_a_lower_body_limit() {
    let t = ScriptedTransport::new([
        Step::status(503).chunks([
            (ms(0), b"0123456789".to_vec()),
            (ms(0), b"abcdefghij".to_vec()),
            (ms(5000), b"rest".to_vec()),
        ]),
        Step::status(400).body(vec![b'x'; 1000]),
    ]);
    let clock = tests::Clock::start();
    let api: FilesClient = tests::scripted(&t);
    let e = api.small().await.expect_err("a 503");
    assert_eq!(
        (clock.now_ms(), e.kind(), e.status()),
        (0, ErrorKind::Status, Some(503))
    );
    assert_eq!(e.body().map(|b| &b[..]), Some(&b"0123456789abcdef"[..]));
    // The client's limit counts too, for a method without its own.
    let api: FilesClient = tests::scripted_builder(&t)
        .max_body_size(8)
        .build()
        .expect("builds");
    let e = api.any().await.expect_err("a 400");
    assert_eq!((e.kind(), e.status()), (ErrorKind::Status, Some(400)));
    assert_eq!(e.body().map(|b| b.len()), Some(8));
    tests::assert_nothing_leaked(&t);
}

/// Regression: with a body limit of 0, an error response's body keeps nothing, yet its
/// read waited for the first chunk (here 5 s later, past the 1 s attempt timeout) only
/// to drop it, so the call ended as an attempt timeout instead of the status at once.
#[tokio::test(start_paused = true)]
async fn an_error_body_with_a_limit_of_0_is_not_waited_for() {
    let t = ScriptedTransport::new([Step::status(500).chunks([(ms(5000), "late")])]);
    let clock = tests::Clock::start();
    let api: FilesClient = tests::scripted_builder(&t)
        .max_body_size(0)
        .build()
        .expect("builds");
    let e = api.any().await.expect_err("a 500");
    assert_eq!(
        (clock.now_ms(), e.kind(), e.status()),
        (0, ErrorKind::Status, Some(500))
    );
    assert_eq!(e.body().map(|b| b.len()), Some(0));
    tests::assert_nothing_leaked(&t);
}

/// A `Content-Length` is digits only (RFC 9110: `1*DIGIT`): `+20` or ` 20x` is not a
/// length, so it neither refuses the body nor stands for it; the limit is then
/// enforced on what arrives.
#[tokio::test(start_paused = true)]
async fn a_content_length_that_is_not_digits_is_no_length() {
    let t = ScriptedTransport::new([
        Step::status(200)
            .header("content-length", "+20")
            .chunks([(ms(0), "abc")]),
        Step::status(200)
            .header("content-length", "-1")
            .chunks([(ms(0), "abc")]),
    ]);
    let api: FilesClient = tests::scripted(&t);
    assert_eq!(api.small().await.expect("3 bytes, under 16"), "abc");
    assert_eq!(api.small().await.expect("3 bytes, under 16"), "abc");
    tests::assert_nothing_leaked(&t);
}
