//! Property tests of what a redirect's `Location` can make the client send
//! (DESIGN §3.9 redirects, §2.3 secret query parameters).
//!
//! The client's base is `https://api.test/v1/` and every request carries credentials:
//! a bearer token, a client-wide secret header, a `Cookie` and a
//! `Proxy-Authorization` set on the builder, a `#[header("X-Api-Key", secret)]`
//! argument and a `#[query("api_key", secret)]` argument; plus one ordinary header
//! that is no credential. The scripted transport answers with a chain of 1 to 5
//! redirects whose `Location`s are drawn from the forms URL parsers disagree on
//! (relative, `//host`, `\\host`, other schemes, user info, IP forms, case, trailing
//! dots, written-out default ports, percent-encoded and non-ASCII hosts, tabs,
//! whitespace, long values), then `200 done`.
//!
//! Origin is the `url` crate's tuple origin for `http`/`https`, which is what the
//! pipeline compares: (scheme, host, port or the scheme's default) after WHATWG
//! parsing. So `https://api.test:443` and `https://API.test` are the origin of
//! `https://api.test`, user info is not part of it, `https://api.test.` (trailing
//! dot) is another host, and so is any IP address here.
//!
//! Checked on what was recorded, each hop against the one before:
//! 1. Once any hop has changed the origin, that request and every later one has no
//!    `Authorization`, `Cookie`, `Proxy-Authorization`, client secret or declared
//!    secret header, no declared secret query parameter, and no secret value
//!    anywhere in its URL or headers.
//! 2. Nothing is ever sent to an `http` URL (an https → http redirect is refused
//!    with `ErrorKind::Redirect`).
//! 3. Nothing is sent to a non-http(s) URL (refused with `ErrorKind::Redirect`).
//! 4. The call ends, never panics, sends at most `max_redirects + 1` requests,
//!    leaves nothing in flight and no body open; a `Location` that is not a header
//!    value the client can read as a URL, one scheme refused, or one hop too many is
//!    `ErrorKind::Redirect` and nothing further is sent.
//! 5. While every hop stays on the origin, every credential is still sent, with its
//!    value, and the ordinary header is always sent.
//! 6. No hop's URL has user info, whatever user info its `Location` held.
//!
//! The explicit tests at the end pin the tricky literal forms to the URL sent.

use std::future::Future;
use std::time::Duration;

use http::HeaderValue;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use resilient_api::testing::{RecordedRequest, ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, resilient_api};
use url::Url;

#[resilient_api(
    base_url = "https://api.test/v1/",
    timeout(attempt = "5s"),
    retry(max = 0)
)]
trait Loc {
    #[get("/items")]
    async fn items(
        &self,
        #[query("api_key", secret)] key: &str,
        #[query] page: u32,
        #[header("X-Api-Key", secret)] header_key: &str,
    ) -> Result<String, ApiError>;
}

/// Every secret value the client sends, by where it goes.
const BEARER: &str = "tok-bearer-1";
const CLIENT_SECRET: &str = "tok-client-2";
const COOKIE: &str = "session=tok-cookie-3";
const PROXY: &str = "Basic tok-proxy-4";
const HEADER_KEY: &str = "tok-header-5";
const QUERY_KEY: &str = "tok-query-6";
const SECRETS: &[&str] = &[
    "tok-bearer-1",
    "tok-client-2",
    "tok-cookie-3",
    "tok-proxy-4",
    "tok-header-5",
    "tok-query-6",
];
/// Header names that must not cross an origin.
const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization",
    "cookie",
    "proxy-authorization",
    "x-client-secret",
    "x-api-key",
];

const FIRST_URL: &str = "https://api.test/v1/items?api_key=tok-query-6&page=1";

fn config() -> ProptestConfig {
    tests::proptest_config!(512, "redirect_location")
}

fn client(t: &ScriptedTransport, max_redirects: u32) -> LocClient {
    LocClient::builder()
        .transport(t.clone())
        .bearer_auth(BEARER)
        .secret_header("x-client-secret", CLIENT_SECRET)
        .header("cookie", COOKIE)
        .header("proxy-authorization", PROXY)
        .header("x-trace", "plain-7")
        .max_redirects(max_redirects)
        .build()
        .expect("the client builds")
}

/// Run `f` on a current-thread runtime with the paused clock; a call that never ends
/// is caught by the outer timeout, which the paused clock reaches at once.
fn run<T, Fut: Future<Output = T>>(f: Fut) -> T {
    let rt = tests::case_runtime(true);
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(3600), f)
            .await
            .expect("the call ends")
    })
}

