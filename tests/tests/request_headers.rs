//! Which `Content-Type` and idempotency key go on the wire when a body's default, a
//! caller's header and a client-wide header meet.

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, Bytes, resilient_api};
use serde::Serialize;
use tests::{assert_nothing_leaked, scripted, scripted_builder};

/// A JSON body.
#[derive(Debug, Serialize)]
pub struct Item {
    /// Its name.
    pub name: String,
}

/// Bodies with a caller's `Content-Type`, given after or before them.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Bodies {
    #[patch("/items/1")]
    async fn json_then_type(
        &self,
        #[body] item: &Item,
        #[header("Content-Type")] content_type: &str,
    ) -> Result<(), ApiError>;

    #[patch("/items/1")]
    async fn type_then_json(
        &self,
        #[header("Content-Type")] content_type: &str,
        #[body] item: &Item,
    ) -> Result<(), ApiError>;

    #[put("/docs/1")]
    async fn raw_then_type(
        &self,
        #[body(raw)] doc: Bytes,
        #[header("Content-Type")] content_type: &str,
    ) -> Result<(), ApiError>;

    #[put("/items/1")]
    async fn json(&self, #[body] item: &Item) -> Result<(), ApiError>;
}

/// A client-wide `Content-Type` for every call.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 0),
    headers("Content-Type" = "application/vnd.acme+json")
)]
pub trait Vendor {
    #[post("/v")]
    async fn post(&self, #[body] item: &Item) -> Result<(), ApiError>;
}

/// A POST keyed anew for every call.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Keyed {
    #[post("/charges")]
    #[idempotency_key]
    async fn charge(&self, #[body] item: &Item) -> Result<(), ApiError>;
}

fn item() -> Item {
    Item { name: "a".into() }
}

fn values(t: &ScriptedTransport, name: &str) -> Vec<Vec<String>> {
    t.requests()
        .iter()
        .map(|r| {
            r.headers
                .get_all(name)
                .iter()
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .collect()
        })
        .collect()
}

/// Regression: a caller's `Content-Type` given after the body was added next to the
/// body's default, so two went out; given before, one did. Now one, either way.
#[tokio::test(start_paused = true)]
async fn a_callers_content_type_replaces_the_bodys_in_any_order() {
    let t = ScriptedTransport::new((0..4).map(|_| Step::status(204)));
    let api = scripted::<BodiesClient>(&t);
    let patch = "application/merge-patch+json";
    api.json_then_type(&item(), patch).await.unwrap();
    api.type_then_json(patch, &item()).await.unwrap();
    api.raw_then_type(Bytes::from_static(b"<x/>"), "application/xml")
        .await
        .unwrap();
    api.json(&item()).await.unwrap();
    assert_eq!(
        values(&t, "content-type"),
        [
            vec![patch.to_owned()],
            vec![patch.to_owned()],
            vec!["application/xml".to_owned()],
            vec!["application/json".to_owned()],
        ]
    );
}

/// Regression: the JSON default replaced a client-wide `Content-Type`.
#[tokio::test(start_paused = true)]
async fn a_client_wide_content_type_is_not_replaced_by_the_bodys() {
    let t = ScriptedTransport::new([Step::status(204)]);
    let api = scripted::<VendorClient>(&t);
    api.post(&item()).await.unwrap();
    assert_eq!(
        values(&t, "content-type"),
        [vec!["application/vnd.acme+json".to_owned()]]
    );
}

/// Regression: a client-wide header named like the idempotency key stopped the
/// per-call key, so every call sent the same key. The call's own key replaces it.
#[tokio::test(start_paused = true)]
async fn a_client_wide_header_does_not_replace_the_per_call_key() {
    let t = ScriptedTransport::new([Step::status(204), Step::status(204)]);
    let api: KeyedClient = scripted_builder(&t)
        .header("Idempotency-Key", "fixed")
        .build()
        .unwrap();
    api.charge(&item()).await.unwrap();
    api.charge(&item()).await.unwrap();
    let keys = values(&t, "idempotency-key");
    assert_eq!(keys.len(), 2);
    assert_eq!((keys[0].len(), keys[1].len()), (1, 1), "{keys:?}");
    assert_ne!(keys[0], keys[1], "two calls, two keys");
    assert!(
        keys.iter().all(|k| k[0] != "fixed" && k[0].len() == 36),
        "{keys:?}"
    );
}

/// A key a call may give itself, on a client given a secret one.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Keys {
    #[get("/data")]
    async fn data(&self, #[header("X-Api-Key")] key: &str) -> Result<(), ApiError>;
}

/// Regression: a call's value replaced a client-wide secret header of the same name
/// without the secret mark, so it was printed in full and kept on a cross-origin
/// redirect. The header stays secret whatever value the call gives it.
#[tokio::test(start_paused = true)]
async fn a_calls_value_for_a_client_wide_secret_header_stays_secret() {
    let t = ScriptedTransport::new([Step::status(204)]);
    let api: KeysClient = scripted_builder(&t)
        .secret_header("x-api-key", "CANARY-client")
        .build()
        .expect("a valid client");
    api.data("CANARY-call").await.expect("the call succeeds");
    let sent = &t.requests()[0];
    assert_eq!(values(&t, "x-api-key"), [["CANARY-call"]]);
    assert!(sent.headers["x-api-key"].is_sensitive());
    let printed = format!("{sent:?}");
    assert!(!printed.contains("CANARY"), "leaked: {printed}");
}

/// One plain GET, no retries.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Plain {
    #[get("/plain")]
    async fn plain(&self) -> Result<String, ApiError>;
}

