//! Property tests of hostile inputs: nothing a caller or a server controls makes a call
//! panic, hang or leak (the project's rule; DESIGN §3.3: all duration arithmetic
//! saturates).
//!
//! 1. **Caller inputs.** Arbitrary strings (any Unicode, control characters, huge),
//!    durations (0, 1 ns, `u64::MAX` s, `Duration::MAX`) and numbers (0, `u32::MAX`,
//!    `u64::MAX`) into every `ClientBuilder` setter, `CallOptions`, and a method's
//!    path, `#[query]` and `#[header]` arguments: `build()` is `Ok` or an
//!    `ErrorKind::Builder` error; the call ends (an outer timeout on the paused clock)
//!    with `Ok` or a typed error, and leaves nothing in flight.
//! 2. **Server inputs.** Arbitrary statuses (100..=999), headers (`content-type`,
//!    `content-length`, `retry-after`, `retry-after-ms`, `location`, `set-cookie`, any
//!    other name), bodies (whole, chunked, cut short) and failures, for every result
//!    type (JSON, `String`, `Bytes`, `()`, `Response<T>`, `ResponseStream`): the call
//!    ends with `Ok` or a typed error of a kind a server can cause, whose `Display`
//!    and `Debug` do not panic; a single non-success, non-3xx answer is `Status`, a
//!    followed 3xx without `Location` is `Redirect`.
//!
//! Every case runs on its own current-thread runtime with a paused clock.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use proptest::prelude::*;
use resilient_api::bulkhead::BulkheadConfig;
use resilient_api::circuit_breaker::state::{BreakerConfig, BreakerMode};
use resilient_api::retry::budget::BudgetConfig;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::transport::{
    HttpRequest, HttpResponse, ResponseBody, SendFuture, Transport, TransportError,
};
use resilient_api::{
    ApiError, Bytes, CallOptions, CancellationToken, Engine, ErrorKind, Jitter, Response,
    ResponseStream, resilient_api,
};
use serde::{Deserialize, Serialize};

/// A JSON result type.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
struct Item {
    id: u64,
    name: String,
}

/// The caller's surface: path, query and header arguments of type `String` and `&str`.
#[resilient_api(timeout(attempt = "5s"), retry(max = 2, backoff = fixed(delay = "10ms")))]
trait Caller {
    #[get("/items/{id}")]
    async fn item(
        &self,
        id: String,
        #[query] q: String,
        #[query] opt: Option<&str>,
        #[header("X-Trace")] trace: String,
    ) -> Result<String, ApiError>;

    #[get("/pair/{left}-{right}")]
    async fn pair(&self, left: &str, right: &str) -> Result<String, ApiError>;

    #[post("/items")]
    async fn create(&self, #[body] item: &Item) -> Result<(), ApiError>;
}

/// Every result type, retried twice (the script is padded so it never runs out).
#[resilient_api(timeout(attempt = "5s"), retry(max = 2, backoff = fixed(delay = "10ms")))]
trait Server {
    #[get("/json")]
    async fn json(&self) -> Result<Item, ApiError>;
    #[get("/text")]
    async fn text(&self) -> Result<String, ApiError>;
    #[get("/bytes")]
    async fn bytes(&self) -> Result<Bytes, ApiError>;
    #[get("/unit")]
    async fn unit(&self) -> Result<(), ApiError>;
    #[get("/resp_json")]
    async fn resp_json(&self) -> Result<Response<Item>, ApiError>;
    #[get("/resp_text")]
    async fn resp_text(&self) -> Result<Response<String>, ApiError>;
    #[get("/resp_unit")]
    async fn resp_unit(&self) -> Result<Response<()>, ApiError>;
    #[get("/stream")]
    async fn stream(&self) -> Result<ResponseStream, ApiError>;
    #[post("/post")]
    async fn post(&self, #[body] item: &Item) -> Result<String, ApiError>;
    #[put("/put")]
    async fn put(&self, #[body] item: &Item) -> Result<(), ApiError>;
}

/// One answer each, not retried: the kind of the error is the oracle's.
#[resilient_api(timeout(attempt = "5s"), retry(max = 0))]
trait Once {
    #[get("/text")]
    async fn text(&self) -> Result<String, ApiError>;
    #[get("/unit")]
    async fn unit(&self) -> Result<(), ApiError>;
    #[get("/resp_unit")]
    async fn resp_unit(&self) -> Result<Response<()>, ApiError>;
    #[get("/stream")]
    async fn stream(&self) -> Result<ResponseStream, ApiError>;
}

fn config() -> ProptestConfig {
    tests::proptest_config!(256, "hostile_inputs")
}

/// Long enough for every scripted case to end many times over (at most three
/// attempts of 5 s, two waits of at most 60 s, redirects): reaching it is a hang.
const OUTER: Duration = Duration::from_secs(24 * 3600);

// ---------------------------------------------------------------- strategies

/// Any string: Unicode, control characters, separators, a huge one.
fn hostile_string() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => any::<String>(),
        2 => "[ -~]{0,24}",
        2 => "[\\x00-\\x1f\\x7f \t\r\n]{0,6}[a-z]{0,4}[\\x00-\\x1f\\x7f\r\n]{0,3}",
        2 => prop::sample::select(vec![
            "", " ", "  padded  ", "\t", "\r\n", "a\r\nX-Injected: 1", "\0", "a\u{7f}b",
            "é", "日本", "\u{202e}", "\u{feff}", "%", "%zz", "%00", "%2F", "?#", "a/b", ".",
            "..", "/", "//", "\\", "a b", "+", "&=", "{id}", "\u{10FFFF}", "\u{0085}",
        ])
        .prop_map(str::to_owned),
        1 => prop::sample::select(vec![1usize, 8 * 1024, 70_000, 1 << 20])
            .prop_map(|n| "x".repeat(n)),
    ]
}

/// Header names: the usual, the invalid and anything at all.
fn header_name() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => prop::sample::select(vec![
            "x-api-key", "X-Trace", "authorization", "content-type", "content-length",
            "host", "cookie", "transfer-encoding", "connection", "te", ":path", "",
            " x", "x y", "x:y", "é", "x\r\ny",
        ])
        .prop_map(str::to_owned),
        1 => hostile_string(),
    ]
}