/// The origin of an http(s) URL: scheme, host as parsed, port or the default.
fn origin(url: &Url) -> (String, Option<String>, Option<u16>) {
    (
        url.scheme().to_owned(),
        url.host_str().map(str::to_owned),
        url.port_or_known_default(),
    )
}

fn header<'a>(r: &'a RecordedRequest, name: &str) -> Option<&'a [u8]> {
    r.headers.get(name).map(HeaderValue::as_bytes)
}

/// (1) nothing secret in a request that went to, or came after, another origin.
fn check_stripped(r: &RecordedRequest, url: &Url) -> Result<(), TestCaseError> {
    for name in CREDENTIAL_HEADERS {
        prop_assert!(
            header(r, name).is_none(),
            "{} sent to {} after the origin changed",
            name,
            r.url
        );
    }
    prop_assert!(
        !url.query_pairs().any(|(k, _)| k == "api_key"),
        "the secret query parameter sent to {}",
        r.url
    );
    for secret in SECRETS {
        prop_assert!(!r.url.contains(secret), "{} in {}", secret, r.url);
        for (name, value) in &r.headers {
            let value = String::from_utf8_lossy(value.as_bytes());
            prop_assert!(!value.contains(secret), "{} in header {}", secret, name);
        }
    }
    Ok(())
}

/// (5) every credential, with its value, on a request that never left the origin.
fn check_kept(r: &RecordedRequest) -> Result<(), TestCaseError> {
    let expected: [(&str, String); 5] = [
        ("authorization", format!("Bearer {BEARER}")),
        ("cookie", COOKIE.to_owned()),
        ("proxy-authorization", PROXY.to_owned()),
        ("x-client-secret", CLIENT_SECRET.to_owned()),
        ("x-api-key", HEADER_KEY.to_owned()),
    ];
    for (name, value) in &expected {
        prop_assert_eq!(
            header(r, name),
            Some(value.as_bytes()),
            "{} on the same-origin {}",
            name,
            r.url
        );
    }
    Ok(())
}

/// Hosts, with their ports and user info, that parsers normalize or read differently.
fn authority() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "api.test",
        "API.TEST",
        "Api.Test",
        "api.test.",
        "api.test..",
        "api.test:443",
        "api.test:0443",
        "api.test:80",
        "api.test:8443",
        "api.test:",
        "api.test:65536",
        "user:pw@api.test",
        "user@api.test",
        ":@api.test",
        "api.test@evil.test",
        "api.test:443@evil.test",
        "evil.test#@api.test",
        "evil.test\\@api.test",
        "evil.test?@api.test",
        "evil.test",
        "api.test.evil.test",
        "evil.test/api.test",
        "ev\til.test",
        "api\t.test",
        "%61pi.test",
        "api%2etest",
        "%65vil.test",
        "xn--bcher-kva.test",
        "bücher.test",
        "аpi.test",
        "api。test",
        "ＡＰＩ.test",
        "127.0.0.1",
        "0x7f.0.0.1",
        "2130706433",
        "0177.0.0.1",
        "127.1",
        "[::1]",
        "[0:0:0:0:0:0:0:1]",
        "[::ffff:127.0.0.1]",
        "[::1]:443",
        "[::1",
        "",
        " ",
    ])
    .prop_map(str::to_owned)
}

fn scheme_prefix() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "https://",
        "HTTPS://",
        "http://",
        "HtTp://",
        "//",
        "\\\\",
        "/\\",
        "\\/",
        "https:\\\\",
        "https:",
        "http:",
        "https:/",
        "https:///",
        " https://",
        "\thttps://",
        "ftp://",
        "file://",
        "ws://",
        "wss://",
        "",
    ])
    .prop_map(str::to_owned)
}

fn path_part() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "",
        "/",
        "/x",
        "/v1/items",
        "/../../x",
        "/%2e%2e/x",
        "/a b",
        "/é",
        "?api_key=srv-key&page=2",
        "/x?api_key=srv-key&page=2",
        "/x?API_KEY=a&api%5Fkey=b&api_key&page=2",
        "/x?page=2#api_key=f",
        "#frag",
        "/x\t/y",
    ])
    .prop_map(str::to_owned)
}

