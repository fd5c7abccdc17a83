//! What a call tells the outside: tracing spans and events, and redaction of secrets.
//!
//! # When to use
//! Install any `tracing` subscriber to see a span per call (`http.client`) and per
//! attempt (`http.attempt`; a coalesced execution's attempts sit in its own
//! `http.client.shared` span, a root that follows from the caller who started it, so
//! no caller's span outlives its call, and each caller's span carries the last status
//! that execution received), named with OpenTelemetry's HTTP-client fields
//! (`http.request.method`, `url.template`, `http.response.status_code`,
//! `http.request.resend_count`), and events for retries, breaker transitions and
//! rejections. A call that fails says so with a `call failed` event in its span,
//! naming the error; an answer that cannot be decoded is the call's failure too (the
//! call's span closes once its answer is decoded). Spans carry the URL *template*,
//! never the URL with its values, so no path or query secret can reach a log.
//!
//! # Defaults
//! `Authorization`, `Cookie`, `Proxy-Authorization`, `Set-Cookie` and every header
//! marked sensitive (declared `secret` by the endpoint, whether the call or the
//! client's `header()` gave its value, or set as a client-wide secret) print as
//! `[redacted]` in every `Debug`. Query strings and fragments print with every value
//! redacted; a `Location` (or `Content-Location`) header prints without its user
//! info, and with its query and fragment, if any, as `[redacted]`. A body, a
//! request's or a response's (`RawResponse`, `HttpResponse`), prints as its length
//! only (`N bytes`, or `stream`), never its bytes.
//!
//! # Metrics
//! With the feature `metrics`, a call reports through the `metrics` facade to whatever
//! recorder is installed. Without it nothing is recorded and nothing is compiled in.
//!
//! Labels: `endpoint` is the trait method's name; `partition` is the partition's
//! name, or `default` for the partition an endpoint without `partition = ...` uses
//! (so a partition named `default` shares its series, and one named `global` shares
//! the queue-depth series of the engine's global bulkhead). A breaker's series is
//! keyed by origin and partition only: two clients of one API and one host that do
//! not share an engine have a breaker each, and both write the one series (it shows
//! the latest transition of either).
//!
//! | name | kind | labels | meaning |
//! | --- | --- | --- | --- |
//! | `resilient_api_requests_total` | counter | `endpoint`, `partition` | attempts sent (retries and hedges included) |
//! | `resilient_api_retries_total` | counter | `endpoint`, `partition` | retries decided, each before its backoff |
//! | `resilient_api_calls_total` | counter | `endpoint`, `partition`, `outcome` | calls ended, once each: `outcome` is `ok` or the error kind ([`ErrorKind::as_str`](crate::ErrorKind::as_str)); a call ends once its answer is decoded, so a body that cannot be decoded is a `decode` (or `unexpected_content_type`) call; a call whose future its caller drops (a `tokio::time::timeout` around it, a `select!` that took another branch) is `cancelled`, like one cancelled by its token (a future dropped before its first poll never started, and counts nothing); a call ended by a panic (its result type's `Deserialize`, a hook) is `panicked` |
//! | `resilient_api_call_duration_seconds` | histogram | `endpoint`, `partition` | a call's time from start to end, whatever its outcome (for a dropped call, until it was dropped) |
//! | `resilient_api_rejections_total` | counter | `endpoint`, `partition`, `policy` | calls ended by a policy's refusal, once each: `policy` is `circuit_breaker`, `bulkhead`, `rate_limit` or `retry_budget` (also counted in `calls_total`) |
//! | `resilient_api_in_flight` | gauge | `endpoint`, `partition` | attempts sent and not yet ended: up by one at dispatch, down by one when the attempt ends in any way (answered, failed, timed out, lost a hedge race, dropped); a streamed response's attempt ends with its head |
//! | `resilient_api_queue_depth` | gauge | `partition` | callers waiting in a bulkhead queue; the engine's global bulkhead is `partition="global"` |
//! | `resilient_api_breaker_state` | gauge | `origin`, `partition` | the breaker's state, set on every transition: `0` closed, `1` half-open, `2` open. Absent until the first transition (closed); an open breaker turns half-open when the first attempt after its reset asks, or `circuit_state()` is read, so it reads `2` until then |
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
use http::header::{
    AUTHORIZATION, CONTENT_LOCATION, COOKIE, LOCATION, PROXY_AUTHORIZATION, SET_COOKIE,
};

