//! Tracing (DESIGN §3.9): a breaker's transition that an attempt's outcome causes is
//! logged inside the call's span, both when a plain call's first attempt trips the
//! breaker and when an attempt of the retry loop does, and when a hedged round that
//! the deadline or the caller's token cuts short records the failure it held.
//!
//! A test binary of its own, with one test: tracing decides once per call site
//! whether anybody listens, and tests on other threads of one binary that hit the
//! same call sites with no subscriber made these events vanish from a capture set on
//! this thread (spans were still seen).

use std::sync::{Arc, Mutex, PoisonError};

use resilient_api::circuit_breaker::state::Phase;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, CancellationToken, ErrorKind, resilient_api};
use tests::{ms, scripted};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// One failure opens the breaker; no retry, so the call ends with that failure.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0), breaker(failures = 1))]
pub trait Tripping {
    #[get("/status")]
    async fn status(&self) -> Result<String, ApiError>;
}

/// The first failure is retried once; the second opens the breaker, in the loop.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 1, backoff = fixed(delay = "10ms"), on = [503]),
    breaker(failures = 2)
)]
pub trait TrippingOnRetry {
    #[get("/status")]
    async fn status(&self) -> Result<String, ApiError>;
}

/// Hedged; one failure opens the breaker.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 0),
    breaker(failures = 1, reset = "1s")
)]
pub trait HedgedTrip {
    #[get("/status")]
    #[hedge(delay = "10ms", max = 2)]
    async fn status(&self) -> Result<String, ApiError>;
}

/// An event's message, and the name of the span it happened in.
type Seen = (String, Option<&'static str>);

/// Every event seen.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<Seen>>>);

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl<S> Layer<S> for Events
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut message = Message(String::new());
        event.record(&mut message);
        let span = ctx.event_span(event).map(|s| s.name());
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((message.0, span));
    }
}

impl Events {
    /// The spans the breaker's transitions were logged in, forgetting every event.
    fn transitions(&self) -> Vec<Option<&'static str>> {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let spans = seen
            .iter()
            .filter(|(message, _)| message == "circuit breaker transition")
            .map(|&(_, span)| span)
            .collect();
        seen.clear();
        spans
    }
}

/// Regression: a plain call's first attempt once recorded its breaker verdict after
/// leaving the call's span, so the breaker's "opened" event had no span at all. The
/// retry loop's attempts, which always recorded it there, are checked too.
///
/// Regression, too: a hedged round cut short by the call's deadline or its token
/// records the failures it held as it is dropped (they did fail), and it was dropped
/// after the call had left its span, so the trip they caused was logged with no span.
/// Here the primary's 503 at 5 ms is held (the hedge at 10 ms is still to come), the
/// hedge hangs, and the deadline, the token or the caller dropping the call ends it
/// at 20 ms.
#[tokio::test(start_paused = true)]
async fn a_breaker_transition_is_logged_in_the_call_span() {
    let events = Events::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(events.clone()));

    let t = ScriptedTransport::new([Step::status(503)]);
    let api = scripted::<TrippingClient>(&t);
    assert_eq!(api.status().await.unwrap_err().kind(), ErrorKind::Status);
    assert_eq!(
        events.transitions(),
        [Some("http.client")],
        "the first attempt's"
    );

    let t = ScriptedTransport::new([Step::status(503), Step::status(503)]);
    let api = scripted::<TrippingOnRetryClient>(&t);
    assert_eq!(api.status().await.unwrap_err().kind(), ErrorKind::Status);
    assert_eq!(t.attempts(), 2);
    assert_eq!(
        events.transitions(),
        [Some("http.client")],
        "the loop's attempt's"
    );

    let hedged = || ScriptedTransport::new([Step::status(503).delay(ms(5)), Step::hang()]);
    let t = hedged();
    let api = scripted::<HedgedTripClient>(&t);
    let short = api.with_options(CallOptions::new().deadline(ms(20)));
    assert_eq!(
        short.status().await.unwrap_err().kind(),
        ErrorKind::Deadline
    );
    assert_eq!(
        api.circuit_state().phase,
        Phase::Open,
        "the held 503 tripped it"
    );
    assert_eq!(
        events.transitions(),
        [Some("http.client")],
        "the deadline's cut"
    );

    let t = hedged();
    let api = scripted::<HedgedTripClient>(&t);
    let token = CancellationToken::new();
    let caller = api.with_options(CallOptions::new().cancel_on(token.clone()));
    let call = tokio::spawn(async move { caller.status().await });
    tokio::time::sleep(ms(20)).await;
    token.cancel();
    let ended = call.await.expect("the call's task");
    assert_eq!(ended.unwrap_err().kind(), ErrorKind::Cancelled);
    assert_eq!(
        api.circuit_state().phase,
        Phase::Open,
        "the held 503 tripped it"
    );
    assert_eq!(
        events.transitions(),
        [Some("http.client")],
        "the token's cut"
    );

    // And when the caller drops the call itself, at 20 ms.
    let t = hedged();
    let api = scripted::<HedgedTripClient>(&t);
    let dropped = tokio::time::timeout(ms(20), api.status()).await;
    assert!(dropped.is_err(), "the caller gave up at 20 ms");
    assert_eq!(
        api.circuit_state().phase,
        Phase::Open,
        "the held 503 tripped it"
    );
    assert_eq!(
        events.transitions(),
        [Some("http.client")],
        "the caller's drop"
    );
}