fn edge_duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        prop::sample::select(vec![
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_millis(1),
            Duration::from_secs(1),
            Duration::from_secs(u64::MAX),
            Duration::MAX,
            Duration::new(u64::MAX - 1, 999_999_999),
            Duration::from_secs(u64::MAX / 2),
        ]),
        (0u64..20_000).prop_map(Duration::from_millis),
        (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
    ]
}

fn edge_u32() -> impl Strategy<Value = u32> {
    prop_oneof![
        prop::sample::select(vec![0, 1, 2, u32::MAX, u32::MAX - 1]),
        any::<u32>()
    ]
}

fn edge_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        prop::sample::select(vec![0, 1, 16, 1 << 22, u64::MAX, u64::MAX - 1]),
        any::<u64>()
    ]
}

fn edge_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        prop::sample::select(vec![
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -0.0,
            0.0,
            1.0,
            -1.0,
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            f64::EPSILON,
        ]),
        any::<f64>()
    ]
}

fn edge_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        prop::sample::select(vec![
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            0.0,
            1.0,
            -1.0,
            2.0,
            f32::MAX,
            f32::MIN,
            f32::MIN_POSITIVE,
        ]),
        any::<f32>()
    ]
}

fn base_url() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => Just("https://example.test".to_owned()),
        2 => hostile_string(),
        2 => hostile_string().prop_map(|s| format!("https://{s}")),
        2 => hostile_string().prop_map(|s| format!("https://example.test/{s}")),
        2 => prop::sample::select(vec![
            "http://[::1]:99999", "http://[::1]:8080/v1/", "https://a.test:0", "http://",
            "https://", "HTTPS://API.TEST", "https://xn--", "http://a.test/%", "https://u:p@a.test",
            "https://u@a.test", "https://a.test?x", "https://a.test#f", "https://a.test/?",
            "file:///etc/passwd", "data:text/plain,x", "mailto:a@b", "http://256.256.256.256",
            "http://0x7f.1", "https://a.test/../..", "https://a.test/%2e%2e/", " https://a.test ",
            "https://a.test/\u{0}", "https://é.test", "http:a.test", "http:/a.test", "//a.test",
        ])
        .prop_map(str::to_owned),
    ]
}

#[derive(Clone, Debug)]
enum JitterChoice {
    Fixed(f64),
    Seeded(u64),
    Random,
}

fn jitter() -> impl Strategy<Value = JitterChoice> {
    prop_oneof![
        edge_f64().prop_map(JitterChoice::Fixed),
        any::<u64>().prop_map(JitterChoice::Seeded),
        Just(JitterChoice::Random),
    ]
}

