//! The one source of randomness: backoff jitter and generated idempotency keys.
//!
//! # When to use
//! Leave the default (a fast thread-local generator) in production. In tests, pass
//! [`Jitter::fixed`] or [`Jitter::seeded`] to the client builder so every backoff and
//! every generated key is reproducible, which is what makes paused-clock scenario
//! tests exact to the millisecond.
//!
//! # Defaults
//! [`Jitter::random`], seeded from the operating system.
//!
//! # Example
//! ```
//! use resilient_api::Jitter;
//! let j = Jitter::fixed(0.5);
//! assert_eq!(j.next_f64(), 0.5);
//! ```

use std::fmt;
use std::sync::{Arc, Mutex};

/// A source of uniformly distributed numbers in `[0, 1)`, shared by one client.
///
/// Cheap to clone: clones share the same generator.
///
/// ```
/// use resilient_api::Jitter;
/// let a = Jitter::seeded(7);
/// let b = a.clone(); // continues `a`'s sequence, it does not restart it
/// let fresh = Jitter::seeded(7);
/// assert_eq!(a.next_f64(), fresh.next_f64());
/// assert_eq!(b.next_f64(), fresh.next_f64());
/// ```
#[derive(Clone)]
pub struct Jitter {
    source: Source,
}

#[derive(Clone)]
enum Source {
    Random,
    Fixed(f64),
    Seeded(Arc<Mutex<fastrand::Rng>>),
}

impl Jitter {
    /// A fast, thread-local random generator (the default).
    ///
    /// ```
    /// use resilient_api::Jitter;
    /// let x = Jitter::random().next_f64();
    /// assert!((0.0..1.0).contains(&x));
    /// ```
    pub fn random() -> Self {
        Jitter {
            source: Source::Random,
        }
    }

    /// Always returns `value`, clamped into `[0, 1)`. A `NaN` becomes `0`.
    ///
    /// With `Jitter::fixed(0.5)`, full jitter waits exactly half the computed backoff.
    ///
    /// ```
    /// use resilient_api::Jitter;
    /// assert_eq!(Jitter::fixed(0.25).next_f64(), 0.25);
    /// assert!(Jitter::fixed(1.0).next_f64() < 1.0); // clamped below 1
    /// assert_eq!(Jitter::fixed(f64::NAN).next_f64(), 0.0);
    /// ```
    pub fn fixed(value: f64) -> Self {
        let v = if value.is_nan() {
            0.0
        } else {
            value.clamp(0.0, 1.0 - f64::EPSILON)
        };
        Jitter {
            source: Source::Fixed(v),
        }
    }

    /// A deterministic generator: the same seed gives the same sequence.
    ///
    /// ```
    /// use resilient_api::Jitter;
    /// let (a, b) = (Jitter::seeded(42), Jitter::seeded(42));
    /// assert_eq!([a.next_f64(), a.next_f64()], [b.next_f64(), b.next_f64()]);
    /// ```
    pub fn seeded(seed: u64) -> Self {
        Jitter {
            source: Source::Seeded(Arc::new(Mutex::new(fastrand::Rng::with_seed(seed)))),
        }
    }

    /// The next number in `[0, 1)`.
    ///
    /// ```
    /// use resilient_api::Jitter;
    /// let j = Jitter::seeded(1);
    /// let full_jitter_wait = 800.0 * j.next_f64(); // somewhere in [0, 800) ms
    /// assert!((0.0..800.0).contains(&full_jitter_wait));
    /// ```
    pub fn next_f64(&self) -> f64 {
        match &self.source {
            Source::Random => fastrand::f64(),
            Source::Fixed(v) => *v,
            Source::Seeded(rng) => match rng.lock() {
                Ok(mut rng) => rng.f64(),
                Err(poisoned) => poisoned.into_inner().f64(),
            },
        }
    }

    /// Sixteen random bytes, e.g. for a UUID v4 idempotency key.
    ///
    /// A fixed source still gives distinct keys per call: its bytes come from a
    /// generator seeded by the fixed value and a counter shared by the whole process,
    /// so no two calls ever share a key. Which key a call gets then depends on how
    /// many the process made before (other tests running at the same time included):
    /// a test that must predict its keys uses [`Jitter::seeded`].
    ///
    /// ```
    /// use resilient_api::Jitter;
    /// assert_eq!(Jitter::seeded(3).next_bytes(), Jitter::seeded(3).next_bytes());
    /// let fixed = Jitter::fixed(0.5);
    /// assert_ne!(fixed.next_bytes(), fixed.next_bytes()); // never the same key twice
    /// ```
    pub fn next_bytes(&self) -> [u8; 16] {
        let mut out = [0u8; 16];
        match &self.source {
            Source::Random => fastrand::fill(&mut out),
            Source::Fixed(v) => {
                use std::sync::atomic::{AtomicU64, Ordering};
                static COUNTER: AtomicU64 = AtomicU64::new(0);
                let n = COUNTER.fetch_add(1, Ordering::Relaxed);
                fastrand::Rng::with_seed(v.to_bits() ^ n.rotate_left(32)).fill(&mut out);
            }
            Source::Seeded(rng) => match rng.lock() {
                Ok(mut rng) => rng.fill(&mut out),
                Err(poisoned) => poisoned.into_inner().fill(&mut out),
            },
        }
        out
    }
}

impl Default for Jitter {
    fn default() -> Self {
        Jitter::random()
    }
}

impl fmt::Debug for Jitter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Source::Random => f.write_str("Jitter::random()"),
            Source::Fixed(v) => write!(f, "Jitter::fixed({v})"),
            Source::Seeded(_) => f.write_str("Jitter::seeded(..)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_is_clamped_into_unit_interval() {
        assert_eq!(Jitter::fixed(0.5).next_f64(), 0.5);
        assert!(Jitter::fixed(7.0).next_f64() < 1.0);
        assert_eq!(Jitter::fixed(-1.0).next_f64(), 0.0);
        assert_eq!(Jitter::fixed(f64::NAN).next_f64(), 0.0);
    }

    #[test]
    fn seeded_is_reproducible() {
        let a = Jitter::seeded(7);
        let b = Jitter::seeded(7);
        for _ in 0..10 {
            assert_eq!(a.next_f64(), b.next_f64());
        }
    }

    #[test]
    fn random_stays_in_range() {
        let j = Jitter::random();
        for _ in 0..1000 {
            let x = j.next_f64();
            assert!((0.0..1.0).contains(&x));
        }
    }
}
