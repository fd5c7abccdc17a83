//! A pure circuit-breaker state machine, fed the current instant and attempt outcomes.
//!
//! # When to use
//!
//! [`Breaker`] holds no clock, no lock and no task: every method takes `now` as a
//! [`tokio::time::Instant`], so it can be tested without a runtime and driven by a
//! paused clock. The async shell around it asks [`Breaker::admit`] before every
//! attempt (retries and hedges too), passes the returned [`Admission`] back exactly
//! once to [`Breaker::record`] or [`Breaker::release`], and turns each
//! [`Transition`] into an event.
//!
//! A breaker is `Closed` (admits everything and counts outcomes), `Open` (refuses
//! until a deadline) or `HalfOpen` (admits a few trial attempts, the probes). Every
//! transition starts a new *generation*; an outcome of an attempt admitted in an
//! older generation is stale and changes nothing, so a slow success that lands after
//! the breaker tripped can never close it or shorten its cooldown.
//!
//! # Defaults
//!
//! [`BreakerConfig::DEFAULT`]: trip after 5 consecutive failures
//! ([`BreakerMode::ConsecutiveFailures`]), stay open 30 s, then admit 1 probe; no
//! slow-call rule. Out-of-range values never panic: a threshold, a probe count or a
//! minimum number of calls of 0 is treated as 1, and a failure-rate threshold is
//! used in steps of 1/10 000, clamped into `[0.0001, 1]` (NaN is treated as 1).
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use resilient_api::circuit_breaker::state::{
//!     Breaker, BreakerConfig, BreakerMode, Outcome, Phase,
//! };
//! use tokio::time::Instant;
//!
//! let mut breaker = Breaker::new(BreakerConfig {
//!     mode: BreakerMode::ConsecutiveFailures { failures: 1 },
//!     reset: Duration::from_millis(100),
//!     ..BreakerConfig::DEFAULT
//! });
//! let t0 = Instant::now();
//!
//! // One failure trips it.
//! let (admission, _) = breaker.admit(t0);
//! let admission = admission.expect("closed breakers admit");
//! let transition = breaker.record(admission, Outcome::Failure, Duration::ZERO, t0);
//! assert_eq!(transition.map(|t| t.to), Some(Phase::Open));
//!
//! // Refused until the cooldown ends, admitted at exactly the deadline.
//! let rejected = breaker.check(t0 + Duration::from_millis(99)).unwrap_err();
//! assert_eq!(rejected.until, Some(t0 + Duration::from_millis(100)));
//! let (probe, transition) = breaker.admit(t0 + Duration::from_millis(100));
//! assert_eq!(transition.map(|t| t.to), Some(Phase::HalfOpen));
//!
//! // A successful probe closes it again.
//! let probe = probe.expect("the first probe is admitted");
//! let at = t0 + Duration::from_millis(110);
//! let transition = breaker.record(probe, Outcome::Success, Duration::from_millis(10), at);
//! assert_eq!(transition.map(|t| t.to), Some(Phase::Closed));
//! assert_eq!(breaker.snapshot(at).phase, Phase::Closed);
//! ```

use std::time::Duration;

use tokio::time::Instant;

/// Number of buckets the failure-rate window is divided into.
const BUCKETS: usize = 10;

/// A failure-rate threshold is used in steps of 1/10 000.
const RATE_UNIT: u64 = 10_000;

/// `threshold` in steps of 1/10 000, between 1 and [`RATE_UNIT`] (NaN: all of it).
///
/// Compared in whole numbers because the `f32` closest to a decimal threshold is
/// often a little above it (0.2 is 0.200000003): "at least 20%" must trip at
/// exactly 2 failures in 10 calls.
fn rate_units(threshold: f32) -> u64 {
    if threshold.is_nan() {
        return RATE_UNIT;
    }
    // Clamped into [1, RATE_UNIT] first: the cast cannot truncate.
    (f64::from(threshold) * RATE_UNIT as f64)
        .round()
        .clamp(1.0, RATE_UNIT as f64) as u64
}

/// How a breaker is configured.
///
/// Const-constructible, so generated code can keep it in a `static`.
///
/// ```
/// use resilient_api::circuit_breaker::state::{Breaker, BreakerConfig, Outcome, Phase};
/// use std::time::Duration;
/// use tokio::time::Instant;
///
/// // A success that took 2 s or more counts as a failure.
/// const IMPATIENT: BreakerConfig =
///     BreakerConfig { slow_call: Some(Duration::from_secs(2)), ..BreakerConfig::DEFAULT };
/// let mut breaker = Breaker::new(IMPATIENT);
/// let now = Instant::now();
/// for _ in 0..5 {
///     let admission = breaker.admit(now).0.expect("closed");
///     breaker.record(admission, Outcome::Success, Duration::from_secs(3), now);
/// }
/// assert_eq!(breaker.snapshot(now).phase, Phase::Open);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BreakerConfig {
    /// When a closed breaker trips. Default: 5 consecutive failures.
    pub mode: BreakerMode,
    /// How long the breaker stays open before it admits a probe. Default: 30 s.
    pub reset: Duration,
    /// How many successful trial attempts close a half-open breaker; at most this
    /// many are in flight at once. Default: 1 (0 is treated as 1).
    pub probes: u32,
    /// An attempt whose latency is at least this long counts as a failure even if it
    /// succeeded. Default: `None` (no slow-call rule).
    pub slow_call: Option<Duration>,
}

impl BreakerConfig {
    /// 5 consecutive failures, 30 s cooldown, 1 probe, no slow-call rule.
    ///
    /// ```
    /// use resilient_api::circuit_breaker::state::BreakerConfig;
    /// use std::time::Duration;
    ///
    /// // Three probes must succeed before a half-open breaker closes.
    /// const CAREFUL: BreakerConfig = BreakerConfig { probes: 3, ..BreakerConfig::DEFAULT };
    /// assert_eq!(CAREFUL.reset, Duration::from_secs(30));
    /// ```
    pub const DEFAULT: Self = Self {
        mode: BreakerMode::DEFAULT,
        reset: Duration::from_secs(30),
        probes: 1,
        slow_call: None,
    };
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// When a closed breaker trips.
///
/// ```
/// use resilient_api::circuit_breaker::state::{BreakerConfig, BreakerMode};
///
/// let tolerant = BreakerConfig {
///     mode: BreakerMode::ConsecutiveFailures { failures: 20 },
///     ..BreakerConfig::DEFAULT
/// };
/// assert_ne!(tolerant.mode, BreakerMode::DEFAULT);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BreakerMode {
    /// Trip after this many failures in a row (a success resets the count).
    ConsecutiveFailures {
        /// Failures in a row that trip the breaker. Default: 5 (0 is treated as 1).
        failures: u32,
    },
    /// Trip when, over a rolling time window, at least `min_calls` outcomes were
    /// counted and the share of failures among them is at least `threshold`.
    ///
    /// The window is kept as 10 buckets of `window / 10` each, so the oldest
    /// outcomes leave it one bucket at a time; a zero window is treated as 10 ns.
    /// The rate is evaluated after every counted outcome.
    ///
    /// ```
    /// use resilient_api::circuit_breaker::state::{
    ///     Breaker, BreakerConfig, BreakerMode, Outcome, Phase,
    /// };
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    ///
    /// // Half of at least four calls in ten seconds.
    /// let mut breaker = Breaker::new(BreakerConfig {
    ///     mode: BreakerMode::FailureRate {
    ///         threshold: 0.5,
    ///         window: Duration::from_secs(10),
    ///         min_calls: 4,
    ///     },
    ///     ..BreakerConfig::DEFAULT
    /// });
    /// let now = Instant::now();
    /// for outcome in [Outcome::Success, Outcome::Failure, Outcome::Success, Outcome::Failure] {
    ///     let admission = breaker.admit(now).0.expect("closed");
    ///     breaker.record(admission, outcome, Duration::ZERO, now);
    /// }
    /// assert_eq!(breaker.snapshot(now).phase, Phase::Open);
    /// ```
    FailureRate {
        /// Failure share that trips the breaker, in `(0, 1]`, used in steps of
        /// 1/10 000 (so `0.2` is exactly 20%).
        threshold: f32,
        /// Length of the rolling window.
        window: Duration,
        /// Outcomes the window must hold before the rate is trusted (0 is treated as 1).
        min_calls: u32,
    },
}