fn breaker() -> impl Strategy<Value = BreakerConfig> {
    let mode = prop_oneof![
        edge_u32().prop_map(|failures| BreakerMode::ConsecutiveFailures { failures }),
        (edge_f32(), edge_duration(), edge_u32()).prop_map(|(threshold, window, min_calls)| {
            BreakerMode::FailureRate {
                threshold,
                window,
                min_calls,
            }
        }),
    ];
    (
        mode,
        edge_duration(),
        edge_u32(),
        proptest::option::of(edge_duration()),
    )
        .prop_map(|(mode, reset, probes, slow_call)| BreakerConfig {
            mode,
            reset,
            probes,
            slow_call,
        })
}

fn budget() -> impl Strategy<Value = Option<BudgetConfig>> {
    proptest::option::of((edge_duration(), edge_u32(), edge_f32()).prop_map(
        |(ttl, min_per_sec, retry_ratio)| BudgetConfig {
            ttl,
            min_per_sec,
            retry_ratio,
        },
    ))
}

#[derive(Clone, Debug)]
enum Cancel {
    None,
    Before,
    After(Duration),
}

#[derive(Clone, Debug)]
struct CallerCase {
    base_url: Option<String>,
    headers: Vec<(String, String, bool)>,
    bearer: Option<String>,
    max_body: Option<u64>,
    max_redirects: Option<u32>,
    jitter: Option<JitterChoice>,
    budget: Option<Option<BudgetConfig>>,
    breaker: Option<BreakerConfig>,
    bulkhead: Option<(u32, u32)>,
    global_bulkhead: Option<(u32, u32)>,
    deadline: Option<Duration>,
    cancel: Cancel,
    /// 0: `item`, 1: `pair`, 2: `create`.
    method: u8,
    args: (String, String, Option<String>, String),
    /// 0: 200 at once; 1: a 503 then 200; 2: a hang then 200; 3: a 302 then 200;
    /// 4: 200 after a delay.
    script: u8,
}

fn caller_case() -> impl Strategy<Value = CallerCase> {
    let builder = (
        proptest::option::of(base_url()),
        prop::collection::vec((header_name(), hostile_string(), any::<bool>()), 0..3),
        proptest::option::of(hostile_string()),
        proptest::option::of(edge_u64()),
        proptest::option::of(edge_u32()),
        proptest::option::of(jitter()),
        proptest::option::of(budget()),
        proptest::option::of(breaker()),
        proptest::option::of((edge_u32(), edge_u32())),
        proptest::option::of((edge_u32(), edge_u32())),
    );
    let call = (
        proptest::option::of(edge_duration()),
        prop_oneof![
            3 => Just(Cancel::None),
            1 => Just(Cancel::Before),
            1 => edge_duration().prop_map(Cancel::After),
        ],
        0u8..3,
        (
            hostile_string(),
            hostile_string(),
            proptest::option::of(hostile_string()),
            hostile_string(),
        ),
        0u8..5,
    );
    (builder, call).prop_map(
        |(
            (
                base_url,
                headers,
                bearer,
                max_body,
                max_redirects,
                jitter,
                budget,
                breaker,
                bulkhead,
                global_bulkhead,
            ),
            (deadline, cancel, method, args, script),
        )| CallerCase {
            base_url,
            headers,
            bearer,
            max_body,
            max_redirects,
            jitter,
            budget,
            breaker,
            bulkhead,
            global_bulkhead,
            deadline,
            cancel,
            method,
            args,
            script,
        },
    )
}

/// Every part of an error a caller may print or ask for.
fn exercise(e: &ApiError) {
    let _ = e.to_string();
    let _ = format!("{e:?} {e:#?}");
    let _ = (
        e.kind(),
        e.kind().as_str(),
        e.status(),
        e.attempts(),
        e.endpoint(),
    );
    let _ = (e.retry_after(), e.retry_at(), e.timeout(), e.is_timeout());
    let _ = (e.is_connect(), e.is_rejection(), e.body_not_replayable());
    let _ = e.headers().map(|h| format!("{h:?}"));
    let _ = e.body().map(Bytes::len);
    let _ = e.body_text();
    let _ = e.decode_body::<serde_json::Value>();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let _ = format!("{s} {s:?}");
        source = s.source();
    }
}

fn caller_script(script: u8) -> Vec<Step> {
    let ok = || Step::status(200).body("ok");
    let mut steps = match script {
        0 => vec![],
        1 => vec![Step::status(503)],
        2 => vec![Step::hang()],
        3 => vec![Step::status(302).header("location", "/elsewhere")],
        _ => vec![ok().delay(Duration::from_millis(300))],
    };
    steps.extend((0..12).map(|_| ok()));
    steps
}

