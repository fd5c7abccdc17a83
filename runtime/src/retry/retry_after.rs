//! What a response asked for (`Retry-After`, `retry-after-ms`), converted once to a wait from now.
//!
//! # When to use
//! The retry loop calls [`server_wait`] on a retryable response; when it returns a
//! wait, that wait replaces the computed backoff for the next retry. The two parsers
//! are public for callers who read the headers themselves.
//!
//! A server's date is rounded **up** (to the whole millisecond), so a retry never
//! leaves before the instant the server named. The wait is capped, because the header
//! is the server's number, not the caller's budget (the error that ends a call still
//! tells the caller the server's wait as it asked:
//! [`ApiError::retry_after`](crate::ApiError::retry_after)). Malformed values (`-5`,
//! `1.5`, `5s`, garbage) give `None`, so the caller falls back to its computed backoff;
//! a date in the past gives a zero wait. Huge values saturate instead of failing, and
//! no input can panic.
//!
//! # Defaults
//! Cap: [`DEFAULT_RETRY_AFTER_CAP`] (60 s). `retry-after-ms` wins over `Retry-After`
//! when both are present and valid.
//!
//! # Example
//! ```
//! use std::time::{Duration, SystemTime};
//! use http::{HeaderMap, HeaderValue, header::RETRY_AFTER};
//! use resilient_api::retry::retry_after::{
//!     parse_retry_after, server_wait, DEFAULT_RETRY_AFTER_CAP,
//! };
//!
//! let now = SystemTime::now();
//! assert_eq!(parse_retry_after(b"3", now), Some(Duration::from_secs(3)));
//! assert_eq!(parse_retry_after(b"5s", now), None);
//!
//! let mut headers = HeaderMap::new();
//! headers.insert(RETRY_AFTER, HeaderValue::from_static("3600"));
//! // An hour is what the server asked for; the cap keeps it to a minute.
//! assert_eq!(server_wait(&headers, now, DEFAULT_RETRY_AFTER_CAP), Some(Duration::from_secs(60)));
//! ```

use std::time::{Duration, SystemTime};

use http::HeaderMap;
use http::header::RETRY_AFTER;

/// The longest wait a server may ask for by default: 60 seconds.
///
/// ```
/// use resilient_api::retry::retry_after::{server_wait, DEFAULT_RETRY_AFTER_CAP};
/// use std::time::{Duration, SystemTime};
///
/// let mut headers = http::HeaderMap::new();
/// headers.insert("retry-after", http::HeaderValue::from_static("3600"));
/// let wait = server_wait(&headers, SystemTime::now(), DEFAULT_RETRY_AFTER_CAP);
/// assert_eq!(wait, Some(Duration::from_secs(60))); // an hour is asked, a minute is honoured
/// ```
pub const DEFAULT_RETRY_AFTER_CAP: Duration = Duration::from_secs(60);

/// The non-standard header some APIs send with a millisecond wait.
const RETRY_AFTER_MS: &str = "retry-after-ms";

/// Parses a `Retry-After` value into a wait from `now_wall`.
///
/// Accepts delta-seconds (ASCII digits only, optional surrounding whitespace; a
/// number too large for a [`Duration`] saturates) or an HTTP-date in any of the three
/// RFC 9110 forms (IMF-fixdate, RFC 850, asctime). A date at or before `now_wall`
/// gives [`Duration::ZERO`]; a later one gives `date - now_wall` rounded up to whole
/// milliseconds. Anything else (a sign, a fraction, a unit, an empty value) is `None`.
///
/// ```
/// use std::time::{Duration, SystemTime, UNIX_EPOCH};
/// use resilient_api::retry::retry_after::parse_retry_after;
///
/// let now = UNIX_EPOCH + Duration::from_millis(784_111_776_250);
/// let date = b"Sun, 06 Nov 1994 08:49:37 GMT"; // 0.75 s after `now`
/// assert_eq!(parse_retry_after(date, now), Some(Duration::from_millis(750)));
/// assert_eq!(parse_retry_after(b" 120 ", now), Some(Duration::from_secs(120)));
/// assert_eq!(parse_retry_after(b"-5", now), None);
/// ```
#[must_use]
pub fn parse_retry_after(value: &[u8], now_wall: SystemTime) -> Option<Duration> {
    let value = value.trim_ascii();
    if let Some(secs) = parse_digits(value) {
        return Some(Duration::from_secs(secs));
    }
    let text = std::str::from_utf8(value).ok()?;
    let date = httpdate::parse_http_date(text).ok()?;
    match date.duration_since(now_wall) {
        Ok(wait) => Some(round_up_to_millis(wait)),
        // The date is before now: no wait.
        Err(_) => Some(Duration::ZERO),
    }
}