impl BreakerMode {
    /// 5 consecutive failures.
    ///
    /// ```
    /// use resilient_api::circuit_breaker::state::{BreakerConfig, BreakerMode};
    ///
    /// assert_eq!(BreakerMode::DEFAULT, BreakerMode::ConsecutiveFailures { failures: 5 });
    /// assert_eq!(BreakerConfig::default().mode, BreakerMode::DEFAULT);
    /// ```
    pub const DEFAULT: Self = Self::ConsecutiveFailures { failures: 5 };
}

impl Default for BreakerMode {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// What an admitted attempt ended with, as far as the breaker is concerned.
///
/// ```
/// use resilient_api::circuit_breaker::state::{Breaker, BreakerConfig, Outcome};
/// use std::time::Duration;
/// use tokio::time::Instant;
///
/// let mut breaker = Breaker::new(BreakerConfig::DEFAULT);
/// let now = Instant::now();
/// for outcome in [Outcome::Failure, Outcome::Ignored, Outcome::Failure] {
///     let admission = breaker.admit(now).0.expect("closed");
///     breaker.record(admission, outcome, Duration::ZERO, now);
/// }
/// // A 404 (ignored) neither counts nor resets the run of failures.
/// assert_eq!(breaker.snapshot(now).consecutive_failures, 2);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A usable answer.
    Success,
    /// A transport error, a timeout or a 5xx.
    Failure,
    /// A 4xx, a body over the size limit or a cancellation: counts as nothing, but
    /// releases a half-open probe slot. (A 2xx that the client then cannot decode is
    /// a [`Success`](Outcome::Success): the upstream answered.)
    Ignored,
}

/// Proof that an attempt was admitted; pass it back exactly once to
/// [`Breaker::record`] or [`Breaker::release`].
///
/// ```
/// use resilient_api::circuit_breaker::state::{Breaker, BreakerConfig};
/// use tokio::time::Instant;
///
/// let mut breaker = Breaker::new(BreakerConfig::DEFAULT);
/// let admission = breaker.admit(Instant::now()).0.expect("closed");
/// assert_eq!((admission.generation, admission.probe), (0, false));
/// breaker.release(admission);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// The generation the attempt was admitted in.
    pub generation: u64,
    /// Whether the attempt holds a half-open probe slot.
    pub probe: bool,
}

/// The breaker refused an attempt.
///
/// ```
/// use resilient_api::circuit_breaker::state::{Breaker, BreakerConfig, BreakerMode, Outcome};
/// use std::time::Duration;
/// use tokio::time::Instant;
///
/// let mut breaker = Breaker::new(BreakerConfig {
///     mode: BreakerMode::ConsecutiveFailures { failures: 1 },
///     ..BreakerConfig::DEFAULT
/// });
/// let t0 = Instant::now();
/// let admission = breaker.admit(t0).0.expect("closed");
/// breaker.record(admission, Outcome::Failure, Duration::ZERO, t0);
/// let rejected = breaker.admit(t0).0.unwrap_err();
/// assert_eq!(rejected.until, Some(t0 + Duration::from_secs(30))); // the default reset
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rejected {
    /// When it may admit again: the end of the cooldown, or `None` when it is
    /// half-open and every probe slot is taken.
    pub until: Option<Instant>,
}

/// The three states of a breaker.
///
/// ```
/// use resilient_api::circuit_breaker::state::{Breaker, BreakerConfig, Phase};
/// use tokio::time::Instant;
///
/// let breaker = Breaker::new(BreakerConfig::DEFAULT);
/// assert_eq!(breaker.snapshot(Instant::now()).phase, Phase::Closed); // it starts closed
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Admits every attempt and counts outcomes.
    Closed,
    /// Refuses every attempt until the cooldown ends.
    Open,
    /// Admits a limited number of trial attempts.
    HalfOpen,
}

/// A change of phase, to be reported as an event.
///
/// ```
/// use resilient_api::circuit_breaker::state::{
///     Breaker, BreakerConfig, BreakerMode, Outcome, Phase, Transition,
/// };
/// use std::time::Duration;
/// use tokio::time::Instant;
///
/// let mut breaker = Breaker::new(BreakerConfig {
///     mode: BreakerMode::ConsecutiveFailures { failures: 1 },
///     ..BreakerConfig::DEFAULT
/// });
/// let now = Instant::now();
/// let admission = breaker.admit(now).0.expect("closed");
/// let tripped = breaker.record(admission, Outcome::Failure, Duration::ZERO, now);
/// assert_eq!(tripped, Some(Transition { from: Phase::Closed, to: Phase::Open, generation: 1 }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    /// The phase left.
    pub from: Phase,
    /// The phase entered.
    pub to: Phase,
    /// The generation that starts with this transition.
    pub generation: u64,
}

/// Observable state of a breaker (what `client.circuit_state()` returns).
///
/// ```
/// use resilient_api::circuit_breaker::state::{Breaker, BreakerConfig, Outcome, Phase};
/// use std::time::Duration;
/// use tokio::time::Instant;
///
/// let mut breaker = Breaker::new(BreakerConfig::DEFAULT);
/// let now = Instant::now();
/// let admission = breaker.admit(now).0.expect("closed");
/// breaker.record(admission, Outcome::Failure, Duration::ZERO, now);
/// let state = breaker.snapshot(now);
/// assert_eq!((state.phase, state.consecutive_failures), (Phase::Closed, 1));
/// assert_eq!((state.open_until, state.generation), (None, 0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CircuitState {
    /// The current phase.
    pub phase: Phase,
    /// Failures in a row counted while closed.
    pub consecutive_failures: u32,
    /// Outcomes counted in the rolling window (failure-rate mode; 0 otherwise).
    pub calls_in_window: u32,
    /// Failures among them.
    pub failures_in_window: u32,
    /// End of the cooldown while open.
    pub open_until: Option<Instant>,
    /// Half-open probes admitted and not yet recorded or released.
    pub probes_in_flight: u32,
    /// Incremented on every transition.
    pub generation: u64,
}

/// The circuit-breaker state machine. See the [module docs](self).
///
/// ```
/// use resilient_api::circuit_breaker::state::{Breaker, BreakerConfig};
/// use tokio::time::Instant;
///
/// // No clock inside: every method is given `now`.
/// let mut breaker = Breaker::new(BreakerConfig::DEFAULT);
/// let now = Instant::now();
/// assert!(breaker.check(now).is_ok());
/// let (admission, transition) = breaker.admit(now);
/// assert!(admission.is_ok() && transition.is_none());
/// ```
#[derive(Debug)]
pub struct Breaker {
    config: BreakerConfig,
    phase: Phase,
    generation: u64,
    consecutive_failures: u32,
    open_until: Option<Instant>,
    probes_in_flight: u32,
    probe_successes: u32,
    window: Window,
}

impl Breaker {
    /// A closed breaker in generation 0.
    ///
    /// ```
    /// use resilient_api::circuit_breaker::state::{Breaker, BreakerConfig, Phase};
    /// use tokio::time::Instant;
    ///
    /// let breaker = Breaker::new(BreakerConfig::DEFAULT);
    /// let state = breaker.snapshot(Instant::now());
    /// assert_eq!((state.phase, state.generation), (Phase::Closed, 0));
    /// ```
    pub fn new(config: BreakerConfig) -> Self {
        let width = match config.mode {
            BreakerMode::FailureRate { window, .. } => {
                (window / BUCKETS as u32).max(Duration::from_nanos(1))
            }
            BreakerMode::ConsecutiveFailures { .. } => Duration::from_nanos(1),
        };
        Self {
            config,
            phase: Phase::Closed,
            generation: 0,
            consecutive_failures: 0,
            open_until: None,
            probes_in_flight: 0,
            probe_successes: 0,
            window: Window::new(width),
        }
    }

    /// Fast check without mutation: refuses while open and `now` is before the end of
    /// the cooldown, or while half-open with every probe slot taken.
    ///
    /// `Ok` means [`admit`](Self::admit) at the same instant would admit.
    ///
    /// ```
    /// use resilient_api::circuit_breaker::state::{Breaker, BreakerConfig};
    /// use tokio::time::Instant;
    ///
    /// let breaker = Breaker::new(BreakerConfig::DEFAULT);
    /// assert!(breaker.check(Instant::now()).is_ok()); // closed: nothing to refuse
    /// ```
    pub fn check(&self, now: Instant) -> Result<(), Rejected> {
        match self.phase {
            Phase::Closed => Ok(()),
            Phase::Open => match self.open_until {
                Some(until) if now < until => Err(Rejected { until: Some(until) }),
                _ => Ok(()),
            },
            Phase::HalfOpen if self.probe_slot_free() => Ok(()),
            Phase::HalfOpen => Err(Rejected { until: None }),
        }
    }

