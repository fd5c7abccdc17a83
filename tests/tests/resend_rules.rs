//! When a request may be sent again: how each failure after sending is classified by
//! method, what a redirect does to a write, whether the retry predicate governs a
//! hedge sent after a failure, what a keyed hedged POST sends, and what a failing
//! hook leaves behind in a hedged round.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use resilient_api::retry::budget::BudgetConfig;
use resilient_api::testing::{RecordedRequest, ScriptedTransport, Step};
use resilient_api::transport::HttpRequest;
use resilient_api::{ApiError, ErrorKind, resilient_api};
use tests::{Clock, assert_nothing_leaked, ms, scripted, scripted_builder};

/// One retry 20 ms after a failure (the default retry set), one endpoint per way of
/// being (or not being) idempotent.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 1, backoff = fixed(delay = "20ms"))
)]
pub trait Review {
    /// Keyed under a header of its own name.
    #[post("/charges")]
    #[idempotency_key("X-Key")]
    async fn keyed(&self, #[body] charge: &serde_json::Value) -> Result<String, ApiError>;

    /// Keyed under a header of its own name, and hedged.
    #[post("/charges/hedged")]
    #[idempotency_key("X-Key")]
    #[hedge(delay = "10ms", max = 2)]
    async fn keyed_hedged(&self, #[body(form)] form: &[(&str, &str)]) -> Result<String, ApiError>;

    /// Declared safe to repeat.
    #[post("/declared")]
    #[idempotent]
    async fn declared(&self, #[body(raw)] payload: &[u8]) -> Result<String, ApiError>;

    /// A plain POST: may not run twice.
    #[post("/plain")]
    async fn plain(&self, #[body(raw)] payload: &[u8]) -> Result<String, ApiError>;

    /// A plain PATCH: may not run twice.
    #[patch("/patch")]
    async fn patch(&self, #[body] change: &serde_json::Value) -> Result<String, ApiError>;

    #[put("/doc")]
    async fn put(&self, #[body(raw)] doc: &[u8]) -> Result<String, ApiError>;

    #[delete("/doc")]
    async fn delete(&self) -> Result<String, ApiError>;

    #[get("/doc")]
    async fn get(&self) -> Result<String, ApiError>;

    /// The same, with two retries.
    #[get("/doc")]
    #[retry(max = 2)]
    async fn get_twice(&self) -> Result<String, ApiError>;

    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;
}

/// A middleware that fails on its `n`th use and lets every other pass.
fn fails_on_use(
    n: usize,
) -> impl Fn(&mut HttpRequest) -> Result<(), resilient_api::error::BoxError> + Send + Sync + 'static
{
    let uses = Arc::new(AtomicUsize::new(0));
    move |_req: &mut HttpRequest| {
        if uses.fetch_add(1, Ordering::SeqCst) + 1 == n {
            return Err("no token to sign with".into());
        }
        Ok(())
    }
}

fn header_values(r: &RecordedRequest, name: &str) -> Vec<String> {
    r.headers
        .get_all(name)
        .iter()
        .map(|v| v.to_str().expect("a text header").to_owned())
        .collect()
}

/// Regression: a 301 or 302 answer to a PUT, PATCH or DELETE turned it into a bodiless
/// GET of the new location (as reqwest does), and the GET's 200 was handed back as the
/// write's success. RFC 9110 §15.4.2/§15.4.3 and the Fetch standard let a client change
/// the method of a 301/302 only from POST to GET; only a 303 turns any method into a
/// GET. The server said "this resource moved", the write never ran anywhere, and the
/// caller was told `Ok` with the old document as the PUT's answer (a DELETE reported
/// done). The same method and bytes now go to `/moved`.
#[tokio::test(start_paused = true)]
async fn a_put_patch_or_delete_answered_301_or_302_keeps_its_method_and_body() {
    let mut sent = Vec::new();
    for status in [301u16, 302] {
        let t = ScriptedTransport::new([
            Step::status(status).header("location", "/moved"),
            Step::status(200).body("stored"),
            Step::status(status).header("location", "/moved"),
            Step::status(200).body("stored"),
            Step::status(status).header("location", "/moved"),
            Step::status(200).body("stored"),
        ]);
        let api: ReviewClient = scripted(&t);
        assert_eq!(api.put(b"new doc").await.expect("followed"), "stored");
        let change = serde_json::json!({ "title": "new" });
        assert_eq!(api.patch(&change).await.expect("followed"), "stored");
        assert_eq!(api.delete().await.expect("followed"), "stored");
        assert_nothing_leaked(&t);
        let requests = t.requests();
        assert_eq!(requests.len(), 6, "{status}");
        for hop in requests.iter().skip(1).step_by(2) {
            assert_eq!(hop.url, "https://example.test/moved");
            sent.push((status, hop.method.to_string(), hop.body.clone()));
        }
    }
    let expected: Vec<(u16, String, Bytes)> = [301u16, 302]
        .into_iter()
        .flat_map(|s| {
            [
                (s, "PUT".to_owned(), Bytes::from_static(b"new doc")),
                (
                    s,
                    "PATCH".to_owned(),
                    Bytes::from_static(br#"{"title":"new"}"#),
                ),
                (s, "DELETE".to_owned(), Bytes::new()),
            ]
        })
        .collect();
    assert_eq!(sent, expected, "what each write's redirect hop sent");
}

/// Regression: the retry predicate ("decides whether a retryable failure is retried
/// ... it can only say no", client.rs) was bypassed by hedging. The primary fails at
/// t=3 with a 503 the predicate refuses to retry; nothing else is in flight, so the
/// hedge due at t=10 would resend the failed request (hedge.rs: "the next is decided
/// at once, as a retry is when its backoff starts"), yet the predicate was never asked
/// and the request went out again at t=10. The call now ends at t=3 with the 503, one
/// dispatch, the predicate asked once.
#[tokio::test(start_paused = true)]
async fn a_retry_predicate_that_says_no_also_stops_a_hedge_after_the_failure() {
    let t = ScriptedTransport::new([
        Step::status(503).body("down for maintenance").delay(ms(3)),
        Step::status(200).body("ok"),
    ]);
    let asked = Arc::new(AtomicUsize::new(0));
    let count = asked.clone();
    let api = scripted_builder::<ReviewClient>(&t)
        .retry_predicate(move |e: &ApiError| {
            count.fetch_add(1, Ordering::SeqCst);
            Ok(e.body_text().as_deref() != Some("down for maintenance"))
        })
        .build()
        .expect("builds");
    let clock = Clock::start();
    let result = api.search().await;
    let ended = clock.now_ms();
    assert_eq!(
        (
            result.map_err(|e| (e.kind(), e.status())),
            ended,
            t.dispatch_times(),
            asked.load(Ordering::SeqCst),
        ),
        (Err((ErrorKind::Status, Some(503))), 3, vec![ms(0)], 1),
        "(result, ended at ms, dispatch times, times the predicate was asked)"
    );
    tests::assert_no_late_dispatch(&t, 1, Duration::from_secs(1)).await;
}

/// Pins §3.2 for the after-send outcomes the existing tests leave out: an attempt
/// timeout and a body cut short are retried on a keyed or declared POST (and a PUT),
/// never on a plain POST or PATCH; a connect error is retried on every method.
#[tokio::test(start_paused = true)]
async fn after_send_failures_are_retried_only_when_the_method_may_run_twice() {
    fn outcome(which: &str) -> Step {
        match which {
            "connect" => Step::connect_error(),
            "timeout" => Step::hang(),
            "cut" => Step::status(200).chunks([(ms(1), "par")]).cut_after(ms(5)),
            _ => unreachable!(),
        }
    }
    let mut seen = Vec::new();
    for method in ["keyed", "declared", "put", "plain", "patch"] {
        for which in ["connect", "timeout", "cut"] {
            let t = ScriptedTransport::new([outcome(which), Step::status(200).body("ok")]);
            let api: ReviewClient = scripted(&t);
            let change = serde_json::json!({ "n": 1 });
            let result = match method {
                "keyed" => api.keyed(&change).await,
                "declared" => api.declared(b"x").await,
                "put" => api.put(b"x").await,
                "plain" => api.plain(b"x").await,
                _ => api.patch(&change).await,
            };
            assert_nothing_leaked(&t);
            seen.push((method, which, t.attempts(), result.ok()));
        }
    }
    let ok = || Some("ok".to_owned());
    let expected = vec![
        ("keyed", "connect", 2, ok()),
        ("keyed", "timeout", 2, ok()),
        ("keyed", "cut", 2, ok()),
        ("declared", "connect", 2, ok()),
        ("declared", "timeout", 2, ok()),
        ("declared", "cut", 2, ok()),
        ("put", "connect", 2, ok()),
        ("put", "timeout", 2, ok()),
        ("put", "cut", 2, ok()),
        ("plain", "connect", 2, ok()),
        ("plain", "timeout", 1, None),
        ("plain", "cut", 1, None),
        ("patch", "connect", 2, ok()),
        ("patch", "timeout", 1, None),
        ("patch", "cut", 1, None),
    ];
    assert_eq!(seen, expected);
}

/// Pins the key and the bytes of a keyed, hedged POST under a header name of its own:
/// both hedges, the retry after both were reset, and that retry's 307 hop carry the
/// one key and the same form bytes (and no `Idempotency-Key`); the next call has
/// another key.
#[tokio::test(start_paused = true)]
async fn a_keyed_hedged_post_sends_one_key_and_the_same_bytes_everywhere() {
    let t = ScriptedTransport::new([
        Step::reset().delay(ms(15)),
        Step::reset().delay(ms(10)),
        Step::status(307).header("location", "/charges/again"),
        Step::status(200).body("charged"),
        Step::status(200).body("charged"),
    ]);
    let api: ReviewClient = scripted(&t);
    let form = [("amount", "12.50 €"), ("note", "a&b=c")];
    let clock = Clock::start();
    assert_eq!(api.keyed_hedged(&form).await.expect("retried"), "charged");
    assert_eq!(clock.now_ms(), 40);
    assert_eq!(api.keyed_hedged(&form).await.expect("first try"), "charged");
    let requests = t.requests();
    assert_eq!(
        requests.iter().map(|r| r.at).collect::<Vec<_>>(),
        [ms(0), ms(10), ms(40), ms(40), ms(40)]
    );
    let body = Bytes::from_static(b"amount=12.50+%E2%82%AC&note=a%26b%3Dc");
    let key = header_values(&requests[0], "x-key");
    assert_eq!(key.len(), 1, "{key:?}");
    assert_eq!(key[0].len(), 36, "{key:?}");
    for r in &requests[..4] {
        assert_eq!(r.method, http::Method::POST);
        assert_eq!(header_values(r, "x-key"), key, "{}", r.url);
        assert!(header_values(r, "idempotency-key").is_empty());
        assert_eq!(r.body, body, "{}", r.url);
    }
    assert_eq!(requests[3].url, "https://example.test/charges/again");
    let next = header_values(&requests[4], "x-key");
    assert_eq!(next.len(), 1);
    assert_ne!(next, key, "a new logical call, a new key");
    assert_nothing_leaked(&t);
}

/// Pins S13 for a hedged round: the middleware fails on its second use, the hedge at
/// t=10, while the primary is still in flight. The call ends then with the hook's
/// error (one dispatch, the primary dropped), and the budget's payment for the hedge
/// is given back: with one retry earned per call and no floor, the next call (two
/// deposits, none spent) can still retry twice (one, had the hedge kept its payment).
#[tokio::test(start_paused = true)]
async fn a_middleware_error_on_a_hedge_ends_the_call_and_gives_its_payment_back() {
    let t = ScriptedTransport::new([Step::status(200).body("slow").delay(ms(50))]);
    let api = scripted_builder::<ReviewClient>(&t)
        .retry_budget(Some(BudgetConfig {
            ttl: Duration::from_secs(10),
            min_per_sec: 0,
            retry_ratio: 1.0,
        }))
        .middleware(fails_on_use(2))
        .build()
        .expect("builds");
    let clock = Clock::start();
    let e = api
        .search()
        .await
        .expect_err("the hedge's middleware failed");
    assert_eq!(
        (e.kind(), e.attempts(), clock.now_ms()),
        (ErrorKind::Hook, 1, 10)
    );
    assert_eq!(
        std::error::Error::source(&e).map(ToString::to_string),
        Some("no token to sign with".to_owned())
    );
    tests::assert_no_late_dispatch(&t, 1, Duration::from_secs(1)).await;
    assert_nothing_leaked(&t);
    t.push([
        Step::status(503),
        Step::status(503),
        Step::status(200).body("ok"),
    ]);
    let clock = Clock::start();
    assert_eq!(api.get_twice().await.expect("two retries were left"), "ok");
    assert_eq!((t.attempts(), clock.now_ms()), (4, 40));
    assert_nothing_leaked(&t);
}
