//! Property tests of what a path or query value can do to the URL sent (DESIGN §2.3).
//!
//! Every call goes through the scripted transport; the recorded URL is parsed with the
//! `url` crate and checked against the contract:
//! 1. A path value is refused (`ErrorKind::InvalidRequest`, naming the parameter,
//!    nothing sent) exactly when it is empty, `.` or `..`, or holds CR, LF or TAB.
//!    Any other value fills its `{name}` as part of exactly one segment: the sent
//!    path has the base URL's segments, then the template's, and each segment
//!    percent-decodes once back to the template's text with the value in it.
//! 2. Query values decode (`application/x-www-form-urlencoded`) back to exactly the
//!    pairs given, in order, with nothing else; no pair at all sends no `?`.
//! 3. Whatever the values, the scheme, host and port are the base URL's, with no user
//!    info and no fragment, and the URL is already in the form the `url` crate would
//!    give it (a transport that parses it again sends the same URL).
//! 4. A refusal's error names the parameter, never its value.

use std::future::Future;

use percent_encoding::percent_decode_str;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use resilient_api::request::InvalidRequest;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, resilient_api};
use url::Url;

#[resilient_api(timeout(attempt = "5s"), retry(max = 0))]
trait Enc {
    #[get("/items/{id}")]
    async fn item(&self, id: &str) -> Result<String, ApiError>;

    #[get("/files/{name}.json")]
    async fn file(&self, name: &str) -> Result<String, ApiError>;

    #[get("/v{version}/x")]
    async fn versioned(&self, version: &str) -> Result<String, ApiError>;

    /// Declared in the other order than the template's.
    #[get("/a/{second}/b/{first}/c")]
    async fn two(&self, first: &str, second: &str) -> Result<String, ApiError>;

    /// Two parameters in one segment.
    #[get("/pair/{left}-{right}")]
    async fn pair(&self, left: &str, right: &str) -> Result<String, ApiError>;

    #[get("/search")]
    async fn search(
        &self,
        #[query] q: &str,
        #[query("na me")] x: &str,
        #[query] opt: Option<&str>,
        #[query] tags: Vec<String>,
    ) -> Result<String, ApiError>;

    /// A path parameter and a query.
    #[get("/items/{id}/search")]
    async fn item_search(&self, id: &str, #[query] q: &str) -> Result<String, ApiError>;

    /// A query that may hold no pair at all.
    #[get("/list")]
    async fn list(
        &self,
        #[query] opt: Option<&str>,
        #[query] tags: Vec<String>,
    ) -> Result<String, ApiError>;
}

/// Base URLs with and without a path, with and without a trailing `/`, one with a port
/// and an escaped character in its path.
const BASES: &[&str] = &[
    "https://api.test",
    "https://api.test/",
    "https://api.test/v1",
    "https://api.test/v1/",
    "http://api.test:8080/a/b%20c/",
];

fn config() -> ProptestConfig {
    tests::proptest_config!(256, "encoding_roundtrip")
}

/// Pieces that mean something to a URL parser, or to a server decoding a path.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "/", "?", "#", "%", ".", "..", " ", "%2e", "%2E", "%2F", "%2f", "%25", "%00",
            "%", "\\", "+", "&", "=", ";", ":", "@", "~", "!", "'", "*", ",", "$", "a",
            "Z", "0", "é", "e\u{301}", "中", "\u{1F600}", "．", "\u{200B}", "\u{FEFF}",
            "\0", "\u{7f}", "\u{1b}", "\u{b}", "\u{c}", "\r", "\n", "\t", "\u{85}",
            "\u{a0}", "\u{2028}", "[", "]", "{", "}", "|", "^", "`", "<", ">", "\"",
            "x=1", "http://evil.test", "//evil.test", "@evil.test", ":8080", "../",
        ])
        .prop_map(str::to_owned),
        1 => any::<char>().prop_map(String::from),
    ]
}

/// Any string, weighted towards the ones a URL builder gets wrong.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::collection::vec(piece(), 1..8).prop_map(|v| v.concat()),
        3 => any::<String>(),
        2 => prop::sample::select(vec![
            "", ".", "..", "...", "%2e", "%2e%2e", ".%2e", "%2E.", "..%2f", "../..", "/",
            "//evil.test/x", "\\..\\", ". ", " .", "a\tb", "\r\n", "\n",
        ])
        .prop_map(str::to_owned),
        1 => prop::collection::vec(piece(), 300..600).prop_map(|v| v.concat()),
        1 => (1usize..5000).prop_map(|n| "é/%".repeat(n)),
    ]
}