/// DESIGN §3.9 ("configured secret headers ... are redacted in every log, event,
/// `Debug` and error"; on a change of origin "every credential header ... and any
/// header the API declares secret is dropped") and the rule the pipeline itself keeps
/// one level down (runtime/src/pipeline.rs `prepare`: "A client-wide secret stays
/// secret whatever value a call gives it"). A header configured with
/// `secret_header("x-api-key", ..)` and then given another value with
/// `header("X-Api-Key", ..)` is still that secret header: the new value replaces the
/// old (documented), and it stays redacted and is not sent to another origin.
///
/// Regression: `build()` took the flag from the later value alone, so the key was
/// printed by the client's `Debug` and by `RecordedRequest`'s, and was sent along on
/// a cross-origin redirect.
#[tokio::test(start_paused = true)]
async fn a_secret_header_given_a_new_value_on_the_builder_stays_secret() {
    let t = ScriptedTransport::new([
        Step::status(302).header("location", "https://elsewhere.test/plain"),
        Step::status(200).body("ok"),
    ]);
    let api = scripted_builder::<PlainClient>(&t)
        .secret_header("x-api-key", "k-1")
        .header("X-Api-Key", "k-2")
        .build()
        .expect("the client builds");
    assert!(
        !format!("{api:?}").contains("k-2"),
        "the client's Debug shows the key: {api:?}"
    );
    assert_eq!(api.plain().await.expect("redirected"), "ok");
    let sent = t.requests();
    assert_eq!(sent.len(), 2);
    assert_eq!(
        sent[0].headers["x-api-key"], "k-2",
        "sent to its own origin"
    );
    assert!(
        sent[0].headers["x-api-key"].is_sensitive(),
        "not marked secret: {:?}",
        sent[0]
    );
    assert_eq!(sent[1].url, "https://elsewhere.test/plain");
    assert!(
        !sent[1].headers.contains_key("x-api-key"),
        "the secret key went to another origin: {:?}",
        sent[1].headers.get("x-api-key")
    );
    assert_nothing_leaked(&t);
}

/// A POST keyed anew for every call, whose caller may bring its own key.
#[resilient_api(timeout(attempt = "1s"), retry(max = 1, backoff = fixed(delay = "10ms")))]
pub trait MaybeKeyed {
    #[post("/charges")]
    #[idempotency_key]
    #[retry(on = [503])]
    async fn charge(
        &self,
        #[header("Idempotency-Key")] key: Option<&str>,
        #[body] item: &Item,
    ) -> Result<(), ApiError>;
}

/// `#[idempotency_key]` with an optional key parameter: a call without a key gets one
/// made for it, a call with one sends it instead, and each call's key is the same on
/// its retry. One key per request either way.
#[tokio::test(start_paused = true)]
async fn a_callers_key_replaces_the_one_made_for_the_call() {
    let t = ScriptedTransport::new([
        Step::status(503),
        Step::status(204),
        Step::status(503),
        Step::status(204),
    ]);
    let api: MaybeKeyedClient = scripted_builder(&t).build().expect("builds");
    api.charge(None, &item()).await.expect("retried to success");
    api.charge(Some("mine-1"), &item())
        .await
        .expect("retried to success");
    let keys = values(&t, "idempotency-key");
    assert_eq!(keys.len(), 4);
    assert!(keys.iter().all(|k| k.len() == 1), "{keys:?}");
    assert_eq!(keys[0], keys[1], "the made key, again on the retry");
    assert_eq!(keys[0][0].len(), 36, "{keys:?}");
    assert_eq!(keys[2..], [["mine-1"], ["mine-1"]]);
}

/// Regression: an optional header's generated `if let Some(v) = &value` tripped
/// `clippy::pattern_type_mismatch`, a restriction lint strict crates turn on, at the
/// user's type. CI's clippy run over this file fails if it comes back.
#[deny(clippy::pattern_type_mismatch)]
mod pattern_types {
    use resilient_api::{ApiError, resilient_api};

    /// An optional header.
    #[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
    pub trait Traced {
        #[get("/a")]
        async fn a(&self, #[header("X-Trace")] trace: Option<&str>) -> Result<String, ApiError>;
    }
}

/// An optional header is sent when given, and left out when not.
#[tokio::test(start_paused = true)]
async fn an_optional_header_is_sent_only_when_given() {
    use pattern_types::Traced as _;
    let t = ScriptedTransport::new([Step::status(200).body("one"), Step::status(200).body("two")]);
    let api: pattern_types::TracedClient = scripted(&t);
    assert_eq!(api.a(Some("t-1")).await.expect("sent"), "one");
    assert_eq!(api.a(None).await.expect("sent"), "two");
    let sent = t.requests();
    assert_eq!(sent[0].headers["x-trace"], "t-1");
    assert!(!sent[1].headers.contains_key("x-trace"));
}