/// Whether a header must never be shown: credential headers and anything sensitive.
///
/// ```
/// use http::{header::AUTHORIZATION, HeaderName, HeaderValue};
/// use resilient_api::observe::is_secret_header;
///
/// let mut key = HeaderValue::from_static("k-123");
/// assert!(!is_secret_header(&HeaderName::from_static("x-api-key"), &key));
/// key.set_sensitive(true); // how a `secret` parameter's value is marked
/// assert!(is_secret_header(&HeaderName::from_static("x-api-key"), &key));
/// assert!(is_secret_header(&AUTHORIZATION, &HeaderValue::from_static("Bearer t")));
/// ```
pub fn is_secret_header(name: &http::HeaderName, value: &http::HeaderValue) -> bool {
    value.is_sensitive()
        || name == AUTHORIZATION
        || name == COOKIE
        || name == PROXY_AUTHORIZATION
        || name == SET_COOKIE
}

/// Shows a header map with secret values replaced by `[redacted]`, and a `Location`
/// or `Content-Location` as [`redact_location`] shows it.
///
/// ```
/// use resilient_api::observe::Redacted;
///
/// let mut headers = http::HeaderMap::new();
/// headers.insert("accept", http::HeaderValue::from_static("application/json"));
/// headers.insert("cookie", http::HeaderValue::from_static("session=s3cr3t"));
/// assert_eq!(
///     format!("{:?}", Redacted(&headers)),
///     r#"{"accept": "application/json", "cookie": "[redacted]"}"#,
/// );
/// ```
pub struct Redacted<'a>(pub &'a HeaderMap);

impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for (k, v) in self.0 {
            if is_secret_header(k, v) {
                m.entry(&k.as_str(), &"[redacted]");
            } else if k == LOCATION || k == CONTENT_LOCATION {
                let shown = std::str::from_utf8(v.as_bytes()).map(redact_location);
                m.entry(&k.as_str(), &shown.as_deref().unwrap_or("[redacted]"));
            } else {
                m.entry(&k.as_str(), &v);
            }
        }
        m.finish()
    }
}

/// A URL with its password and every query and fragment value replaced by
/// `[redacted]` (the user name, the query's names and the fragment's stay): a
/// fragment such as `#access_token=...` is redacted as the query is.
///
/// `url` is read as a parsed URL's text (what [`url::Url::as_str`] gives): in raw text
/// that does not parse, a `#`, `?` or `/` inside a password ends the authority early,
/// and the rest of the password is shown. Parse first.
///
/// ```
/// use resilient_api::observe::redact_url;
///
/// assert_eq!(
///     redact_url("https://ada:hunter2@api.test/v1/users?api_key=abc&page=2"),
///     "https://ada:[redacted]@api.test/v1/users?api_key=[redacted]&page=[redacted]",
/// );
/// assert_eq!(
///     redact_url("https://app.test/callback#access_token=abc&expires_in=3600"),
///     "https://app.test/callback#access_token=[redacted]&expires_in=[redacted]",
/// );
/// ```
pub fn redact_url(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    // The fragment first: a `?` after the `#` is the fragment's.
    let (rest, fragment) = match url.split_once('#') {
        Some((rest, fragment)) => (rest, Some(fragment)),
        None => (url, None),
    };
    let (head, query) = match rest.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (rest, None),
    };
    push_without_password(&mut out, head);
    if let Some(query) = query {
        out.push('?');
        push_redacted_query(&mut out, query);
    }
    if let Some(fragment) = fragment {
        out.push('#');
        push_redacted_query(&mut out, fragment);
    }
    out
}

/// A `Location` as it may be shown: without its user info, and with its query and
/// its fragment, if it has them, replaced by `[redacted]`, names and all (a server's
/// `Location` is no URL the client built, and may carry anything).
///
/// ```
/// use resilient_api::observe::redact_location;
///
/// assert_eq!(
///     redact_location("https://ada:hunter2@api.test/cb?code=abc#access_token=xyz"),
///     "https://api.test/cb?[redacted]#[redacted]",
/// );
/// assert_eq!(redact_location("/next#top"), "/next#[redacted]");
/// ```
pub fn redact_location(location: &str) -> String {
    let mut out = String::with_capacity(location.len());
    let (rest, fragment) = match location.split_once('#') {
        Some((rest, _)) => (rest, true),
        None => (location, false),
    };
    let (head, query) = match rest.split_once('?') {
        Some((head, _)) => (head, true),
        None => (rest, false),
    };
    // The authority follows `scheme://`, or `//` in a relative reference; a `\` ends
    // it as a `/` does (browsers read `\` as `/` in http(s) URLs).
    let authority_start = match head.find("://") {
        Some(i) => Some(i + 3),
        None => head.starts_with("//").then_some(2),
    };
    match authority_start {
        Some(start) => {
            let len = head[start..]
                .find(['/', '\\'])
                .unwrap_or(head.len() - start);
            let authority = &head[start..start + len];
            out.push_str(&head[..start]);
            out.push_str(
                authority
                    .rfind('@')
                    .map_or(authority, |at| &authority[at + 1..]),
            );
            out.push_str(&head[start + len..]);
        }
        None => out.push_str(head),
    }
    if query {
        out.push_str("?[redacted]");
    }
    if fragment {
        out.push_str("#[redacted]");
    }
    out
}