    /// Admits one attempt, or refuses it.
    ///
    /// An open breaker whose cooldown has ended (`now >= open_until`, so exactly at
    /// the deadline) moves to half-open and the attempt takes a probe slot; the
    /// transition is returned alongside.
    ///
    /// Half-open, a probe is admitted while the probes in flight plus the successful
    /// probes so far are fewer than `probes`: at most `probes` run at once, and no
    /// more are started than could still be needed to close.
    ///
    /// ```
    /// use resilient_api::circuit_breaker::state::{Breaker, BreakerConfig};
    /// use tokio::time::Instant;
    ///
    /// let mut breaker = Breaker::new(BreakerConfig::DEFAULT);
    /// let (admission, transition) = breaker.admit(Instant::now());
    /// let admission = admission.expect("a closed breaker admits");
    /// assert!(!admission.probe && transition.is_none());
    /// breaker.release(admission); // or `record` its outcome: exactly one of the two
    /// ```
    pub fn admit(&mut self, now: Instant) -> (Result<Admission, Rejected>, Option<Transition>) {
        match self.phase {
            Phase::Closed => (Ok(self.admission(false)), None),
            Phase::Open => match self.settle(now) {
                None => (
                    Err(Rejected {
                        until: self.open_until,
                    }),
                    None,
                ),
                Some(transition) => {
                    self.probes_in_flight = 1;
                    (Ok(self.admission(true)), Some(transition))
                }
            },
            Phase::HalfOpen if self.probe_slot_free() => {
                self.probes_in_flight = self.probes_in_flight.saturating_add(1);
                (Ok(self.admission(true)), None)
            }
            Phase::HalfOpen => (Err(Rejected { until: None }), None),
        }
    }

    /// Records the outcome of an admitted attempt; `latency` is for the slow-call rule.
    ///
    /// A stale admission (from an older generation) changes nothing and returns
    /// `None`: it cannot close, reopen, shorten or extend anything, is not counted,
    /// and releases no probe slot of the current generation.
    ///
    /// ```
    /// use resilient_api::circuit_breaker::state::{
    ///     Breaker, BreakerConfig, BreakerMode, Outcome, Phase,
    /// };
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    ///
    /// let mut breaker = Breaker::new(BreakerConfig {
    ///     mode: BreakerMode::ConsecutiveFailures { failures: 1 },
    ///     ..BreakerConfig::DEFAULT
    /// });
    /// let now = Instant::now();
    /// let slow = breaker.admit(now).0.expect("closed");
    /// let fast = breaker.admit(now).0.expect("closed");
    /// breaker.record(fast, Outcome::Failure, Duration::ZERO, now); // trips it
    ///
    /// // The slow attempt's success was admitted before the trip: it is stale.
    /// assert_eq!(breaker.record(slow, Outcome::Success, Duration::ZERO, now), None);
    /// assert_eq!(breaker.snapshot(now).phase, Phase::Open);
    /// ```
    pub fn record(
        &mut self,
        admission: Admission,
        outcome: Outcome,
        latency: Duration,
        now: Instant,
    ) -> Option<Transition> {
        if admission.generation != self.generation {
            return None;
        }
        let outcome = match (outcome, self.config.slow_call) {
            (Outcome::Success, Some(slow)) if latency >= slow => Outcome::Failure,
            _ => outcome,
        };
        match self.phase {
            Phase::Closed if !admission.probe => self.record_closed(outcome, now),
            Phase::HalfOpen if admission.probe => {
                self.probes_in_flight = self.probes_in_flight.saturating_sub(1);
                match outcome {
                    Outcome::Success => {
                        self.probe_successes = self.probe_successes.saturating_add(1);
                        (self.probe_successes >= self.probes()).then(|| self.close())
                    }
                    Outcome::Failure => Some(self.trip(now)),
                    Outcome::Ignored => None,
                }
            }
            // Unreachable with admissions from this breaker: nothing is admitted in an
            // open generation, and probe admissions only exist in half-open ones.
            _ => None,
        }
    }

    /// The attempt was cancelled or dropped before it had an outcome: releases its
    /// probe slot (if it holds one of the current generation) and counts as nothing.
    ///
    /// ```
    /// use resilient_api::circuit_breaker::state::{
    ///     Breaker, BreakerConfig, BreakerMode, Outcome,
    /// };
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    ///
    /// let mut breaker = Breaker::new(BreakerConfig {
    ///     mode: BreakerMode::ConsecutiveFailures { failures: 1 },
    ///     reset: Duration::from_secs(1),
    ///     ..BreakerConfig::DEFAULT
    /// });
    /// let t0 = Instant::now();
    /// let first = breaker.admit(t0).0.expect("closed");
    /// breaker.record(first, Outcome::Failure, Duration::ZERO, t0);
    ///
    /// let later = t0 + Duration::from_secs(1);
    /// let probe = breaker.admit(later).0.expect("the cooldown is over");
    /// assert!(breaker.check(later).is_err()); // the one probe slot is taken
    /// breaker.release(probe); // its caller gave up
    /// assert!(breaker.check(later).is_ok()); // the next caller may probe
    /// ```
    pub fn release(&mut self, admission: Admission) {
        if admission.generation == self.generation
            && admission.probe
            && self.phase == Phase::HalfOpen
        {
            self.probes_in_flight = self.probes_in_flight.saturating_sub(1);
        }
    }

    /// `Some(open_until)` if the breaker will still refuse at instant `at` (it is open
    /// and `open_until > at`), else `None`.
    ///
    /// Lets the caller skip sleeping a backoff only to be refused afterwards.
    ///
    /// ```
    /// use resilient_api::circuit_breaker::state::{
    ///     Breaker, BreakerConfig, BreakerMode, Outcome,
    /// };
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    ///
    /// let mut breaker = Breaker::new(BreakerConfig {
    ///     mode: BreakerMode::ConsecutiveFailures { failures: 1 },
    ///     reset: Duration::from_secs(1),
    ///     ..BreakerConfig::DEFAULT
    /// });
    /// let t0 = Instant::now();
    /// let admission = breaker.admit(t0).0.expect("closed");
    /// breaker.record(admission, Outcome::Failure, Duration::ZERO, t0);
    ///
    /// let reopens = t0 + Duration::from_secs(1);
    /// assert_eq!(breaker.open_at(t0 + Duration::from_millis(200)), Some(reopens));
    /// assert_eq!(breaker.open_at(reopens), None);
    /// ```
    pub fn open_at(&self, at: Instant) -> Option<Instant> {
        match (self.phase, self.open_until) {
            (Phase::Open, Some(until)) if until > at => Some(until),
            _ => None,
        }
    }

    /// An open breaker whose cooldown has ended by `now` moves to half-open, with no
    /// probe in flight yet, and the transition is returned; in any other state nothing
    /// changes. [`admit`](Self::admit) does this itself; a reader of the state (the
    /// client's `circuit_state()`) calls it first, so that it never reads `Open` past
    /// the end of the cooldown.
    ///
    /// ```
    /// use resilient_api::circuit_breaker::state::{Breaker, BreakerConfig, BreakerMode, Outcome, Phase};
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    ///
    /// let mut breaker = Breaker::new(BreakerConfig {
    ///     mode: BreakerMode::ConsecutiveFailures { failures: 1 },
    ///     reset: Duration::from_secs(1),
    ///     ..BreakerConfig::DEFAULT
    /// });
    /// let t0 = Instant::now();
    /// let admission = breaker.admit(t0).0.expect("closed");
    /// breaker.record(admission, Outcome::Failure, Duration::ZERO, t0);
    ///
    /// assert_eq!(breaker.settle(t0 + Duration::from_millis(999)), None);
    /// let t = breaker.settle(t0 + Duration::from_secs(1)).expect("the cooldown is over");
    /// assert_eq!((t.from, t.to), (Phase::Open, Phase::HalfOpen));
    /// assert_eq!(breaker.snapshot(t0 + Duration::from_secs(1)).phase, Phase::HalfOpen);
    /// ```
    pub fn settle(&mut self, now: Instant) -> Option<Transition> {
        match (self.phase, self.open_until) {
            (Phase::Open, Some(until)) if now < until => None,
            (Phase::Open, _) => Some(self.transition(Phase::HalfOpen)),
            _ => None,
        }
    }

