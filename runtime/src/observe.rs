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

/// A URL with its password and every query value replaced by `[redacted]` (the user
/// name and the query's names stay).
pub fn redact_url(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    let (head, query) = match url.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (url, None),
    };
    push_without_password(&mut out, head);
    let Some(query) = query else {
        return out;
    };
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

/// `head` (a URL up to its query) with the password of its user info redacted.
fn push_without_password(out: &mut String, head: &str) {
    let authority_start = head.find("://").map_or(0, |i| i + 3);
    let authority_len = head[authority_start..]
        .find(['/', '#'])
        .unwrap_or(head.len() - authority_start);
    let authority = &head[authority_start..authority_start + authority_len];
    let password = authority
        .rfind('@')
        .and_then(|at| authority[..at].find(':').map(|colon| (colon, at)));
    match password {
        Some((colon, at)) => {
            out.push_str(&head[..authority_start + colon + 1]);
            out.push_str("[redacted]");
            out.push_str(&head[authority_start + at..]);
        }
        None => out.push_str(head),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_is_redacted() {
        assert_eq!(
            redact_url("https://user:hunter2@example.test/p?k=v"),
            "https://user:[redacted]@example.test/p?k=[redacted]"
        );
        assert_eq!(
            redact_url("https://user:hunter2@example.test"),
            "https://user:[redacted]@example.test"
        );
        // A user name alone is not a secret; an `@` in the path is not user info.
        assert_eq!(redact_url("https://user@h/p"), "https://user@h/p");
        assert_eq!(redact_url("https://h/a:b@c"), "https://h/a:b@c");
    }

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
