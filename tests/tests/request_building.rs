//! How a call's request is built from its arguments and how its answer is read
//! (DESIGN §2.3, the README's "Parameters" and "Results"): exact URLs, query strings,
//! header bytes and decoded values on the scripted transport.
//!
//! Tests named "regression" failed on the code before the fix they came with.

use resilient_api::client::{GeneratedClient, Handle};
use resilient_api::request::{ApiSpec, InvalidRequest, RequestBuilder};
use resilient_api::response::decode::{Text, Unit};
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, Bytes, ErrorKind, resilient_api};
use serde::{Deserialize, Serialize};
use std::error::Error as _;
use tests::{scripted, scripted_builder};

/// A unit-variant enum, sent as its (renamed) name.
#[derive(Debug, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Sort {
    /// `asc`
    Asc,
}

/// A query struct with every kind of field a search form has.
#[derive(Debug, Serialize)]
pub struct Filter {
    /// Free text.
    pub q: String,
    /// Left out when `None`.
    pub page: Option<u32>,
    /// `true` / `false`.
    pub exact: bool,
    /// A float.
    pub ratio: f64,
    /// An enum.
    pub sort: Sort,
    /// Repeats its name, empty values included.
    pub tags: Vec<String>,
}

/// Two secret values a server checks together (a key and a signature).
#[derive(Debug, Serialize)]
pub struct Creds {
    /// The API key.
    pub api_key: String,
    /// A signature.
    pub sig: String,
}

/// A JSON result.
#[derive(Debug, Deserialize, PartialEq)]
pub struct Doc {
    /// Its text.
    pub text: String,
}