/// Parses a `retry-after-ms` value: a non-negative whole number of milliseconds.
///
/// ASCII digits only, with optional surrounding whitespace; a number too large
/// saturates. Anything else (a sign, a fraction, a unit, an empty value) is `None`.
///
/// ```
/// use std::time::Duration;
/// use resilient_api::retry::retry_after::parse_retry_after_ms;
///
/// assert_eq!(parse_retry_after_ms(b"1500"), Some(Duration::from_millis(1500)));
/// assert_eq!(parse_retry_after_ms(b"1.5"), None);
/// ```
#[must_use]
pub fn parse_retry_after_ms(value: &[u8]) -> Option<Duration> {
    parse_digits(value.trim_ascii()).map(Duration::from_millis)
}

/// What the server asked for in a response's headers, as a wait from `now_wall`, at
/// most `cap`.
///
/// A valid `retry-after-ms` wins; otherwise `Retry-After` is used (only the first
/// value of each header is read). `None` when neither header is present and valid:
/// the caller then uses its computed backoff.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use http::{HeaderMap, HeaderValue};
/// use resilient_api::retry::retry_after::server_wait;
///
/// let mut headers = HeaderMap::new();
/// headers.insert("retry-after", HeaderValue::from_static("2"));
/// headers.insert("retry-after-ms", HeaderValue::from_static("250"));
/// let wait = server_wait(&headers, SystemTime::now(), Duration::from_secs(60));
/// assert_eq!(wait, Some(Duration::from_millis(250)));
/// assert_eq!(server_wait(&HeaderMap::new(), SystemTime::now(), Duration::MAX), None);
/// ```
#[must_use]
pub fn server_wait(headers: &HeaderMap, now_wall: SystemTime, cap: Duration) -> Option<Duration> {
    let from_ms = headers
        .get(RETRY_AFTER_MS)
        .and_then(|v| parse_retry_after_ms(v.as_bytes()));
    let wait = match from_ms {
        Some(wait) => wait,
        None => headers
            .get(RETRY_AFTER)
            .and_then(|v| parse_retry_after(v.as_bytes(), now_wall))?,
    };
    Some(wait.min(cap))
}