    /// The observable state at `now` (window counts exclude expired buckets). An open
    /// breaker is read as it stands: call [`settle`](Self::settle) first to see the
    /// end of its cooldown.
    ///
    /// ```
    /// use resilient_api::circuit_breaker::state::{Breaker, BreakerConfig, Outcome};
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    ///
    /// let mut breaker = Breaker::new(BreakerConfig::DEFAULT);
    /// let now = Instant::now();
    /// let admission = breaker.admit(now).0.expect("closed");
    /// breaker.record(admission, Outcome::Failure, Duration::ZERO, now);
    /// assert_eq!(breaker.snapshot(now).consecutive_failures, 1);
    /// ```
    pub fn snapshot(&self, now: Instant) -> CircuitState {
        let (calls_in_window, failures_in_window) = self.window.totals(now);
        CircuitState {
            phase: self.phase,
            consecutive_failures: self.consecutive_failures,
            calls_in_window,
            failures_in_window,
            open_until: self.open_until,
            probes_in_flight: self.probes_in_flight,
            generation: self.generation,
        }
    }

    fn probes(&self) -> u32 {
        self.config.probes.max(1)
    }

    /// `Some(generation)` while admitting an attempt, and recording its success or an
    /// ignored outcome, change nothing: closed, counting consecutive failures, none
    /// counted, no slow-call rule. A shell may then admit and record without
    /// touching this state (as [`Breaker::admit`] would: `Admission { generation,
    /// probe: false }`).
    ///
    /// ```
    /// use resilient_api::circuit_breaker::state::{Breaker, BreakerConfig, Outcome};
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    ///
    /// let mut breaker = Breaker::new(BreakerConfig::DEFAULT);
    /// assert_eq!(breaker.quiet_generation(), Some(0));
    /// let now = Instant::now();
    /// let admission = breaker.admit(now).0.expect("closed");
    /// breaker.record(admission, Outcome::Failure, Duration::ZERO, now);
    /// assert_eq!(breaker.quiet_generation(), None); // a failure is counted now
    /// ```
    pub fn quiet_generation(&self) -> Option<u64> {
        let quiet = self.phase == Phase::Closed
            && matches!(self.config.mode, BreakerMode::ConsecutiveFailures { .. })
            && self.consecutive_failures == 0
            && self.config.slow_call.is_none();
        quiet.then_some(self.generation)
    }

    fn probe_slot_free(&self) -> bool {
        self.probes_in_flight.saturating_add(self.probe_successes) < self.probes()
    }

    fn admission(&self, probe: bool) -> Admission {
        Admission {
            generation: self.generation,
            probe,
        }
    }

    fn record_closed(&mut self, outcome: Outcome, now: Instant) -> Option<Transition> {
        match outcome {
            Outcome::Success => self.consecutive_failures = 0,
            Outcome::Failure => {
                self.consecutive_failures = self.consecutive_failures.saturating_add(1);
            }
            Outcome::Ignored => return None,
        }
        let failed = outcome == Outcome::Failure;
        let trips = match self.config.mode {
            BreakerMode::ConsecutiveFailures { failures } => {
                self.consecutive_failures >= failures.max(1)
            }
            BreakerMode::FailureRate {
                threshold,
                min_calls,
                ..
            } => {
                self.window.add(now, failed);
                let (calls, failures) = self.window.totals(now);
                calls >= min_calls.max(1)
                    && u64::from(failures) * RATE_UNIT >= rate_units(threshold) * u64::from(calls)
            }
        };
        trips.then(|| self.trip(now))
    }

    /// Moves to `Open` with a fresh cooldown starting at `now`.
    fn trip(&mut self, now: Instant) -> Transition {
        let transition = self.transition(Phase::Open);
        self.open_until = Some(deadline(now, self.config.reset));
        transition
    }

    /// Moves to `Closed` with every counter reset.
    fn close(&mut self) -> Transition {
        let transition = self.transition(Phase::Closed);
        self.consecutive_failures = 0;
        self.window.clear();
        transition
    }

    /// Changes phase, starts a new generation and clears per-phase state.
    fn transition(&mut self, to: Phase) -> Transition {
        let from = self.phase;
        self.phase = to;
        // Wrapping, not saturating: a stuck generation would make stale outcomes look
        // current, whereas a wrap needs 2^64 transitions.
        self.generation = self.generation.wrapping_add(1);
        self.open_until = None;
        self.probes_in_flight = 0;
        self.probe_successes = 0;
        Transition {
            from,
            to,
            generation: self.generation,
        }
    }
}

/// `now + d`; when that overflows, an instant close to the latest one this platform
/// can represent (found by adding halves of `d`), so a huge `reset` means "open for a
/// very long time" instead of a panic.
fn deadline(now: Instant, d: Duration) -> Instant {
    if let Some(at) = now.checked_add(d) {
        return at;
    }
    let (mut at, mut step) = (now, d);
    while !step.is_zero() {
        step /= 2;
        if let Some(later) = at.checked_add(step) {
            at = later;
        }
    }
    at
}

/// One bucket of the rolling window.
#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    /// Which bucket of time (counted from the epoch) this slot currently holds.
    index: u64,
    calls: u32,
    failures: u32,
}

/// Rolling counts over `BUCKETS` buckets of `width` each.
#[derive(Debug)]
struct Window {
    width: Duration,
    /// Start of bucket 0: the first outcome recorded since the window was cleared.
    epoch: Option<Instant>,
    /// Highest bucket index written so far; late outcomes are counted in it.
    latest: u64,
    buckets: [Bucket; BUCKETS],
}

impl Window {
    fn new(width: Duration) -> Self {
        Self {
            width,
            epoch: None,
            latest: 0,
            buckets: [Bucket::default(); BUCKETS],
        }
    }

    fn clear(&mut self) {
        *self = Self::new(self.width);
    }

    fn index(&self, now: Instant) -> u64 {
        let Some(epoch) = self.epoch else { return 0 };
        let elapsed = now.saturating_duration_since(epoch).as_nanos();
        let width = self.width.as_nanos().max(1);
        u64::try_from(elapsed / width).unwrap_or(u64::MAX)
    }

    fn add(&mut self, now: Instant, failed: bool) {
        self.epoch.get_or_insert(now);
        let index = self.index(now).max(self.latest);
        self.latest = index;
        let bucket = &mut self.buckets[slot(index)];
        if bucket.index != index {
            *bucket = Bucket {
                index,
                calls: 0,
                failures: 0,
            };
        }
        bucket.calls = bucket.calls.saturating_add(1);
        if failed {
            bucket.failures = bucket.failures.saturating_add(1);
        }
    }

    /// (calls, failures) in buckets still inside the window at `now`.
    fn totals(&self, now: Instant) -> (u32, u32) {
        let current = self.index(now);
        self.buckets
            .iter()
            .filter(|b| b.calls > 0 && current.saturating_sub(b.index) < BUCKETS as u64)
            .fold((0u32, 0u32), |(calls, failures), b| {
                (
                    calls.saturating_add(b.calls),
                    failures.saturating_add(b.failures),
                )
            })
    }
}