/// Endpoints of every shape these tests need; no retries.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Review {
    #[get("/x")]
    async fn literal(&self) -> Result<String, ApiError>;

    #[get("/")]
    async fn root(&self) -> Result<String, ApiError>;

    #[get("/items/{id}")]
    async fn item(&self, id: &str) -> Result<String, ApiError>;

    #[get("/q")]
    async fn q(&self, #[query] v: &str, #[query] w: Option<&str>) -> Result<String, ApiError>;

    #[get("/f")]
    async fn filter(&self, #[query] f: Option<&Filter>) -> Result<String, ApiError>;

    #[get("/search")]
    async fn signed(
        &self,
        #[query(secret)] creds: &Creds,
        #[query] page: u32,
    ) -> Result<String, ApiError>;

    #[get("/h")]
    async fn header(&self, #[header("X-V")] v: &str) -> Result<String, ApiError>;

    /// A path value, a repeated key, an empty value and a key of reserved characters.
    #[get("/shapes/{seg}")]
    async fn shapes(
        &self,
        seg: &str,
        #[query] ids: Vec<u32>,
        #[query("e")] empty: &str,
        #[query("k&=+ ?#/%")] odd: &str,
    ) -> Result<String, ApiError>;

    #[get("/doc")]
    async fn doc(&self) -> Result<Doc, ApiError>;

    #[get("/bytes")]
    async fn bytes(&self) -> Result<Bytes, ApiError>;

    #[get("/text")]
    async fn text(&self) -> Result<String, ApiError>;
}

/// One endpoint with a path parameter, for requests built by hand.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Narrow {
    #[delete("/users/{id}")]
    async fn remove(&self, id: u64) -> Result<(), ApiError>;
}

/// Another API, with more endpoints than [`Narrow`].
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Wide {
    #[get("/a")]
    async fn a(&self) -> Result<String, ApiError>;

    #[get("/b/{x}/{r#type}")]
    async fn b(&self, x: u64, r#type: &str) -> Result<String, ApiError>;
}

/// The handle under a [`NarrowClient`] or a [`WideClient`], to send requests built
/// by hand.
struct Raw<C>(Handle, std::marker::PhantomData<C>);

impl<C: GeneratedClient> GeneratedClient for Raw<C> {
    const API: &'static ApiSpec = C::API;
    fn from_handle(handle: Handle) -> Self {
        Raw(handle, std::marker::PhantomData)
    }
}

/// The handle of a `C` client on `t`.
fn handle<C: GeneratedClient>(t: &ScriptedTransport) -> Handle {
    scripted::<Raw<C>>(t).0
}

/// A call's error as (kind, endpoint, text, the `InvalidRequest` it holds).
fn refusal(e: &ApiError) -> (ErrorKind, &'static str, String, Option<InvalidRequest>) {
    let invalid = e.source().and_then(|s| s.downcast_ref::<InvalidRequest>());
    (e.kind(), e.endpoint(), e.to_string(), invalid.cloned())
}

fn urls(t: &ScriptedTransport) -> Vec<String> {
    t.requests().into_iter().map(|r| r.url).collect()
}

fn oks(n: usize) -> ScriptedTransport {
    ScriptedTransport::new((0..n).map(|_| Step::status(200).body("ok")))
}

/// Regression: `#[query(secret)]` on a `Serialize` struct (flattened, as the README
/// allows) marked only the parameter's own name (`creds`) secret, not the names that
/// go on the wire (`api_key`, `sig`). On a cross-origin redirect whose `Location`
/// carries the query (nginx's `return 301 https://new$request_uri`), both secrets
/// reached the other origin; a scalar `#[query("api_key", secret)]` is dropped there
/// (redirect_credentials.rs), and so now are a secret struct's fields.
///
/// DESIGN §2.3: "`#[query("api_key", secret)]` mark a value secret: redacted
/// everywhere and dropped on a cross-origin redirect".
#[tokio::test(start_paused = true)]
async fn regression_a_secret_struct_query_is_dropped_when_the_origin_changes() {
    let t = ScriptedTransport::new([
        Step::status(301).header(
            "location",
            "https://other.test/search?api_key=k-1&sig=s-1&page=2",
        ),
        Step::status(200).body("done"),
    ]);
    let api = scripted::<ReviewClient>(&t);
    let creds = Creds {
        api_key: "k-1".into(),
        sig: "s-1".into(),
    };
    assert_eq!(api.signed(&creds, 2).await.expect("followed"), "done");
    assert_eq!(
        urls(&t),
        [
            "https://example.test/search?api_key=k-1&sig=s-1&page=2",
            "https://other.test/search?page=2",
        ]
    );
}

/// Regression: a JSON answer whose content type has a quoted parameter holding
/// obs-text (`application/json; title="caf\xE9"`, legal per RFC 9110's
/// `quoted-string`) was refused as `UnexpectedContentType`: `json_content_type` gave
/// up when the whole header was not visible ASCII (`HeaderValue::to_str`), before it
/// looked at the media type. It now reads the media type alone.
///
/// README, module docs of `response`: "A JSON endpoint accepts `application/json`
/// ... in any case and with any parameters".
#[tokio::test(start_paused = true)]
async fn regression_json_with_an_obs_text_parameter_is_still_json() {
    let t = ScriptedTransport::new([Step::status(200)
        .header_bytes("content-type", b"application/json; title=\"caf\xe9\"")
        .body(r#"{"text":"x"}"#)]);
    let api = scripted::<ReviewClient>(&t);
    let got = api.doc().await.map_err(|e| (e.kind(), e.to_string()));
    assert_eq!(got, Ok(Doc { text: "x".into() }));
}

/// The base URL's path is kept once, with or without its trailing `/`, for a literal
/// template (the URL made at build time), the root template `/`, a template with a
/// parameter and one with a query.
#[tokio::test(start_paused = true)]
async fn the_base_path_is_kept_once_with_or_without_its_slash() {
    for base in ["https://h.test/api/v1", "https://h.test/api/v1/"] {
        let t = oks(4);
        let api: ReviewClient = scripted_builder(&t).base_url(base).build().unwrap();
        api.literal().await.unwrap();
        api.root().await.unwrap();
        api.item("a b").await.unwrap();
        api.q("z", None).await.unwrap();
        assert_eq!(
            urls(&t),
            [
                "https://h.test/api/v1/x",
                "https://h.test/api/v1/",
                "https://h.test/api/v1/items/a%20b",
                "https://h.test/api/v1/q?v=z",
            ],
            "base {base}"
        );
    }
    for base in ["https://h.test", "https://h.test/"] {
        let t = oks(2);
        let api: ReviewClient = scripted_builder(&t).base_url(base).build().unwrap();
        api.literal().await.unwrap();
        api.root().await.unwrap();
        assert_eq!(
            urls(&t),
            ["https://h.test/x", "https://h.test/"],
            "base {base}"
        );
    }
}

/// The exact query string of scalars (`+`, `&`, `=`, unicode, an empty string) and of
/// a flattened struct: a `None` field left out, booleans and floats as written, an
/// enum by its serde name, a sequence repeating its name (an empty element kept), and
/// an `Option` struct that is `None` sending no `?` at all.
#[tokio::test(start_paused = true)]
async fn query_values_are_sent_exactly() {
    let t = oks(4);
    let api = scripted::<ReviewClient>(&t);
    api.q("a+b&c=d", Some("")).await.unwrap();
    api.q("é", None).await.unwrap();
    let f = Filter {
        q: "x y".into(),
        page: None,
        exact: true,
        ratio: 1.0,
        sort: Sort::Asc,
        tags: vec!["a".into(), String::new(), "b".into()],
    };
    api.filter(Some(&f)).await.unwrap();
    api.filter(None).await.unwrap();
    assert_eq!(
        urls(&t),
        [
            "https://example.test/q?v=a%2Bb%26c%3Dd&w=",
            "https://example.test/q?v=%C3%A9",
            "https://example.test/f?q=x+y&exact=true&ratio=1.0&sort=asc&tags=a&tags=&tags=b",
            "https://example.test/f",
        ]
    );
}

/// The shapes of a query string, with a path value before it, as sent: a sequence
/// repeats its key in order (an empty one adds no pair), an empty value is `key=`,
/// and reserved characters in a key or a value (`&`, `=`, `+`, space, `?`, `#`, `/`,
/// `%`, non-ASCII) are form-encoded, so that each pair decodes back to what was given;
/// the path value's own reserved characters stay in its one segment.
#[tokio::test(start_paused = true)]
async fn query_shapes_and_the_target_are_sent_exactly() {
    let t = oks(3);
    let api = scripted::<ReviewClient>(&t);
    let odd = "v&=+ ?#/%é";
    api.shapes("a b/?#%", vec![1, 2, 1], "", odd).await.unwrap();
    api.shapes("x", vec![], "", "").await.unwrap();
    api.shapes("é", vec![0], "=", "&").await.unwrap();
    assert_eq!(
        urls(&t),
        [
            "https://example.test/shapes/a%20b%2F%3F%23%25?ids=1&ids=2&ids=1&e=&k%26%3D%2B+%3F%23%2F%25=v%26%3D%2B+%3F%23%2F%25%C3%A9",
            "https://example.test/shapes/x?e=&k%26%3D%2B+%3F%23%2F%25=",
            "https://example.test/shapes/%C3%A9?ids=0&e=%3D&k%26%3D%2B+%3F%23%2F%25=%26",
        ]
    );
    // Each pair decodes back to the key and value given.
    let first = url::Url::parse(&urls(&t)[0]).unwrap();
    let pairs: Vec<(String, String)> = first.query_pairs().into_owned().collect();
    let want = [
        ("ids", "1"),
        ("ids", "2"),
        ("ids", "1"),
        ("e", ""),
        ("k&=+ ?#/%", odd),
    ];
    assert_eq!(pairs, want.map(|(k, v)| (k.to_owned(), v.to_owned())));
}

/// A header value may hold what `http` allows (a tab inside, obs-text such as UTF-8
/// bytes) and is sent byte for byte; DEL and other controls are refused before
/// sending, as `http` refuses them.
#[tokio::test(start_paused = true)]
async fn header_values_follow_what_http_allows() {
    let t = oks(2);
    let api = scripted::<ReviewClient>(&t);
    api.header("a\tb").await.unwrap();
    api.header("café").await.unwrap();
    for bad in ["a\u{7f}b", "a\u{1}b"] {
        let e = api.header(bad).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidRequest, "{bad:?}");
    }
    let sent: Vec<Vec<u8>> = t
        .requests()
        .iter()
        .map(|r| r.headers["x-v"].as_bytes().to_vec())
        .collect();
    assert_eq!(sent, [b"a\tb".to_vec(), "café".as_bytes().to_vec()]);
}

/// A `Bytes` result is the body unchanged, however it was chunked (a byte order mark
/// and a cut UTF-8 sequence included); a `String` result reads past the mark.
#[tokio::test(start_paused = true)]
async fn bytes_are_unchanged_and_text_drops_only_the_mark() {
    let ms = tests::ms;
    let t = ScriptedTransport::new([
        Step::status(200).chunks([
            (ms(1), Bytes::from_static(b"\xef\xbb\xbfa")),
            (ms(1), Bytes::new()),
            (ms(1), Bytes::from_static(b"\xc3")),
        ]),
        Step::status(200).body(Bytes::from_static(b"\xef\xbb\xbfcaf\xc3\xa9")),
    ]);
    let api = scripted::<ReviewClient>(&t);
    assert_eq!(api.bytes().await.unwrap(), &b"\xef\xbb\xbfa\xc3"[..]);
    assert_eq!(api.text().await.unwrap(), "café");
}

/// Regression: `Handle::call` found the endpoint by the spec's index alone, so a
/// request built from another API's spec ran as this client's endpoint of that index
/// (`Wide::a` was sent as `Narrow::remove`, `DELETE /users/`), or, past this client's
/// endpoints (`Wide::b`), panicked with an index out of range. It is refused as
/// `InvalidRequest` naming the endpoint, before anything is sent.
#[tokio::test(start_paused = true)]
async fn regression_a_request_of_another_apis_endpoint_is_refused() {
    let t = oks(1);
    let narrow = handle::<NarrowClient>(&t);
    for spec in <WideClient as GeneratedClient>::API.endpoints {
        let h = narrow.clone();
        let request = RequestBuilder::new(spec);
        let got =
            tokio::spawn(async move { h.call::<Text>(request).await.map_err(|e| refusal(&e)) })
                .await
                .map_err(|e| e.is_panic());
        assert_eq!(
            got,
            Ok(Err((
                ErrorKind::InvalidRequest,
                spec.name,
                format!(
                    "invalid request in `{}`: the request was built from another API's spec: `{}` is not an endpoint of `Narrow`",
                    spec.name, spec.name
                ),
                Some(InvalidRequest {
                    name: spec.name.into(),
                    reason: "not an endpoint of this client's API",
                }),
            ))),
            "{}",
            spec.name
        );
    }
    assert_eq!(t.attempts(), 0, "nothing was sent");
    // The client's own spec still runs.
    let mut own = RequestBuilder::new(<NarrowClient as GeneratedClient>::API.endpoints[0]);
    own.path("id", &7);
    narrow.call::<Unit>(own).await.expect("sent");
    assert_eq!(urls(&t), ["https://example.test/users/7"]);
}

/// Regression: a request built by hand without a value for a path parameter was
/// sent with that segment empty (`DELETE /users/`). It is refused as
/// `InvalidRequest` naming the placeholder (the first without a value, a raw
/// identifier by its bare name), before any attempt.
#[tokio::test(start_paused = true)]
async fn regression_a_missing_path_value_is_refused_naming_the_placeholder() {
    let t = oks(0);
    let narrow = handle::<NarrowClient>(&t);
    let remove = <NarrowClient as GeneratedClient>::API.endpoints[0];
    let e = narrow
        .call::<Unit>(RequestBuilder::new(remove))
        .await
        .expect_err("refused");
    assert_eq!(
        refusal(&e),
        (
            ErrorKind::InvalidRequest,
            "remove",
            "invalid request in `remove`: invalid `id`: the path parameter has no value".into(),
            Some(InvalidRequest {
                name: "id".into(),
                reason: "the path parameter has no value",
            }),
        )
    );
    let wide = handle::<WideClient>(&t);
    let b = <WideClient as GeneratedClient>::API.endpoints[1];
    let mut request = RequestBuilder::new(b);
    request.path("x", &1);
    let e = wide.call::<Text>(request).await.expect_err("refused");
    let (kind, endpoint, _, invalid) = refusal(&e);
    assert_eq!(
        (kind, endpoint, invalid.map(|i| i.name)),
        (ErrorKind::InvalidRequest, "b", Some("type".into()))
    );
    assert_eq!(t.attempts(), 0, "nothing was sent");
}

/// Regression: a request built by hand with more path values than its template has
/// placeholders was sent with the extra values dropped (`DELETE /users/7` for
/// `7, 8`), so a caller's mistake went out as another request. It is refused as
/// `InvalidRequest`, naming the first value past the template's (`#1`), before any
/// attempt.
#[tokio::test(start_paused = true)]
async fn regression_a_path_value_past_the_templates_is_refused() {
    let t = oks(0);
    let narrow = handle::<NarrowClient>(&t);
    let remove = <NarrowClient as GeneratedClient>::API.endpoints[0];
    let mut request = RequestBuilder::new(remove);
    request.path("id", &7).path("extra", &8);
    let e = narrow.call::<Unit>(request).await.expect_err("refused");
    assert_eq!(
        refusal(&e),
        (
            ErrorKind::InvalidRequest,
            "remove",
            "invalid request in `remove`: invalid `#1`: the template has no placeholder for this path value".into(),
            Some(InvalidRequest {
                name: "#1".into(),
                reason: "the template has no placeholder for this path value",
            }),
        )
    );
    assert_eq!(t.attempts(), 0, "nothing was sent");
}