/// A non-empty run of ASCII digits as a number, saturating at `u64::MAX`.
fn parse_digits(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(digits.iter().fold(0u64, |n, d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

/// Rounds up to the next whole millisecond (saturating).
fn round_up_to_millis(d: Duration) -> Duration {
    let rest = d.subsec_nanos() % 1_000_000;
    if rest == 0 {
        d
    } else {
        d.saturating_add(Duration::from_nanos(u64::from(1_000_000 - rest)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use proptest::prelude::*;
    use std::time::UNIX_EPOCH;

    /// 2023-11-14 22:13:20 UTC, a Tuesday.
    const NOW_SECS: u64 = 1_700_000_000;

    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(NOW_SECS)
    }

    fn secs(n: u64) -> Option<Duration> {
        Some(Duration::from_secs(n))
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn delta_seconds_are_parsed() {
        assert_eq!(parse_retry_after(b"1", now()), secs(1));
        assert_eq!(parse_retry_after(b"0", now()), secs(0));
        assert_eq!(parse_retry_after(b" 3 ", now()), secs(3));
        assert_eq!(parse_retry_after(b"\t007\t", now()), secs(7));
    }

    #[test]
    fn malformed_delta_seconds_are_rejected() {
        for bad in [
            &b"-5"[..],
            b"+5",
            b"1.5",
            b"5s",
            b"",
            b"   ",
            b"abc",
            b"1 2",
            b"\xff\xfe",
            b"\xd9\xa3", // ARABIC-INDIC DIGIT THREE: a digit, but not an ASCII one
        ] {
            assert_eq!(parse_retry_after(bad, now()), None, "{bad:?}");
            assert_eq!(parse_retry_after_ms(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn huge_delta_seconds_saturate_then_are_capped() {
        let huge = b"99999999999999999999999";
        assert_eq!(parse_retry_after(huge, now()), secs(u64::MAX));
        let h = headers(&[("retry-after", "99999999999999999999999")]);
        assert_eq!(server_wait(&h, now(), DEFAULT_RETRY_AFTER_CAP), secs(60));
        assert_eq!(
            parse_retry_after_ms(huge),
            Some(Duration::from_millis(u64::MAX))
        );
    }

    #[test]
    fn imf_fixdate_in_the_future() {
        let date = httpdate::fmt_http_date(now() + Duration::from_secs(30));
        assert_eq!(date, "Tue, 14 Nov 2023 22:13:50 GMT");
        assert_eq!(parse_retry_after(date.as_bytes(), now()), secs(30));
    }

    #[test]
    fn rfc850_date_in_the_future() {
        let date = b"Tuesday, 14-Nov-23 22:13:50 GMT";
        assert_eq!(parse_retry_after(date, now()), secs(30));
    }

    #[test]
    fn asctime_date_in_the_future() {
        assert_eq!(
            parse_retry_after(b"Tue Nov 14 22:13:50 2023", now()),
            secs(30)
        );
    }

    #[test]
    fn asctime_with_a_space_padded_day() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777 - 10);
        assert_eq!(
            parse_retry_after(b"Sun Nov  6 08:49:37 1994", now),
            secs(10)
        );
    }

    #[test]
    fn past_or_present_date_means_no_wait() {
        let past = httpdate::fmt_http_date(now() - Duration::from_secs(3_600));
        assert_eq!(parse_retry_after(past.as_bytes(), now()), secs(0));
        let present = httpdate::fmt_http_date(now());
        assert_eq!(parse_retry_after(present.as_bytes(), now()), secs(0));
        assert_eq!(
            parse_retry_after(b"Sun Nov  6 08:49:37 1994", now()),
            secs(0)
        );
    }

    #[test]
    fn future_date_is_rounded_up_to_whole_milliseconds() {
        let date = httpdate::fmt_http_date(now() + Duration::from_secs(30));
        // now has sub-second precision: 29.8 s exactly.
        let now_plus = now() + Duration::from_millis(200);
        assert_eq!(
            parse_retry_after(date.as_bytes(), now_plus),
            Some(Duration::from_millis(29_800))
        );
        // 29.9999995 s rounds up to 30 s, never down.
        let now_plus = now() + Duration::from_nanos(500);
        assert_eq!(parse_retry_after(date.as_bytes(), now_plus), secs(30));
        // A date half a microsecond ahead still waits a whole millisecond.
        let now_minus = now() + Duration::from_secs(30) - Duration::from_nanos(500);
        assert_eq!(
            parse_retry_after(date.as_bytes(), now_minus),
            Some(Duration::from_millis(1))
        );
    }

    #[test]
    fn dates_with_wrong_weekday_or_garbage_are_rejected() {
        assert_eq!(
            parse_retry_after(b"Mon, 14 Nov 2023 22:13:50 GMT", now()),
            None
        );
        assert_eq!(
            parse_retry_after(b"Tue, 14 Nov 2023 22:13:50 UTC", now()),
            None
        );
        assert_eq!(parse_retry_after(b"tomorrow", now()), None);
    }

    #[test]
    fn retry_after_ms_is_parsed() {
        assert_eq!(parse_retry_after_ms(b"0"), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after_ms(b"1500"),
            Some(Duration::from_millis(1_500))
        );
        assert_eq!(
            parse_retry_after_ms(b" 20 "),
            Some(Duration::from_millis(20))
        );
    }

    #[test]
    fn server_wait_prefers_valid_retry_after_ms() {
        let h = headers(&[("retry-after", "5"), ("retry-after-ms", "1500")]);
        assert_eq!(
            server_wait(&h, now(), DEFAULT_RETRY_AFTER_CAP),
            Some(Duration::from_millis(1_500))
        );
    }

    #[test]
    fn server_wait_falls_back_to_retry_after_when_ms_is_invalid() {
        let h = headers(&[("retry-after", "5"), ("retry-after-ms", "1.5")]);
        assert_eq!(server_wait(&h, now(), DEFAULT_RETRY_AFTER_CAP), secs(5));
        let h = headers(&[("retry-after", "Tue, 14 Nov 2023 22:13:50 GMT")]);
        assert_eq!(server_wait(&h, now(), DEFAULT_RETRY_AFTER_CAP), secs(30));
    }

    #[test]
    fn server_wait_is_none_without_a_valid_header() {
        assert_eq!(
            server_wait(&HeaderMap::new(), now(), DEFAULT_RETRY_AFTER_CAP),
            None
        );
        let h = headers(&[("retry-after", "5s"), ("retry-after-ms", "-1")]);
        assert_eq!(server_wait(&h, now(), DEFAULT_RETRY_AFTER_CAP), None);
    }

    #[test]
    fn server_wait_applies_the_cap() {
        let h = headers(&[("retry-after", "120")]);
        assert_eq!(server_wait(&h, now(), DEFAULT_RETRY_AFTER_CAP), secs(60));
        assert_eq!(server_wait(&h, now(), Duration::from_secs(10)), secs(10));
        assert_eq!(server_wait(&h, now(), Duration::ZERO), secs(0));
        let h = headers(&[("retry-after-ms", "90000")]);
        assert_eq!(server_wait(&h, now(), DEFAULT_RETRY_AFTER_CAP), secs(60));
        let h = headers(&[("retry-after", "Tue, 14 Nov 2023 23:13:20 GMT")]);
        assert_eq!(server_wait(&h, now(), DEFAULT_RETRY_AFTER_CAP), secs(60));
    }

    #[test]
    fn only_the_first_value_is_read() {
        let h = headers(&[("retry-after", "2"), ("retry-after", "9")]);
        assert_eq!(server_wait(&h, now(), DEFAULT_RETRY_AFTER_CAP), secs(2));
    }

    fn any_now() -> impl Strategy<Value = SystemTime> {
        (any::<bool>(), any::<u64>(), 0u32..1_000_000_000).prop_map(|(after, s, n)| {
            let offset = Duration::new(s, n);
            let t = if after {
                UNIX_EPOCH.checked_add(offset)
            } else {
                UNIX_EPOCH.checked_sub(offset)
            };
            t.unwrap_or(UNIX_EPOCH)
        })
    }

    proptest! {
        #[test]
        fn parsers_never_panic(value in proptest::collection::vec(any::<u8>(), 0..40), now in any_now()) {
            let _ = parse_retry_after(&value, now);
            let _ = parse_retry_after_ms(&value);
        }

        #[test]
        fn date_parser_never_panics_on_date_shaped_input(
            value in "[A-Za-z]{3,9},? [0-9 ]{1,2}[- ][A-Za-z]{3}[- ][0-9]{2,4} [0-9]{2}:[0-9]{2}:[0-9]{2}( GMT| [0-9]{4})?",
            now in any_now(),
            cap in any::<u64>(),
        ) {
            let wait = parse_retry_after(value.as_bytes(), now);
            if let Some(wait) = wait {
                prop_assert_eq!(wait.subsec_nanos() % 1_000_000, 0);
            }
            let mut h = HeaderMap::new();
            if let Ok(v) = HeaderValue::from_str(&value) {
                h.insert(RETRY_AFTER, v);
            }
            let capped = server_wait(&h, now, Duration::from_millis(cap));
            prop_assert!(capped.is_none_or(|w| w <= Duration::from_millis(cap)));
        }
    }
}
