//! `Retry-After`, `retry-after-ms` and `server_wait` on any bytes, any `now` within
//! 68 years of 2023, and any cap: nothing panics, and each result is what the docs
//! in `runtime/src/retry/retry_after.rs` promise.

#![no_main]

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::header::{HeaderMap, HeaderValue, RETRY_AFTER};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use resilient_api::retry::retry_after::{parse_retry_after, parse_retry_after_ms, server_wait};

/// 2023-11-14 22:13:20 UTC.
const BASE_SECS: u64 = 1_700_000_000;

#[derive(Arbitrary)]
struct Input<'a> {
    /// Seconds from `BASE_SECS`, either way.
    now_offset: i32,
    now_nanos: u32,
    cap_millis: u64,
    /// The `retry-after-ms` value.
    ms: &'a [u8],
    /// The `Retry-After` value: the rest of the input.
    value: &'a [u8],
}

/// Byte strings as escaped text, for `cargo fuzz fmt` and failure messages.
impl fmt::Debug for Input<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Input")
            .field("now_offset", &self.now_offset)
            .field("now_nanos", &self.now_nanos)
            .field("cap_millis", &self.cap_millis)
            .field("ms", &Bytes(self.ms))
            .field("value", &Bytes(self.value))
            .finish()
    }
}

struct Bytes<'a>(&'a [u8]);

impl fmt::Debug for Bytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "b\"{}\"", self.0.escape_ascii())
    }
}

fn now(offset: i32, nanos: u32) -> SystemTime {
    let base = UNIX_EPOCH + Duration::from_secs(BASE_SECS);
    let by = Duration::new(u64::from(offset.unsigned_abs()), nanos % 1_000_000_000);
    if offset >= 0 { base + by } else { base - by }
}

/// A non-empty run of ASCII digits, saturating at `u64::MAX` (the only error
/// `u64::from_str` can give on digits alone is overflow).
fn digits(value: &[u8]) -> Option<u64> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let text = std::str::from_utf8(value).ok()?;
    Some(text.parse::<u64>().unwrap_or(u64::MAX))
}

fn check_retry_after(value: &[u8], now: SystemTime) -> Option<Duration> {
    let wait = parse_retry_after(value, now);
    let trimmed = value.trim_ascii();
    if let Some(secs) = digits(trimmed) {
        assert_eq!(wait, Some(Duration::from_secs(secs)), "{:?}", Bytes(value));
    } else if let Some(date) = std::str::from_utf8(trimmed)
        .ok()
        .and_then(|t| httpdate::parse_http_date(t).ok())
    {
        // At or before now: zero. Later: the exact wait rounded up to whole ms.
        let exact = date.duration_since(now).unwrap_or(Duration::ZERO);
        let wait = wait.unwrap_or_else(|| panic!("no wait for the date {:?}", Bytes(value)));
        assert!(wait >= exact, "{:?}: {wait:?} < {exact:?}", Bytes(value));
        assert!(
            wait - exact < Duration::from_millis(1),
            "{:?}: {wait:?}",
            Bytes(value)
        );
        assert_eq!(
            wait.subsec_nanos() % 1_000_000,
            0,
            "{:?}: {wait:?}",
            Bytes(value)
        );
    } else {
        assert_eq!(wait, None, "{:?}", Bytes(value));
    }
    // Surrounding whitespace changes nothing.
    let padded = [b" \t", value, b"\r\n "].concat();
    assert_eq!(parse_retry_after(&padded, now), wait, "{:?}", Bytes(value));
    wait
}

fn check_retry_after_ms(value: &[u8]) -> Option<Duration> {
    let wait = parse_retry_after_ms(value);
    let expected = digits(value.trim_ascii()).map(Duration::from_millis);
    assert_eq!(wait, expected, "{:?}", Bytes(value));
    wait
}

fuzz_target!(|input: Input<'_>| {
    let now = now(input.now_offset, input.now_nanos);
    let cap = Duration::from_millis(input.cap_millis);
    let from_header = check_retry_after(input.value, now);
    let from_ms = check_retry_after_ms(input.ms);

    // The same bytes as headers, when they make valid header values.
    let mut headers = HeaderMap::new();
    let value = HeaderValue::from_bytes(input.value).ok();
    let ms = HeaderValue::from_bytes(input.ms).ok();
    if let Some(v) = &value {
        headers.insert(RETRY_AFTER, v.clone());
    }
    if let Some(v) = &ms {
        headers.insert("retry-after-ms", v.clone());
    }
    let wait = server_wait(&headers, now, cap);
    // A valid `retry-after-ms` wins, then `Retry-After`; never above the cap.
    let expected = ms
        .and(from_ms)
        .or(value.and(from_header))
        .map(|w| w.min(cap));
    assert_eq!(wait, expected, "{input:?}");
    assert!(wait.is_none_or(|w| w <= cap), "{input:?}");
});