fn slot(index: u64) -> usize {
    // The remainder is below BUCKETS, so it always fits.
    (index % BUCKETS as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn consecutive(failures: u32, reset_ms: u64, probes: u32) -> BreakerConfig {
        BreakerConfig {
            mode: BreakerMode::ConsecutiveFailures { failures },
            reset: ms(reset_ms),
            probes,
            slow_call: None,
        }
    }

    fn rate(threshold: f32, window_ms: u64, min_calls: u32) -> BreakerConfig {
        BreakerConfig {
            mode: BreakerMode::FailureRate {
                threshold,
                window: ms(window_ms),
                min_calls,
            },
            reset: ms(100),
            probes: 1,
            slow_call: None,
        }
    }

    fn admit(b: &mut Breaker, at: Instant) -> Admission {
        b.admit(at).0.expect("expected admission")
    }

    fn call(b: &mut Breaker, outcome: Outcome, at: Instant) -> Option<Transition> {
        let a = admit(b, at);
        b.record(a, outcome, Duration::ZERO, at)
    }

    /// Trips a 1-failure breaker at `at`.
    fn trip_at(b: &mut Breaker, at: Instant) {
        let t = call(b, Outcome::Failure, at).expect("expected a trip");
        assert_eq!(t.to, Phase::Open);
    }

    #[test]
    fn defaults_match_docs() {
        assert_eq!(BreakerConfig::default(), BreakerConfig::DEFAULT);
        assert_eq!(
            BreakerConfig::DEFAULT.mode,
            BreakerMode::ConsecutiveFailures { failures: 5 }
        );
        assert_eq!(BreakerConfig::DEFAULT.reset, Duration::from_secs(30));
        assert_eq!(BreakerConfig::DEFAULT.probes, 1);
        assert_eq!(BreakerConfig::DEFAULT.slow_call, None);
        static _IN_A_STATIC: BreakerConfig = BreakerConfig::DEFAULT;
    }

    #[test]
    fn quiet_only_while_a_success_would_change_nothing() {
        let t0 = Instant::now();
        let mut b = Breaker::new(consecutive(2, 1000, 1));
        assert_eq!(b.quiet_generation(), Some(0));
        let a = b.admit(t0).0.expect("closed admits");
        assert_eq!(
            a,
            Admission {
                generation: 0,
                probe: false
            }
        );
        assert_eq!(
            b.quiet_generation(),
            Some(0),
            "admission in closed changes nothing"
        );
        assert_eq!(b.record(a, Outcome::Failure, Duration::ZERO, t0), None);
        assert_eq!(b.quiet_generation(), None, "one failure counted");
        let a = b.admit(t0).0.expect("closed admits");
        assert_eq!(b.record(a, Outcome::Success, Duration::ZERO, t0), None);
        assert_eq!(b.quiet_generation(), Some(0), "a success clears the count");
        assert_eq!(call(&mut b, Outcome::Failure, t0), None);
        trip_at(&mut b, t0);
        assert_eq!(b.quiet_generation(), None, "open");

        let slow = BreakerConfig {
            slow_call: Some(Duration::from_millis(10)),
            ..consecutive(2, 1000, 1)
        };
        assert_eq!(
            Breaker::new(slow).quiet_generation(),
            None,
            "a success may count as slow"
        );
        let rate = BreakerConfig {
            mode: BreakerMode::FailureRate {
                threshold: 0.5,
                min_calls: 4,
                window: Duration::from_secs(10),
            },
            ..BreakerConfig::DEFAULT
        };
        assert_eq!(
            Breaker::new(rate).quiet_generation(),
            None,
            "every outcome counts"
        );
    }

    #[test]
    fn new_breaker_is_closed_in_generation_zero() {
        let base = Instant::now();
        let b = Breaker::new(BreakerConfig::DEFAULT);
        let s = b.snapshot(base);
        assert_eq!(s.phase, Phase::Closed);
        assert_eq!(s.generation, 0);
        assert_eq!(s.open_until, None);
        assert_eq!(b.check(base), Ok(()));
        assert_eq!(b.open_at(base), None);
    }

    #[test]
    fn s19_two_consecutive_failures_trip() {
        let base = Instant::now();
        let mut b = Breaker::new(consecutive(2, 1000, 1));
        assert_eq!(call(&mut b, Outcome::Failure, base), None);
        assert_eq!(b.snapshot(base).consecutive_failures, 1);
        let t = call(&mut b, Outcome::Failure, base + ms(20));
        assert_eq!(
            t,
            Some(Transition {
                from: Phase::Closed,
                to: Phase::Open,
                generation: 1
            })
        );
        let until = base + ms(1020);
        assert_eq!(b.snapshot(base + ms(20)).open_until, Some(until));
        let (res, t) = b.admit(base + ms(21));
        assert_eq!(res, Err(Rejected { until: Some(until) }));
        assert_eq!(t, None);
    }

    #[test]
    fn success_resets_consecutive_failures() {
        let base = Instant::now();
        let mut b = Breaker::new(consecutive(2, 1000, 1));
        assert_eq!(call(&mut b, Outcome::Failure, base), None);
        assert_eq!(call(&mut b, Outcome::Success, base), None);
        assert_eq!(b.snapshot(base).consecutive_failures, 0);
        assert_eq!(call(&mut b, Outcome::Failure, base), None);
        assert_eq!(b.snapshot(base).phase, Phase::Closed);
    }

    #[test]
    fn concurrent_closed_attempts_all_count() {
        let base = Instant::now();
        let mut b = Breaker::new(consecutive(2, 1000, 1));
        let first = admit(&mut b, base);
        let second = admit(&mut b, base);
        assert_eq!(b.record(first, Outcome::Failure, ms(5), base + ms(5)), None);
        let t = b.record(second, Outcome::Failure, ms(6), base + ms(6));
        assert_eq!(t.map(|t| t.to), Some(Phase::Open));
    }

    #[test]
    fn open_refuses_one_ms_before_the_deadline() {
        let base = Instant::now();
        let mut b = Breaker::new(consecutive(1, 100, 1));
        trip_at(&mut b, base);
        let rejected = Rejected {
            until: Some(base + ms(100)),
        };
        assert_eq!(b.check(base + ms(99)), Err(rejected));
        assert_eq!(b.admit(base + ms(99)), (Err(rejected), None));
        assert_eq!(b.snapshot(base + ms(99)).phase, Phase::Open);
    }

    #[test]
    fn open_admits_a_probe_at_exactly_the_deadline() {
        let base = Instant::now();
        let mut b = Breaker::new(consecutive(1, 100, 1));
        trip_at(&mut b, base);
        assert_eq!(b.check(base + ms(100)), Ok(()));
        let (res, t) = b.admit(base + ms(100));
        assert_eq!(
            res,
            Ok(Admission {
                generation: 2,
                probe: true
            })
        );
        assert_eq!(
            t,
            Some(Transition {
                from: Phase::Open,
                to: Phase::HalfOpen,
                generation: 2
            })
        );
        let s = b.snapshot(base + ms(100));
        assert_eq!(s.phase, Phase::HalfOpen);
        assert_eq!(s.probes_in_flight, 1);
        assert_eq!(s.open_until, None);
    }

    #[test]
    fn open_admits_a_probe_one_ms_after_the_deadline() {
        let base = Instant::now();
        let mut b = Breaker::new(consecutive(1, 100, 1));
        trip_at(&mut b, base);
        let (res, t) = b.admit(base + ms(101));
        assert!(res.is_ok_and(|a| a.probe));
        assert_eq!(t.map(|t| t.to), Some(Phase::HalfOpen));
    }

    #[test]
    fn open_at_is_some_only_before_the_deadline() {
        let base = Instant::now();
        let mut b = Breaker::new(consecutive(1, 100, 1));
        assert_eq!(b.open_at(base), None);
        trip_at(&mut b, base);
        assert_eq!(b.open_at(base + ms(99)), Some(base + ms(100)));
        assert_eq!(b.open_at(base + ms(100)), None);
        assert_eq!(b.open_at(base + ms(101)), None);
        let _ = admit(&mut b, base + ms(100));
        assert_eq!(b.open_at(base + ms(50)), None, "half-open is not open");
    }

    #[test]
    fn half_open_refuses_without_deadline_when_probe_slots_are_taken() {
        let base = Instant::now();
        let mut b = Breaker::new(consecutive(1, 100, 1));
        trip_at(&mut b, base);
        let _probe = admit(&mut b, base + ms(100));
        let rejected = Rejected { until: None };
        assert_eq!(b.check(base + ms(101)), Err(rejected));
        assert_eq!(b.admit(base + ms(101)), (Err(rejected), None));
    }

    #[test]
    fn probe_success_closes_with_counters_reset() {
        let base = Instant::now();
        let mut b = Breaker::new(consecutive(1, 100, 1));
        trip_at(&mut b, base);
        let probe = admit(&mut b, base + ms(100));
        let t = b.record(probe, Outcome::Success, ms(10), base + ms(110));
        assert_eq!(
            t,
            Some(Transition {
                from: Phase::HalfOpen,
                to: Phase::Closed,
                generation: 3
            })
        );
        let s = b.snapshot(base + ms(110));
        assert_eq!(
            s,
            CircuitState {
                phase: Phase::Closed,
                consecutive_failures: 0,
                calls_in_window: 0,
                failures_in_window: 0,
                open_until: None,
                probes_in_flight: 0,
                generation: 3,
            }
        );
        assert!(!admit(&mut b, base + ms(111)).probe);
    }

    #[test]
    fn probe_failure_reopens_with_a_fresh_cooldown_at_boundaries() {
        let base = Instant::now();
        let mut b = Breaker::new(consecutive(1, 100, 1));
        trip_at(&mut b, base);
        let probe = admit(&mut b, base + ms(100));
        let t = b.record(probe, Outcome::Failure, ms(20), base + ms(120));
        assert_eq!(
            t,
            Some(Transition {
                from: Phase::HalfOpen,
                to: Phase::Open,
                generation: 3
            })
        );
        let until = Some(base + ms(220));
        assert_eq!(b.snapshot(base + ms(120)).open_until, until);
        assert_eq!(b.admit(base + ms(219)), (Err(Rejected { until }), None));
        assert_eq!(b.check(base + ms(220)), Ok(()));
        assert_eq!(b.check(base + ms(221)), Ok(()));
        let (res, t) = b.admit(base + ms(220));
        assert!(res.is_ok_and(|a| a.probe && a.generation == 4));
        assert_eq!(t.map(|t| t.to), Some(Phase::HalfOpen));
    }

    #[test]
    fn s20_stale_success_neither_closes_nor_shortens_the_new_cooldown() {
        let base = Instant::now();
        let mut b = Breaker::new(consecutive(1, 100, 1));
        let before_trip = admit(&mut b, base);
        trip_at(&mut b, base);
        assert!(b.admit(base + ms(99)).0.is_err());
        let (probe, _) = b.admit(base + ms(100));
        let probe = probe.expect("probe admitted at exactly t=100");
        let t = b.record(probe, Outcome::Failure, ms(20), base + ms(120));
        assert_eq!(t.map(|t| t.to), Some(Phase::Open));

        let before = b.snapshot(base + ms(150));
        assert_eq!(
            b.record(before_trip, Outcome::Success, ms(150), base + ms(150)),
            None
        );
        assert_eq!(b.snapshot(base + ms(150)), before);
        assert_eq!(before.open_until, Some(base + ms(220)));

        assert_eq!(
            b.check(base + ms(219)),
            Err(Rejected {
                until: Some(base + ms(220))
            })
        );
        let (probe, _) = b.admit(base + ms(220));
        let probe = probe.expect("recovery probe at t=220");
        let t = b.record(probe, Outcome::Success, ms(1), base + ms(221));
        assert_eq!(t.map(|t| t.to), Some(Phase::Closed));
    }

    /// Collects admissions from every older generation of a 1-failure, 2-probe
    /// breaker and leaves it in the given phase.
    ///
    /// A half-open generation that closes has no probe left in flight (closing takes
    /// `probes` successes and no more are admitted), so its entry is a probe that was
    /// already resolved: replaying it must change nothing either.
    fn breaker_with_history(end: Phase) -> (Breaker, Vec<Admission>, Instant) {
        let base = Instant::now();
        let mut b = Breaker::new(consecutive(1, 100, 2));
        let mut old = vec![admit(&mut b, base), admit(&mut b, base)];
        let mut now = base;
        // gen 0 closed → 1 open → 2 half-open → 3 open → 4 half-open → 5 closed.
        trip_at(&mut b, now);
        now += ms(100);
        let probe = admit(&mut b, now);
        old.push(admit(&mut b, now)); // still in flight when gen 2 reopens
        assert!(b.record(probe, Outcome::Failure, ms(1), now).is_some());
        now += ms(100);
        let first = admit(&mut b, now);
        let second = admit(&mut b, now);
        assert_eq!(b.record(first, Outcome::Success, ms(1), now), None);
        b.release(second);
        old.push(second);
        let third = admit(&mut b, now);
        assert_eq!(
            b.record(third, Outcome::Success, ms(1), now).map(|t| t.to),
            Some(Phase::Closed)
        );
        old.push(admit(&mut b, now));
        old.push(admit(&mut b, now));
        assert_eq!(b.snapshot(now).generation, 5);
        // gen 6 open; then gen 7 half-open; then gen 8 closed.
        trip_at(&mut b, now);
        match end {
            Phase::Open => {}
            Phase::HalfOpen => {
                now += ms(100);
                let _probe = admit(&mut b, now);
            }
            Phase::Closed => {
                now += ms(100);
                let first = admit(&mut b, now);
                let second = admit(&mut b, now);
                assert_eq!(b.record(first, Outcome::Success, ms(1), now), None);
                old.push(first);
                assert!(b.record(second, Outcome::Success, ms(1), now).is_some());
            }
        }
        assert_eq!(b.snapshot(now).phase, end);
        (b, old, now)
    }

    #[test]
    fn stale_outcome_does_not_count_in_the_window() {
        let base = Instant::now();
        let mut b = Breaker::new(rate(0.5, 10_000, 1));
        let before_trip = admit(&mut b, base);
        assert!(call(&mut b, Outcome::Failure, base).is_some());
        let probe = admit(&mut b, base + ms(100));
        assert!(
            b.record(probe, Outcome::Success, ms(1), base + ms(100))
                .is_some()
        );
        let t = b.record(before_trip, Outcome::Failure, ms(1), base + ms(101));
        assert_eq!(t, None);
        let s = b.snapshot(base + ms(101));
        assert_eq!((s.phase, s.calls_in_window), (Phase::Closed, 0));
    }

    #[test]
    fn stale_outcomes_from_every_older_generation_change_nothing() {
        for end in [Phase::Open, Phase::HalfOpen, Phase::Closed] {
            let (mut b, old, now) = breaker_with_history(end);
            let current = b.snapshot(now).generation;
            let mut generations: Vec<u64> = old.iter().map(|a| a.generation).collect();
            generations.dedup();
            // Open generations (1, 3, 6) admit nothing; every other older one is here.
            let (expected, expected_current): (&[u64], u64) = match end {
                Phase::Open => (&[0, 2, 4, 5], 6),
                Phase::HalfOpen => (&[0, 2, 4, 5], 7),
                Phase::Closed => (&[0, 2, 4, 5, 7], 8),
            };
            assert_eq!(
                (generations.as_slice(), current),
                (expected, expected_current)
            );
            for a in &old {
                assert_ne!(a.generation, current);
                for outcome in [Outcome::Success, Outcome::Failure, Outcome::Ignored] {
                    for at in [now, now + ms(1), now + ms(500)] {
                        let before = b.snapshot(at);
                        assert_eq!(b.record(*a, outcome, ms(1000), at), None);
                        assert_eq!(b.snapshot(at), before, "{end:?} {a:?} {outcome:?}");
                    }
                }
                let before = b.snapshot(now);
                b.release(*a);
                assert_eq!(b.snapshot(now), before, "{end:?} {a:?} release");
            }
        }
    }

    #[test]
    fn stale_probe_does_not_release_a_slot_of_the_new_generation() {
        let base = Instant::now();
        let mut b = Breaker::new(consecutive(1, 100, 1));
        trip_at(&mut b, base);
        let old_probe = admit(&mut b, base + ms(100));
        // Force a new half-open generation while `old_probe` is still in flight.
        let _ = b.record(old_probe, Outcome::Failure, ms(1), base + ms(101));
        let new_probe = admit(&mut b, base + ms(201));
        assert_eq!(b.snapshot(base + ms(201)).probes_in_flight, 1);
        b.release(old_probe);
        assert_eq!(
            b.record(old_probe, Outcome::Ignored, ms(1), base + ms(202)),
            None
        );
        assert_eq!(b.snapshot(base + ms(202)).probes_in_flight, 1);
        assert!(b.admit(base + ms(202)).0.is_err());
        assert!(
            b.record(new_probe, Outcome::Success, ms(1), base + ms(203))
                .is_some()
        );
    }

    #[test]
    fn two_probes_admitted_concurrently_third_refused_two_successes_close() {
        let base = Instant::now();
        let mut b = Breaker::new(consecutive(1, 100, 2));
        trip_at(&mut b, base);
        let first = admit(&mut b, base + ms(100));
        let second = admit(&mut b, base + ms(100));
        assert!(second.probe);
        assert_eq!(b.snapshot(base + ms(100)).probes_in_flight, 2);
        assert_eq!(
            b.admit(base + ms(100)),
            (Err(Rejected { until: None }), None)
        );
        assert_eq!(
            b.record(first, Outcome::Success, ms(5), base + ms(105)),
            None
        );
        assert_eq!(b.snapshot(base + ms(105)).phase, Phase::HalfOpen);
        // One success is banked and one probe is in flight: nothing more is needed.
        assert!(b.admit(base + ms(105)).0.is_err());
        let t = b.record(second, Outcome::Success, ms(6), base + ms(106));
        assert_eq!(t.map(|t| t.to), Some(Phase::Closed));
    }

    #[test]
    fn one_failed_probe_of_two_reopens() {
        let base = Instant::now();
        let mut b = Breaker::new(consecutive(1, 100, 2));
        trip_at(&mut b, base);
        let first = admit(&mut b, base + ms(100));
        let second = admit(&mut b, base + ms(100));
        assert_eq!(
            b.record(first, Outcome::Success, ms(5), base + ms(105)),
            None
        );
        let t = b.record(second, Outcome::Failure, ms(6), base + ms(106));
        assert_eq!(t.map(|t| t.to), Some(Phase::Open));
        assert_eq!(b.snapshot(base + ms(106)).open_until, Some(base + ms(206)));
    }

    #[test]
    fn release_frees_a_probe_slot() {
        let base = Instant::now();
        let mut b = Breaker::new(consecutive(1, 100, 1));
        trip_at(&mut b, base);
        let probe = admit(&mut b, base + ms(100));
        assert!(b.check(base + ms(100)).is_err());
        b.release(probe);
        let s = b.snapshot(base + ms(101));
        assert_eq!((s.phase, s.probes_in_flight), (Phase::HalfOpen, 0));
        let (res, t) = b.admit(base + ms(101));
        assert!(res.is_ok_and(|a| a.probe));
        assert_eq!(t, None);
    }

    #[test]
    fn ignored_probe_frees_its_slot_and_counts_nothing() {
        let base = Instant::now();
        let mut b = Breaker::new(consecutive(1, 100, 1));
        trip_at(&mut b, base);
        let probe = admit(&mut b, base + ms(100));
        assert_eq!(
            b.record(probe, Outcome::Ignored, ms(1), base + ms(101)),
            None
        );
        let s = b.snapshot(base + ms(101));
        assert_eq!(
            (s.phase, s.probes_in_flight, s.generation),
            (Phase::HalfOpen, 0, 2)
        );
        assert!(b.admit(base + ms(101)).0.is_ok());
    }

    #[test]
    fn ignored_counts_as_nothing_while_closed() {
        let base = Instant::now();
        let mut b = Breaker::new(consecutive(2, 100, 1));
        assert_eq!(call(&mut b, Outcome::Failure, base), None);
        for _ in 0..10 {
            assert_eq!(call(&mut b, Outcome::Ignored, base), None);
        }
        let s = b.snapshot(base);
        assert_eq!((s.phase, s.consecutive_failures), (Phase::Closed, 1));

        let mut b = Breaker::new(rate(0.5, 1000, 2));
        for _ in 0..10 {
            assert_eq!(call(&mut b, Outcome::Ignored, base), None);
        }
        assert_eq!(b.snapshot(base).calls_in_window, 0);
    }

    #[test]
    fn s21_released_attempts_count_nothing_while_closed() {
        let base = Instant::now();
        let mut b = Breaker::new(consecutive(1, 100, 1));
        for _ in 0..3 {
            let a = admit(&mut b, base);
            b.release(a);
        }
        let s = b.snapshot(base);
        assert_eq!(
            (s.phase, s.consecutive_failures, s.generation),
            (Phase::Closed, 0, 0)
        );
    }

    #[test]
    fn failure_rate_waits_for_min_calls() {
        let base = Instant::now();
        let mut b = Breaker::new(rate(0.5, 1000, 4));
        for i in 0..3 {
            assert_eq!(call(&mut b, Outcome::Failure, base + ms(i)), None);
        }
        let s = b.snapshot(base + ms(3));
        assert_eq!((s.calls_in_window, s.failures_in_window), (3, 3));
        let t = call(&mut b, Outcome::Failure, base + ms(3));
        assert_eq!(t.map(|t| t.to), Some(Phase::Open));
    }

    #[test]
    fn failure_rate_trips_at_exactly_the_threshold() {
        let base = Instant::now();
        let mut b = Breaker::new(rate(0.5, 1000, 4));
        assert_eq!(call(&mut b, Outcome::Success, base), None);
        assert_eq!(call(&mut b, Outcome::Success, base), None);
        assert_eq!(call(&mut b, Outcome::Success, base), None);
        assert_eq!(call(&mut b, Outcome::Failure, base), None, "1/4 < 0.5");
        assert_eq!(call(&mut b, Outcome::Failure, base), None, "2/5 < 0.5");
        let t = call(&mut b, Outcome::Failure, base);
        assert_eq!(t.map(|t| t.to), Some(Phase::Open), "3/6 >= 0.5");
    }

    /// Regression: 0.2 as an `f32` is 0.200000003, and 2 failures in 10 calls were
    /// compared against 2.00000003 and did not trip.
    #[test]
    fn failure_rate_trips_at_exactly_a_decimal_threshold() {
        for (threshold, calls, failures) in [(0.2, 10, 2), (0.1, 10, 1), (0.3, 10, 3), (0.6, 5, 3)]
        {
            let base = Instant::now();
            let mut b = Breaker::new(rate(threshold, 10_000, calls));
            for _ in 0..calls - failures {
                assert_eq!(call(&mut b, Outcome::Success, base), None);
            }
            for _ in 0..failures - 1 {
                assert_eq!(call(&mut b, Outcome::Failure, base), None);
            }
            let t = call(&mut b, Outcome::Failure, base);
            assert_eq!(
                t.map(|t| t.to),
                Some(Phase::Open),
                "{failures} of {calls} is exactly {threshold}"
            );
        }
        // Just under it does not trip: 1 of 10 against 0.2.
        let base = Instant::now();
        let mut b = Breaker::new(rate(0.2, 10_000, 10));
        for _ in 0..9 {
            assert_eq!(call(&mut b, Outcome::Success, base), None);
        }
        assert_eq!(call(&mut b, Outcome::Failure, base), None);
    }

    #[test]
    fn failure_rate_window_expires_old_buckets_at_boundaries() {
        let base = Instant::now();
        // 10 buckets of 100 ms.
        let mut b = Breaker::new(rate(0.5, 1000, 3));
        assert_eq!(call(&mut b, Outcome::Failure, base), None);
        assert_eq!(call(&mut b, Outcome::Failure, base + ms(50)), None);
        assert_eq!(b.snapshot(base + ms(999)).calls_in_window, 2);
        assert_eq!(b.snapshot(base + ms(1000)).calls_in_window, 0);
        assert_eq!(b.snapshot(base + ms(1001)).calls_in_window, 0);
        // At 999 ms the two failures still count: a third trips it.
        let mut again = Breaker::new(rate(0.5, 1000, 3));
        assert_eq!(call(&mut again, Outcome::Failure, base), None);
        assert_eq!(call(&mut again, Outcome::Failure, base + ms(50)), None);
        let t = call(&mut again, Outcome::Failure, base + ms(999));
        assert_eq!(t.map(|t| t.to), Some(Phase::Open));
        // At 1000 ms they have expired: the third is alone in the window.
        assert_eq!(call(&mut b, Outcome::Failure, base + ms(1000)), None);
        let s = b.snapshot(base + ms(1000));
        assert_eq!((s.calls_in_window, s.failures_in_window), (1, 1));
    }

    #[test]
    fn failure_rate_window_is_cleared_when_closing() {
        let base = Instant::now();
        let mut b = Breaker::new(rate(0.5, 10_000, 2));
        assert_eq!(call(&mut b, Outcome::Failure, base), None);
        assert!(call(&mut b, Outcome::Failure, base).is_some());
        let probe = admit(&mut b, base + ms(100));
        assert!(
            b.record(probe, Outcome::Success, ms(1), base + ms(100))
                .is_some()
        );
        let s = b.snapshot(base + ms(100));
        assert_eq!((s.calls_in_window, s.failures_in_window), (0, 0));
        assert_eq!(call(&mut b, Outcome::Failure, base + ms(101)), None);
    }

    #[test]
    fn late_outcome_counts_in_the_latest_bucket() {
        let base = Instant::now();
        let mut b = Breaker::new(rate(1.0, 1000, 100));
        assert_eq!(call(&mut b, Outcome::Success, base + ms(500)), None);
        // Recorded with an earlier `now` than the previous one.
        assert_eq!(call(&mut b, Outcome::Success, base + ms(100)), None);
        assert_eq!(b.snapshot(base + ms(500)).calls_in_window, 2);
    }

    #[test]
    fn slow_success_counts_as_failure_from_exactly_the_threshold() {
        let base = Instant::now();
        let config = BreakerConfig {
            slow_call: Some(ms(50)),
            ..consecutive(1, 100, 1)
        };
        let mut b = Breaker::new(config);
        let a = admit(&mut b, base);
        assert_eq!(b.record(a, Outcome::Success, ms(49), base + ms(49)), None);
        let a = admit(&mut b, base + ms(49));
        let t = b.record(a, Outcome::Success, ms(50), base + ms(99));
        assert_eq!(t.map(|t| t.to), Some(Phase::Open));
        assert_eq!(b.snapshot(base + ms(99)).open_until, Some(base + ms(199)));
    }

    #[test]
    fn slow_probe_success_reopens_and_slow_ignored_stays_ignored() {
        let base = Instant::now();
        let config = BreakerConfig {
            slow_call: Some(ms(50)),
            ..consecutive(1, 100, 1)
        };
        let mut b = Breaker::new(config);
        trip_at(&mut b, base);
        let probe = admit(&mut b, base + ms(100));
        assert_eq!(
            b.record(probe, Outcome::Ignored, ms(500), base + ms(600)),
            None
        );
        let probe = admit(&mut b, base + ms(600));
        let t = b.record(probe, Outcome::Success, ms(60), base + ms(660));
        assert_eq!(t.map(|t| t.to), Some(Phase::Open));
    }

    #[test]
    fn huge_reset_does_not_overflow() {
        let base = Instant::now();
        let config = BreakerConfig {
            reset: Duration::MAX,
            ..consecutive(1, 0, 1)
        };
        let mut b = Breaker::new(config);
        trip_at(&mut b, base);
        let until = b.snapshot(base).open_until.expect("open");
        assert!(until > base + Duration::from_secs(60 * 60 * 24 * 365));
        assert!(
            b.check(base + Duration::from_secs(60 * 60 * 24 * 365))
                .is_err()
        );
    }

    #[test]
    fn zero_reset_admits_a_probe_at_once() {
        let base = Instant::now();
        let mut b = Breaker::new(consecutive(1, 0, 1));
        trip_at(&mut b, base);
        assert_eq!(b.open_at(base), None);
        let (res, t) = b.admit(base);
        assert!(res.is_ok_and(|a| a.probe));
        assert_eq!(t.map(|t| t.to), Some(Phase::HalfOpen));
    }

    #[test]
    fn zero_config_values_are_treated_as_one() {
        let base = Instant::now();
        let mut b = Breaker::new(consecutive(0, 100, 0));
        trip_at(&mut b, base);
        let _probe = admit(&mut b, base + ms(100));
        assert!(b.admit(base + ms(100)).0.is_err());

        let mut b = Breaker::new(rate(0.0, 0, 0));
        assert!(call(&mut b, Outcome::Failure, base).is_some());
        let mut b = Breaker::new(rate(f32::NAN, 1000, 1));
        assert_eq!(call(&mut b, Outcome::Success, base), None);
        assert!(call(&mut b, Outcome::Failure, base + ms(1)).is_none());
        assert!(
            call(&mut b, Outcome::Failure, base + ms(2)).is_none(),
            "2/3 < 1"
        );
    }

    #[derive(Clone, Debug)]
    enum Op {
        Admit,
        Record(usize, Outcome, u64),
        Release(usize),
        Advance(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        let outcome = prop_oneof![
            Just(Outcome::Success),
            Just(Outcome::Failure),
            Just(Outcome::Ignored)
        ];
        prop_oneof![
            3 => Just(Op::Admit),
            3 => (any::<usize>(), outcome, 0..80u64).prop_map(|(i, o, l)| Op::Record(i, o, l)),
            1 => any::<usize>().prop_map(Op::Release),
            2 => (0..150u64).prop_map(Op::Advance),
        ]
    }

    fn config() -> impl Strategy<Value = BreakerConfig> {
        let mode = prop_oneof![
            (0..4u32).prop_map(|failures| BreakerMode::ConsecutiveFailures { failures }),
            (0.05f32..=1.0, 0..500u64, 0..5u32).prop_map(|(threshold, window, min_calls)| {
                BreakerMode::FailureRate {
                    threshold,
                    window: ms(window),
                    min_calls,
                }
            }),
        ];
        (mode, 0..200u64, 0..4u32, proptest::option::of(10..60u64)).prop_map(
            |(mode, reset, probes, slow)| BreakerConfig {
                mode,
                reset: ms(reset),
                probes,
                slow_call: slow.map(ms),
            },
        )
    }

    proptest! {
        #[test]
        fn random_sequences_keep_the_invariants(
            config in config(),
            ops in proptest::collection::vec(op(), 0..200),
        ) {
            let base = Instant::now();
            let mut now = base;
            let mut b = Breaker::new(config);
            let mut pending: Vec<Admission> = Vec::new();
            for op in ops {
                let before = b.snapshot(now);
                // What the shell's lock-free fast path relies on.
                let quiet = b.quiet_generation();
                match op {
                    Op::Admit => {
                        let checked = b.check(now);
                        let (res, t) = b.admit(now);
                        prop_assert_eq!(checked.is_ok(), res.is_ok());
                        if let Some(generation) = quiet {
                            prop_assert_eq!(res, Ok(Admission { generation, probe: false }));
                            prop_assert_eq!(t, None);
                            prop_assert_eq!(b.snapshot(now), before);
                        }
                        if before.phase == Phase::Open
                            && before.open_until.is_some_and(|until| now < until)
                        {
                            prop_assert!(res.is_err(), "admitted while open");
                            prop_assert_eq!(b.open_at(now), before.open_until);
                        }
                        if let Some(t) = t {
                            prop_assert_eq!(t.from, before.phase);
                            prop_assert_eq!(t.generation, before.generation + 1);
                        }
                        if let Ok(a) = res {
                            prop_assert_eq!(a.generation, b.snapshot(now).generation);
                            pending.push(a);
                        }
                    }
                    Op::Record(..) | Op::Release(_) if pending.is_empty() => {}
                    Op::Record(i, outcome, latency) => {
                        let a = pending.swap_remove(i % pending.len());
                        let t = b.record(a, outcome, ms(latency), now);
                        let after = b.snapshot(now);
                        if a.generation != before.generation {
                            prop_assert_eq!(t, None);
                            prop_assert_eq!(after, before);
                        } else if let Some(t) = t {
                            prop_assert_eq!(t.from, before.phase);
                            prop_assert_eq!(t.generation, before.generation + 1);
                            prop_assert_eq!(after.phase, t.to);
                        } else {
                            prop_assert_eq!(after.phase, before.phase);
                            prop_assert_eq!(after.generation, before.generation);
                        }
                        if outcome == Outcome::Ignored {
                            prop_assert_eq!(t, None);
                        }
                        if quiet.is_some() && outcome != Outcome::Failure {
                            prop_assert_eq!(t, None);
                            prop_assert_eq!(after, before);
                        }
                    }
                    Op::Release(i) => {
                        let a = pending.swap_remove(i % pending.len());
                        b.release(a);
                        let after = b.snapshot(now);
                        if !a.probe {
                            prop_assert_eq!(after, before);
                        }
                        prop_assert_eq!(after.phase, before.phase);
                        prop_assert_eq!(after.generation, before.generation);
                        prop_assert_eq!(after.open_until, before.open_until);
                        if a.generation != before.generation {
                            prop_assert_eq!(after, before);
                        }
                    }
                    Op::Advance(n) => now += ms(n),
                }
                let s = b.snapshot(now);
                prop_assert!(s.probes_in_flight <= config.probes.max(1));
                let live_probes = pending
                    .iter()
                    .filter(|a| a.probe && a.generation == s.generation)
                    .count();
                prop_assert_eq!(s.probes_in_flight as usize, live_probes);
                prop_assert_eq!(s.open_until.is_some(), s.phase == Phase::Open);
                if s.phase != Phase::HalfOpen {
                    prop_assert_eq!(s.probes_in_flight, 0);
                }
            }
        }
    }
}