/// The kinds a call with these caller inputs and this (benign) server may end with.
fn caller_kind_allowed(kind: ErrorKind) -> bool {
    !matches!(
        kind,
        ErrorKind::Builder
            | ErrorKind::Hook
            | ErrorKind::Decode
            | ErrorKind::UnexpectedContentType
            | ErrorKind::Connect
            | ErrorKind::Transport
            | ErrorKind::AllHedgesFailed
    )
}

fn run_caller(case: &CallerCase) -> Result<(), TestCaseError> {
    let rt = tests::case_runtime(true);
    rt.block_on(async {
        let t = ScriptedTransport::new(caller_script(case.script));
        let mut b = CallerClient::builder().transport(t.clone());
        if let Some(u) = &case.base_url {
            b = b.base_url(u.clone());
        } else {
            b = b.base_url("https://example.test");
        }
        for (n, v, secret) in &case.headers {
            b = if *secret {
                b.secret_header(n.clone(), v.clone())
            } else {
                b.header(n.clone(), v.clone())
            };
        }
        if let Some(tok) = &case.bearer {
            b = b.bearer_auth(tok);
        }
        if let Some(m) = case.max_body {
            b = b.max_body_size(m);
        }
        if let Some(r) = case.max_redirects {
            b = b.max_redirects(r);
        }
        match &case.jitter {
            Some(JitterChoice::Fixed(v)) => b = b.jitter(Jitter::fixed(*v)),
            Some(JitterChoice::Seeded(s)) => b = b.jitter(Jitter::seeded(*s)),
            Some(JitterChoice::Random) => b = b.jitter(Jitter::random()),
            None => b = b.jitter(Jitter::fixed(0.5)),
        }
        if let Some(budget) = case.budget {
            b = b.retry_budget(budget);
        }
        if let Some(br) = case.breaker {
            b = b.default_breaker(br);
        }
        if let Some((c, q)) = case.bulkhead {
            b = b.default_bulkhead(BulkheadConfig::new(c, q));
        }
        if let Some((c, q)) = case.global_bulkhead {
            b = b.engine(Engine::new().global_bulkhead(BulkheadConfig::new(c, q)));
        }
        let _ = format!("{b:?}");
        let api = match b.build() {
            Ok(api) => api,
            Err(e) => {
                exercise(&e);
                prop_assert_eq!(e.kind(), ErrorKind::Builder, "build failed with {:?}", e);
                prop_assert_eq!(t.attempts(), 0);
                return Ok(());
            }
        };
        let _ = format!("{api:?}");
        let mut options = CallOptions::new();
        if let Some(d) = case.deadline {
            options = options.deadline(d);
        }
        let token = CancellationToken::new();
        match case.cancel {
            Cancel::None => {}
            Cancel::Before => {
                token.cancel();
                options = options.cancel_on(token.clone());
            }
            Cancel::After(d) => {
                options = options.cancel_on(token.clone());
                let token = token.clone();
                tokio::spawn(async move {
                    // `sleep` with a far instant saturates in tokio; keep it reachable.
                    tokio::time::sleep(d.min(OUTER * 2)).await;
                    token.cancel();
                });
            }
        }
        let api = api.with_options(options);
        let (id, q, opt, trace) = &case.args;
        let item = Item {
            id: 7,
            name: trace.clone(),
        };
        let call = async {
            match case.method {
                0 => api
                    .item(id.clone(), q.clone(), opt.as_deref(), trace.clone())
                    .await
                    .map(drop),
                1 => api.pair(id, q).await.map(drop),
                _ => api.create(&item).await,
            }
        };
        let r = tokio::time::timeout(OUTER, call).await;
        let Ok(r) = r else {
            return Err(TestCaseError::fail(format!(
                "the call did not end within {OUTER:?} (hang)"
            )));
        };
        prop_assert_eq!(t.in_flight(), 0, "an attempt is still in flight");
        prop_assert_eq!(t.open_bodies(), 0, "a response body is still open");
        if let Err(e) = &r {
            exercise(e);
            prop_assert!(
                caller_kind_allowed(e.kind()),
                "unexpected kind {:?}: {}",
                e.kind(),
                e
            );
            if e.kind() == ErrorKind::InvalidRequest {
                prop_assert_eq!(t.attempts(), 0, "an invalid request was sent");
            }
        }
        // An argument accepted is sent as given: a header value is not altered.
        if r.is_ok() && case.method == 0 {
            let reqs = t.requests();
            let sent = reqs.last().and_then(|r| r.headers.get("x-trace"));
            prop_assert_eq!(
                sent.map(|v| v.as_bytes()),
                Some(trace.as_bytes()),
                "the X-Trace value was changed"
            );
        }
        Ok(())
    })
}

