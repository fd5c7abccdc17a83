//! Retries: what may be retried, how long to wait, and how much retrying a host can take.
//!
//! # When to use
//! Every endpoint has a retry policy; `retry(max = 0)` turns retries off. Whether a
//! failure is retried depends on whether the request may already have run:
//!
//! | outcome | retried |
//! |---|---|
//! | connect refused, DNS failure (never sent) | any method |
//! | reset, broken pipe, attempt timeout, body cut short | idempotent only |
//! | status in the retry set | idempotent only |
//! | any other status (a 600 to 999 too), decode failure | never |
//! | cancelled, deadline passed, rejected by a policy | never |
//!
//! # Defaults
//! `max = 2` (three attempts), exponential backoff with full jitter (200 ms base, ×2,
//! 30 s cap), retry on 408, 425, 429, 500, 502, 503 and 504, `Retry-After` honoured up
//! to 60 s, and a [retry budget](budget) per partition.
//!
//! # Example
//! ```
//! use resilient_api::retry::RetryPolicy;
//! let p = RetryPolicy::DEFAULT;
//! assert_eq!(p.max, 2);
//! assert!(p.retries_status(503));
//! assert!(!p.retries_status(404));
//! ```

use std::time::Duration;

pub mod backoff;
pub mod budget;
pub mod retry_after;

use backoff::Backoff;

/// The statuses retried unless an endpoint says otherwise: 408, 425, 429, 500, 502,
/// 503 and 504 (not 501, which will not change).
///
/// ```
/// use resilient_api::retry::{RetryPolicy, DEFAULT_RETRY_ON};
/// assert_eq!(RetryPolicy::DEFAULT.on, DEFAULT_RETRY_ON);
/// assert!(DEFAULT_RETRY_ON.contains(&503) && !DEFAULT_RETRY_ON.contains(&501));
/// ```
pub const DEFAULT_RETRY_ON: &[u16] = &[408, 425, 429, 500, 502, 503, 504];

/// Retry settings of one endpoint. Const-constructible.
///
/// ```
/// use resilient_api::retry::RetryPolicy;
/// use std::time::Duration;
///
/// // As `#[retry(max = 4, on = [503])]` declares it, honouring `Retry-After` up to 10 s.
/// const PATIENT: RetryPolicy = RetryPolicy {
///     max: 4,
///     on: &[503],
///     retry_after_cap: Duration::from_secs(10),
///     ..RetryPolicy::DEFAULT
/// };
/// assert!(!PATIENT.retries_status(502));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt: `max = 2` is three attempts.
    pub max: u32,
    /// Waits between attempts.
    pub backoff: Backoff,
    /// Statuses that may be retried (idempotent endpoints only; error statuses,
    /// `400..=599`, alone: see [`RetryPolicy::retries_status`]).
    pub on: &'static [u16],
    /// The longest `Retry-After` honoured.
    pub retry_after_cap: Duration,
}

impl RetryPolicy {
    /// Two retries, default backoff, default statuses, 60 s `Retry-After` cap.
    ///
    /// ```
    /// use resilient_api::retry::{backoff::Backoff, RetryPolicy};
    /// use std::time::Duration;
    ///
    /// let p = RetryPolicy::DEFAULT;
    /// assert_eq!((p.max, p.backoff), (2, Backoff::DEFAULT));
    /// assert_eq!(p.retry_after_cap, Duration::from_secs(60));
    /// assert_eq!(RetryPolicy::default(), p);
    /// ```
    pub const DEFAULT: RetryPolicy = RetryPolicy {
        max: 2,
        backoff: Backoff::DEFAULT,
        on: DEFAULT_RETRY_ON,
        retry_after_cap: retry_after::DEFAULT_RETRY_AFTER_CAP,
    };

    /// Whether `status` is in the retry set. Only an error status (`400..=599`) can
    /// be: a hand-built `on` that lists another (a 600 to 999, which is an answer
    /// like a 4xx) is not retried on it, as the attribute refuses to list it.
    ///
    /// ```
    /// use resilient_api::retry::RetryPolicy;
    /// assert!(RetryPolicy::DEFAULT.retries_status(429));
    /// assert!(!RetryPolicy::DEFAULT.retries_status(501)); // not implemented stays so
    ///
    /// let odd = RetryPolicy { on: &[503, 600], ..RetryPolicy::DEFAULT };
    /// assert!(odd.retries_status(503) && !odd.retries_status(600));
    /// ```
    pub fn retries_status(&self, status: u16) -> bool {
        (400..=599).contains(&status) && self.on.contains(&status)
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: the attribute refuses to retry anything but an error status
    /// (`400..=599`), and a hand-built policy listing others did retry them: a 600
    /// to 999 (an answer, like a 4xx, see the module's table) was sent again.
    #[test]
    fn a_hand_built_policy_retries_only_error_statuses() {
        const ODD: RetryPolicy = RetryPolicy {
            on: &[200, 302, 399, 400, 503, 599, 600, 799, 999],
            ..RetryPolicy::DEFAULT
        };
        let retried: Vec<u16> = ODD
            .on
            .iter()
            .copied()
            .filter(|&s| ODD.retries_status(s))
            .collect();
        assert_eq!(retried, [400, 503, 599]);
    }
}
