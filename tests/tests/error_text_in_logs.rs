//! A server's text in an error's message, and so in the "call failed" event that logs
//! it, is bounded. Alone in its binary: it installs a `tracing` subscriber for the
//! thread, which tests running beside it on other threads would race (a callsite
//! first reached there can keep an interest computed without this subscriber).

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, resilient_api};
use tests::{LogBuffer, assert_nothing_leaked, scripted};

/// Longest message an error may print about one response.
const MESSAGE_BOUND: usize = 512;

/// A GET with no retries.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Moved {
    #[get("/start")]
    async fn start(&self) -> Result<String, ApiError>;
}

/// Regression: a redirect to another scheme was refused with a message naming the
/// scheme as the server wrote it, unbounded; the call's "call failed" event logs that
/// message, so a `Location` of 5,000 letters and a colon put 5,000 bytes of the
/// server's text into the error and into the log.
#[tokio::test(start_paused = true)]
async fn a_refused_redirect_scheme_is_bounded_in_the_error_and_the_log() {
    let logs = LogBuffer::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

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