/// `query` (without its `?`; or a fragment, without its `#`) with every value
/// replaced by `[redacted]`.
pub(crate) fn push_redacted_query(out: &mut String, query: &str) {
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
}

/// `head` (a URL up to its query and fragment) with the password of its user info
/// redacted.
fn push_without_password(out: &mut String, head: &str) {
    let authority_start = head.find("://").map_or(0, |i| i + 3);
    let authority_len = head[authority_start..]
        .find('/')
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

    /// Regression: the fragment was kept as it was written, so an OAuth implicit
    /// grant's `#access_token=...` printed in clear where the query's did not.
    #[test]
    fn fragment_values_are_redacted() {
        assert_eq!(
            redact_url("https://h/cb#access_token=CANARY&token_type=bearer"),
            "https://h/cb#access_token=[redacted]&token_type=[redacted]"
        );
        assert_eq!(
            redact_url("https://h/cb?code=CANARY#state=CANARY2"),
            "https://h/cb?code=[redacted]#state=[redacted]"
        );
        // A `?` inside the fragment is the fragment's, not a query.
        assert_eq!(
            redact_url("https://h/p#a?k=CANARY"),
            "https://h/p#a?k=[redacted]"
        );
        // A bare anchor is kept, as a bare query name is.
        assert_eq!(
            redact_url("https://u:pw@h#section-2"),
            "https://u:[redacted]@h#section-2"
        );
        assert_eq!(redact_url("https://h/p#"), "https://h/p#");
    }

    #[test]
    fn a_location_loses_its_user_info_query_and_fragment() {
        for (location, shown) in [
            (
                "https://u:pw@h/p?k=v#f",
                "https://h/p?[redacted]#[redacted]",
            ),
            ("https://u@h", "https://h"),
            ("//u:pw@h/p", "//h/p"),
            ("https://h/a:b@c", "https://h/a:b@c"),
            ("https://evil.test\\@h/x", "https://evil.test\\@h/x"),
            ("/p#a?k=v", "/p#[redacted]"),
            ("p?", "p?[redacted]"),
            ("", ""),
        ] {
            assert_eq!(redact_location(location), shown, "{location:?}");
        }
    }

    #[test]
    fn a_location_header_is_shown_redacted() {
        let mut h = HeaderMap::new();
        h.insert(
            LOCATION,
            http::HeaderValue::from_static("https://u:pw@h/?k=v"),
        );
        let latin1 = http::HeaderValue::from_bytes(b"/caf\xe9?k=v").expect("obs-text");
        h.insert(CONTENT_LOCATION, latin1);
        assert_eq!(
            format!("{:?}", Redacted(&h)),
            r#"{"location": "https://h/?[redacted]", "content-location": "[redacted]"}"#
        );
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

/// The metrics listed in the module's docs (feature `metrics`).
#[cfg(feature = "metrics")]
pub(crate) mod metrics_impl {
    use std::time::Duration;

    use metrics::{Gauge, SharedString};

    use crate::circuit_breaker::state::Phase;
    use crate::error::{ApiError, ErrorKind};
    use crate::response::RawResponse;

    /// The `partition` label: the default partition (named `""`) is `default`.
    fn partition_tag(partition: &str) -> SharedString {
        if partition.is_empty() {
            SharedString::const_str("default")
        } else {
            SharedString::from(partition.to_owned())
        }
    }

    /// The policy whose refusal `kind` is, if it is one.
    fn rejected_by(kind: ErrorKind) -> Option<&'static str> {
        match kind {
            ErrorKind::CircuitOpen => Some("circuit_breaker"),
            ErrorKind::BulkheadFull => Some("bulkhead"),
            ErrorKind::RateLimited => Some("rate_limit"),
            ErrorKind::BudgetExhausted => Some("retry_budget"),
            _ => None,
        }
    }

    /// An attempt is sent: counted, and in flight until the returned guard drops.
    pub(crate) fn attempt(endpoint: &'static str, partition: &str) -> InFlight {
        let partition = partition_tag(partition);
        metrics::counter!("resilient_api_requests_total", "endpoint" => endpoint, "partition" => partition.clone()).increment(1);
        let gauge = metrics::gauge!("resilient_api_in_flight", "endpoint" => endpoint, "partition" => partition);
        gauge.increment(1.0);
        InFlight(gauge)
    }

    /// An attempt in flight; dropping it (however the attempt ends) takes it out.
    #[must_use]
    pub(crate) struct InFlight(Gauge);

    impl Drop for InFlight {
        fn drop(&mut self) {
            self.0.decrement(1.0);
        }
    }

    pub(crate) fn retry(endpoint: &'static str, partition: &str) {
        metrics::counter!("resilient_api_retries_total", "endpoint" => endpoint, "partition" => partition_tag(partition)).increment(1);
    }

    /// A call is under way: its end is recorded once, by [`CallEnd::record`] (once
    /// its answer is decoded, so a body that cannot be decoded is the call's
    /// outcome), or as `cancelled` if the call's future is dropped first (its caller
    /// gave up on it).
    pub(crate) fn call_end<'a>(
        endpoint: &'static str,
        partition: &'a str,
        started: tokio::time::Instant,
    ) -> CallEnd<'a> {
        CallEnd {
            endpoint,
            partition,
            started,
            recorded: false,
        }
    }

    /// A call's answer with its end, which its caller records once the answer is
    /// decoded ([`decoded`]).
    pub(crate) type Ended<'a> = (Result<RawResponse, ApiError>, CallEnd<'a>);

    /// The answer `result` of the call `end` is the end of.
    pub(crate) fn ended(result: Result<RawResponse, ApiError>, end: CallEnd<'_>) -> Ended<'_> {
        (result, end)
    }

    /// Decode a call's answer, then record the call's end with the decoded outcome: a
    /// body that cannot be decoded is the call's outcome.
    pub(crate) fn decoded<T>(
        ended: Ended<'_>,
        decode: impl FnOnce(Result<RawResponse, ApiError>) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        let (answer, end) = ended;
        let result = decode(answer);
        end.record(result.as_ref().map(|_| ()).map_err(ApiError::kind));
        result
    }

    /// A call whose end is not recorded yet (see [`call_end`]).
    pub(crate) struct CallEnd<'a> {
        endpoint: &'static str,
        partition: &'a str,
        started: tokio::time::Instant,
        recorded: bool,
    }

    impl CallEnd<'_> {
        /// A call that never started (a broken invariant): nothing to record.
        pub(crate) fn unstarted() -> Self {
            CallEnd {
                endpoint: "",
                partition: "",
                started: tokio::time::Instant::now(),
                recorded: true,
            }
        }

        /// The call ended: `Ok(())`, or the kind of its error.
        pub(crate) fn record(mut self, outcome: Result<(), ErrorKind>) {
            if !self.recorded {
                self.recorded = true;
                call(self.endpoint, self.partition, outcome, self.started);
            }
        }
    }

    impl Drop for CallEnd<'_> {
        fn drop(&mut self) {
            if !self.recorded {
                // Dropped by a panic's unwinding (a decoder's, a hook's), the call
                // ended in that panic; dropped otherwise, its caller gave up on it.
                if std::thread::panicking() {
                    ended_as(self.endpoint, self.partition, "panicked", self.started);
                } else {
                    let cancelled = Err(ErrorKind::Cancelled);
                    call(self.endpoint, self.partition, cancelled, self.started);
                }
            }
        }
    }

    /// A call ended: `Ok(())`, or the kind of its error.
    fn call(
        endpoint: &'static str,
        partition: &str,
        outcome: Result<(), ErrorKind>,
        started: tokio::time::Instant,
    ) {
        let label = match outcome {
            Ok(()) => "ok",
            Err(kind) => kind.as_str(),
        };
        if let Some(policy) = outcome.err().and_then(rejected_by) {
            metrics::counter!("resilient_api_rejections_total", "endpoint" => endpoint, "partition" => partition_tag(partition), "policy" => policy).increment(1);
        }
        ended_as(endpoint, partition, label, started);
    }

    /// A call ended with the outcome `label`.
    fn ended_as(
        endpoint: &'static str,
        partition: &str,
        label: &'static str,
        started: tokio::time::Instant,
    ) {
        let took: Duration = started.elapsed();
        let partition = partition_tag(partition);
        metrics::counter!("resilient_api_calls_total", "endpoint" => endpoint, "partition" => partition.clone(), "outcome" => label).increment(1);
        metrics::histogram!("resilient_api_call_duration_seconds", "endpoint" => endpoint, "partition" => partition).record(took.as_secs_f64());
    }

    /// A caller may wait in a bulkhead queue (of `partition`, or the global one when
    /// `None`) until the returned guard drops.
    pub(crate) fn queued(partition: Option<&str>) -> Queued {
        let partition = match partition {
            Some(p) => partition_tag(p),
            None => SharedString::const_str("global"),
        };
        let gauge = metrics::gauge!("resilient_api_queue_depth", "partition" => partition);
        gauge.increment(1.0);
        Queued(gauge)
    }

    /// A caller waiting in a bulkhead queue; dropping it (permit granted, queue
    /// full, call dropped) takes it out.
    #[must_use]
    pub(crate) struct Queued(Gauge);

    impl Drop for Queued {
        fn drop(&mut self) {
            self.0.decrement(1.0);
        }
    }

    /// The breaker of `partition` of `origin` entered `phase`.
    pub(crate) fn breaker_state(origin: &str, partition: &str, phase: Phase) {
        let value = match phase {
            Phase::Closed => 0.0,
            Phase::HalfOpen => 1.0,
            Phase::Open => 2.0,
        };
        metrics::gauge!(
            "resilient_api_breaker_state",
            "origin" => origin.to_owned(),
            "partition" => partition_tag(partition)
        )
        .set(value);
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn rejections_map_to_their_policy() {
            assert_eq!(rejected_by(ErrorKind::CircuitOpen), Some("circuit_breaker"));
            assert_eq!(rejected_by(ErrorKind::BulkheadFull), Some("bulkhead"));
            assert_eq!(rejected_by(ErrorKind::RateLimited), Some("rate_limit"));
            assert_eq!(
                rejected_by(ErrorKind::BudgetExhausted),
                Some("retry_budget")
            );
            assert_eq!(rejected_by(ErrorKind::Deadline), None);
            assert_eq!(rejected_by(ErrorKind::Status), None);
        }

        #[test]
        fn the_default_partition_is_tagged_default() {
            assert_eq!(&*partition_tag(""), "default");
            assert_eq!(&*partition_tag("search"), "search");
        }
    }
}

