#![allow(dead_code)]
//! A `metrics` recorder for the metrics tests: it keeps every value until it is
//! dropped (`metrics-util`'s `DebuggingRecorder` zeroes counters and gauges on every
//! snapshot, which would turn a gauge read twice into a delta).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use metrics::{
    Counter, Gauge, Histogram, Key, KeyName, Label, Metadata, Recorder, SharedString, Unit,
};
use metrics_util::registry::{AtomicStorage, Registry};

/// The `endpoint` label of the metrics tests' one endpoint, `resource`.
pub const EP: (&str, &str) = ("endpoint", "resource");
/// The `partition` label of a client's own partition.
pub const DEFAULT: (&str, &str) = ("partition", "default");
/// The metrics by name.
pub const IN_FLIGHT: &str = "resilient_api_in_flight";
pub const DEPTH: &str = "resilient_api_queue_depth";
pub const REQUESTS: &str = "resilient_api_requests_total";
pub const RETRIES: &str = "resilient_api_retries_total";
pub const CALLS: &str = "resilient_api_calls_total";
pub const REJECTIONS: &str = "resilient_api_rejections_total";
pub const DURATION: &str = "resilient_api_call_duration_seconds";

/// Poll `fut` for `d` of paused time, and hand it back unfinished.
pub async fn run_for<F: std::future::Future + Unpin>(fut: &mut F, d: std::time::Duration) {
    assert!(
        tokio::time::timeout(d, fut).await.is_err(),
        "the call was expected to be still running"
    );
}

/// A recorder that keeps every value until it is dropped.
pub struct Recorded(Registry<Key, AtomicStorage>);

impl Recorded {
    pub fn new() -> Self {
        Recorded(Registry::atomic())
    }

    fn key(name: &'static str, labels: &[(&'static str, &'static str)]) -> Key {
        let labels: Vec<Label> = labels.iter().map(|&(k, v)| Label::new(k, v)).collect();
        Key::from_parts(name, labels)
    }

    /// A counter's value; `0` if it was never touched.
    pub fn counter(&self, name: &'static str, labels: &[(&'static str, &'static str)]) -> u64 {
        self.0
            .get_counter(&Self::key(name, labels))
            .map_or(0, |c| c.load(Ordering::SeqCst))
    }

    /// A gauge's value; `None` if it was never touched.
    pub fn gauge(
        &self,
        name: &'static str,
        labels: &[(&'static str, &'static str)],
    ) -> Option<f64> {
        self.0
            .get_gauge(&Self::key(name, labels))
            .map(|g| f64::from_bits(g.load(Ordering::SeqCst)))
    }

    /// A histogram's samples.
    pub fn histogram(
        &self,
        name: &'static str,
        labels: &[(&'static str, &'static str)],
    ) -> Vec<f64> {
        self.0
            .get_histogram(&Self::key(name, labels))
            .map_or_else(Vec::new, |h| h.data())
    }

    /// How many series of `name` there are (with any labels).
    pub fn series(&self, name: &str) -> usize {
        self.all_series()
            .iter()
            .filter(|s| s.split('{').next() == Some(name))
            .count()
    }

    /// Every series, as `name{label=value,...}`, sorted.
    pub fn all_series(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut push = |k: &Key| {
            let labels: Vec<String> = k
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            out.push(format!("{}{{{}}}", k.name(), labels.join(",")));
        };
        self.0.visit_counters(|k, _| push(k));
        self.0.visit_gauges(|k, _| push(k));
        self.0.visit_histograms(|k, _| push(k));
        out.sort();
        out
    }

    /// Every gauge's value, as `(name{labels}, value)`.
    pub fn all_gauges(&self) -> Vec<(String, f64)> {
        let mut out = Vec::new();
        self.0.visit_gauges(|k, g| {
            let labels: Vec<String> = k
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            out.push((
                format!("{}{{{}}}", k.name(), labels.join(",")),
                f64::from_bits(g.load(Ordering::SeqCst)),
            ));
        });
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Every in-flight and queue-depth gauge reads zero.
    #[track_caller]
    pub fn assert_gauges_at_rest(&self) {
        for (series, value) in self.all_gauges() {
            if series.starts_with("resilient_api_in_flight")
                || series.starts_with("resilient_api_queue_depth")
            {
                assert_eq!(value, 0.0, "{series} did not return to zero");
            }
        }
    }
}

impl Recorder for Recorded {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        self.0
            .get_or_create_counter(key, |c: &Arc<AtomicU64>| Counter::from_arc(c.clone()))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        self.0
            .get_or_create_gauge(key, |g: &Arc<AtomicU64>| Gauge::from_arc(g.clone()))
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        self.0
            .get_or_create_histogram(key, |h| Histogram::from_arc(h.clone()))
    }
}
