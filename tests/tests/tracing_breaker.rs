//! Tracing (DESIGN §3.9): a breaker's transition that an attempt's outcome causes is
//! logged inside the call's span, whichever path made the attempt.
//!
//! A test binary of its own, with one test: tracing decides once per call site
//! whether anybody listens, and tests on other threads of one binary that hit the
//! same call sites with no subscriber made these events vanish from a capture set on
//! this thread (spans were still seen).

use std::sync::{Arc, Mutex, PoisonError};

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ErrorKind, resilient_api};
use tests::scripted;
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

/// Regression: a plain call's first attempt once recorded its breaker verdict after
/// leaving the call's span, so the breaker's "opened" event had no span at all.
#[tokio::test(start_paused = true)]
async fn a_breaker_transition_is_logged_in_the_call_span() {
    let events = Events::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(events.clone()));
    let t = ScriptedTransport::new([Step::status(503)]);
    let api = scripted::<TrippingClient>(&t);
    assert_eq!(api.status().await.unwrap_err().kind(), ErrorKind::Status);
    let seen = events.0.lock().unwrap_or_else(PoisonError::into_inner);
    let transitions: Vec<_> = seen
        .iter()
        .filter(|(message, _)| message == "circuit breaker transition")
        .collect();
    assert_eq!(transitions.len(), 1, "{seen:?}");
    assert_eq!(transitions[0].1, Some("http.client"), "{seen:?}");
}
