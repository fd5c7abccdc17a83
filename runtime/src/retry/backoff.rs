//! How long to wait before each retry, as an infinite iterator of durations.
//!
//! # When to use
//! Pick a [`Backoff`] for a method or a whole client; the retry loop calls
//! [`Backoff::iter`] once per call and takes the next item before each retry, so the
//! first item is the wait before the second attempt. The default, exponential growth
//! with full jitter, spreads the retries of many clients over time instead of letting
//! them arrive together. Use [`Backoff::Fixed`] for tests or a polling-like API, and
//! [`Backoff::DecorrelatedJitter`] when you want AWS's "decorrelated jitter".
//!
//! A `Retry-After` header from the server replaces the computed wait for that retry
//! (see [`retry_after`](crate::retry::retry_after)).
//!
//! # Defaults
//! [`Backoff::DEFAULT`]: exponential with full jitter, 200 ms base, factor 2, 30 s cap.
//!
//! Random parts of a wait are truncated (floored) to whole milliseconds, so that a
//! fixed jitter gives round, predictable numbers; un-jittered waits keep full
//! [`Duration`] precision. All arithmetic saturates: no configuration and no number
//! of retries can overflow or panic.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use resilient_api::Jitter;
//! use resilient_api::retry::backoff::Backoff;
//!
//! // With a fixed jitter of 0.5, full jitter waits exactly half the exponential delay.
//! let waits: Vec<Duration> = Backoff::DEFAULT.iter(Jitter::fixed(0.5)).take(4).collect();
//! assert_eq!(
//!     waits,
//!     [100, 200, 400, 800].map(Duration::from_millis),
//! );
//!
//! let capped = Backoff::Exponential {
//!     base: Duration::from_millis(100),
//!     factor: 10,
//!     cap: Duration::from_secs(5),
//! };
//! let waits: Vec<Duration> = capped.iter(Jitter::random()).take(4).collect();
//! assert_eq!(waits, [100, 1_000, 5_000, 5_000].map(Duration::from_millis));
//! ```

use std::iter::FusedIterator;
use std::time::Duration;

use crate::jitter::Jitter;

/// How long to wait before each retry. Const-constructible, so it can live in a
/// `static`.
///
/// In the exponential variants a `factor` of 0 is treated as 1 (a constant delay), so
/// a slip of the pen can never turn into retries without any wait. A `cap` below
/// `base` wins: every wait is then exactly `cap`.
///
/// ```
/// use resilient_api::retry::backoff::Backoff;
/// use std::time::Duration;
///
/// // Decorrelated jitter between 100 ms and 10 s.
/// const SPREAD: Backoff = Backoff::DecorrelatedJitter {
///     base: Duration::from_millis(100),
///     cap: Duration::from_secs(10),
/// };
/// # let _ = SPREAD;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backoff {
    /// The same wait before every retry. A zero delay is allowed.
    Fixed {
        /// The wait before each retry.
        delay: Duration,
    },
    /// `base * factor^n` before retry `n + 1`, at most `cap`. No randomness.
    Exponential {
        /// The first wait.
        base: Duration,
        /// How much each wait grows over the previous one (0 counts as 1).
        factor: u32,
        /// The longest wait.
        cap: Duration,
    },
    /// "Full jitter": uniform in `[0, min(cap, base * factor^n))`, computed as
    /// `min(cap, base * factor^n) * jitter` and floored to whole milliseconds.
    ExponentialJitter {
        /// The first un-jittered wait.
        base: Duration,
        /// How much each un-jittered wait grows over the previous one (0 counts as 1).
        factor: u32,
        /// The longest un-jittered wait.
        cap: Duration,
    },
    /// AWS "decorrelated jitter": `next = min(cap, uniform(base, prev * 3))`, with
    /// `prev` starting at `base`. Computed as `base + (prev * 3 - base) * jitter`, the
    /// random part floored to whole milliseconds; every wait lies in
    /// `[min(base, cap), cap]`.
    DecorrelatedJitter {
        /// The shortest wait.
        base: Duration,
        /// The longest wait.
        cap: Duration,
    },
}