/// No-op stand-ins when the `metrics` feature is off: empty functions and zero-sized
/// guards without `Drop`.
#[cfg(not(feature = "metrics"))]
pub(crate) mod metrics_impl {
    use crate::circuit_breaker::state::Phase;
    use crate::error::ApiError;
    use crate::response::RawResponse;

    #[inline(always)]
    pub(crate) fn attempt(_endpoint: &'static str, _partition: &str) -> InFlight {
        InFlight
    }

    #[must_use]
    pub(crate) struct InFlight;

    #[inline(always)]
    pub(crate) fn retry(_endpoint: &'static str, _partition: &str) {}

    #[inline(always)]
    pub(crate) fn call_end<'a>(
        _endpoint: &'static str,
        _partition: &'a str,
        _started: tokio::time::Instant,
    ) -> CallEnd<'a> {
        CallEnd(std::marker::PhantomData)
    }

    /// Zero-sized, and without `Drop`.
    pub(crate) struct CallEnd<'a>(std::marker::PhantomData<&'a str>);

    /// The answer alone: nothing to record, and nothing more for the call's future
    /// to hand over.
    pub(crate) type Ended<'a> = Result<RawResponse, ApiError>;

    #[inline(always)]
    pub(crate) fn ended(result: Result<RawResponse, ApiError>, _end: CallEnd<'_>) -> Ended<'_> {
        result
    }

    #[inline(always)]
    pub(crate) fn decoded<T>(
        ended: Ended<'_>,
        decode: impl FnOnce(Result<RawResponse, ApiError>) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        decode(ended)
    }

    impl CallEnd<'_> {
        #[inline(always)]
        pub(crate) fn unstarted() -> Self {
            CallEnd(std::marker::PhantomData)
        }
    }

    #[inline(always)]
    pub(crate) fn queued(_partition: Option<&str>) -> Queued {
        Queued
    }

    #[must_use]
    pub(crate) struct Queued;

    #[inline(always)]
    pub(crate) fn breaker_state(_origin: &str, _partition: &str, _phase: Phase) {}
}
