//! A caller-supplied `Idempotency-Key` header makes a POST retryable, like
//! `#[idempotency_key]`: every attempt carries the caller's one value.

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, resilient_api};

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