// ---------------------------------------------------------------- server side

fn server_status() -> impl Strategy<Value = u16> {
    prop_oneof![
        3 => prop::sample::select(vec![
            100, 101, 103, 199, 200, 201, 204, 206, 299, 300, 301, 302, 303, 304, 305, 306, 307,
            308, 309, 399, 400, 404, 408, 409, 425, 429, 500, 502, 503, 504, 599, 600, 999,
        ]),
        1 => 100u16..=999,
    ]
}

fn server_header_name() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::sample::select(vec![
            "content-type", "content-length", "retry-after", "retry-after-ms", "location",
            "set-cookie", "content-encoding", "transfer-encoding", "www-authenticate",
            "authorization", "date", "etag", "x-request-id", "connection",
        ])
        .prop_map(str::to_owned),
        1 => "[a-z0-9!#$%&'*+.^_`|~-]{1,12}",
    ]
}

/// Values `Step::header` takes (`HeaderValue::from_str`: visible ASCII, space, tab).
fn server_header_value() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[\\t -~]{0,40}",
        3 => prop::sample::select(vec![
            // numbers
            "0", "-0", "1", "-1", "+1", "1.5", "1e9", " 5 ", "0x10", "00000000000000000001",
            "4294967295", "4294967296", "18446744073709551615", "18446744073709551616",
            "99999999999999999999999999999999", "9223372036854775807", "5, 5", "5,6",
            // dates
            "Thu, 01 Jan 1970 00:00:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994", "Mon, 99 Foo 2001", "Tue, 29 Feb 2100 00:00:00 GMT",
            // content types
            "application/json", "application/json; charset=utf-8", "text/plain",
            "text/plain; charset=utf-16", "application/json; charset=latin1", "text/html",
            "application/problem+json", "application/octet-stream", "", ";;;", "*/*",
            "application/", "/json", "application/json; charset=\"", "multipart/form-data; boundary=",
            // locations
            "/elsewhere", "elsewhere", "//evil.test/x", "http://", "https://",
            "https://[::1]:0/", "http://[::1", "javascript:alert(1)", "file:///etc/passwd",
            "/../../..", "?q=1", "#frag", "http://a:b@evil.test/", "%", "%zz",
            "http://evil.test:99999/", "https://example.test/loop", "ftp://x.test/",
            "data:text/plain,x", " /spaced ", "\t",
            // encodings
            "gzip", "chunked", "identity", "br, gzip",
            // cookies
            "session=abc; Secure; HttpOnly", "=", "a=b; Max-Age=-1",
        ])
        .prop_map(str::to_owned),
    ]
}

#[derive(Clone, Debug)]
enum BodyChoice {
    Bytes(Vec<u8>),
    Chunks(Vec<(u64, Vec<u8>)>),
}

fn body_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop::collection::vec(any::<u8>(), 0..48),
        2 => prop::sample::select(vec![
            r#"{"id":1,"name":"a"}"#, r#"{"id":-1,"name":"a"}"#,
            r#"{"id":18446744073709551616,"name":"a"}"#, r#"{"id":1}"#, "null", "{}", "[]",
            r#""text""#, "", "{", r#"{"id":1,"name":"\ud800"}"#, "\u{feff}{}", "ok",
            "\u{fffd}", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
        1 => prop::sample::select(vec![200usize, 5000, 70_000]).prop_map(|n| vec![b'a'; n]),
        1 => Just(vec![0xff, 0xfe, 0x00, 0xc3]),
    ]
}

fn body_choice() -> impl Strategy<Value = BodyChoice> {
    prop_oneof![
        3 => body_bytes().prop_map(BodyChoice::Bytes),
        1 => prop::collection::vec((0u64..2_000, body_bytes()), 0..4).prop_map(BodyChoice::Chunks),
    ]
}

#[derive(Clone, Debug)]
enum Answer {
    Respond {
        status: u16,
        headers: Vec<(String, String)>,
        body: BodyChoice,
        delay_ms: u64,
        cut_ms: Option<u64>,
    },
    Hang,
    ConnectError,
    Reset,
}

