//! The client writes the upstream's status on its own spans only: never on the
//! caller's. Under an INFO filter (the usual production setting) the client's DEBUG
//! call span is disabled, and the span current while the client runs is the caller's
//! own (a server's request span, which uses the same OpenTelemetry field name).
//!
//! A binary of its own: the filter set here is process-wide in `tracing`'s interest
//! cache, which the other tracing tests must not share.

use std::sync::{Arc, Mutex, PoisonError};

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, resilient_api};
use tests::scripted;
use tracing::Instrument;
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// Two retries on 503.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503])
)]
pub trait Users {
    #[get("/users/{id}")]
    async fn user(&self, id: u64) -> Result<String, ApiError>;
}

/// Every `http.response.status_code` recorded after a span was made, with the span's
/// name.
#[derive(Clone, Default)]
struct StatusesRecorded(Arc<Mutex<Vec<(String, u64)>>>);

struct Statuses<'a>(&'a mut Vec<(String, u64)>, &'a str);

impl Visit for Statuses<'_> {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "http.response.status_code" {
            self.0.push((self.1.to_owned(), value));
        }
    }
    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for StatusesRecorded {
    fn on_new_span(&self, _: &Attributes<'_>, _: &Id, _: Context<'_, S>) {}
    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let name = ctx.span(id).map(|s| s.name()).unwrap_or("?");
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        values.record(&mut Statuses(&mut seen, name));
    }
}

/// Regression: inside the retry loop the client recorded an error status on the
/// current span, which under an INFO filter was the caller's.
#[tokio::test(start_paused = true)]
async fn an_upstream_status_is_not_written_into_the_callers_span() {
    let seen = StatusesRecorded::default();
    let _subscriber = tracing::subscriber::set_default(
        tracing_subscriber::registry()
            .with(LevelFilter::INFO)
            .with(seen.clone()),
    );
    tracing::callsite::rebuild_interest_cache();
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        Step::status(503).body("busy"),
        Step::status(200).body("alice"),
    ]);
    let api = scripted::<UsersClient>(&t);
    let server = tracing::info_span!(
        "server",
        "http.response.status_code" = tracing::field::Empty
    );
    assert_eq!(
        api.user(1).instrument(server).await.expect("retried"),
        "alice"
    );
    assert_eq!(t.attempts(), 3);
    let seen = seen
        .0
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    assert_eq!(seen, vec![], "the client wrote on the caller's span");
}
