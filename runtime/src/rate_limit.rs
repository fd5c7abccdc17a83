//! A rate limiter: a token bucket that lets `burst` attempts through at once and then
//! one every `1 / per_second` seconds.
//!
//! Every attempt takes a token, retries and hedges included, and so does a redirect
//! hop back to the same origin, so the limit holds for what actually reaches the
//! upstream, not for calls. Callers that must wait line up
//! first come, first served. Waiting is bounded by the call's deadline (a redirect
//! hop's, which waits inside its attempt, by the attempt's time limit too), and the
//! decision is made up front: when the caller's token (the one after those of the
//! callers ahead of it, each taken on the timer tick that wakes its waiter) would come
//! at or after the deadline, or in the deadline's own millisecond (tokio's timer wakes
//! on whole milliseconds, so the deadline would win that race), [`RateLimiter::acquire`]
//! fails at once with [`RateLimited`] rather than sleeping just to fail. The refusal
//! carries the instant that token could have been had: a caller that comes back then,
//! with nobody new in line, is served at once. A waiter
//! that gives up takes nothing: the one behind it moves up to its earlier time.
//!
//! The bucket is kept as a theoretical arrival time in whole nanoseconds (GCRA), so
//! spacing is exact (10 per second is one token every 100 ms, not 99.999...) and no
//! input can overflow or panic. The limit holds at the times tokens are handed out:
//! a waiter takes its token when the millisecond timer wakes it, so with a burst of 1
//! and an interval that is not a whole number of milliseconds, each wait rounds up
//! and the rate comes out a little lower than configured, never higher (three per
//! second: 0, 334, 668, 1002 ms). A burst of 2 or more absorbs that rounding when
//! the interval is longer than a millisecond.
//!
//! # When to use
//! When the upstream publishes a request rate (an API quota) or you want to smooth
//! bursts towards it. One limiter per partition (by default one per client, that is
//! per upstream host). A token taken by an attempt that was then never dispatched
//! goes back with [`RateLimiter::refund`].
//!
//! # Defaults
//! None: no rate limit unless configured. A `burst` of `0` is treated as `1`. A
//! `per_second` that is zero, negative or NaN never refills (only the burst is ever
//! granted); an infinite one never limits. Rates are saturated to whole nanoseconds
//! between tokens, rounded up so the limit is never exceeded.
//!
//! # Example
//! ```
//! use resilient_api::rate_limit::{RateLimitConfig, RateLimiter};
//! use std::time::Duration;
//! use tokio::time::Instant;
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() {
//!     // 100 per second (one every 10 ms), 2 at once.
//!     let limiter = RateLimiter::new(RateLimitConfig::new(100.0, 2), Instant::now());
//!     assert!(limiter.try_acquire(Instant::now()).is_some());
//!     assert!(limiter.try_acquire(Instant::now()).is_some());
//!     assert!(limiter.try_acquire(Instant::now()).is_none()); // burst spent
//!
//!     // A deadline the next token cannot meet fails at once, saying when to come back.
//!     let deadline = Instant::now() + Duration::from_millis(1);
//!     let limited = limiter.acquire(Some(deadline)).await.unwrap_err();
//!     assert!(limited.retry_at >= deadline);
//!
//!     // Without a deadline, wait for the next token (about 10 ms).
//!     let token = limiter.acquire(None).await.unwrap();
//!     limiter.refund(token); // the attempt was never sent: give the token back
//! }
//! ```

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use portable_atomic::AtomicU128;

use tokio::sync::Notify;
use tokio::time::{Instant, sleep_until, timeout_at};

/// How fast tokens refill and how many may be taken at once.
///
/// ```
/// use resilient_api::rate_limit::RateLimitConfig;
///
/// // 100 requests a minute, no more than 10 in a burst.
/// let config = RateLimitConfig { per_second: 100.0 / 60.0, burst: 10 };
/// assert_eq!(config, RateLimitConfig::new(100.0 / 60.0, 10));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLimitConfig {
    /// Tokens added per second. Zero, negative or NaN: never refills; infinite: no limit.
    pub per_second: f64,
    /// Tokens the bucket holds when full (it starts full). `0` is treated as `1`.
    pub burst: u32,
}

impl RateLimitConfig {
    /// `per_second` tokens a second, up to `burst` at once.
    ///
    /// ```
    /// use resilient_api::rate_limit::RateLimitConfig;
    /// const QUOTA: RateLimitConfig = RateLimitConfig::new(10.0, 5);
    /// assert_eq!(QUOTA.burst, 5);
    /// ```
    pub const fn new(per_second: f64, burst: u32) -> Self {
        RateLimitConfig { per_second, burst }
    }
}

/// Proof that a token was taken from a [`RateLimiter`].
///
/// Dropping it keeps the token spent; [`RateLimiter::refund`] gives it back.
///
/// ```
/// use resilient_api::rate_limit::{RateLimitConfig, RateLimiter};
/// use tokio::time::Instant;
///
/// let now = Instant::now();
/// let limiter = RateLimiter::new(RateLimitConfig::new(1.0, 2), now);
/// let token = limiter.try_acquire(now).expect("the bucket starts full");
/// drop(token); // spent all the same
/// assert_eq!(limiter.available(now), 1.0);
/// ```
#[derive(Debug)]
#[must_use = "a token is spent whether or not it is used; refund it if the attempt is not sent"]
pub struct RateLimitToken {
    _private: (),
}

/// No token could be had before the deadline.
///
/// ```
/// use resilient_api::rate_limit::{RateLimitConfig, RateLimiter};
/// use std::time::Duration;
/// use tokio::time::Instant;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let start = Instant::now();
/// let limiter = RateLimiter::new(RateLimitConfig::new(1.0, 1), start);
/// let _first = limiter.try_acquire(start);
/// let deadline = start + Duration::from_millis(200);
/// let limited = limiter.acquire(Some(deadline)).await.unwrap_err();
/// assert_eq!(limited.retry_at, start + Duration::from_secs(1));
/// assert_eq!(limited.to_string(), "rate limited");
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimited {
    /// When this caller could have had its token: the first instant at which the
    /// callers ahead of it in line have all been served (each on the timer tick that
    /// wakes it) and the bucket holds one more. A caller that comes back then, with
    /// nobody new in line, is served at once, not refused again.
    ///
    /// Counted as if the callers ahead wait for their tokens: one that gives up
    /// instead makes the token come sooner. Exact on a paused clock, which moves by
    /// whole ticks; on a running clock, whose ticks fall anywhere, a caller behind
    /// others can be told up to a tick off, either way. A caller refused only after it
    /// joined the line (the line was run late) counts as ahead of it no more than were
    /// when it joined, so it may be told a later instant than it could have had.
    pub retry_at: Instant,
}

impl fmt::Display for RateLimited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("rate limited")
    }
}

impl std::error::Error for RateLimited {}

/// A token bucket with a FIFO line of waiters.
///
/// `Send + Sync`; share it with an `Arc`. The pure methods take `now`;
/// [`RateLimiter::acquire`] reads the tokio clock.
///
/// ```
/// use resilient_api::rate_limit::{RateLimitConfig, RateLimiter};
/// use std::sync::Arc;
/// use tokio::time::Instant;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let limiter = Arc::new(RateLimiter::new(RateLimitConfig::new(10.0, 1), Instant::now()));
/// let start = Instant::now();
/// let _a = limiter.acquire(None).await; // the bucket's one token
/// let _b = limiter.acquire(None).await; // waits for the next, 100 ms later
/// assert_eq!(start.elapsed().as_millis(), 100);
/// # }
/// ```
// Aligned to its own cache lines (128 bytes: a line and the one the prefetcher pairs
// with it), so that the words every call writes here (and in the partition's other
// policies) are not next to words other threads only read. Measured in the engine's
// two-worker benchmark: without it, a field added elsewhere in the partition cost
// about a tenth of the second worker's gain.
#[repr(align(128))]
pub struct RateLimiter {
    config: RateLimitConfig,
    /// Nanoseconds between tokens; `0` = unlimited, `u64::MAX` = never refills.
    interval: u128,
    /// `burst * interval`: how far ahead of now the arrival time may run.
    tolerance: u128,
    /// Time zero for the nanosecond counts below.
    origin: Instant,
    /// Theoretical arrival time (ns since `origin`): the bucket is full when it is
    /// at or before now and holds `burst - (tat - now) / interval` tokens otherwise.
    /// Taken and refunded by compare-and-swap, so that a call that finds a token
    /// takes no lock. 128 bits, so that no rate, burst or time can overflow it.
    ///
    /// Why not a mutex: every attempt of every call takes a token, from every
    /// thread. Measured in the engine benchmark (a rate limit too high to ever
    /// wait), a call took 0.56–0.57 µs with the mutex, 0.53–0.54 µs with this, and
    /// 0.46–0.47 µs with no rate limit at all.
    tat: AtomicU128,
    /// Callers inside `acquire` that have not been served yet. While any waits,
    /// [`RateLimiter::try_acquire`] and newcomers to `acquire` take nothing. A caller
    /// counted here only after its first look found no token (a few instructions, on
    /// another thread) can be overtaken by a `try_acquire` that takes a token just
    /// come due.
    waiting: AtomicU64,
    /// Held by the waiter at the front of the line, the only one with a timer.
    /// tokio's mutex is FIFO and a dropped `lock()` future leaves in O(1).
    front: tokio::sync::Mutex<()>,
    /// Wakes the front waiter when a refund makes a token free early.
    refunded: Notify,
}

