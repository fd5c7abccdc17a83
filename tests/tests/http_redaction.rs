//! Wiremock tier: a canary secret sent as a bearer token, a declared secret header, a
//! client-wide secret header and a declared secret query parameter must reach the
//! server and appear in nothing we print: errors (Display, Debug, whole source chain),
//! the client and builder `Debug`, the scripted transport's records, and the tracing
//! output of failing calls.

use std::error::Error as _;
use std::time::Duration;

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, resilient_api};
use tests::LogBuffer;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const CANARY: &str = "CANARY-7f3a9";

#[resilient_api(
    timeout(attempt = "2s"),
    retry(max = 2, backoff = fixed(delay = "5ms"), on = [500, 503])
)]
trait Canary {
    #[get("/data")]
    async fn data(
        &self,
        #[header("X-Api-Key", secret)] key: &str,
        #[query("api_key", secret)] api_key: &str,
    ) -> Result<String, ApiError>;

    #[get("/slow")]
    #[timeout(attempt = "100ms")]
    async fn slow(
        &self,
        #[header("X-Api-Key", secret)] key: &str,
        #[query("api_key", secret)] api_key: &str,
    ) -> Result<String, ApiError>;
}

fn builder(base: &str) -> resilient_api::ClientBuilder<CanaryClient> {
    CanaryClient::builder()
        .base_url(base)
        .bearer_auth(CANARY)
        .secret_header("X-Client-Secret", CANARY)
}

/// Every way an error can be printed: Display, Debug, pretty Debug, and the same for
/// each error of its source chain.
fn renderings(label: &str, e: &ApiError) -> Vec<(String, String)> {
    let mut out = vec![
        (format!("{label}: Display"), format!("{e}")),
        (format!("{label}: Debug"), format!("{e:?}")),
        (format!("{label}: Debug (pretty)"), format!("{e:#?}")),
    ];
    let mut depth = 0;
    let mut source = e.source();
    while let Some(s) = source {
        depth += 1;
        out.push((format!("{label}: source {depth} Display"), format!("{s}")));
        out.push((format!("{label}: source {depth} Debug"), format!("{s:?}")));
        out.push((
            format!("{label}: source {depth} Debug (pretty)"),
            format!("{s:#?}"),
        ));
        source = s.source();
    }
    out
}

fn assert_canary_reached(r: &Request, what: &str) {
    assert_eq!(
        r.headers
            .get("authorization")
            .expect("header sent")
            .to_str()
            .expect("text"),
        format!("Bearer {CANARY}"),
        "{what}"
    );
    assert_eq!(
        r.headers
            .get("x-api-key")
            .expect("header sent")
            .to_str()
            .expect("text"),
        CANARY,
        "{what}"
    );
    assert_eq!(
        r.headers
            .get("x-client-secret")
            .expect("header sent")
            .to_str()
            .expect("text"),
        CANARY,
        "{what}"
    );
    assert_eq!(
        r.url.query(),
        Some(format!("api_key={CANARY}").as_str()),
        "{what}"
    );
}