/// Whole `Location` values that need no composing.
fn literal() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "",
        " ",
        "\t",
        "/",
        ".",
        "..",
        "../../../../x",
        "x",
        "?",
        "#",
        "?api_key=srv-key",
        "items?page=3",
        "/items",
        "//evil.test",
        "///evil.test",
        "\\\\evil.test",
        "/\\evil.test",
        "\\/evil.test",
        "/\t/evil.test",
        "https://ev\til.test/",
        "https:evil.test",
        "https:/evil.test",
        "http:evil.test",
        "http://api.test/",
        "data:text/html,<script>alert(1)</script>",
        "javascript:alert(1)",
        "JavaScript:alert(1)",
        "file:///etc/passwd",
        "ftp://api.test/",
        "mailto:x@api.test",
        "about:blank",
        "blob:https://api.test/x",
        "https://user:pw@api.test/",
        "https://api.test:443/",
        "https://api.test./",
        "https://API.TEST/",
        "https://[::1]/",
        "https://%65vil.test/",
        "https://xn--bcher-kva.test/",
        "https://bücher.test/",
        "/café",
        "https://api.test:99999/",
        "http://[::1",
        "https://",
        "https:",
        "https://:443/",
    ])
    .prop_map(str::to_owned)
}

/// Any `Location` string, weighted towards the ones a redirect follower gets wrong.
fn location() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (scheme_prefix(), authority(), path_part()).prop_map(|(s, a, p)| s + &a + &p),
        4 => literal(),
        2 => path_part(),
        2 => any::<String>(),
        1 => "[ -~]{0,40}",
        1 => (1usize..3000).prop_map(|n| format!("/{}", "a/".repeat(n))),
        1 => (1usize..300).prop_map(|n| format!("https://{}.test/", "a".repeat(n))),
    ]
}

fn redirect_status() -> impl Strategy<Value = u16> {
    prop::sample::select(vec![301u16, 302, 303, 307, 308])
}

/// A usable `Location` as the client reads it: a header value read as UTF-8, joined
/// onto the URL of the request it answers, that a request can carry (`url` reads
/// some targets that `http::Uri` refuses, such as a host with a `"`).
fn target(current: &Url, location: &str) -> Option<Url> {
    HeaderValue::from_str(location).ok()?;
    let next = current.join(location).ok()?;
    next.as_str().parse::<http::Uri>().ok()?;
    Some(next)
}

