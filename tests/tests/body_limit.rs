//! Response size limits: per client and per method, checked against Content-Length
//! first and enforced while streaming.

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