#[tokio::test]
async fn canary_secret_appears_in_no_output() {
    // Tracing first, so that every call below is captured.
    let logs = LogBuffer::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::FULL)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let mut printed: Vec<(String, String)> = Vec::new();

    // --- Over real sockets ---------------------------------------------------------
    let failing = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/data"))
        .respond_with(ResponseTemplate::new(500).set_body_string("internal"))
        .mount(&failing)
        .await;
    Mock::given(method("GET"))
        .and(path("/slow"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_string("late")
                .set_delay(Duration::from_secs(1)),
        )
        .mount(&failing)
        .await;
    let missing = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/data"))
        .respond_with(ResponseTemplate::new(404).set_body_string("no such thing"))
        .mount(&missing)
        .await;
    // A port nobody listens on.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let refused_base = format!("http://127.0.0.1:{closed}");

    let b = builder(&failing.uri());
    printed.push(("builder Debug".into(), format!("{b:?}")));
    printed.push(("builder Debug (pretty)".into(), format!("{b:#?}")));
    let api = b.build().unwrap();
    printed.push(("client Debug".into(), format!("{api:?}")));
    printed.push(("client Debug (pretty)".into(), format!("{api:#?}")));

    // 500 with retries.
    let e = api.data(CANARY, CANARY).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Status);
    assert_eq!(e.status(), Some(500));
    assert_eq!(e.attempts(), 3);
    printed.extend(renderings("500 after retries", &e));

    // Attempt timeouts (retried: GET). A client of its own: the 500s above count in
    // the default breaker (5 consecutive failures), so this one starts closed.
    let timed = builder(&failing.uri()).build().unwrap();
    let e = timed.slow(CANARY, CANARY).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AttemptTimeout);
    assert_eq!(e.attempts(), 3);
    printed.extend(renderings("attempt timeout", &e));

    // 404.
    let api404 = builder(&missing.uri()).build().unwrap();
    let e = api404.data(CANARY, CANARY).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Status);
    assert_eq!(e.status(), Some(404));
    printed.extend(renderings("404", &e));

    // Connection refused.
    let refused = builder(&refused_base).build().unwrap();
    printed.push(("refused client Debug".into(), format!("{refused:?}")));
    let e = refused.data(CANARY, CANARY).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connect);
    printed.extend(renderings("connection refused", &e));

    // The canary did reach the server, in every place it was put.
    let reqs = failing.received_requests().await.unwrap();
    let data: Vec<&Request> = reqs.iter().filter(|r| r.url.path() == "/data").collect();
    assert_eq!(data.len(), 3);
    for r in &data {
        assert_canary_reached(r, "500 call");
    }
    let slow: Vec<&Request> = reqs.iter().filter(|r| r.url.path() == "/slow").collect();
    assert!(!slow.is_empty());
    assert_canary_reached(slow[0], "timeout call");
    let reqs = missing.received_requests().await.unwrap();
    assert_eq!(reqs.len(), 1);
    assert_canary_reached(&reqs[0], "404 call");

    // --- Through the scripted transport ---------------------------------------------
    let t = ScriptedTransport::new([
        Step::status(500).body("e1"),
        Step::status(500).body("e2"),
        Step::status(500).body("e3"),
        Step::status(404).body("missing"),
        Step::reset(),
        Step::reset(),
        Step::reset(),
        Step::connect_error(),
        Step::connect_error(),
        Step::connect_error(),
    ]);
    // A client per call (each with its own breaker), all on the same transport.
    let scripted = || {
        CanaryClient::builder()
            .base_url("https://example.test")
            .transport(t.clone())
            .bearer_auth(CANARY)
            .secret_header("X-Client-Secret", CANARY)
            .build()
            .unwrap()
    };
    printed.push(("scripted client Debug".into(), format!("{:?}", scripted())));
    for (label, kind) in [
        ("scripted 500", ErrorKind::Status),
        ("scripted 404", ErrorKind::Status),
        ("scripted reset", ErrorKind::Transport),
        ("scripted connect", ErrorKind::Connect),
    ] {
        let e = scripted().data(CANARY, CANARY).await.unwrap_err();
        assert_eq!(e.kind(), kind, "{label}");
        printed.extend(renderings(label, &e));
    }
    assert_eq!(t.attempts(), 10);
    let recorded = t.requests();
    assert_eq!(recorded.len(), 10);
    assert_eq!(
        recorded[0].headers.get("authorization").unwrap(),
        format!("Bearer {CANARY}").as_str()
    );
    assert_eq!(recorded[0].headers.get("x-api-key").unwrap(), CANARY);
    assert_eq!(recorded[0].headers.get("x-client-secret").unwrap(), CANARY);
    assert!(
        recorded[0].url.contains(CANARY),
        "the query canary was sent"
    );
    printed.push((
        "ScriptedTransport::requests() Debug".into(),
        format!("{recorded:?}"),
    ));
    printed.push((
        "ScriptedTransport::requests() Debug (pretty)".into(),
        format!("{recorded:#?}"),
    ));
    printed.push(("ScriptedTransport Debug".into(), format!("{t:?}")));

    // --- Tracing --------------------------------------------------------------------
    let log = logs.contents();
    assert!(
        log.contains("retrying"),
        "the subscriber captured the calls: {log}"
    );
    printed.push(("tracing output".into(), log));

    let leaks: Vec<String> = printed
        .iter()
        .filter(|(_, text)| text.contains(CANARY))
        .map(|(what, text)| format!("--- {what}:\n{text}"))
        .collect();
    assert!(
        leaks.is_empty(),
        "the canary leaked in {} place(s):\n{}",
        leaks.len(),
        leaks.join("\n")
    );
}
