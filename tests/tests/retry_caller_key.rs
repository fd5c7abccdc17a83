//! A caller-supplied `Idempotency-Key` header makes a POST retryable, like
//! `#[idempotency_key]`: every attempt carries the caller's one value. An empty key
//! is no key: the call is refused before any attempt.

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, resilient_api};

/// A POST whose caller brings its own key.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [503])
)]
pub trait Charges {
    #[post("/charges")]
    #[retry(on = [503])]
    async fn charge(
        &self,
        #[header("Idempotency-Key")] key: &str,
        #[body(raw)] body: &[u8],
    ) -> Result<String, ApiError>;

    /// A generated key under its own header, which a caller's header replaces.
    #[post("/refunds")]
    #[idempotency_key("X-Request-Key")]
    async fn refund(
        &self,
        #[header("X-Request-Key")] key: &str,
        #[body(raw)] body: &[u8],
    ) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn caller_supplied_idempotency_key_is_retried_with_the_same_value() {
    let t = ScriptedTransport::new([Step::status(503), Step::status(200).body("charged")]);
    let api: ChargesClient = tests::scripted(&t);
    let got = api
        .charge("key-123", b"{}")
        .await
        .expect("retried to success");
    assert_eq!(got, "charged");
    let requests = t.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(
            r.headers.get("idempotency-key").map(|v| v.as_bytes()),
            Some(&b"key-123"[..])
        );
    }
    assert_eq!(t.dispatch_times(), [tests::ms(0), tests::ms(20)]);
    tests::assert_nothing_leaked(&t);
}

/// Regression: an empty caller key made the POST retryable and was sent as it was
/// (two dispatches, each with an empty `Idempotency-Key`). An empty key (or one of
/// blanks only, which a server reads as empty) is no key: refused up front as
/// `InvalidRequest`, nothing sent.
#[tokio::test(start_paused = true)]
async fn an_empty_caller_key_is_refused_before_any_attempt() {
    let t = ScriptedTransport::new([Step::status(503), Step::status(200).body("charged")]);
    let api: ChargesClient = tests::scripted(&t);
    for key in ["", " ", "\t "] {
        let e = api.charge(key, b"{}").await.unwrap_err();
        assert_eq!((e.kind(), e.attempts()), (ErrorKind::InvalidRequest, 0));
        assert_eq!(
            e.to_string(),
            "invalid request in `charge`: invalid `Idempotency-Key`: an idempotency key cannot be empty"
        );
        assert_eq!(t.attempts(), 0, "nothing is sent for {key:?}");
    }
    // A real key still goes, and is retried with the same value.
    assert_eq!(api.charge("key-1", b"{}").await.unwrap(), "charged");
    assert_eq!(t.attempts(), 2);
    tests::assert_nothing_leaked(&t);
}

/// The same for a caller's value replacing a generated key: an empty one is refused,
/// not sent in place of the generated key.
#[tokio::test(start_paused = true)]
async fn an_empty_caller_key_replacing_a_generated_one_is_refused() {
    let t = ScriptedTransport::new([Step::status(200).body("refunded")]);
    let api: ChargesClient = tests::scripted(&t);
    let e = api.refund("", b"{}").await.unwrap_err();
    assert_eq!((e.kind(), e.attempts()), (ErrorKind::InvalidRequest, 0));
    assert_eq!(
        e.to_string(),
        "invalid request in `refund`: invalid `X-Request-Key`: an idempotency key cannot be empty"
    );
    assert_eq!(t.attempts(), 0);
    assert_eq!(api.refund("r-1", b"{}").await.unwrap(), "refunded");
    assert_eq!(
        t.requests()[0]
            .headers
            .get("x-request-key")
            .map(|v| v.as_bytes()),
        Some(&b"r-1"[..])
    );
    tests::assert_nothing_leaked(&t);
}