fn answer() -> impl Strategy<Value = Answer> {
    prop_oneof![
        12 => (
            server_status(),
            prop::collection::vec((server_header_name(), server_header_value()), 0..4),
            body_choice(),
            prop_oneof![3 => Just(0u64), 1 => 0u64..7_000],
            proptest::option::of(0u64..100),
        )
            .prop_map(|(status, headers, body, delay_ms, cut_ms)| Answer::Respond {
                status,
                headers,
                body,
                delay_ms,
                cut_ms,
            }),
        1 => Just(Answer::Hang),
        1 => Just(Answer::ConnectError),
        1 => Just(Answer::Reset),
    ]
}

fn step(a: &Answer) -> Step {
    match a {
        Answer::Respond {
            status,
            headers,
            body,
            delay_ms,
            cut_ms,
        } => {
            let mut s = Step::status(*status);
            for (n, v) in headers {
                s = s.header(n, v);
            }
            s = match body {
                BodyChoice::Bytes(b) => s.body(b.clone()),
                BodyChoice::Chunks(c) => s.chunks(
                    c.iter()
                        .map(|(d, b)| (Duration::from_millis(*d), b.clone()))
                        .collect::<Vec<_>>(),
                ),
            };
            if *delay_ms > 0 {
                s = s.delay(Duration::from_millis(*delay_ms));
            }
            if let Some(c) = cut_ms {
                s = s.cut_after(Duration::from_millis(*c));
            }
            s
        }
        Answer::Hang => Step::hang(),
        Answer::ConnectError => Step::connect_error(),
        Answer::Reset => Step::reset(),
    }
}

fn wall_epoch() -> SystemTime {
    UNIX_EPOCH
}
fn wall_fixed() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_000_000_000)
}
fn wall_far() -> SystemTime {
    // Year 9999 and a bit: beyond every HTTP date.
    UNIX_EPOCH + Duration::from_secs(253_402_300_800)
}
fn wall_before_epoch() -> SystemTime {
    UNIX_EPOCH
        .checked_sub(Duration::from_secs(86_400))
        .unwrap_or(UNIX_EPOCH)
}

const WALLS: [fn() -> SystemTime; 5] = [
    wall_epoch,
    wall_fixed,
    wall_far,
    wall_before_epoch,
    SystemTime::now,
];

#[derive(Clone, Debug)]
struct ServerCase {
    method: u8,
    answers: Vec<Answer>,
    wall: usize,
    max_body: Option<u64>,
    max_redirects: Option<u32>,
}

fn server_case() -> impl Strategy<Value = ServerCase> {
    (
        0u8..10,
        prop::collection::vec(answer(), 1..5),
        0..WALLS.len(),
        proptest::option::of(prop::sample::select(vec![0u64, 1, 16, 100, 1 << 22])),
        proptest::option::of(prop::sample::select(vec![0u32, 1, 3])),
    )
        .prop_map(
            |(method, answers, wall, max_body, max_redirects)| ServerCase {
                method,
                answers,
                wall,
                max_body,
                max_redirects,
            },
        )
}

/// The kinds a server can cause on a call without a deadline, hooks or cancellation.
fn server_kind_allowed(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::Status
            | ErrorKind::AttemptTimeout
            | ErrorKind::Connect
            | ErrorKind::Transport
            | ErrorKind::Decode
            | ErrorKind::UnexpectedContentType
            | ErrorKind::BodyTooLarge
            | ErrorKind::Redirect
            | ErrorKind::BudgetExhausted
            | ErrorKind::CircuitOpen
    )
}

/// Read a stream to its end (or its first error), with every accessor on the way.
async fn drain(mut s: ResponseStream) -> Result<usize, ApiError> {
    let _ = (s.status(), format!("{:?}", s.headers()), format!("{s:?}"));
    let mut n = 0;
    while let Some(chunk) = s.chunk().await? {
        n += chunk.len();
    }
    Ok(n)
}