/// Follow one chain of redirects; returns `Ok` or the failed case.
fn check_chain(chain: &[(u16, String)], max_redirects: u32) -> Result<(), TestCaseError> {
    // A value that cannot be a header at all cannot be scripted (or sent by a
    // server): nothing to check.
    if chain
        .iter()
        .any(|(_, l)| HeaderValue::from_bytes(l.as_bytes()).is_err())
    {
        return Ok(());
    }
    let mut steps: Vec<Step> = chain
        .iter()
        .map(|(s, l)| Step::status(*s).header("location", l))
        .collect();
    steps.push(Step::status(200).body("done"));
    let t = ScriptedTransport::new(steps);
    let api = client(&t, max_redirects);
    let result = run(api.items(QUERY_KEY, 1, HEADER_KEY));
    let requests = t.requests();
    tests::assert_nothing_leaked(&t);

    // (4) bounded.
    prop_assert!(!requests.is_empty());
    prop_assert!(requests.len() <= chain.len() + 1);
    prop_assert!(requests.len() as u64 <= u64::from(max_redirects) + 1);
    prop_assert_eq!(requests[0].url.as_str(), FIRST_URL);
    check_kept(&requests[0])?;

    // The model: which hop ends the chain, and how.
    let mut current = Url::parse(FIRST_URL).expect("a valid URL");
    let mut crossed = false;
    for (i, (_, loc)) in chain.iter().enumerate() {
        let hop = i + 1;
        let refused = match target(&current, loc) {
            None => Some("no usable Location"),
            Some(_) if hop as u64 > u64::from(max_redirects) => Some("one hop too many"),
            Some(next) if !matches!(next.scheme(), "http" | "https") => Some("not http(s)"),
            Some(next) if current.scheme() == "https" && next.scheme() != "https" => {
                Some("a downgrade")
            }
            Some(_) => None,
        };
        if let Some(why) = refused {
            // (2), (3), (4): refused, nothing further sent.
            let kind = result.as_ref().err().map(ApiError::kind);
            prop_assert_eq!(kind, Some(ErrorKind::Redirect), "{:?}: {}", loc, why);
            prop_assert_eq!(requests.len(), hop, "{:?}: {} yet sent", loc, why);
            return Ok(());
        }
        let next = target(&current, loc).expect("checked above");
        prop_assert!(
            requests.len() > hop,
            "{:?} ({}) was not followed",
            loc,
            next
        );
        let sent = &requests[hop];
        let sent_url = Url::parse(&sent.url)
            .map_err(|e| TestCaseError::fail(format!("{:?}: {e}", sent.url)))?;
        // (2), (3): only https, whatever the Location.
        prop_assert_eq!(sent_url.scheme(), "https", "{:?} sent to {}", loc, sent.url);
        // The target is the Location's, query aside (secret pairs may go).
        prop_assert_eq!(origin(&sent_url), origin(&next), "{:?}", loc);
        prop_assert_eq!(sent_url.path(), next.path(), "{:?}", loc);
        // No user info is ever sent, whatever the Location held.
        prop_assert_eq!(
            (sent_url.username(), sent_url.password()),
            ("", None),
            "{:?} sent to {}",
            loc,
            sent.url
        );
        // Crossed by what was actually sent, hop against hop.
        let before = Url::parse(&requests[hop - 1].url).expect("checked");
        crossed |= origin(&before) != origin(&sent_url);
        let mut expected_pairs: Vec<(String, String)> = next.query_pairs().into_owned().collect();
        if crossed {
            expected_pairs.retain(|(k, _)| k != "api_key");
            check_stripped(sent, &sent_url)?;
        } else {
            check_kept(sent)?;
        }
        let sent_pairs: Vec<(String, String)> = sent_url.query_pairs().into_owned().collect();
        prop_assert_eq!(sent_pairs, expected_pairs, "query of {:?}", loc);
        prop_assert_eq!(header(sent, "x-trace"), Some(&b"plain-7"[..]));
        current = next;
    }
    prop_assert_eq!(result.as_deref().ok(), Some("done"));
    prop_assert_eq!(requests.len(), chain.len() + 1);
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    /// One redirect: the common case, with the default bound of 10.
    #[test]
    fn one_redirect(status in redirect_status(), loc in location()) {
        check_chain(&[(status, loc)], 10)?;
    }

    /// Chains, some longer than the bound.
    #[test]
    fn redirect_chains(
        chain in prop::collection::vec((redirect_status(), location()), 1..=5),
        max_redirects in 1u32..=4,
    ) {
        check_chain(&chain, max_redirects)?;
    }
}

// The literal forms, each pinned to the URL sent (or refused).

/// One redirect to `location`, then `200 done`: the call's result and the requests.
async fn follow_one(location: &str) -> (Result<String, ApiError>, Vec<RecordedRequest>) {
    let t = ScriptedTransport::new([
        Step::status(302).header("location", location),
        Step::status(200).body("done"),
    ]);
    let api = client(&t, 10);
    let result = api.items(QUERY_KEY, 1, HEADER_KEY).await;
    tests::assert_nothing_leaked(&t);
    (result, t.requests())
}

fn has_credentials(r: &RecordedRequest) -> bool {
    CREDENTIAL_HEADERS
        .iter()
        .all(|h| r.headers.contains_key(*h))
}

fn no_credentials(r: &RecordedRequest) -> bool {
    CREDENTIAL_HEADERS
        .iter()
        .all(|h| !r.headers.contains_key(*h))
}

/// A `Location` the client follows: the URL it went to, and whether it kept the
/// credentials (all of them) or dropped them (all of them).
async fn followed(location: &str) -> (String, bool) {
    let (result, requests) = follow_one(location).await;
    assert_eq!(result.expect("followed"), "done", "{location:?}");
    assert_eq!(requests.len(), 2, "{location:?}");
    let second = &requests[1];
    assert!(
        has_credentials(second) || no_credentials(second),
        "{location:?}: some credentials kept, some dropped"
    );
    (second.url.clone(), has_credentials(second))
}

async fn refused(location: &str) {
    let (result, requests) = follow_one(location).await;
    let kind = result.map_err(|e| e.kind());
    assert_eq!(kind, Err(ErrorKind::Redirect), "{location:?}");
    assert_eq!(requests.len(), 1, "{location:?} was followed");
}

/// WHATWG parsers read `\` as `/` in http(s) URLs: both forms leave the host.
#[tokio::test(start_paused = true)]
async fn a_backslash_is_a_slash_and_leaves_the_origin() {
    for location in ["\\\\evil.test/x", "/\\evil.test/x", "\\/evil.test/x"] {
        let (url, kept) = followed(location).await;
        assert_eq!(url, "https://evil.test/x", "{location:?}");
        assert!(!kept, "{location:?}");
    }
}