impl RateLimiter {
    /// A full bucket (`burst` tokens) at `now`.
    ///
    /// ```
    /// use resilient_api::rate_limit::{RateLimitConfig, RateLimiter};
    /// use tokio::time::Instant;
    ///
    /// let now = Instant::now();
    /// let limiter = RateLimiter::new(RateLimitConfig::new(5.0, 0), now);
    /// assert_eq!(limiter.config().burst, 1); // a burst of 0 is treated as 1
    /// assert_eq!(limiter.available(now), 1.0);
    /// ```
    pub fn new(config: RateLimitConfig, now: Instant) -> Self {
        let config = RateLimitConfig {
            per_second: config.per_second,
            burst: config.burst.max(1),
        };
        let interval = u128::from(interval_ns(config.per_second));
        RateLimiter {
            config,
            interval,
            tolerance: interval * u128::from(config.burst),
            origin: now,
            tat: AtomicU128::new(0),
            waiting: AtomicU64::new(0),
            front: tokio::sync::Mutex::new(()),
            refunded: Notify::new(),
        }
    }

    /// Takes a token at `now` if one is free and nobody is waiting for one.
    ///
    /// ```
    /// use resilient_api::rate_limit::{RateLimitConfig, RateLimiter};
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    ///
    /// let t0 = Instant::now();
    /// let limiter = RateLimiter::new(RateLimitConfig::new(10.0, 1), t0); // one every 100 ms
    /// assert!(limiter.try_acquire(t0).is_some());
    /// assert!(limiter.try_acquire(t0 + Duration::from_millis(99)).is_none());
    /// assert!(limiter.try_acquire(t0 + Duration::from_millis(100)).is_some());
    /// ```
    pub fn try_acquire(&self, now: Instant) -> Option<RateLimitToken> {
        let now = self.ns(now);
        if self.waiting.load(Ordering::Acquire) > 0 {
            return None;
        }
        self.take(now)
    }

    /// Waits for a token, in FIFO order, giving up at `deadline` (`None`: no deadline).
    ///
    /// Fails with [`RateLimited`] at once, without sleeping, when the next token this
    /// caller could get (after those of the callers ahead of it, see
    /// [`RateLimited::retry_at`]) comes at or after `deadline`, or less than a timer
    /// tick (1 ms) before it (the sleep would end in the deadline's own tick), and
    /// only then. Cancel-safe: a future dropped while waiting takes no token, and the
    /// waiter behind it gets the earlier time.
    ///
    /// ```
    /// use resilient_api::rate_limit::{RateLimitConfig, RateLimiter};
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let start = Instant::now();
    /// let limiter = RateLimiter::new(RateLimitConfig::new(1.0, 1), start);
    /// let _first = limiter.acquire(None).await.unwrap();
    /// let err = limiter.acquire(Some(start + Duration::from_millis(500))).await.unwrap_err();
    /// assert!(err.retry_at >= start + Duration::from_secs(1)); // one second after the first
    /// assert!(Instant::now() < start + Duration::from_millis(500)); // decided at once
    /// # });
    /// ```
    pub async fn acquire(&self, deadline: Option<Instant>) -> Result<RateLimitToken, RateLimited> {
        let now = self.ns(Instant::now());
        let place = {
            let waiting = self.waiting.load(Ordering::Acquire);
            let ready = self.ready_at(now, waiting.saturating_add(1));
            if self.missed(ready, now, deadline) {
                return Err(RateLimited {
                    retry_at: self.instant(ready),
                });
            }
            if waiting == 0
                && let Some(token) = self.take(now)
            {
                return Ok(token);
            }
            let ahead = self.waiting.fetch_add(1, Ordering::AcqRel);
            InLine {
                limiter: self,
                left: false,
                ahead,
            }
        };
        self.wait_in_line(place, deadline).await
    }

    async fn wait_in_line(
        &self,
        mut place: InLine<'_>,
        deadline: Option<Instant>,
    ) -> Result<RateLimitToken, RateLimited> {
        let _front = match deadline {
            None => self.front.lock().await,
            Some(deadline) => match timeout_at(deadline, self.front.lock()).await {
                Ok(front) => front,
                Err(_elapsed) => {
                    let now = self.ns(Instant::now());
                    // Those still ahead of us, plus us: no more than were ahead when we
                    // joined (the line only loses callers ahead), nor than are in it
                    // (those behind us are counted there too).
                    let nth = self
                        .waiting
                        .load(Ordering::Acquire)
                        .min(place.ahead.saturating_add(1));
                    let retry_at = self.ready_at(now, nth);
                    return Err(RateLimited {
                        retry_at: self.instant(retry_at),
                    });
                }
            },
        };
        loop {
            // Registered before looking, so a refund in between is not missed.
            let refunded = self.refunded.notified();
            // In a block, so that no `u128` is kept across the await below: it would
            // make this future, and every call's future around it, 16-byte aligned.
            let wake = {
                // Taken as of now, when the timer woke this waiter (on a whole
                // millisecond, up to one after the token was due), not as of when it
                // was due: that would let the next waiter, woken on time, follow
                // closer than the rate allows.
                let now = self.ns(Instant::now());
                // The deadline before the token, as on the way in: a waiter that runs
                // again only after its deadline (a timer serviced late, or the front
                // handed on in the tick where the deadline fires) takes nothing.
                let ready = self.ready_at(now, 1);
                if self.missed(ready, now, deadline) {
                    return Err(RateLimited {
                        retry_at: self.instant(ready),
                    });
                }
                if let Some(token) = self.take(now) {
                    place.leave();
                    return Ok(token);
                }
                self.instant(ready)
            };
            tokio::select! {
                () = sleep_until(wake) => {}
                () = refunded => {}
            }
        }
    }