/// The script, padded with plain answers so that no number of retries or redirect
/// hops runs it out.
fn padded_script(answers: &[Answer]) -> Vec<Step> {
    let mut steps: Vec<Step> = answers.iter().map(step).collect();
    steps.extend((0..40).map(|_| Step::status(200).body(r#"{"id":1,"name":"pad"}"#)));
    steps
}

fn check_server_error(e: &ApiError) -> Result<(), TestCaseError> {
    exercise(e);
    prop_assert!(
        server_kind_allowed(e.kind()),
        "unexpected kind {:?}: {}",
        e.kind(),
        e
    );
    if e.kind() == ErrorKind::Status {
        let s = e.status();
        prop_assert!(
            s.is_some_and(|s| !(200..300).contains(&s)),
            "a Status error with status {:?}",
            s
        );
    }
    Ok(())
}

fn run_server(case: &ServerCase) -> Result<(), TestCaseError> {
    let rt = tests::case_runtime(true);
    rt.block_on(async {
        let t = ScriptedTransport::new(padded_script(&case.answers));
        let mut b = tests::scripted_builder::<ServerClient>(&t).wall_clock(WALLS[case.wall]);
        if let Some(m) = case.max_body {
            b = b.max_body_size(m);
        }
        if let Some(r) = case.max_redirects {
            b = b.max_redirects(r);
        }
        let api = b.build().expect("the client builds");
        let item = Item {
            id: 1,
            name: "n".into(),
        };
        let call = async {
            match case.method {
                0 => api.json().await.map(|v| format!("{v:?}")),
                1 => api.text().await,
                2 => api.bytes().await.map(|b| b.len().to_string()),
                3 => api.unit().await.map(|()| String::new()),
                4 => api
                    .resp_json()
                    .await
                    .map(|r| format!("{} {:?} {r:?}", r.status(), r.headers())),
                5 => api.resp_text().await.map(|r| r.into_value()),
                6 => api.resp_unit().await.map(|r| format!("{r:?}")),
                7 => match api.stream().await {
                    Ok(s) => drain(s).await.map(|n| n.to_string()),
                    Err(e) => Err(e),
                },
                8 => api.post(&item).await,
                _ => api.put(&item).await.map(|()| String::new()),
            }
        };
        let Ok(r) = tokio::time::timeout(OUTER, call).await else {
            return Err(TestCaseError::fail("the call did not end (hang)"));
        };
        prop_assert_eq!(t.in_flight(), 0, "an attempt is still in flight");
        prop_assert_eq!(t.open_bodies(), 0, "a response body is still open");
        if let Err(e) = &r {
            check_server_error(e)?;
        }
        Ok(())
    })
}

/// One answer, no retry: the error's kind follows from the status.
fn run_once(method: u8, a: &Answer) -> Result<(), TestCaseError> {
    let rt = tests::case_runtime(true);
    rt.block_on(async {
        let t = ScriptedTransport::new(padded_script(std::slice::from_ref(a)));
        let api: OnceClient = tests::scripted(&t);
        let call = async {
            match method {
                0 => api.text().await.map(drop),
                1 => api.unit().await,
                2 => api.resp_unit().await.map(drop),
                _ => match api.stream().await {
                    Ok(s) => drain(s).await.map(drop),
                    Err(e) => Err(e),
                },
            }
        };
        let Ok(r) = tokio::time::timeout(OUTER, call).await else {
            return Err(TestCaseError::fail("the call did not end (hang)"));
        };
        tests::assert_nothing_leaked(&t);
        if let Err(e) = &r {
            check_server_error(e)?;
        }
        let Answer::Respond {
            status,
            headers,
            body,
            delay_ms,
            cut_ms,
        } = a
        else {
            return Ok(());
        };
        // The oracle holds for an answer that ends within the attempt timeout.
        let body_ms: u64 = match body {
            BodyChoice::Bytes(_) => 0,
            BodyChoice::Chunks(c) => c.iter().map(|(d, _)| d).sum(),
        };
        if delay_ms + body_ms + cut_ms.unwrap_or(0) >= 5_000 {
            return Ok(());
        }
        let has_location = headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("location"));
        let followed = matches!(status, 301 | 302 | 303 | 307 | 308);
        if !(200..400).contains(status) {
            // 1xx, 4xx, 5xx and 600..=999: an error status.
            let got = r.as_ref().err().map(|e| (e.kind(), e.status()));
            prop_assert_eq!(got, Some((ErrorKind::Status, Some(*status))));
        } else if followed && !has_location {
            let got = r.as_ref().err().map(ApiError::kind);
            prop_assert_eq!(got, Some(ErrorKind::Redirect));
        }
        Ok(())
    })
}

// ------------------------------------------------ raw header bytes (obs-text)

/// A transport that answers with header values `Step::header` cannot make: any bytes
/// `http::HeaderValue::from_bytes` accepts (obs-text, 0x80 to 0xFF, is not UTF-8),
/// and a body streamed in the given chunks (empty ones among them). Once its answers
/// are spent it answers 200 `{}`.
#[derive(Clone, Default)]
struct RawTransport {
    answers: Arc<Mutex<VecDeque<RawAnswer>>>,
}

#[derive(Clone, Debug)]
struct RawAnswer {
    status: u16,
    headers: Vec<(String, Vec<u8>)>,
    chunks: Vec<Vec<u8>>,
}

impl Transport for RawTransport {
    fn send(&self, _request: HttpRequest) -> SendFuture {
        let next = self
            .answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front();
        Box::pin(async move {
            let Some(a) = next else {
                let mut r = HttpResponse::new(StatusCode::OK, HeaderMap::new());
                r.body = ResponseBody::full(Bytes::from_static(b"{}"));
                return Ok(r);
            };
            let status = StatusCode::from_u16(a.status).unwrap_or(StatusCode::OK);
            let mut headers = HeaderMap::new();
            for (n, v) in &a.headers {
                if let (Ok(n), Ok(v)) = (
                    HeaderName::from_bytes(n.as_bytes()),
                    HeaderValue::from_bytes(v),
                ) {
                    headers.append(n, v);
                }
            }
            let mut r = HttpResponse::new(status, headers);
            let chunks: Vec<Result<Bytes, TransportError>> =
                a.chunks.into_iter().map(|c| Ok(Bytes::from(c))).collect();
            r.body = ResponseBody::stream(futures_util::stream::iter(chunks));
            Ok(r)
        })
    }
}

fn raw_value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        2 => prop::collection::vec(any::<u8>(), 0..24),
        2 => prop::collection::vec(prop_oneof![0x20u8..0x7f, 0x80u8..=0xff, Just(b'\t')], 0..24),
        1 => server_header_value().prop_map(|v| {
            let mut v = v.into_bytes();
            v.push(0xff);
            v
        }),
    ]
}