/// The `url` crate strips tabs and newlines inside a URL: `ev<TAB>il.test` is
/// `evil.test`, judged as such.
#[tokio::test(start_paused = true)]
async fn a_tab_inside_the_host_is_stripped_before_the_origin_is_judged() {
    let (url, kept) = followed("https://ev\til.test/x").await;
    assert_eq!(url, "https://evil.test/x");
    assert!(!kept);
    let (url, kept) = followed("https://api\t.test/x").await;
    assert_eq!(url, "https://api.test/x");
    assert!(kept);
}

/// User info is not part of the origin; the host after the `@` is. The user info
/// itself is dropped, never sent.
#[tokio::test(start_paused = true)]
async fn user_info_is_not_the_host() {
    let (url, kept) = followed("https://user:pw@api.test/x").await;
    assert_eq!(url, "https://api.test/x");
    assert!(kept, "the same origin");
    for (location, expected) in [
        ("https://api.test@evil.test/x", "https://evil.test/x"),
        ("https://api.test:443@evil.test/x", "https://evil.test/x"),
        ("//api.test@evil.test/x", "https://evil.test/x"),
    ] {
        let (url, kept) = followed(location).await;
        assert_eq!(url, expected, "{location:?}");
        assert!(!kept, "{location:?}");
    }
}

/// A default port written out, and an uppercase host, are the same origin.
#[tokio::test(start_paused = true)]
async fn a_written_out_default_port_and_an_uppercase_host_are_the_same_origin() {
    for location in [
        "https://api.test:443/x",
        "https://api.test:0443/x",
        "https://API.TEST/x",
        "HTTPS://Api.Test:443/x",
        "https://%61pi.test/x",
    ] {
        let (url, kept) = followed(location).await;
        assert_eq!(url, "https://api.test/x", "{location:?}");
        assert!(kept, "{location:?}");
    }
    // Another port is another origin.
    let (url, kept) = followed("https://api.test:8443/x").await;
    assert_eq!(url, "https://api.test:8443/x");
    assert!(!kept);
}

/// A trailing dot names the same host in DNS but not to the URL parser: another
/// origin, so the credentials stay home (the safe side).
#[tokio::test(start_paused = true)]
async fn a_trailing_dot_is_another_origin() {
    let (url, kept) = followed("https://api.test./x").await;
    assert_eq!(url, "https://api.test./x");
    assert!(!kept);
}

/// IP forms and IDN hosts are other hosts, normalized before judging.
#[tokio::test(start_paused = true)]
async fn ip_and_idn_hosts_are_other_origins() {
    for (location, expected) in [
        ("https://[0:0::1]/x", "https://[::1]/x"),
        ("https://0x7f.1/x", "https://127.0.0.1/x"),
        (
            "https://xn--bcher-kva.test/x",
            "https://xn--bcher-kva.test/x",
        ),
    ] {
        let (url, kept) = followed(location).await;
        assert_eq!(url, expected, "{location:?}");
        assert!(!kept, "{location:?}");
    }
}

/// A `Location` in raw UTF-8 (an IDN host, an `é` in the path) is followed, as
/// browsers and reqwest follow it, to the URL it encodes to. The origin is judged on
/// that URL: `bücher.test` is another host, and full-width `ＡＰＩ.test` is
/// `api.test` itself, so the credentials go where that URL goes.
#[tokio::test(start_paused = true)]
async fn a_location_in_utf8_is_followed_to_its_encoded_url() {
    for (location, expected, same_origin) in [
        (
            "https://bücher.test/x",
            "https://xn--bcher-kva.test/x",
            false,
        ),
        ("https://ＡＰＩ.test/x", "https://api.test/x", true),
        ("/café", "https://api.test/caf%C3%A9", true),
        (
            "https://api.test/é?q=ü",
            "https://api.test/%C3%A9?q=%C3%BC",
            true,
        ),
    ] {
        let (url, kept) = followed(location).await;
        assert_eq!(url, expected, "{location:?}");
        assert_eq!(kept, same_origin, "{location:?}");
    }
}