/// The values the contract refuses.
fn refused(value: &str) -> bool {
    value.is_empty() || value == "." || value == ".." || value.contains(['\r', '\n', '\t'])
}

/// Make one call on a fresh client on `base` whose transport answers `200 ok`; the
/// call's result and the URLs sent.
fn call<F, Fut>(base: &str, f: F) -> (Result<String, ApiError>, Vec<String>)
where
    F: FnOnce(EncClient) -> Fut,
    Fut: Future<Output = Result<String, ApiError>>,
{
    let rt = tests::case_runtime(false);
    let t = ScriptedTransport::new([Step::status(200).body("ok")]);
    let api: EncClient = EncClient::builder()
        .base_url(base)
        .transport(t.clone())
        .build()
        .expect("the client builds");
    let result = rt.block_on(f(api));
    let urls = t.requests().into_iter().map(|r| r.url).collect();
    (result, urls)
}

/// The base URL's path segments, decoded, without the trailing empty one.
fn base_segments(base: &Url) -> Vec<String> {
    let mut segs: Vec<String> = base
        .path_segments()
        .expect("an http base")
        .map(|s| percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect();
    while segs.last().is_some_and(String::is_empty) {
        segs.pop();
    }
    segs
}

/// Check the one URL sent: origin, path segments (decoded once) and query pairs.
/// `query: None` means no query at all (no `?`).
fn check_sent(
    base: &str,
    sent: &str,
    path: &[String],
    query: Option<&[(String, String)]>,
) -> Result<(), TestCaseError> {
    let base = Url::parse(base).expect("a valid base");
    let url = Url::parse(sent).map_err(|e| TestCaseError::fail(format!("{sent:?}: {e}")))?;
    // Already normalized: what a transport sends after parsing it again.
    prop_assert_eq!(url.as_str(), sent);
    // (3) the origin is the base URL's, whatever the values.
    prop_assert_eq!(url.scheme(), base.scheme());
    prop_assert_eq!(url.host_str(), base.host_str());
    prop_assert_eq!(url.port(), base.port());
    prop_assert_eq!(url.username(), "");
    prop_assert_eq!(url.password(), None);
    prop_assert_eq!(url.fragment(), None);
    // (1) the base path, then the template's segments, each decoded once.
    let mut expected = base_segments(&base);
    expected.extend(path.iter().cloned());
    let mut got = Vec::new();
    for raw in url.path_segments().expect("an http URL") {
        let decoded = percent_decode_str(raw)
            .decode_utf8()
            .map_err(|e| TestCaseError::fail(format!("segment {raw:?} of {sent:?}: {e}")))?;
        got.push(decoded.into_owned());
    }
    prop_assert_eq!(&got, &expected, "path segments of {:?}", sent);
    // (2) exactly the pairs given, in order.
    match query {
        None => prop_assert_eq!(url.query(), None, "query of {:?}", sent),
        Some(pairs) => {
            let got: Vec<(String, String)> = url.query_pairs().into_owned().collect();
            prop_assert_eq!(got.as_slice(), pairs, "query of {:?}", sent);
        }
    }
    Ok(())
}

/// The call either was refused for `name` with nothing sent (when `bad`), or sent
/// exactly one request, checked by [`check_sent`].
fn check_call(
    base: &str,
    (result, urls): (Result<String, ApiError>, Vec<String>),
    bad: Option<&str>,
    path: &[String],
    query: Option<&[(String, String)]>,
) -> Result<(), TestCaseError> {
    match bad {
        Some(name) => {
            let e = result.err().ok_or_else(|| {
                TestCaseError::fail(format!("a refused value was sent: {urls:?}"))
            })?;
            prop_assert_eq!(e.kind(), ErrorKind::InvalidRequest, "{}", e);
            let invalid = std::error::Error::source(&e)
                .and_then(|s| s.downcast_ref::<InvalidRequest>())
                .map(|i| i.name.clone());
            prop_assert_eq!(invalid.as_deref(), Some(name));
            prop_assert!(urls.is_empty(), "sent after a refusal: {:?}", urls);
        }
        None => {
            prop_assert_eq!(result.as_deref().map_err(ToString::to_string), Ok("ok"));
            prop_assert_eq!(urls.len(), 1);
            check_sent(base, &urls[0], path, query)?;
        }
    }
    Ok(())
}

fn segs(s: &[&str]) -> Vec<String> {
    s.iter().map(|&s| s.to_owned()).collect()
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|&(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn base() -> impl Strategy<Value = &'static str> {
    prop::sample::select(BASES)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_path_value_alone_in_its_segment(base in base(), v in value()) {
        let bad = refused(&v).then_some("id");
        let path = segs(&["items", &v]);
        let sent = call(base, |api| async move { api.item(&v).await });
        check_call(base, sent, bad, &path, None)?;
    }

    #[test]
    fn a_path_value_before_a_suffix(base in base(), v in value()) {
        let bad = refused(&v).then_some("name");
        let path = segs(&["files", &format!("{v}.json")]);
        let sent = call(base, |api| async move { api.file(&v).await });
        check_call(base, sent, bad, &path, None)?;
    }

    #[test]
    fn a_path_value_after_a_prefix(base in base(), v in value()) {
        let bad = refused(&v).then_some("version");
        let path = segs(&[&format!("v{v}"), "x"]);
        let sent = call(base, |api| async move { api.versioned(&v).await });
        check_call(base, sent, bad, &path, None)?;
    }

    #[test]
    fn two_path_values_in_template_order(base in base(), first in value(), second in value()) {
        // The first mistake in template order is the one reported.
        let bad = if refused(&second) {
            Some("second")
        } else if refused(&first) {
            Some("first")
        } else {
            None
        };
        let path = segs(&["a", &second, "b", &first, "c"]);
        let sent = call(base, |api| async move { api.two(&first, &second).await });
        check_call(base, sent, bad, &path, None)?;
    }

    #[test]
    fn two_path_values_in_one_segment(base in base(), left in value(), right in value()) {
        let bad = if refused(&left) {
            Some("left")
        } else if refused(&right) {
            Some("right")
        } else {
            None
        };
        let path = segs(&["pair", &format!("{left}-{right}")]);
        let sent = call(base, |api| async move { api.pair(&left, &right).await });
        check_call(base, sent, bad, &path, None)?;
    }

    #[test]
    fn query_values_decode_to_the_pairs_given(
        base in base(),
        q in value(),
        x in value(),
        opt in proptest::option::of(value()),
        tags in prop::collection::vec(value(), 0..4),
    ) {
        let mut expected = pairs(&[("q", &q), ("na me", &x)]);
        expected.extend(opt.iter().map(|o| ("opt".to_owned(), o.clone())));
        expected.extend(tags.iter().map(|t| ("tags".to_owned(), t.clone())));
        let path = segs(&["search"]);
        let sent = call(base, |api| async move {
            api.search(&q, &x, opt.as_deref(), tags).await
        });
        check_call(base, sent, None, &path, Some(&expected))?;
    }

    #[test]
    fn a_query_beside_a_path_value(base in base(), id in value(), q in value()) {
        let expected = pairs(&[("q", &q)]);
        let bad = refused(&id).then_some("id");
        let path = segs(&["items", &id, "search"]);
        let sent = call(base, |api| async move { api.item_search(&id, &q).await });
        check_call(base, sent, bad, &path, Some(&expected))?;
    }

    #[test]
    fn a_query_with_no_pair_sends_no_question_mark(
        base in base(),
        opt in proptest::option::of(value()),
        tags in prop::collection::vec(value(), 0..3),
    ) {
        let mut expected: Vec<(String, String)> =
            opt.iter().map(|o| ("opt".to_owned(), o.clone())).collect();
        expected.extend(tags.iter().map(|t| ("tags".to_owned(), t.clone())));
        let query = (!expected.is_empty()).then_some(expected.as_slice());
        let path = segs(&["list"]);
        let sent = call(base, |api| async move { api.list(opt.as_deref(), tags).await });
        check_call(base, sent, None, &path, query)?;
    }

    /// "Errors name the parameter, never its value" (`request` module docs).
    #[test]
    fn a_refusal_names_the_parameter_not_the_value(
        base in base(),
        v in value(),
        bad in prop::sample::select(vec!["\r", "\n", "\t"]),
    ) {
        let v = format!("CANARY{v}{bad}");
        let (result, urls) = call(base, |api| async move { api.item(&v).await });
        prop_assert!(urls.is_empty());
        let e = result.err().ok_or_else(|| TestCaseError::fail("a refused value was sent"))?;
        let shown = format!("{e} {e:?}");
        prop_assert!(!shown.contains("CANARY"), "{}", shown);
        prop_assert!(shown.contains("`id`"), "{}", shown);
    }
}