fn raw_answer() -> impl Strategy<Value = RawAnswer> {
    (
        server_status(),
        prop::collection::vec((server_header_name(), raw_value()), 0..4),
        prop::collection::vec(body_bytes(), 0..4),
    )
        .prop_map(|(status, headers, chunks)| RawAnswer {
            status,
            headers,
            chunks,
        })
}

fn run_raw(method: u8, answers: &[RawAnswer]) -> Result<(), TestCaseError> {
    let rt = tests::case_runtime(true);
    rt.block_on(async {
        let t = RawTransport::default();
        t.answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(answers.iter().cloned());
        let api = ServerClient::builder()
            .base_url("https://example.test")
            .transport(t.clone())
            .jitter(Jitter::fixed(0.5))
            .wall_clock(wall_fixed)
            .build()
            .expect("the client builds");
        let item = Item {
            id: 1,
            name: "n".into(),
        };
        let call = async {
            match method {
                0 => api.json().await.map(drop),
                1 => api.text().await.map(drop),
                2 => api.bytes().await.map(drop),
                3 => api.unit().await,
                4 => api.resp_json().await.map(|r| drop(format!("{r:?}"))),
                5 => api.resp_text().await.map(|r| drop(format!("{r:?}"))),
                6 => api.resp_unit().await.map(|r| drop(format!("{r:?}"))),
                7 => match api.stream().await {
                    Ok(s) => drain(s).await.map(drop),
                    Err(e) => Err(e),
                },
                8 => api.post(&item).await.map(drop),
                _ => api.put(&item).await,
            }
        };
        let Ok(r) = tokio::time::timeout(OUTER, call).await else {
            return Err(TestCaseError::fail("the call did not end (hang)"));
        };
        if let Err(e) = &r {
            check_server_error(e)?;
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(config())]

    /// Group 2: header values that are not UTF-8, through a transport of its own.
    #[test]
    fn raw_header_bytes_never_panic_or_hang(
        method in 0u8..10,
        answers in prop::collection::vec(raw_answer(), 1..4),
    ) {
        run_raw(method, &answers)?;
    }

    /// Group 1: any caller input to the builder, the call options and the arguments.
    #[test]
    fn caller_inputs_never_panic_hang_or_leak(case in caller_case()) {
        run_caller(&case)?;
    }

    /// Group 2: any answer a server can give, for every result type.
    #[test]
    fn server_answers_never_panic_hang_or_leak(case in server_case()) {
        run_server(&case)?;
    }

    /// Group 2, with an oracle: one answer, no retry.
    #[test]
    fn one_server_answer_gets_the_documented_kind(method in 0u8..4, a in answer()) {
        run_once(method, &a)?;
    }
}