/// A `Location` whose bytes are not UTF-8 (a Latin-1 `é`, or a lone byte 0xFF) is no
/// URL the client can read: the redirect is an error, and nothing more is sent.
#[tokio::test(start_paused = true)]
async fn a_location_that_is_not_utf8_is_refused() {
    for location in [&b"/caf\xe9"[..], b"https://api.test/\xff"] {
        let t = ScriptedTransport::new([
            Step::status(302).header_bytes("location", location),
            Step::status(200).body("done"),
        ]);
        let api = client(&t, 10);
        let e = api
            .items(QUERY_KEY, 1, HEADER_KEY)
            .await
            .expect_err("refused");
        assert_eq!(e.kind(), ErrorKind::Redirect, "{location:?}");
        assert_eq!(t.attempts(), 1, "{location:?} was followed");
        tests::assert_nothing_leaked(&t);
    }
}

/// A secret query parameter in a cross-origin `Location` is dropped, the rest kept.
#[tokio::test(start_paused = true)]
async fn a_secret_query_parameter_does_not_cross() {
    let (url, kept) = followed("//evil.test/x?page=2&api_key=srv&api%5Fkey=b").await;
    assert_eq!(url, "https://evil.test/x?page=2");
    assert!(!kept);
    let (url, kept) = followed("/x?page=2&api_key=srv").await;
    assert_eq!(url, "https://api.test/x?page=2&api_key=srv", "same origin");
    assert!(kept);
}

/// Downgrades and other schemes are refused, whatever their case or form.
#[tokio::test(start_paused = true)]
async fn downgrades_and_other_schemes_are_refused() {
    for location in [
        "http://api.test/x",
        "HTTP://api.test/x",
        "http:x",
        "http://evil.test/x",
        "javascript:alert(1)",
        "data:text/plain,x",
        "file:///etc/passwd",
        "ftp://api.test/x",
        "ws://api.test/x",
        "wss://api.test/x",
    ] {
        refused(location).await;
    }
}

/// A `Location` the client cannot read is an error, not the resource.
#[tokio::test(start_paused = true)]
async fn an_unreadable_location_is_refused() {
    for location in ["http://[::1", "https://", "https://api.test:99999/"] {
        refused(location).await;
    }
}

/// Each hop counts against the attempt's timeout.
#[tokio::test(start_paused = true)]
async fn hops_count_against_the_attempt_timeout() {
    let t = ScriptedTransport::new([
        Step::status(302)
            .header("location", "/a")
            .delay(Duration::from_secs(2)),
        Step::status(302)
            .header("location", "/b")
            .delay(Duration::from_secs(2)),
        Step::status(200).body("done").delay(Duration::from_secs(2)),
    ]);
    let api = client(&t, 10);
    let start = tokio::time::Instant::now();
    let e = api.items(QUERY_KEY, 1, HEADER_KEY).await.expect_err("5s");
    assert_eq!(e.kind(), ErrorKind::AttemptTimeout);
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    assert_eq!(t.attempts(), 3);
    tests::assert_nothing_leaked(&t);
}

/// From an `http` base the downgrade check cannot hide the scheme check: other
/// schemes are still refused, and `http` → `https` is followed as another origin.
#[tokio::test(start_paused = true)]
async fn from_http_other_schemes_are_refused_and_https_is_another_origin() {
    let call = |location: &str| {
        let t = ScriptedTransport::new([
            Step::status(302).header("location", location),
            Step::status(200).body("done"),
        ]);
        let api: LocClient = LocClient::builder()
            .base_url("http://api.test/v1/")
            .transport(t.clone())
            .bearer_auth(BEARER)
            .build()
            .expect("the client builds");
        async move {
            let result = api.items(QUERY_KEY, 1, HEADER_KEY).await;
            tests::assert_nothing_leaked(&t);
            (result.map_err(|e| e.kind()), t.requests())
        }
    };
    for location in [
        "ftp://api.test/x",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "data:text/plain,x",
        "ws://api.test/x",
    ] {
        let (result, requests) = call(location).await;
        assert_eq!(result, Err(ErrorKind::Redirect), "{location:?}");
        assert_eq!(requests.len(), 1, "{location:?} was followed");
    }
    let (result, requests) = call("https://api.test/x").await;
    assert_eq!(result.as_deref(), Ok("done"));
    assert_eq!(requests[1].url, "https://api.test/x");
    assert!(
        no_credentials(&requests[1]),
        "another scheme, another origin"
    );
    let (result, requests) = call("/x").await;
    assert_eq!(result.as_deref(), Ok("done"));
    assert_eq!(requests[1].url, "http://api.test/x");
    assert!(
        requests[1].headers.contains_key("authorization"),
        "the same origin"
    );
    assert!(
        requests[1].headers.contains_key("x-api-key"),
        "the same origin"
    );
}
