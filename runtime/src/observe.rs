//! What a call tells the outside: tracing spans and events, and redaction of secrets.
//!
//! # When to use
//! Install any `tracing` subscriber to see a span per call (`http.client`) and per
//! attempt (`http.attempt`), named with OpenTelemetry's HTTP-client fields
//! (`http.request.method`, `url.template`, `http.response.status_code`,
//! `http.request.resend_count`), and events for retries, breaker transitions and
//! rejections. Spans carry the URL *template*, never the URL with its values, so no
//! path or query secret can reach a log.
//!
//! # Defaults
//! `Authorization`, `Cookie`, `Proxy-Authorization`, `Set-Cookie` and every header
//! marked sensitive (declared `secret`, or set as a client-wide secret) print as
//! `[redacted]` in every `Debug`. Query strings print with every value redacted.
//!
//! # Example
//! ```
//! use resilient_api::observe::Redacted;
//! let mut h = http::HeaderMap::new();
//! h.insert("authorization", "Bearer s3cr3t".parse().unwrap());
//! assert!(!format!("{:?}", Redacted(&h)).contains("s3cr3t"));
//! ```

use std::fmt;

use http::HeaderMap;
use http::header::{AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION, SET_COOKIE};

/// Whether a header must never be shown: credential headers and anything sensitive.
pub fn is_secret_header(name: &http::HeaderName, value: &http::HeaderValue) -> bool {
    value.is_sensitive()
        || name == AUTHORIZATION
        || name == COOKIE
        || name == PROXY_AUTHORIZATION
        || name == SET_COOKIE
}

/// Shows a header map with secret values replaced by `[redacted]`.
pub struct Redacted<'a>(pub &'a HeaderMap);

impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for (k, v) in self.0 {
            if is_secret_header(k, v) {
                m.entry(&k.as_str(), &"[redacted]");
            } else {
                m.entry(&k.as_str(), &v);
            }
        }
        m.finish()
    }
}

/// A URL with every query value replaced by `[redacted]` (the names stay).
pub fn redact_url(url: &str) -> String {
    let Some((head, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let mut out = String::with_capacity(url.len());
    out.push_str(head);
    out.push('?');
    for (i, pair) in query.split('&').enumerate() {
        if i > 0 {
            out.push('&');
        }
        match pair.split_once('=') {
            Some((k, _)) => {
                out.push_str(k);
                out.push_str("=[redacted]");
            }
            None => out.push_str(pair),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_redacted() {
        assert_eq!(
            redact_url("http://h/p?api_key=abc&x=1"),
            "http://h/p?api_key=[redacted]&x=[redacted]"
        );
        assert_eq!(redact_url("http://h/p"), "http://h/p");
    }

    #[test]
    fn sensitive_headers_are_redacted() {
        let mut h = HeaderMap::new();
        let mut v = http::HeaderValue::from_static("canary");
        v.set_sensitive(true);
        h.insert("x-api-key", v);
        h.insert("cookie", http::HeaderValue::from_static("canary2"));
        h.insert("accept", http::HeaderValue::from_static("json"));
        let s = format!("{:?}", Redacted(&h));
        assert!(!s.contains("canary"), "{s}");
        assert!(s.contains("json"));
    }
}

/// Metrics through the `metrics` facade (feature `metrics`), tagged by endpoint and
/// partition: `resilient_api_requests_total` (attempts sent),
/// `resilient_api_retries_total`, `resilient_api_calls_total` (by `outcome`: `ok` or
/// the error kind), `resilient_api_call_duration_seconds`, and
/// `resilient_api_rejections_total` (by `policy`).
#[cfg(feature = "metrics")]
pub(crate) mod metrics_impl {
    use std::time::Duration;

    pub(crate) fn attempt(endpoint: &'static str, partition: &str) {
        metrics::counter!("resilient_api_requests_total", "endpoint" => endpoint, "partition" => partition.to_owned()).increment(1);
    }

    pub(crate) fn retry(endpoint: &'static str, partition: &str) {
        metrics::counter!("resilient_api_retries_total", "endpoint" => endpoint, "partition" => partition.to_owned()).increment(1);
    }

    pub(crate) fn call(
        endpoint: &'static str,
        partition: &str,
        outcome: &'static str,
        started: tokio::time::Instant,
    ) {
        let took: Duration = started.elapsed();
        metrics::counter!("resilient_api_calls_total", "endpoint" => endpoint, "partition" => partition.to_owned(), "outcome" => outcome).increment(1);
        metrics::histogram!("resilient_api_call_duration_seconds", "endpoint" => endpoint, "partition" => partition.to_owned()).record(took.as_secs_f64());
    }
}

/// No-op stand-ins when the `metrics` feature is off.
#[cfg(not(feature = "metrics"))]
pub(crate) mod metrics_impl {
    #[inline(always)]
    pub(crate) fn attempt(_endpoint: &'static str, _partition: &str) {}

    #[inline(always)]
    pub(crate) fn retry(_endpoint: &'static str, _partition: &str) {}

    #[inline(always)]
    pub(crate) fn call(
        _endpoint: &'static str,
        _partition: &str,
        _outcome: &'static str,
        _started: tokio::time::Instant,
    ) {
    }
}
