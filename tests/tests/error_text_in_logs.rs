//! A server's text in an error's message, and so in the "call failed" event that logs
//! it, is bounded, and a refused `Location` is never printed whole. Alone in their
//! binary: each test installs a `tracing` subscriber for its thread, which tests
//! without one running beside them on other threads would race (a callsite first
//! reached there can keep an interest computed without this subscriber).

use std::error::Error as _;

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, resilient_api};
use tests::{LogBuffer, assert_nothing_leaked, scripted, scripted_builder};

/// Longest message an error may print about one response.
const MESSAGE_BOUND: usize = 512;

/// A GET with no retries.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Moved {
    #[get("/start")]
    async fn start(&self) -> Result<String, ApiError>;
}

/// Every event at every level, as text, for as long as the guard lives.
fn capture_logs() -> (LogBuffer, tracing::subscriber::DefaultGuard) {
    let logs = LogBuffer::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .finish();
    (logs, tracing::subscriber::set_default(subscriber))
}

/// Regression: a redirect to another scheme was refused with a message naming the
/// scheme as the server wrote it, unbounded; the call's "call failed" event logs that
/// message, so a `Location` of 5,000 letters and a colon put 5,000 bytes of the
/// server's text into the error and into the log.
#[tokio::test(start_paused = true)]
async fn a_refused_redirect_scheme_is_bounded_in_the_error_and_the_log() {
    let (logs, _guard) = capture_logs();

    let scheme = "a".repeat(5000);
    let location = format!("{scheme}:x");
    let t = ScriptedTransport::new([Step::status(302).header("location", &location)]);
    let api: MovedClient = scripted(&t);
    let e = api.start().await.expect_err("another scheme");
    assert_eq!(
        (e.kind(), e.attempts(), t.attempts()),
        (ErrorKind::Redirect, 1, 1)
    );
    let log = logs.contents();
    assert!(log.contains("call failed"), "{log}");
    assert!(
        !log.contains(&"a".repeat(1000)),
        "the log holds the server's {}-byte scheme",
        scheme.len()
    );
    let shown = e.to_string();
    assert!(
        shown.starts_with("redirect refused in `start`: a redirect to a `aaa"),
        "{shown}"
    );
    assert!(
        shown.len() <= MESSAGE_BOUND,
        "a {}-byte Display for a {}-byte Location",
        shown.len(),
        location.len()
    );
    assert_nothing_leaked(&t);
}

/// What a `Location` may hold that no log may show: a password, a query value and a
/// fragment value (the user name too: it is the password's half).
const LOCATION_SECRETS: &[&str] = &["ada-5e1", "pw-5e1", "q-5e1", "f-5e1"];

/// Every way the error prints: Display, Debug, and each source's.
fn renderings(e: &ApiError) -> Vec<String> {
    let mut out = vec![e.to_string(), format!("{e:?}"), format!("{e:#?}")];
    let mut source = e.source();
    while let Some(s) = source {
        out.push(s.to_string());
        out.push(format!("{s:?}"));
        source = s.source();
    }
    out
}

/// A redirect refused, or a hop that failed, for each reason a `Location` holding
/// user info, a query and a fragment can end a call: neither the error nor the log
/// of the call shows any of it.
#[tokio::test(start_paused = true)]
async fn a_refused_location_is_never_printed_whole() {
    let (logs, _guard) = capture_logs();

    let tail = "ada-5e1:pw-5e1@example.test/x?token=q-5e1#state=f-5e1";
    let cases: [(&str, Vec<Step>, ErrorKind, &str); 5] = [
        (
            "a downgrade",
            vec![Step::status(302).header("location", &format!("http://{tail}"))],
            ErrorKind::Redirect,
            "redirect refused in `start`: a redirect from https to http was refused",
        ),
        (
            "another scheme",
            vec![Step::status(302).header("location", &format!("ftp://{tail}"))],
            ErrorKind::Redirect,
            "redirect refused in `start`: a redirect to a `ftp:` URL was refused",
        ),
        (
            "a URL no request can carry",
            vec![Step::status(302).header(
                "location",
                "https://ada-5e1:pw-5e1@{{host}}/x?token=q-5e1#state=f-5e1",
            )],
            ErrorKind::Redirect,
            "redirect refused in `start`: a redirect to a URL no request can be sent to was refused",
        ),
        (
            "one hop too many",
            vec![
                Step::status(302).header("location", &format!("https://{tail}")),
                Step::status(302).header("location", &format!("https://{tail}")),
            ],
            ErrorKind::Redirect,
            "redirect refused in `start`: more than 1 redirects",
        ),
        (
            "a hop that fails",
            vec![
                Step::status(302).header("location", &format!("https://{tail}")),
                Step::reset(),
            ],
            ErrorKind::Transport,
            "transport failed in `start`: while following a redirect (the first request was sent)",
        ),
    ];
    for (why, steps, kind, message) in cases {
        let sent = steps.len();
        let t = ScriptedTransport::new(steps);
        let api: MovedClient = scripted_builder(&t).max_redirects(1).build().unwrap();
        let e = api.start().await.expect_err(why);
        assert_eq!((e.kind(), t.attempts()), (kind, sent), "{why}: {e}");
        assert_eq!(e.to_string(), message, "{why}");
        for shown in renderings(&e) {
            for secret in LOCATION_SECRETS {
                assert!(!shown.contains(secret), "{why}: {secret} in {shown}");
            }
        }
        assert_nothing_leaked(&t);
    }
    let log = logs.contents();
    assert_eq!(log.matches("call failed").count(), 5, "{log}");
    for secret in LOCATION_SECRETS {
        assert!(!log.contains(secret), "{secret} in the log: {log}");
    }
}