impl Backoff {
    /// Exponential with full jitter: 200 ms base, factor 2, 30 s cap.
    ///
    /// ```
    /// use resilient_api::retry::backoff::Backoff;
    /// use resilient_api::Jitter;
    /// use std::time::Duration;
    ///
    /// // Full jitter draws each wait from [0, min(30 s, 200 ms × 2^n)); here, half of it.
    /// let waits: Vec<Duration> = Backoff::DEFAULT.iter(Jitter::fixed(0.5)).take(9).collect();
    /// assert_eq!(waits[0], Duration::from_millis(100));
    /// assert_eq!(waits[7], Duration::from_millis(12_800));
    /// assert_eq!(waits[8], Duration::from_secs(15)); // half the 30 s cap
    /// ```
    pub const DEFAULT: Backoff = Backoff::ExponentialJitter {
        base: Duration::from_millis(200),
        factor: 2,
        cap: Duration::from_secs(30),
    };

    /// The waits of one call: an infinite iterator whose `n`-th item (from 0) is the
    /// wait before retry `n + 1`.
    ///
    /// `jitter` is drawn once per item by the jittered variants and ignored by the
    /// others.
    ///
    /// ```
    /// use std::time::Duration;
    /// use resilient_api::Jitter;
    /// use resilient_api::retry::backoff::Backoff;
    ///
    /// let fixed = Backoff::Fixed { delay: Duration::from_millis(50) };
    /// assert!(fixed.iter(Jitter::random()).take(3).all(|d| d == Duration::from_millis(50)));
    /// ```
    #[must_use]
    pub fn iter(&self, jitter: Jitter) -> BackoffIter {
        let current = match *self {
            Backoff::Fixed { delay } => delay,
            Backoff::Exponential { base, cap, .. }
            | Backoff::ExponentialJitter { base, cap, .. }
            | Backoff::DecorrelatedJitter { base, cap } => base.min(cap),
        };
        BackoffIter {
            backoff: *self,
            jitter,
            current,
        }
    }
}

impl Default for Backoff {
    /// [`Backoff::DEFAULT`].
    fn default() -> Self {
        Backoff::DEFAULT
    }
}

/// The waits of one call, from [`Backoff::iter`]. Never ends.
///
/// ```
/// use resilient_api::Jitter;
/// use resilient_api::retry::backoff::Backoff;
/// use std::time::Duration;
///
/// let backoff = Backoff::Exponential {
///     base: Duration::from_millis(100),
///     factor: 2,
///     cap: Duration::from_millis(300),
/// };
/// let waits: Vec<Duration> = backoff.iter(Jitter::random()).take(4).collect();
/// assert_eq!(waits, [100, 200, 300, 300].map(Duration::from_millis));
/// ```
#[derive(Clone, Debug)]
pub struct BackoffIter {
    backoff: Backoff,
    jitter: Jitter,
    /// Fixed: the delay. Exponential variants: the un-jittered wait of the next item,
    /// already capped. Decorrelated: the previous wait (`base`, capped, at first).
    current: Duration,
}

impl Iterator for BackoffIter {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let wait = match self.backoff {
            Backoff::Fixed { delay } => delay,
            Backoff::Exponential { factor, cap, .. } => {
                let wait = self.current;
                self.current = grow(wait, factor, cap);
                wait
            }
            Backoff::ExponentialJitter { factor, cap, .. } => {
                let full = self.current;
                self.current = grow(full, factor, cap);
                scale_floor_ms(full, self.jitter.next_f64())
            }
            Backoff::DecorrelatedJitter { base, cap } => {
                let span = self.current.saturating_mul(3).saturating_sub(base);
                let random = scale_floor_ms(span, self.jitter.next_f64());
                let wait = base.saturating_add(random).min(cap);
                self.current = wait;
                wait
            }
        };
        Some(wait)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (usize::MAX, None)
    }
}

impl FusedIterator for BackoffIter {}

/// The next un-jittered exponential wait: `min(cap, current * factor)`.
///
/// Capping at every step gives the same result as capping `base * factor^n` once
/// (the factor is at least 1), and keeps the state from ever growing past `cap`.
fn grow(current: Duration, factor: u32, cap: Duration) -> Duration {
    current.saturating_mul(factor.max(1)).min(cap)
}