    /// Gives back a token taken by an attempt that never dispatched.
    ///
    /// The bucket never holds more than `burst` tokens, however late the refund. Give
    /// a token back as soon as it is known to be unused, as the client does (in the
    /// poll that took it): a refund is one interval taken off the bucket's schedule,
    /// so a token kept for an interval or more and then refunded lets the next taker
    /// follow sooner than the rate allows.
    ///
    /// ```
    /// use resilient_api::rate_limit::{RateLimitConfig, RateLimiter};
    /// use tokio::time::Instant;
    ///
    /// let now = Instant::now();
    /// let limiter = RateLimiter::new(RateLimitConfig::new(1.0, 1), now);
    /// let token = limiter.try_acquire(now).expect("the bucket starts full");
    /// assert_eq!(limiter.available(now), 0.0);
    /// limiter.refund(token); // the attempt was never sent
    /// assert_eq!(limiter.available(now), 1.0);
    /// ```
    pub fn refund(&self, token: RateLimitToken) {
        let RateLimitToken { _private: () } = token;
        let interval = self.interval;
        // The closure always returns `Some`: the update cannot fail.
        let _ = self
            .tat
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |tat| {
                Some(tat.saturating_sub(interval))
            });
        self.refunded.notify_one();
    }

    /// Tokens in the bucket at `now`, fractions included (between `0` and `burst`).
    ///
    /// ```
    /// use resilient_api::rate_limit::{RateLimitConfig, RateLimiter};
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    ///
    /// let t0 = Instant::now();
    /// let limiter = RateLimiter::new(RateLimitConfig::new(2.0, 2), t0); // one every 500 ms
    /// let _a = limiter.try_acquire(t0);
    /// let _b = limiter.try_acquire(t0);
    /// assert_eq!(limiter.available(t0 + Duration::from_millis(250)), 0.5);
    /// ```
    pub fn available(&self, now: Instant) -> f64 {
        let burst = f64::from(self.config.burst);
        if self.interval == 0 {
            return burst;
        }
        let now = self.ns(now);
        let deficit = self.tat.load(Ordering::Acquire).saturating_sub(now);
        (burst - deficit as f64 / self.interval as f64).clamp(0.0, burst)
    }

    /// Whether the bucket is full at `now` and nobody waits: as a new limiter would be.
    pub(crate) fn is_settled(&self, now: Instant) -> bool {
        self.waiting.load(Ordering::Acquire) == 0
            && self.tat.load(Ordering::Acquire) <= self.ns(now)
    }

    /// The effective configuration (burst clamped to at least 1).
    ///
    /// ```
    /// use resilient_api::rate_limit::{RateLimitConfig, RateLimiter};
    /// use tokio::time::Instant;
    ///
    /// let limiter = RateLimiter::new(RateLimitConfig::new(2.0, 0), Instant::now());
    /// assert_eq!(limiter.config(), RateLimitConfig::new(2.0, 1));
    /// ```
    pub fn config(&self) -> RateLimitConfig {
        self.config
    }

    /// Takes a token at `now` if the bucket has one.
    fn take(&self, now: u128) -> Option<RateLimitToken> {
        if self.interval == 0 {
            // Unlimited: nothing to count, and nothing for every call to write.
            return Some(RateLimitToken { _private: () });
        }
        let limit = now.saturating_add(self.tolerance);
        let mut tat = self.tat.load(Ordering::Acquire);
        loop {
            let next = tat.max(now).saturating_add(self.interval);
            if next > limit {
                return None;
            }
            match self
                .tat
                .compare_exchange_weak(tat, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(RateLimitToken { _private: () }),
                Err(actual) => tat = actual,
            }
        }
    }

    /// When the `nth` caller from now (1-based, served one after another, first come
    /// first served) can have its token: the first instant at which the `nth - 1`
    /// ahead of it have taken theirs and the bucket holds one more.
    ///
    /// Alone (`nth == 1`), that is when the bucket next holds a token, or now. Behind
    /// others, it depends on the timer: a waiter takes its token when the millisecond
    /// timer wakes it, on the tick after its token came free (or at once, when it is
    /// handed the front of the line on a tick its token is already free), and a bucket
    /// that fills while a waiter sleeps to its tick loses what it cannot hold. So the
    /// caller behind them can be served only once the last of them is, on that one's
    /// tick, and only when a token is free then. See [`RateLimiter::behind_line`].
    ///
    /// Counted from the bucket alone (the nth token's time in it, or whole ticks from
    /// the first token's time), a caller behind others was told up to a tick before
    /// the line could serve it, or after it: one that came back then found the line
    /// still there, and one whose token would have come in time was refused.
    fn ready_at(&self, now: u128, nth: u64) -> u128 {
        let tat = self.tat.load(Ordering::Acquire).max(now);
        match nth.saturating_sub(1) {
            0 => tat
                .saturating_add(self.interval)
                .saturating_sub(self.tolerance)
                .max(now),
            // Only a caller behind others pays for the line's count.
            ahead => self.behind_line(now, tat, u128::from(ahead)),
        }
    }

    /// [`RateLimiter::ready_at`] for a caller with `ahead` (at least one) waiters
    /// ahead of it, the bucket's arrival time being `tat` (not before `now`).
    ///
    /// The timer's ticks are counted from `now`: a paused clock, which moves by whole
    /// ticks from the runtime's start, is always on one, so there the count is exact.
    /// A running clock is never on them, and the instant can be off by less than a
    /// tick, either way.
    ///
    /// The `k`th waiter's token is free at `first + (k - 1) * interval` (`first` the
    /// next token's time) while nothing is lost. With a burst of 1 a waiter that sleeps
    /// to its tick always loses the rest of its tick: the first is served on the tick
    /// after `first`, each after it the interval rounded up to whole ticks later, and
    /// the caller's token comes an interval after the last one's. With `burst - 1`
    /// intervals of a tick or more, the bucket holds what a tick's wait leaves and
    /// nothing is lost: the last one ahead is served on the tick after its token, and
    /// the caller then, or when its own token comes if later. Otherwise see
    /// [`RateLimiter::after_ticks`].
    #[cold]
    fn behind_line(&self, now: u128, tat: u128, ahead: u128) -> u128 {
        let (interval, burst) = (self.interval, u128::from(self.config.burst));
        // The tick on which a waiter whose token is free at `at` takes it.
        let tick =
            |at: u128| now.saturating_add(at.saturating_sub(now).div_ceil(MS).saturating_mul(MS));
        if interval == 0 {
            // Unlimited: nobody ever waits.
            return now;
        }
        let first = tat.saturating_add(interval).saturating_sub(self.tolerance);
        if burst == 1 {
            let step = interval.div_ceil(MS).saturating_mul(MS);
            return tick(first)
                .saturating_add(step.saturating_mul(ahead - 1))
                .saturating_add(interval);
        }
        if (burst - 1).saturating_mul(interval) >= MS {
            // Counted from `tat`, not `first`: a full bucket's `first` is clamped to 0.
            let free = |k: u128| {
                tat.saturating_add(interval.saturating_mul(k))
                    .saturating_sub(self.tolerance)
            };
            return tick(free(ahead)).max(free(ahead + 1));
        }
        self.after_ticks(tat, tick(first), ahead)
    }

    /// [`RateLimiter::behind_line`] when `1 < burst` and `(burst - 1) * interval` is
    /// less than a tick (so is the interval): the line drains the bucket within a
    /// tick, and every tick, from the first waiter's (`start`), serves all that the
    /// bucket holds then.
    ///
    /// Let `left` be how far ahead of the tick the arrival time runs once that tick's
    /// waiters are served: more than `tolerance - interval`. The next tick (a tick adds
    /// more than a token) finds it a millisecond less: when that is more than zero,
    /// less than a token is missing and the tick serves `burst - 1`, leaving `left`
    /// smaller by `gain = 1 ms - (burst - 1) * interval`; otherwise the bucket is full
    /// and the tick serves `burst` (what it could not hold was lost), leaving
    /// `tolerance`. So after the first tick come `ceil((left - 1 ms) / gain)` ticks of
    /// `burst - 1`, then cycles of one full tick and `ceil((tolerance - 1 ms) / gain)`
    /// ticks of `burst - 1`. The caller behind the last one ahead is served on that
    /// one's tick when the tick held one more token, else when its own comes.
    /// (1,900 per second, burst 2, the bucket empty at 0: 1, 2, 1, 2 ... a tick from
    /// 1 ms, the seventh at 5 ms and the eighth's token at 5.05 ms.)
    fn after_ticks(&self, tat: u128, start: u128, ahead: u128) -> u128 {
        let (interval, tolerance) = (self.interval, self.tolerance);
        let burst = u128::from(self.config.burst);
        // Below a millisecond: no product below overflows.
        let (short, gain) = (burst - 1, MS - (burst - 1) * interval);
        // The first tick serves what the bucket holds then (a token at least).
        let base = tat.max(start);
        let free = (start + tolerance - base) / interval;
        if ahead < free {
            return start;
        }
        let left = base + free * interval - start;
        if ahead == free {
            return start + left + interval - tolerance;
        }
        // When the `n`th waiter served after `tick`, in ticks of `burst - 1` from a
        // `left` of `from`, is served: that tick, or the caller's token after it.
        let among_short = |tick: u128, from: u128, n: u128| {
            let ticks = n.div_ceil(short);
            let at = tick + ticks * MS;
            if n < ticks * short {
                at
            } else {
                at + from - ticks * gain + interval - tolerance
            }
        };
        let rest = ahead - free;
        let before_full = left.saturating_sub(MS).div_ceil(gain);
        if rest <= before_full * short {
            return among_short(start, left, rest);
        }
        let rest = rest - before_full * short;
        let cycle = tolerance.saturating_sub(MS).div_ceil(gain) + 1;
        let per_cycle = burst + (cycle - 1) * short;
        let cycles = (rest - 1) / per_cycle;
        let rest = rest - cycles * per_cycle;
        let full = start + (before_full + 1 + cycles * cycle) * MS;
        match rest.checked_sub(burst) {
            None => full,
            Some(0) => full + interval,
            Some(rest) => among_short(full, tolerance, rest),
        }
    }

    /// Whether a token free at `ready` comes too late for `deadline`: at or after it,
    /// or, when it must be waited for, less than a timer tick before it (see
    /// [`crate::timeout::wait_fits`]): the wait could end in the deadline's own
    /// tick, and the call would have slept just to fail.
    fn missed(&self, ready: u128, now: u128, deadline: Option<Instant>) -> bool {
        deadline.is_some_and(|deadline| {
            !crate::timeout::wait_fits(self.instant(now), self.instant(ready), deadline)
        })
    }

    fn ns(&self, at: Instant) -> u128 {
        at.saturating_duration_since(self.origin).as_nanos()
    }

    fn instant(&self, ns: u128) -> Instant {
        let offset = Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX));
        self.origin
            .checked_add(offset)
            .or_else(|| {
                self.origin
                    .checked_add(Duration::from_secs(30 * 365 * 86_400))
            })
            .unwrap_or(self.origin)
    }
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let waiting = self.waiting.load(Ordering::Acquire);
        f.debug_struct("RateLimiter")
            .field("config", &self.config)
            .field("waiting", &waiting)
            .finish_non_exhaustive()
    }
}

/// A caller's place in line; leaving without a token takes nothing.
struct InLine<'a> {
    limiter: &'a RateLimiter,
    /// Already counted out of `waiting`.
    left: bool,
    /// How many were in line when this caller joined it.
    ahead: u64,
}

impl InLine<'_> {
    /// Leaves the line, served or not; only the first call counts.
    fn leave(&mut self) {
        if !std::mem::replace(&mut self.left, true) {
            self.limiter.waiting.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        self.leave();
    }
}

/// A timer tick (tokio's timer wakes on whole milliseconds), in nanoseconds.
const MS: u128 = 1_000_000;

/// Whole nanoseconds between tokens, rounded up, saturating.
fn interval_ns(per_second: f64) -> u64 {
    if per_second.is_nan() || per_second <= 0.0 {
        return u64::MAX;
    }
    // `as` saturates: an infinite quotient becomes u64::MAX, an infinite rate 0.
    (1e9 / per_second).ceil() as u64
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokio::time::sleep;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn is_send_sync_debug() {
        fn check<T: Send + Sync + fmt::Debug>() {}
        check::<RateLimiter>();
        check::<RateLimited>();
        check::<RateLimitToken>();
        fn future_is_send(l: &RateLimiter) -> impl Send + '_ {
            l.acquire(None)
        }
        let _ = future_is_send;
        assert_eq!(
            RateLimited {
                retry_at: Instant::now()
            }
            .to_string(),
            "rate limited"
        );
    }

    #[test]
    fn interval_rounds_up_and_saturates() {
        assert_eq!(interval_ns(10.0), 100_000_000);
        assert_eq!(interval_ns(3.0), 333_333_334);
        assert_eq!(interval_ns(1e-9), 1_000_000_000_000_000_000);
        assert_eq!(interval_ns(1e-12), u64::MAX);
        assert_eq!(interval_ns(1e300), 1);
        assert_eq!(interval_ns(f64::INFINITY), 0);
        for never in [0.0, -1.0, f64::NAN, f64::NEG_INFINITY] {
            assert_eq!(interval_ns(never), u64::MAX);
        }
    }

    #[test]
    fn pure_bucket_refills_exactly() {
        let t0 = Instant::now();
        let l = RateLimiter::new(RateLimitConfig::new(10.0, 3), t0);
        assert_eq!(l.available(t0), 3.0);
        for _ in 0..3 {
            assert!(l.try_acquire(t0).is_some());
        }
        assert!(l.try_acquire(t0).is_none());
        assert_eq!(l.available(t0 + ms(50)), 0.5);
        assert!(l.try_acquire(t0 + ms(99)).is_none());
        assert!(l.try_acquire(t0 + ms(100)).is_some());
        assert_eq!(l.available(t0 + ms(10_000)), 3.0, "never more than burst");
    }

    #[test]
    fn zero_burst_is_one() {
        let t0 = Instant::now();
        let l = RateLimiter::new(RateLimitConfig::new(1.0, 0), t0);
        assert_eq!(l.config().burst, 1);
        assert!(l.try_acquire(t0).is_some());
        assert!(l.try_acquire(t0).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn burst_then_exact_spacing() {
        let start = Instant::now();
        let l = RateLimiter::new(RateLimitConfig::new(10.0, 3), start);
        let mut granted = Vec::new();
        for _ in 0..7 {
            let _token = l.acquire(None).await.unwrap();
            granted.push(start.elapsed());
        }
        assert_eq!(granted, [0, 0, 0, 100, 200, 300, 400].map(ms).to_vec());
    }

    #[tokio::test(start_paused = true)]
    async fn deadline_too_short_fails_at_once() {
        let start = Instant::now();
        let l = RateLimiter::new(RateLimitConfig::new(10.0, 1), start);
        let _t = l.acquire(None).await.unwrap();

        let err = l.acquire(Some(start + ms(50))).await.unwrap_err();
        assert_eq!(err.retry_at, start + ms(100));
        // Exactly at the deadline is too late as well.
        let err = l.acquire(Some(start + ms(100))).await.unwrap_err();
        assert_eq!(err.retry_at, start + ms(100));
        // A deadline already passed with no token is refused too.
        let err = l.acquire(Some(start)).await.unwrap_err();
        assert_eq!(err.retry_at, start + ms(100));
        assert_eq!(Instant::now(), start, "no time passed");

        let _t = l.acquire(Some(start + ms(101))).await.unwrap();
        assert_eq!(Instant::now(), start + ms(100));
    }

    #[tokio::test(start_paused = true)]
    async fn deadline_counts_the_waiters_ahead() {
        let start = Instant::now();
        let l = Arc::new(RateLimiter::new(RateLimitConfig::new(10.0, 1), start));
        let _t = l.try_acquire(start).unwrap();
        let ahead = {
            let l = Arc::clone(&l);
            tokio::spawn(async move { l.acquire(None).await.map(|_| Instant::now()) })
        };
        tokio::task::yield_now().await;
        let err = l.acquire(Some(start + ms(150))).await.unwrap_err();
        assert_eq!(err.retry_at, start + ms(200));
        assert_eq!(Instant::now(), start);
        assert!(l.try_acquire(start).is_none(), "no overtaking the line");
        assert_eq!(ahead.await.unwrap().unwrap(), start + ms(100));
    }

    /// A limiter whose burst is spent at the start, and `waiters` in line behind it,
    /// each saying when it was served.
    async fn spent_with_line(
        rate: f64,
        burst: u32,
        waiters: usize,
    ) -> (
        Instant,
        Arc<RateLimiter>,
        Vec<tokio::task::JoinHandle<Result<Duration, RateLimited>>>,
    ) {
        let start = Instant::now();
        let l = Arc::new(RateLimiter::new(RateLimitConfig::new(rate, burst), start));
        while l.try_acquire(start).is_some() {}
        let mut ahead = Vec::new();
        for _ in 0..waiters {
            let l = Arc::clone(&l);
            ahead.push(tokio::spawn(async move {
                l.acquire(None).await.map(|_| start.elapsed())
            }));
            tokio::task::yield_now().await;
        }
        (start, l, ahead)
    }

    /// Regression: with a burst the line drains within one timer tick (1,900 per second,
    /// burst 2: a token every 526.316 µs, two at most per tick), the waiters take their
    /// tokens at 1, 2, 2, 3, 4, 4, 5 ms, not one every 526 µs: the bucket fills up to its
    /// burst while each waits for the next tick, and what it cannot hold is lost. The
    /// up-front decision counted one interval per waiter ahead, so an eighth caller with
    /// a 5.3 ms deadline was let in line for a token predicted at 4.21 ms, slept until
    /// the seventh was served at 5 ms, and was refused then. It is refused at once.
    #[tokio::test(start_paused = true)]
    async fn a_caller_behind_a_line_that_drains_the_burst_each_tick_is_refused_at_once() {
        let (start, l, ahead) = spent_with_line(1_900.0, 2, 7).await;
        let deadline = start + Duration::from_micros(5_300);
        let err = l.acquire(Some(deadline)).await.unwrap_err();
        assert_eq!(Instant::now(), start, "decided at once, without sleeping");
        // Its token comes at 5.05 ms: the seventh takes its own at 5 ms, leaving the
        // bucket 0.05 ms short of the next. Less than a tick before the deadline, so
        // the refusal stands. (This asserted `retry_at >= deadline`, which held only
        // because the old count said 5.53 ms, half a tick late: the count was as of
        // the first token's time, 0.53 ms, not of the tick its waiter takes it on.)
        assert_eq!(err.retry_at, start + Duration::from_nanos(5_052_632));
        assert!(!crate::timeout::wait_fits(start, err.retry_at, deadline));
        let mut served = Vec::new();
        for t in ahead {
            served.push(t.await.unwrap().unwrap());
        }
        assert_eq!(served, [1, 2, 2, 3, 4, 4, 5].map(ms).to_vec());
        assert_eq!(l.waiting.load(Ordering::Acquire), 0);
        // Coming back then, it is served at once; a nanosecond sooner, not.
        assert!(
            l.try_acquire(err.retry_at - Duration::from_nanos(1))
                .is_none()
        );
        assert!(l.try_acquire(err.retry_at).is_some());
    }

    /// Regression: a refusal's `retry_at` was up to a tick early. 2,500 per second,
    /// burst 4 (a token every 400 µs): the burst spent at 0, a waiter's token is free
    /// at 0.4 ms and it takes it on the next tick, at 1 ms. The caller behind it was
    /// told 0.8 ms, its own token's time in the bucket, when the waiter ahead of it
    /// was still in line: coming back then, it would have had to wait again. Its token
    /// can be had at 1 ms, once the waiter ahead is served.
    #[tokio::test(start_paused = true)]
    async fn a_refusal_behind_a_waiter_says_when_the_waiter_is_served() {
        let start = Instant::now();
        let l = Arc::new(RateLimiter::new(RateLimitConfig::new(2_500.0, 4), start));
        while l.try_acquire(start).is_some() {}
        let ahead = {
            let l = Arc::clone(&l);
            tokio::spawn(async move { l.acquire(None).await.map(|_| start.elapsed()) })
        };
        tokio::task::yield_now().await;
        let deadline = start + Duration::from_micros(1_500);
        let err = l.acquire(Some(deadline)).await.unwrap_err();
        assert_eq!(Instant::now(), start, "decided at once, without sleeping");
        assert_eq!(err.retry_at, start + ms(1));
        assert_eq!(ahead.await.unwrap().unwrap(), ms(1));
        assert!(l.try_acquire(err.retry_at).is_some(), "served at once then");
    }

    /// Regression, the other way: a caller whose token would come in time was refused.
    /// 2,500 per second, burst 3, the burst spent at 0: three waiters take their tokens
    /// at 1, 1 and 2 ms (the bucket fills while the third sleeps to its tick), and the
    /// fourth's is free at 2 ms too. The old count (two ticks after the first token's
    /// time, 0.4 ms) said 2.4 ms and refused a deadline of 3.1 ms. It is served at 2 ms.
    #[tokio::test(start_paused = true)]
    async fn a_caller_whose_token_comes_in_time_behind_a_line_is_served() {
        let (start, l, ahead) = spent_with_line(2_500.0, 3, 3).await;
        let deadline = start + Duration::from_micros(3_100);
        let _t = l.acquire(Some(deadline)).await.unwrap();
        assert_eq!(Instant::now(), start + ms(2));
        let mut served = Vec::new();
        for t in ahead {
            served.push(t.await.unwrap().unwrap());
        }
        assert_eq!(served, [1, 1, 2].map(ms).to_vec());
    }

    /// The other side of the same rule: a deadline the line surely leaves room for is
    /// served. Behind seven waiters (served at 1 to 5 ms, as above), a caller with a
    /// 7.6 ms deadline gets its token at 6 ms.
    #[tokio::test(start_paused = true)]
    async fn a_caller_behind_a_line_that_drains_the_burst_each_tick_is_served_in_time() {
        let start = Instant::now();
        let l = Arc::new(RateLimiter::new(RateLimitConfig::new(1_900.0, 2), start));
        while l.try_acquire(start).is_some() {}
        for _ in 0..7 {
            let l = Arc::clone(&l);
            tokio::spawn(async move { l.acquire(None).await.map(|_| ()) });
            tokio::task::yield_now().await;
        }
        let _t = l
            .acquire(Some(start + Duration::from_micros(7_600)))
            .await
            .unwrap();
        assert_eq!(Instant::now(), start + ms(6));
    }

    /// Regression: a caller whose deadline passed while it waited for the front of the
    /// line (the front one stalled: its task not run, as on a blocked worker) was told
    /// the time of a token for every caller in line, those behind it included. Second
    /// of four (one token every 100 ms, the bucket's token spent at 0), its deadline at
    /// 250 ms: the front one takes the token free then, and its own comes at 350 ms,
    /// not 550 (the fourth's).
    #[tokio::test(start_paused = true)]
    async fn a_caller_timed_out_in_line_is_told_its_own_token_not_the_last_ones() {
        let start = Instant::now();
        let l = Arc::new(RateLimiter::new(RateLimitConfig::new(10.0, 1), start));
        let _t = l.try_acquire(start).unwrap();
        // The front waiter, polled once and then never again.
        let mut stalled = Box::pin(l.acquire(None));
        let waker = futures_util::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(stalled.as_mut().poll(&mut cx).is_pending());
        let deadline = start + ms(250);
        let second = {
            let l = Arc::clone(&l);
            tokio::spawn(async move { l.acquire(Some(deadline)).await.map(|_| ()) })
        };
        tokio::task::yield_now().await;
        let behind: Vec<_> = (0..2)
            .map(|_| {
                let l = Arc::clone(&l);
                tokio::spawn(async move { l.acquire(None).await.map(|_| ()) })
            })
            .collect();
        tokio::task::yield_now().await;
        assert_eq!(l.waiting.load(Ordering::Acquire), 4);
        let err = second.await.unwrap().unwrap_err();
        assert_eq!(Instant::now(), deadline);
        assert_eq!(err.retry_at, start + ms(350));
        drop(stalled);
        for b in behind {
            b.await.unwrap().unwrap();
        }
        assert_eq!(l.waiting.load(Ordering::Acquire), 0);
    }

    /// Regression: a waiter that runs again only after its deadline (its timer was
    /// serviced late: a busy or stalled runtime) took the token it woke for. It is
    /// refused, as it would have been on the way in, and the token stays.
    #[tokio::test(start_paused = true)]
    async fn a_waiter_woken_after_its_deadline_takes_no_token() {
        let start = Instant::now();
        let l = Arc::new(RateLimiter::new(RateLimitConfig::new(10.0, 1), start));
        let _t = l.try_acquire(start).unwrap();
        let deadline = start + ms(150);
        let waiter = {
            let l = Arc::clone(&l);
            tokio::spawn(async move { l.acquire(Some(deadline)).await.map(|_| start.elapsed()) })
        };
        tokio::task::yield_now().await; // in line, asleep until the token at 100 ms
        assert_eq!(l.waiting.load(Ordering::Acquire), 1);
        // The runtime stalls past the deadline: the waiter runs again at 200 ms.
        tokio::time::advance(ms(200)).await;
        let got = waiter.await.unwrap();
        assert!(got.is_err(), "a token taken after the deadline: {got:?}");
        assert_eq!(l.waiting.load(Ordering::Acquire), 0);
        assert_eq!(l.available(Instant::now()), 1.0, "the token is still there");
    }

    /// Regression: the front of the line handed on in the tick where a waiter's
    /// deadline fires: `timeout_at` polls the lock before its timer, so the waiter
    /// got the front, found a token free (burst 2) and took it after its deadline.
    #[tokio::test(start_paused = true)]
    async fn a_waiter_handed_the_front_after_its_deadline_takes_no_token() {
        let start = Instant::now();
        let l = Arc::new(RateLimiter::new(RateLimitConfig::new(10.0, 2), start));
        while l.try_acquire(start).is_some() {}
        let spawn_waiter = |deadline: Option<Instant>| {
            let l = Arc::clone(&l);
            tokio::spawn(async move { l.acquire(deadline).await.map(|_| start.elapsed()) })
        };
        let front = spawn_waiter(None); // its token: 100 ms
        tokio::task::yield_now().await;
        let deadline = start + ms(250);
        let behind = spawn_waiter(Some(deadline)); // its token: 200 ms
        tokio::task::yield_now().await;
        assert_eq!(l.waiting.load(Ordering::Acquire), 2);
        // Both timers are due when the runtime runs again, at 300 ms.
        tokio::time::advance(ms(300)).await;
        assert_eq!(front.await.unwrap().unwrap(), ms(300));
        let got = behind.await.unwrap();
        assert!(got.is_err(), "a token taken after the deadline: {got:?}");
        assert_eq!(l.waiting.load(Ordering::Acquire), 0);
        assert_eq!(
            l.available(Instant::now()),
            1.0,
            "the second token is still there"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn dropped_waiter_returns_its_reservation() {
        let start = Instant::now();
        let l = Arc::new(RateLimiter::new(RateLimitConfig::new(10.0, 1), start));
        let _t = l.try_acquire(start).unwrap();
        let spawn_waiter = || {
            let l = Arc::clone(&l);
            tokio::spawn(async move { l.acquire(None).await.map(|_| Instant::now()) })
        };
        let first = spawn_waiter();
        tokio::task::yield_now().await;
        let second = spawn_waiter();
        tokio::task::yield_now().await;

        sleep(ms(50)).await;
        first.abort();
        assert!(first.await.unwrap_err().is_cancelled());
        // The second waiter moves up to the first one's time, not 200 ms.
        assert_eq!(second.await.unwrap().unwrap(), start + ms(100));
        assert_eq!(l.available(start + ms(100)), 0.0, "exactly one token taken");
        assert_eq!(l.waiting.load(Ordering::Acquire), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn dropped_waiter_leaves_its_time_to_a_newcomer() {
        let start = Instant::now();
        let l = RateLimiter::new(RateLimitConfig::new(10.0, 1), start);
        let _t = l.try_acquire(start).unwrap();
        let timed_out = tokio::time::timeout(ms(50), l.acquire(None)).await;
        assert!(timed_out.is_err());
        assert_eq!(l.waiting.load(Ordering::Acquire), 0);
        let _t = l.acquire(None).await.unwrap();
        assert_eq!(Instant::now(), start + ms(100));
    }

    #[tokio::test(start_paused = true)]
    async fn refund_gives_the_token_back() {
        let start = Instant::now();
        let l = RateLimiter::new(RateLimitConfig::new(10.0, 1), start);
        let token = l.try_acquire(start).unwrap();
        assert!(l.try_acquire(start).is_none());
        l.refund(token);
        assert_eq!(l.available(start), 1.0);
        let token = l.try_acquire(start).unwrap();
        // A refund long after never overfills the bucket.
        l.refund(token);
        l.refund(RateLimitToken { _private: () });
        assert_eq!(l.available(start + ms(1_000)), 1.0);
    }

    #[tokio::test(start_paused = true)]
    async fn refund_wakes_the_front_waiter() {
        let start = Instant::now();
        let l = Arc::new(RateLimiter::new(RateLimitConfig::new(10.0, 1), start));
        let token = l.try_acquire(start).unwrap();
        let waiter = {
            let l = Arc::clone(&l);
            tokio::spawn(async move { l.acquire(None).await.map(|_| Instant::now()) })
        };
        sleep(ms(10)).await;
        l.refund(token);
        assert_eq!(waiter.await.unwrap().unwrap(), start + ms(10));
    }

    /// Threads taking and refunding at once: every grant is counted, never one more
    /// than the bucket holds (the tokens are taken by compare-and-swap, not a lock).
    #[test]
    fn threads_racing_take_exactly_what_the_bucket_holds() {
        const BURST: u32 = 1_000;
        let t0 = Instant::now();
        let l = Arc::new(RateLimiter::new(RateLimitConfig::new(10.0, BURST), t0));
        let race = |refund_every: u32| {
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    let l = Arc::clone(&l);
                    std::thread::spawn(move || {
                        let (mut kept, mut i) = (0u32, 0u32);
                        for _ in 0..1_000 {
                            if let Some(token) = l.try_acquire(t0) {
                                i += 1;
                                if refund_every > 0 && i % refund_every == 0 {
                                    l.refund(token);
                                } else {
                                    kept += 1;
                                }
                            }
                        }
                        kept
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).sum::<u32>()
        };
        // Half the bucket taken and kept, the rest taken and given back at random.
        let first = race(2);
        assert!(first <= BURST);
        assert_eq!(l.available(t0), f64::from(BURST - first));
        // Then every token left, and not one more.
        assert_eq!(first + race(0), BURST);
        assert_eq!(l.available(t0), 0.0);
        // One second later, exactly ten more.
        let later = t0 + Duration::from_secs(1);
        assert_eq!(
            (0..100).filter(|_| l.try_acquire(later).is_some()).count(),
            10
        );
    }

    /// Four workers, a bucket that never refills: the burst is all there is. Callers
    /// with a deadline get exactly the burst between them, the rest are refused at
    /// once; callers that wait and give their token back all get one in turn, each
    /// refund waking the next (none is lost, so none waits forever).
    #[test]
    fn workers_share_a_bucket_that_never_refills_exactly() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            for _ in 0..20 {
                let start = Instant::now();
                let l = Arc::new(RateLimiter::new(RateLimitConfig::new(0.0, 20), start));
                let tasks: Vec<_> = (0..100)
                    .map(|_| {
                        let l = Arc::clone(&l);
                        tokio::spawn(async move {
                            let deadline = Instant::now() + Duration::from_secs(60);
                            l.acquire(Some(deadline)).await.is_ok()
                        })
                    })
                    .collect();
                let mut granted = 0;
                for t in tasks {
                    granted += usize::from(t.await.unwrap());
                }
                assert_eq!(granted, 20);
                assert_eq!(l.waiting.load(Ordering::Acquire), 0);

                let l = Arc::new(RateLimiter::new(RateLimitConfig::new(0.0, 3), start));
                let tasks: Vec<_> = (0..64)
                    .map(|_| {
                        let l = Arc::clone(&l);
                        tokio::spawn(async move {
                            let token = l.acquire(None).await.unwrap();
                            tokio::task::yield_now().await;
                            l.refund(token);
                        })
                    })
                    .collect();
                let all = futures_util::future::join_all(tasks);
                let done = tokio::time::timeout(Duration::from_secs(10), all).await;
                assert!(done.is_ok(), "a waiter was never woken");
                assert_eq!(l.waiting.load(Ordering::Acquire), 0);
                assert_eq!(l.available(Instant::now()), 3.0);
            }
        });
    }

    /// An infinite rate counts nothing, so no time it is asked at, in any order, can
    /// make it refuse. (Under the old mutex it kept the latest time it was asked at,
    /// and a caller at an earlier time was refused.)
    #[tokio::test(start_paused = true)]
    async fn unlimited_never_refuses_whatever_the_order_of_times() {
        let start = Instant::now();
        let l = RateLimiter::new(RateLimitConfig::new(f64::INFINITY, 1), start);
        assert!(l.try_acquire(start + Duration::from_secs(10)).is_some());
        assert!(l.try_acquire(start).is_some());
        assert!(l.acquire(Some(start + ms(1))).await.is_ok());
        assert_eq!(l.available(start), 1.0);
    }

    #[tokio::test(start_paused = true)]
    async fn extreme_rates_saturate() {
        let start = Instant::now();
        let rates = [
            1e300,
            f64::MAX,
            f64::INFINITY,
            1e-9,
            1e-300,
            f64::MIN_POSITIVE,
            0.0,
            -1.0,
            f64::NAN,
        ];
        let far = start + Duration::from_secs(1_000 * 365 * 86_400);
        for per_second in rates {
            for burst in [0, 1, u32::MAX] {
                let l = RateLimiter::new(RateLimitConfig::new(per_second, burst), start);
                for now in [start, start + ms(1), far] {
                    for _ in 0..5 {
                        let _ = l.try_acquire(now);
                    }
                    let a = l.available(now);
                    assert!((0.0..=f64::from(burst.max(1))).contains(&a), "{a}");
                }
                let deadline = Instant::now() + Duration::from_secs(1);
                match l.acquire(Some(deadline)).await {
                    Ok(token) => l.refund(token),
                    Err(limited) => assert!(limited.retry_at >= deadline),
                }
                assert_eq!(Instant::now(), start);
            }
        }
        // A tiny rate: the next token is about 31.7 years away, reported, not awaited.
        let l = RateLimiter::new(RateLimitConfig::new(1e-9, 1), start);
        let _t = l.try_acquire(start).unwrap();
        let err = l.acquire(Some(start + ms(1))).await.unwrap_err();
        assert_eq!(err.retry_at, start + Duration::from_secs(1_000_000_000));
        // Unlimited: everything passes.
        let l = RateLimiter::new(RateLimitConfig::new(f64::INFINITY, 1), start);
        for _ in 0..1_000 {
            assert!(l.try_acquire(start).is_some());
        }
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        /// Every window `[g_i, g_j]` of grant times holds at most `burst + rate * len`.
        fn assert_bounded(grants: &[Instant], rate: f64, burst: u32) -> Result<(), TestCaseError> {
            for i in 0..grants.len() {
                for j in i..grants.len() {
                    let secs = (grants[j] - grants[i]).as_secs_f64();
                    let allowed = f64::from(burst) + rate * secs + 1e-9;
                    prop_assert!(
                        (j - i + 1) as f64 <= allowed,
                        "{} grants in {secs}s, allowed {allowed}",
                        j - i + 1
                    );
                }
            }
            Ok(())
        }

        proptest! {
            #[test]
            fn try_acquire_never_exceeds_burst_plus_rate(
                rate in 0.5f64..1_000.0,
                burst in 1u32..8,
                steps in proptest::collection::vec((0u64..300_000_000, 0usize..5), 1..100),
            ) {
                let start = Instant::now();
                let l = RateLimiter::new(RateLimitConfig::new(rate, burst), start);
                let mut now = start;
                let mut grants = Vec::new();
                for (advance_ns, attempts) in steps {
                    now += Duration::from_nanos(advance_ns);
                    for _ in 0..attempts {
                        if l.try_acquire(now).is_some() {
                            grants.push(now);
                        }
                    }
                }
                assert_bounded(&grants, rate, burst)?;
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]
            #[test]
            fn acquire_never_exceeds_burst_plus_rate(
                rate in 1.0f64..1_000.0,
                burst in 1u32..6,
                arrivals in proptest::collection::vec((0u64..2_000, any::<bool>()), 1..30),
            ) {
                let rt = paused_runtime();
                let grants = rt.block_on(async {
                    let start = Instant::now();
                    let l = Arc::new(RateLimiter::new(RateLimitConfig::new(rate, burst), start));
                    let tasks: Vec<_> = arrivals
                        .iter()
                        .map(|&(at_ms, give_up)| {
                            let l = Arc::clone(&l);
                            tokio::spawn(async move {
                                sleep_until(start + ms(at_ms)).await;
                                let deadline = give_up.then(|| Instant::now() + ms(50));
                                match l.acquire(deadline).await {
                                    Ok(_token) => Some(Instant::now()),
                                    Err(limited) => {
                                        // Refused only when the token comes at or
                                        // after the deadline, or within a timer tick
                                        // before it.
                                        let deadline = deadline.unwrap();
                                        assert!(
                                            limited.retry_at + crate::timeout::TICK > deadline
                                        );
                                        None
                                    }
                                }
                            })
                        })
                        .collect();
                    let mut grants = Vec::new();
                    for t in tasks {
                        grants.extend(t.await.unwrap());
                    }
                    assert_eq!(l.waiting.load(Ordering::Acquire), 0);
                    grants
                });
                let mut grants = grants;
                grants.sort();
                let waited = arrivals.iter().filter(|(_, give_up)| !give_up).count();
                prop_assert!(grants.len() >= waited);
                assert_bounded(&grants, rate, burst)?;
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]
            /// Rates whose line drains the burst within a tick (or moves one a tick):
            /// a caller let into the line is served before its deadline, never
            /// refused after sleeping.
            #[test]
            fn a_caller_let_in_line_is_served_before_its_deadline(
                rate in 1_000.0f64..20_000.0,
                burst in 1u32..6,
                arrivals in proptest::collection::vec((0u64..20_000, 0u64..8_000), 1..40),
            ) {
                let rt = paused_runtime();
                rt.block_on(async {
                    let start = Instant::now();
                    let l = Arc::new(RateLimiter::new(RateLimitConfig::new(rate, burst), start));
                    let tasks: Vec<_> = arrivals
                        .iter()
                        .map(|&(at_us, within_us)| {
                            let l = Arc::clone(&l);
                            tokio::spawn(async move {
                                sleep_until(start + Duration::from_micros(at_us)).await;
                                let came = Instant::now();
                                let deadline = came + Duration::from_micros(within_us);
                                match l.acquire(Some(deadline)).await {
                                    Ok(_token) => assert!(Instant::now() < deadline),
                                    Err(_) => assert_eq!(
                                        Instant::now(),
                                        came,
                                        "refused after sleeping ({rate}/s, burst {burst})"
                                    ),
                                }
                            })
                        })
                        .collect();
                    for t in tasks {
                        t.await.unwrap();
                    }
                });
            }
        }

        /// [`RateLimiter::ready_at`] worked out waiter by waiter: each one ahead takes
        /// its token on the tick after it is free (ticks counted from `now`), or at once
        /// when it is free on the tick the one before was served on.
        fn served_one_by_one(l: &RateLimiter, now: u128, ahead: u64) -> u128 {
            let (interval, tolerance) = (l.interval, l.tolerance);
            let mut tat = l.tat.load(Ordering::Acquire).max(now);
            let mut at = now;
            for _ in 0..ahead {
                let free = (tat + interval).saturating_sub(tolerance);
                if free > at {
                    at = now + (free - now).div_ceil(MS) * MS;
                }
                tat = tat.max(at) + interval;
            }
            at.max((tat + interval).saturating_sub(tolerance))
        }

        proptest! {
            /// The closed forms of [`RateLimiter::behind_line`] give what serving the
            /// line one by one gives, for any bucket, clock and line.
            #[test]
            fn ready_at_is_the_line_served_one_by_one(
                rate in prop_oneof![1.0f64..1_000.0, 1_000.0f64..20_000.0, 20_000.0f64..2e6],
                burst in prop_oneof![1u32..6, 6u32..200],
                now_ns in 0u128..10_000_000_000,
                deficit in 0.0f64..=1.0,
                ahead in prop_oneof![0u64..20, 20u64..2_000],
            ) {
                let l = RateLimiter::new(RateLimitConfig::new(rate, burst), Instant::now());
                // Anywhere from a full bucket to an empty one.
                let tat = now_ns + (l.tolerance as f64 * deficit) as u128;
                l.tat.store(tat, Ordering::Release);
                let nth = ahead + 1;
                prop_assert_eq!(
                    l.ready_at(now_ns, nth),
                    served_one_by_one(&l, now_ns, ahead)
                );
            }
        }

        /// A current-thread runtime on the paused clock, for one property case.
        fn paused_runtime() -> tokio::runtime::Runtime {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .unwrap()
        }

        /// How one caller of [`run_line`] came out, in nanoseconds since the start.
        #[derive(Clone, Copy, Debug, PartialEq)]
        enum Outcome {
            /// Served at `at`; `tat` is the bucket's arrival time right after its take.
            Served { came: u128, at: u128, tat: u128 },
            /// Refused at `at`, told to come back at `retry_at`.
            Refused {
                came: u128,
                at: u128,
                retry_at: u128,
            },
        }

        impl Outcome {
            fn came(self) -> u128 {
                match self {
                    Outcome::Served { came, .. } | Outcome::Refused { came, .. } => came,
                }
            }
            fn ended(self) -> u128 {
                match self {
                    Outcome::Served { at, .. } | Outcome::Refused { at, .. } => at,
                }
            }
        }

        /// Callers arriving `at_ms` after the start, each with a deadline `within` after
        /// it came (`None`: none), on a paused current-thread runtime, whose clock moves
        /// by whole ticks from the start. Each is spawned from one task in turn and runs
        /// its first poll before the next is spawned, so a caller listed earlier is
        /// ahead of one listed later.
        fn run_line(rate: f64, burst: u32, callers: &[(u64, Option<Duration>)]) -> Vec<Outcome> {
            let rt = paused_runtime();
            rt.block_on(async {
                let start = Instant::now();
                let l = Arc::new(RateLimiter::new(RateLimitConfig::new(rate, burst), start));
                let mut tasks = Vec::new();
                for &(at_ms, within) in callers {
                    sleep_until(start + ms(at_ms)).await;
                    let l = Arc::clone(&l);
                    tasks.push(tokio::spawn(async move {
                        let came = Instant::now();
                        let deadline = within.map(|within| came + within);
                        let got = l.acquire(deadline).await;
                        let (came, at) = (l.ns(came), l.ns(Instant::now()));
                        match got {
                            Ok(_token) => Outcome::Served {
                                came,
                                at,
                                tat: l.tat.load(Ordering::Acquire),
                            },
                            Err(limited) => Outcome::Refused {
                                came,
                                at,
                                retry_at: l.ns(limited.retry_at),
                            },
                        }
                    }));
                    tokio::task::yield_now().await;
                }
                let mut outcomes = Vec::new();
                for t in tasks {
                    outcomes.push(t.await.unwrap());
                }
                assert_eq!(l.waiting.load(Ordering::Acquire), 0);
                outcomes
            })
        }

        /// Regression: 2,500 per second, burst 3 (a token every 400 µs), the burst spent
        /// at 0 and three waiters: two are served on the tick at 1 ms, the third, whose
        /// token is free at 1.2 ms, on the next, at 2 ms, and the bucket then holds one
        /// more. A caller that came at 1 ms, behind the last two, was told 1.8 ms (a tick
        /// after the first one's token time, 0.8 ms, not after the tick it is served on),
        /// when the third was still in line. It is told 2 ms.
        #[test]
        fn a_refusal_on_a_tick_that_serves_the_line_counts_from_that_tick() {
            let callers = [[(0, None)].repeat(6), vec![(1, Some(Duration::ZERO))]].concat();
            let outcomes = run_line(2_500.0, 3, &callers);
            let served: Vec<_> = outcomes[3..6].iter().map(|o| o.ended() / MS).collect();
            assert_eq!(served, [1, 1, 2]);
            assert_eq!(
                outcomes[6],
                Outcome::Refused {
                    came: MS,
                    at: MS,
                    retry_at: 2 * MS
                }
            );
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]
            /// A refusal's `retry_at` is when the caller's token would really have come:
            /// the first instant at which, with nobody new in line, no caller ahead of it
            /// is left in line and the bucket holds a token, so that a caller coming back
            /// then is served at once. It is measured by running the same callers again,
            /// up to the refused one, which this time waits without a deadline, and
            /// looking at when the last one ahead of it left the line, the bucket as that
            /// one left it, and when the refused one was then served (on the tick after
            /// its token, the timer's). It is never earlier than that instant, and exactly
            /// it unless someone ahead gave up after the refused one came (the limiter
            /// cannot know they will). And a refusal, always made at once, is deserved:
            /// the token would have come at or after the deadline, or less than a tick
            /// before it ([`crate::timeout::wait_fits`]). A caller let in line is served
            /// before its deadline.
            #[test]
            fn a_refusal_says_when_the_token_really_comes(
                rate in prop_oneof![1.0f64..100.0, 100.0f64..2_000.0, 2_000.0f64..20_000.0],
                burst in 1u32..6,
                callers in proptest::collection::vec(
                    (
                        0u64..4,
                        0u64..3,
                        proptest::option::weighted(0.7, (0u64..12, 0u64..3_000)),
                    ),
                    1..30,
                ),
            ) {
                let interval = u128::from(interval_ns(rate));
                let tolerance = interval * u128::from(burst);
                // Arrivals spaced by half intervals and whole ticks; deadlines some
                // intervals and some microseconds after the arrival.
                let mut at_ms = 0u64;
                let callers: Vec<(u64, Option<Duration>)> = callers
                    .iter()
                    .map(|&(halves, ticks, within)| {
                        let halves = interval * u128::from(halves) / 2 / MS;
                        at_ms += u64::try_from(halves).unwrap() + ticks;
                        let within = within.map(|(intervals, us)| {
                            Duration::from_nanos(
                                u64::try_from(interval * u128::from(intervals)).unwrap(),
                            ) + Duration::from_micros(us)
                        });
                        (at_ms, within)
                    })
                    .collect();
                let outcomes = run_line(rate, burst, &callers);
                for (i, &outcome) in outcomes.iter().enumerate() {
                    let deadline =
                        callers[i].1.map(|within| outcome.came() + within.as_nanos());
                    let Outcome::Refused { came, at, retry_at } = outcome else {
                        if let Some(deadline) = deadline {
                            prop_assert!(outcome.ended() < deadline, "served late: {outcome:?}");
                        }
                        continue;
                    };
                    prop_assert_eq!(at, came, "caller {} refused after sleeping", i);
                    // The same callers up to this one, which now waits for its token.
                    let mut again = callers[..=i].to_vec();
                    again[i].1 = None;
                    let replay = run_line(rate, burst, &again);
                    prop_assert_eq!(&replay[..i], &outcomes[..i], "the replay differs");
                    let Outcome::Served { at: served, .. } = replay[i] else {
                        panic!("a caller with no deadline refused: {:?}", replay[i]);
                    };
                    let ahead = &replay[..i];
                    let line_left = ahead.iter().map(|o| o.ended()).fold(came, u128::max);
                    let tat = ahead
                        .iter()
                        .rev()
                        .find_map(|o| match *o {
                            Outcome::Served { tat, .. } => Some(tat),
                            Outcome::Refused { .. } => None,
                        })
                        .unwrap_or(0);
                    // The first instant a take could succeed, once the line ahead is gone.
                    let real = line_left.max((tat + interval).saturating_sub(tolerance));
                    prop_assert_eq!(served, real.div_ceil(MS) * MS, "measured {} (ns)", real);
                    prop_assert!(
                        retry_at >= real,
                        "caller {i} told {retry_at} ns, its token came at {real} ns \
                         ({rate}/s, burst {burst}, {callers:?})"
                    );
                    // Someone ahead that gave up after this one came moved it up.
                    let moved_up = ahead.iter().any(|o| {
                        let Outcome::Refused { came: c, at: a, .. } = *o else {
                            return false;
                        };
                        a > c && a >= came
                    });
                    if !moved_up {
                        prop_assert_eq!(
                            retry_at,
                            real,
                            "caller {} ({}/s, burst {}, {:?})",
                            i,
                            rate,
                            burst,
                            callers
                        );
                        let origin = Instant::now();
                        let t = |ns: u128| {
                            origin + Duration::from_nanos(u64::try_from(ns).unwrap())
                        };
                        let deadline = deadline.unwrap();
                        prop_assert!(
                            !crate::timeout::wait_fits(t(came), t(real), t(deadline)),
                            "caller {i} refused, its token at {real} ns fits its deadline \
                             {deadline} ns ({rate}/s, burst {burst}, {callers:?})"
                        );
                        prop_assert!(served + crate::timeout::TICK.as_nanos() > deadline);
                    }
                }
            }
        }
    }
}