/// `d * fraction`, floored to whole milliseconds (no float rounding of `d`).
///
/// `fraction` is taken into `[0, 1)` (a `NaN` counts as 0) and used as a 53-bit
/// fixed-point number. The product is rounded to the nearest nanosecond (ties down)
/// before the floor: a decimal fraction such as `0.3` is a hair below its value in
/// binary, and flooring that hair would make 1 s × 0.3 read 299 ms. `0.5` still halves
/// any duration exactly, and the result stays below `d` (full jitter's range is
/// half-open) unless `d` is zero.
fn scale_floor_ms(d: Duration, fraction: f64) -> Duration {
    const FRACTION_BITS: u32 = 53;
    let fraction = if fraction.is_nan() {
        0.0
    } else {
        fraction.clamp(0.0, 1.0)
    };
    // `fraction * 2^53` is exact for every f64 in [0, 1]; the cast truncates.
    let fixed =
        ((fraction * (1u64 << FRACTION_BITS) as f64) as u128).min((1u128 << FRACTION_BITS) - 1);

    // nanos < 2^95 and fixed < 2^53: split nanos so no product exceeds u128.
    let nanos = d.as_nanos();
    let high = nanos >> 64;
    let low = nanos & u128::from(u64::MAX);
    let half = (1u128 << (FRACTION_BITS - 1)) - 1;
    let scaled = ((high * fixed) << (64 - FRACTION_BITS)) + ((low * fixed + half) >> FRACTION_BITS);
    let scaled = scaled.min(nanos.saturating_sub(1));

    let millis = scaled / 1_000_000;
    let secs = u64::try_from(millis / 1_000).unwrap_or(u64::MAX);
    // `millis % 1000` is below 1000, so the sub-second part is below 10^9.
    let subsec_nanos = u32::try_from(millis % 1_000).unwrap_or(0) * 1_000_000;
    Duration::new(secs, subsec_nanos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn take(backoff: Backoff, jitter: Jitter, n: usize) -> Vec<Duration> {
        backoff.iter(jitter).take(n).collect()
    }

    #[test]
    fn default_is_exponential_jitter_200ms_x2_30s() {
        assert_eq!(
            Backoff::default(),
            Backoff::ExponentialJitter {
                base: ms(200),
                factor: 2,
                cap: Duration::from_secs(30),
            }
        );
    }

    #[test]
    fn default_with_half_jitter_halves_each_wait_up_to_the_cap() {
        let waits = take(Backoff::DEFAULT, Jitter::fixed(0.5), 10);
        let expected = [
            100, 200, 400, 800, 1_600, 3_200, 6_400, 12_800, 15_000, 15_000,
        ]
        .map(ms);
        assert_eq!(waits, expected);
    }

    #[test]
    fn fixed_repeats_the_delay_including_zero() {
        let waits = take(Backoff::Fixed { delay: ms(250) }, Jitter::random(), 5);
        assert_eq!(waits, [ms(250); 5]);
        let zero = take(
            Backoff::Fixed {
                delay: Duration::ZERO,
            },
            Jitter::random(),
            3,
        );
        assert_eq!(zero, [Duration::ZERO; 3]);
    }

    #[test]
    fn exponential_grows_then_stays_at_cap() {
        let b = Backoff::Exponential {
            base: ms(100),
            factor: 3,
            cap: ms(2_000),
        };
        assert_eq!(
            take(b, Jitter::random(), 6),
            [100, 300, 900, 2_000, 2_000, 2_000].map(ms)
        );
    }

    #[test]
    fn exponential_keeps_sub_millisecond_precision() {
        let b = Backoff::Exponential {
            base: Duration::from_micros(1_500),
            factor: 2,
            cap: Duration::from_secs(1),
        };
        assert_eq!(
            take(b, Jitter::random(), 3),
            [1_500, 3_000, 6_000].map(Duration::from_micros)
        );
    }

    #[test]
    fn exponential_does_not_overflow_at_attempt_1000_or_huge_factor() {
        let b = Backoff::Exponential {
            base: ms(200),
            factor: u32::MAX,
            cap: Duration::MAX,
        };
        let waits = take(b, Jitter::random(), 1_000);
        assert_eq!(waits[0], ms(200));
        assert_eq!(waits[999], Duration::MAX);

        let b = Backoff::Exponential {
            base: ms(200),
            factor: 2,
            cap: Duration::from_secs(30),
        };
        assert_eq!(
            b.iter(Jitter::random()).nth(1_000),
            Some(Duration::from_secs(30))
        );
    }

    #[test]
    fn factor_zero_counts_as_one() {
        let b = Backoff::Exponential {
            base: ms(100),
            factor: 0,
            cap: ms(1_000),
        };
        assert_eq!(take(b, Jitter::random(), 3), [ms(100); 3]);
    }

    #[test]
    fn cap_below_base_wins() {
        let b = Backoff::Exponential {
            base: ms(500),
            factor: 2,
            cap: ms(100),
        };
        assert_eq!(take(b, Jitter::random(), 3), [ms(100); 3]);
        let d = Backoff::DecorrelatedJitter {
            base: ms(500),
            cap: ms(100),
        };
        assert_eq!(take(d, Jitter::fixed(0.9), 3), [ms(100); 3]);
    }

    #[test]
    fn exponential_jitter_floors_to_whole_milliseconds() {
        let b = Backoff::ExponentialJitter {
            base: Duration::from_micros(3_999),
            factor: 1,
            cap: Duration::from_secs(1),
        };
        // 3.999 ms * 0.5 = 1.9995 ms → 1 ms.
        assert_eq!(take(b, Jitter::fixed(0.5), 2), [ms(1); 2]);
        // Jitter 0 waits nothing at all.
        assert_eq!(take(b, Jitter::fixed(0.0), 1), [Duration::ZERO]);
    }

    #[test]
    fn exponential_jitter_never_reaches_the_full_wait() {
        let b = Backoff::ExponentialJitter {
            base: ms(1_000),
            factor: 2,
            cap: Duration::MAX,
        };
        let waits = take(b, Jitter::fixed(1.0), 200);
        assert_eq!(waits[0], ms(999));
        assert!(waits.iter().all(|w| *w < Duration::MAX));
    }

    #[test]
    fn decorrelated_jitter_follows_aws_formula() {
        let b = Backoff::DecorrelatedJitter {
            base: ms(100),
            cap: ms(10_000),
        };
        // prev = 100: 100 + (300 - 100) * 0.5 = 200; then 100 + (600 - 100) * 0.5 = 350;
        // then 100 + (1050 - 100) * 0.5 = 575.
        assert_eq!(take(b, Jitter::fixed(0.5), 3), [200, 350, 575].map(ms));
        // Jitter 0 always waits base.
        assert_eq!(take(b, Jitter::fixed(0.0), 3), [ms(100); 3]);
        // Near-one jitter grows about ×3 up to the cap.
        let waits = take(b, Jitter::fixed(1.0), 8);
        assert_eq!(waits[7], ms(10_000));
    }

    #[test]
    fn decorrelated_jitter_saturates_with_huge_durations() {
        let b = Backoff::DecorrelatedJitter {
            base: Duration::MAX,
            cap: Duration::MAX,
        };
        assert_eq!(take(b, Jitter::fixed(0.7), 3), [Duration::MAX; 3]);
    }

    #[test]
    fn scale_halves_exactly_even_for_huge_durations() {
        let d = Duration::MAX;
        let half_nanos = d.as_nanos() / 2;
        let expected_ms = half_nanos / 1_000_000;
        let got = scale_floor_ms(d, 0.5);
        assert_eq!(got.as_millis(), expected_ms);
        assert_eq!(got.subsec_nanos() % 1_000_000, 0);
        assert_eq!(scale_floor_ms(d, f64::NAN), Duration::ZERO);
    }

    /// Regression: a decimal jitter is a hair below its value in binary (`0.3` is
    /// 0.29999999999999998...), and flooring that hair made 1 s × 0.3 read 299 ms.
    #[test]
    fn a_decimal_fraction_scales_to_its_decimal_milliseconds() {
        let second = Duration::from_secs(1);
        for (fraction, want) in [(0.3, 300), (0.7, 700), (0.1, 100), (0.9, 900), (0.55, 550)] {
            assert_eq!(scale_floor_ms(second, fraction), ms(want), "{fraction}");
        }
        // The range stays half-open: what rounds up to the whole wait is kept below it.
        assert_eq!(scale_floor_ms(second, 1.0), ms(999));
        assert_eq!(scale_floor_ms(ms(1), 0.999_999_999_9), Duration::ZERO);
        assert_eq!(scale_floor_ms(Duration::ZERO, 0.5), Duration::ZERO);
    }

    #[test]
    fn iterator_is_clone_and_debug() {
        let mut a = Backoff::DEFAULT.iter(Jitter::fixed(0.5));
        a.next();
        let mut b = a.clone();
        assert_eq!(a.next(), b.next());
        assert!(!format!("{a:?}").is_empty());
    }

    fn any_duration() -> impl Strategy<Value = Duration> {
        prop_oneof![
            Just(Duration::ZERO),
            (0u64..100_000).prop_map(Duration::from_millis),
            (0u64..10_000_000_000).prop_map(Duration::from_nanos),
            (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
            Just(Duration::MAX),
        ]
    }

    fn any_factor() -> impl Strategy<Value = u32> {
        prop_oneof![0u32..5, any::<u32>(), Just(u32::MAX)]
    }

    fn any_backoff() -> impl Strategy<Value = Backoff> {
        prop_oneof![
            any_duration().prop_map(|delay| Backoff::Fixed { delay }),
            (any_duration(), any_factor(), any_duration())
                .prop_map(|(base, factor, cap)| Backoff::Exponential { base, factor, cap }),
            (any_duration(), any_factor(), any_duration()).prop_map(|(base, factor, cap)| {
                Backoff::ExponentialJitter { base, factor, cap }
            }),
            (any_duration(), any_duration())
                .prop_map(|(base, cap)| Backoff::DecorrelatedJitter { base, cap }),
        ]
    }

    fn floor_ms(d: Duration) -> Duration {
        let millis = d.as_millis();
        Duration::new(
            u64::try_from(millis / 1_000).unwrap_or(u64::MAX),
            u32::try_from(millis % 1_000).unwrap_or(0) * 1_000_000,
        )
    }

    proptest! {
        #[test]
        fn every_wait_respects_its_bounds(
            backoff in any_backoff(),
            attempts in 1usize..=2_000,
            jitter in prop_oneof![Just(0.0), Just(0.5), 0.0f64..1.0, Just(1.0)],
            seed in any::<u64>(),
            seeded in any::<bool>(),
        ) {
            let jitter = if seeded { Jitter::seeded(seed) } else { Jitter::fixed(jitter) };
            let waits: Vec<Duration> = backoff.iter(jitter).take(attempts).collect();
            prop_assert_eq!(waits.len(), attempts);
            match backoff {
                Backoff::Fixed { delay } => {
                    prop_assert!(waits.iter().all(|w| *w == delay));
                }
                Backoff::Exponential { cap, .. } => {
                    prop_assert!(waits.iter().all(|w| *w <= cap));
                    prop_assert!(waits.windows(2).all(|p| p[0] <= p[1]));
                }
                Backoff::ExponentialJitter { cap, .. } => {
                    prop_assert!(waits.iter().all(|w| *w <= cap));
                }
                Backoff::DecorrelatedJitter { base, cap } => {
                    let low = base.min(cap);
                    prop_assert!(waits.iter().all(|w| low <= *w && *w <= cap));
                }
            }
        }

        #[test]
        fn half_jitter_is_exactly_half_of_exponential_floored(
            base in any_duration(),
            factor in any_factor(),
            cap in any_duration(),
            attempts in 1usize..=2_000,
        ) {
            let plain = Backoff::Exponential { base, factor, cap }.iter(Jitter::random());
            let jittered = Backoff::ExponentialJitter { base, factor, cap }.iter(Jitter::fixed(0.5));
            for (full, half) in plain.zip(jittered).take(attempts) {
                let expected = floor_ms(full / 2);
                prop_assert_eq!(half, expected);
            }
        }
    }
}
