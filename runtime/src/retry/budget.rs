//! A retry budget: retries may be at most a fixed fraction of recent traffic, plus a small floor.
//!
//! # When to use
//! One budget is shared by every call to a partition (by default one per client,
//! that is per upstream host; it is on by default). Each call's first attempt, once
//! sent, [`deposit`](RetryBudget::deposit)s (a call that never sends one, refused by a
//! policy or dropped while it waits in a queue or for a token, deposits nothing: shed
//! load earns no retries); each retry or hedge must
//! [`withdraw`](RetryBudget::withdraw) first, and a refused withdrawal ends the call
//! with `BudgetExhausted`, whose source is the call's last error. A retry is paid for
//! when it is decided, before its backoff, and the client gives the payment back if
//! the retry is never sent: the on-retry hook fails, the breaker, bulkhead or rate
//! limiter refuses it, or the call ends first. The budget counts the retries sent (a
//! retry the transport then fails to connect stays paid for).
//!
//! Why a budget and not just a maximum retry count: with `max = 3`, a host that fails
//! every request receives four times its normal load exactly when it can least take
//! it, and every client layer that retries multiplies that again. A budget keeps
//! retries a bounded fraction of the traffic (20% by default): when failures are rare
//! every failure is retried, and when everything fails the extra load stays at about
//! 1.2×, so a struggling host can recover. The floor lets a client with little traffic
//! still retry. This is the design of Finagle's `RetryBudget` and tower's `TpsBudget`.
//!
//! # Precisely
//! Deposits and withdrawals are counted in 10 buckets, each `ttl / 10` wide, counted
//! from the `now` given to [`RetryBudget::new`]; an event stops counting when its
//! bucket falls out of the 10 most recent, that is between `0.9 × ttl` and `ttl`
//! after it happened (always by `ttl`). A withdrawal succeeds when
//!
//! ```text
//! min_per_sec × ttl  +  retry_ratio × (deposits counted)  −  (withdrawals counted)  ≥  1
//! ```
//!
//! So the floor is `min_per_sec × ttl` retries (100 with the defaults) that may be
//! spent in any `ttl` window even with no traffic at all, in one burst if need be;
//! spent retries count against the budget until they expire like deposits do.
//! `retry_ratio` is used with a resolution of 1/10 000. Time is passed in, never read.
//!
//! # Defaults
//! [`BudgetConfig::DEFAULT`]: `ttl` 10 s, `min_per_sec` 10, `retry_ratio` 0.2.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use resilient_api::retry::budget::{BudgetConfig, RetryBudget};
//! use tokio::time::Instant;
//!
//! let now = Instant::now();
//! let config = BudgetConfig { min_per_sec: 0, ..BudgetConfig::DEFAULT };
//! let budget = RetryBudget::new(config, now);
//! assert!(!budget.withdraw(now)); // no traffic yet, no floor: no retry
//! for _ in 0..10 {
//!     budget.deposit(now); // ten calls...
//! }
//! assert!(budget.withdraw(now)); // ...pay for two retries
//! assert!(budget.withdraw(now));
//! assert!(!budget.withdraw(now));
//! // Ten seconds later those calls no longer count.
//! assert!(!budget.withdraw(now + Duration::from_secs(10)));
//! ```

use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// How many buckets the `ttl` window is split into.
const SLOTS: usize = 10;
/// The cost of one retry, in budget units; a deposit earns `retry_ratio × UNIT`.
const UNIT: i64 = 10_000;
/// The largest floor, in units: far more retries than any client makes, and far from
/// overflowing when added to the buckets.
const MAX_RESERVE: i64 = i64::MAX / 4;

/// The settings of a [`RetryBudget`].
///
/// ```
/// use resilient_api::retry::budget::{BudgetConfig, RetryBudget};
/// use tokio::time::Instant;
///
/// // No floor: only traffic earns retries, one for every two calls.
/// let config = BudgetConfig { min_per_sec: 0, retry_ratio: 0.5, ..BudgetConfig::DEFAULT };
/// let now = Instant::now();
/// let budget = RetryBudget::new(config, now);
/// assert!(!budget.withdraw(now));
/// budget.deposit(now);
/// budget.deposit(now);
/// assert!(budget.withdraw(now));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BudgetConfig {
    /// How long a deposit (or a spent retry) counts. Default 10 s; less than 1 s is
    /// treated as 1 s.
    pub ttl: Duration,
    /// The floor: `min_per_sec × ttl` retries are allowed in any `ttl` window even
    /// without traffic. Default 10.
    pub min_per_sec: u32,
    /// Retries earned per call: 0.2 lets 20% of calls be retried. Default 0.2;
    /// clamped to `[0, 1000]`, and `NaN` counts as 0.
    pub retry_ratio: f32,
}

impl BudgetConfig {
    /// `ttl` 10 s, `min_per_sec` 10, `retry_ratio` 0.2.
    ///
    /// ```
    /// use resilient_api::retry::budget::BudgetConfig;
    ///
    /// // Let a tenth of calls be retried, with a floor of one retry a second.
    /// const STRICT: BudgetConfig = BudgetConfig {
    ///     min_per_sec: 1,
    ///     retry_ratio: 0.1,
    ///     ..BudgetConfig::DEFAULT
    /// };
    /// # let _ = STRICT;
    /// ```
    pub const DEFAULT: BudgetConfig = BudgetConfig {
        ttl: Duration::from_secs(10),
        min_per_sec: 10,
        retry_ratio: 0.2,
    };
}

impl Default for BudgetConfig {
    /// [`BudgetConfig::DEFAULT`].
    fn default() -> Self {
        BudgetConfig::DEFAULT
    }
}

/// A thread-safe retry budget shared by the calls to one partition. See the
/// [module docs](self) for what it allows, exactly.
///
/// Every method takes `&self` and the current time; none allocates.
///
/// ```
/// use resilient_api::retry::budget::{BudgetConfig, RetryBudget};
/// use std::sync::Arc;
/// use tokio::time::Instant;
///
/// let now = Instant::now();
/// let config = BudgetConfig { min_per_sec: 1, ..BudgetConfig::DEFAULT }; // a floor of 10
/// let shared = Arc::new(RetryBudget::new(config, now));
/// let granted = (0..20).filter(|_| shared.withdraw(now)).count();
/// assert_eq!(granted, 10); // with no traffic, the floor is all there is
/// ```
// Aligned to its own cache lines (128 bytes: a line and the one the prefetcher pairs
// with it), so that the words every call writes here (and in the partition's other
// policies) are not next to words other threads only read. Measured in the engine's
// two-worker benchmark: without it, a field added elsewhere in the partition cost
// about a tenth of the second worker's gain.
#[repr(align(128))]
#[derive(Debug)]
pub struct RetryBudget {
    /// Bucket 0 starts here.
    start: Instant,
    /// The width of one bucket in nanoseconds (at least 100 ms).
    slot_nanos: u128,
    /// The floor, in units.
    reserve: i64,
    /// What one deposit earns, in units.
    deposit: i64,
    /// Net units per bucket; the newest bucket's units are in
    /// `slots[epoch % SLOTS]`. A deposit into the newest bucket adds without the
    /// lock (every call makes one); moving the window forward and withdrawing take it.
    slots: [AtomicI64; SLOTS],
    /// The number of the newest bucket. Written only under `lock`.
    epoch: AtomicU64,
    lock: Mutex<()>,
}

impl RetryBudget {
    /// A budget with nothing deposited; its buckets are counted from `now`.
    ///
    /// ```
    /// use resilient_api::retry::budget::{BudgetConfig, RetryBudget};
    /// use tokio::time::Instant;
    ///
    /// let now = Instant::now();
    /// // The floor alone: 10 per second over 10 s is 100 retries without any traffic.
    /// let budget = RetryBudget::new(BudgetConfig::DEFAULT, now);
    /// assert_eq!((0..101).filter(|_| budget.withdraw(now)).count(), 100);
    /// ```
    #[must_use]
    pub fn new(config: BudgetConfig, now: Instant) -> Self {
        let ttl = config.ttl.max(Duration::from_secs(1));
        let ttl_nanos = ttl.as_nanos();
        let ratio = if config.retry_ratio.is_nan() {
            0.0
        } else {
            f64::from(config.retry_ratio).clamp(0.0, 1000.0)
        };
        // At most 1000 × UNIT: the cast cannot truncate.
        let deposit = (ratio * UNIT as f64).round() as i64;
        let reserve = ttl_nanos
            .saturating_mul(u128::from(config.min_per_sec))
            .saturating_mul(UNIT as u128)
            / 1_000_000_000;
        let reserve = i64::try_from(reserve)
            .unwrap_or(MAX_RESERVE)
            .min(MAX_RESERVE);
        RetryBudget {
            start: now,
            slot_nanos: ttl_nanos / SLOTS as u128,
            reserve,
            deposit,
            slots: std::array::from_fn(|_| AtomicI64::new(0)),
            epoch: AtomicU64::new(0),
            lock: Mutex::new(()),
        }
    }

    /// Records a first attempt of a call, which earns `retry_ratio` retries.
    ///
    /// ```
    /// use resilient_api::retry::budget::{BudgetConfig, RetryBudget};
    /// use tokio::time::Instant;
    ///
    /// let now = Instant::now();
    /// let config = BudgetConfig { min_per_sec: 0, retry_ratio: 0.5, ..BudgetConfig::DEFAULT };
    /// let budget = RetryBudget::new(config, now);
    /// budget.deposit(now);
    /// assert!(!budget.withdraw(now)); // half a retry is not a retry
    /// budget.deposit(now);
    /// assert!(budget.withdraw(now));
    /// ```
    pub fn deposit(&self, now: Instant) {
        let epoch = self.epoch_of(now);
        // A `now` older than the newest bucket (callers racing) counts in the newest.
        let newest = self.epoch.load(Ordering::Acquire);
        let slot = if epoch <= newest {
            newest
        } else {
            let _locked = self.lock();
            self.advance(epoch)
        };
        // No overflow: a deposit is at most 1000 × UNIT, so a bucket would need
        // about 10^12 calls to overflow.
        self.slots[slot_index(slot)].fetch_add(self.deposit, Ordering::AcqRel);
    }

    /// Asks for one retry (or hedge). `true`: go ahead, it has been counted. `false`:
    /// the budget is exhausted and the call must not be retried.
    ///
    /// ```
    /// use resilient_api::retry::budget::{BudgetConfig, RetryBudget};
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    ///
    /// let t0 = Instant::now();
    /// let config = BudgetConfig { min_per_sec: 0, retry_ratio: 1.0, ..BudgetConfig::DEFAULT };
    /// let budget = RetryBudget::new(config, t0);
    /// budget.deposit(t0);
    /// assert!(budget.withdraw(t0));
    /// assert!(!budget.withdraw(t0)); // spent
    /// budget.deposit(t0 + Duration::from_secs(1));
    /// assert!(budget.withdraw(t0 + Duration::from_secs(1)));
    /// ```
    #[must_use]
    pub fn withdraw(&self, now: Instant) -> bool {
        self.try_withdraw(now).is_some()
    }

    /// [`withdraw`](Self::withdraw), returning what was taken so that a retry never
    /// sent can be given back with [`refund`](Self::refund). Crate-internal: a
    /// [`Withdrawal`] does not say which budget it came from.
    #[must_use]
    pub(crate) fn try_withdraw(&self, now: Instant) -> Option<Withdrawal> {
        let epoch = self.epoch_of(now);
        // Withdrawals are serialized, so two cannot both take the last retry;
        // deposits racing with one only add.
        let _locked = self.lock();
        let newest = self.advance(epoch);
        let available = i128::from(self.reserve)
            + self
                .slots
                .iter()
                .map(|s| i128::from(s.load(Ordering::Acquire)))
                .sum::<i128>();
        if available < i128::from(UNIT) {
            return None;
        }
        self.slots[slot_index(newest)].fetch_sub(UNIT, Ordering::AcqRel);
        Some(Withdrawal { epoch: newest })
    }

    /// Gives back a withdrawal whose retry (or hedge) was never sent: a policy refused
    /// it, a hook failed, or the call ended first. The budget is then as if it had not
    /// been made. A withdrawal that no longer counts (its bucket has left the window)
    /// has nothing to give back.
    pub(crate) fn refund(&self, withdrawal: Withdrawal) {
        let _locked = self.lock();
        // Under the lock the window does not move: the bucket is the withdrawal's own
        // while it is among the newest `SLOTS`, and reused (or cleared) after.
        let newest = self.epoch.load(Ordering::Acquire);
        if newest
            .checked_sub(withdrawal.epoch)
            .is_some_and(|age| age < SLOTS as u64)
        {
            self.slots[slot_index(withdrawal.epoch)].fetch_add(UNIT, Ordering::AcqRel);
        }
    }

    /// Whether nothing deposited or withdrawn still counts at `now`: the budget then
    /// allows what a new one would (its floor alone).
    pub(crate) fn is_settled(&self, now: Instant) -> bool {
        let epoch = self.epoch_of(now);
        let _locked = self.lock();
        let newest = self.epoch.load(Ordering::Acquire);
        let Some(counted) = (SLOTS as u64).checked_sub(epoch.saturating_sub(newest)) else {
            return true;
        };
        // The buckets of `newest` and the `counted - 1` before it still count.
        (0..counted)
            .filter_map(|k| newest.checked_sub(k))
            .all(|e| self.slots[slot_index(e)].load(Ordering::Acquire) == 0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        // Nothing panics while it is held, but never let a poisoned lock stop retries.
        self.lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The bucket `now` falls in.
    fn epoch_of(&self, now: Instant) -> u64 {
        let elapsed = now.saturating_duration_since(self.start).as_nanos();
        u64::try_from(elapsed / self.slot_nanos).unwrap_or(u64::MAX)
    }

    /// Under the lock: moves the window forward so `epoch` is the newest bucket,
    /// clearing the buckets that fall out of it, and returns the newest bucket (which
    /// stays the same when `epoch` is older).
    fn advance(&self, epoch: u64) -> u64 {
        let newest = self.epoch.load(Ordering::Acquire);
        if epoch <= newest {
            return newest;
        }
        let gap = epoch - newest;
        let cleared = if gap >= SLOTS as u64 {
            SLOTS as u64
        } else {
            gap
        };
        for k in 1..=cleared {
            self.slots[slot_index(newest + k)].store(0, Ordering::Release);
        }
        self.epoch.store(epoch, Ordering::Release);
        epoch
    }
}

/// One retry taken from a [`RetryBudget`], which [`RetryBudget::refund`] can give back.
#[derive(Debug)]
pub(crate) struct Withdrawal {
    /// The bucket it was counted in.
    epoch: u64,
}

fn slot_index(epoch: u64) -> usize {
    // The remainder is below SLOTS, so it fits a usize.
    (epoch % SLOTS as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn config(ttl_secs: u64, min_per_sec: u32, retry_ratio: f32) -> BudgetConfig {
        BudgetConfig {
            ttl: Duration::from_secs(ttl_secs),
            min_per_sec,
            retry_ratio,
        }
    }

    fn withdrawals(budget: &RetryBudget, now: Instant) -> usize {
        let mut n = 0;
        while budget.withdraw(now) {
            n += 1;
            assert!(n <= 1_000_000, "budget never ran out");
        }
        n
    }

    #[test]
    fn default_config_is_10s_10_per_sec_20_percent() {
        assert_eq!(BudgetConfig::default(), config(10, 10, 0.2));
    }

    #[test]
    fn ten_deposits_at_20_percent_allow_exactly_two_retries() {
        let t0 = Instant::now();
        let budget = RetryBudget::new(config(10, 0, 0.2), t0);
        for _ in 0..10 {
            budget.deposit(t0);
        }
        assert_eq!(withdrawals(&budget, t0), 2);
    }

    #[test]
    fn nothing_deposited_and_no_floor_allows_no_retry() {
        let t0 = Instant::now();
        let budget = RetryBudget::new(config(10, 0, 0.2), t0);
        assert!(!budget.withdraw(t0));
    }

    #[test]
    fn deposits_expire_after_ttl() {
        let t0 = Instant::now();
        let budget = RetryBudget::new(config(10, 0, 0.2), t0);
        for _ in 0..10 {
            budget.deposit(t0);
        }
        // Still counted just before ttl (same window, bucket 9 of 10)...
        let almost = t0 + Duration::from_millis(9_999);
        assert!(budget.withdraw(almost));
        // ...gone at ttl.
        assert!(!budget.withdraw(t0 + Duration::from_secs(10)));
    }

    /// A budget is settled (as a new one, so an engine may forget it) only once
    /// nothing it counted still counts: a deposit keeps it unsettled until its bucket
    /// leaves the window, and so does a withdrawal, unless it was refunded.
    #[test]
    fn a_budget_is_settled_once_nothing_counts() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let budget = RetryBudget::new(config(10, 1, 0.5), t0);
        assert!(budget.is_settled(t0));
        let paid = budget.try_withdraw(t0).expect("the floor");
        assert!(!budget.is_settled(t0));
        budget.refund(paid);
        assert!(budget.is_settled(t0), "refunded: as if never made");
        budget.deposit(t0 + s(3));
        assert!(!budget.is_settled(t0 + s(3)));
        assert!(
            !budget.is_settled(t0 + s(12)),
            "bucket 3 still counts until 13 s"
        );
        assert!(budget.is_settled(t0 + s(13)));
        assert!(budget.is_settled(t0 + s(10 * 365 * 24 * 3600)));
    }

    #[test]
    fn deposits_expire_bucket_by_bucket() {
        let t0 = Instant::now();
        let budget = RetryBudget::new(config(10, 0, 1.0), t0);
        budget.deposit(t0); // bucket 0
        budget.deposit(t0 + Duration::from_secs(5)); // bucket 5
        // At 10 s bucket 0 has expired, bucket 5 has not.
        assert_eq!(withdrawals(&budget, t0 + Duration::from_secs(10)), 1);
    }

    #[test]
    fn floor_allows_exactly_min_per_sec_times_ttl_per_window() {
        let t0 = Instant::now();
        let budget = RetryBudget::new(config(10, 10, 0.0), t0);
        assert_eq!(withdrawals(&budget, t0), 100);
        // Spent retries count until they expire...
        assert!(!budget.withdraw(t0 + Duration::from_millis(9_999)));
        // ...then the whole floor is available again.
        assert_eq!(withdrawals(&budget, t0 + Duration::from_secs(10)), 100);
    }

    #[test]
    fn floor_and_ratio_add_up() {
        let t0 = Instant::now();
        let budget = RetryBudget::new(BudgetConfig::DEFAULT, t0);
        for _ in 0..50 {
            budget.deposit(t0);
        }
        assert_eq!(withdrawals(&budget, t0), 100 + 10);
    }

    #[test]
    fn no_floor_and_zero_ratio_never_allow_retries() {
        let t0 = Instant::now();
        let budget = RetryBudget::new(config(10, 0, 0.0), t0);
        for _ in 0..1_000 {
            budget.deposit(t0);
        }
        assert!(!budget.withdraw(t0));
        assert!(!budget.withdraw(t0 + Duration::from_secs(60)));
    }

    #[test]
    fn zero_ttl_counts_as_one_second() {
        let t0 = Instant::now();
        let budget = RetryBudget::new(config(0, 5, 1.0), t0);
        assert_eq!(withdrawals(&budget, t0), 5);
        // With a 1 s window, the deposit pays for one more retry...
        budget.deposit(t0 + Duration::from_millis(500));
        assert_eq!(withdrawals(&budget, t0 + Duration::from_millis(999)), 1);
        // ...and at 1 s the first five retries expire: the floor is back.
        assert_eq!(withdrawals(&budget, t0 + Duration::from_secs(1)), 5);
    }

    #[test]
    fn fractional_ttl_gives_a_fractional_floor() {
        let t0 = Instant::now();
        let budget = RetryBudget::new(
            BudgetConfig {
                ttl: Duration::from_millis(1_500),
                min_per_sec: 3,
                retry_ratio: 0.0,
            },
            t0,
        );
        // 3 × 1.5 = 4.5 retries: four whole ones.
        assert_eq!(withdrawals(&budget, t0), 4);
    }

    #[test]
    fn ratio_is_clamped_and_nan_is_zero() {
        let t0 = Instant::now();
        let budget = RetryBudget::new(config(10, 0, 5_000.0), t0);
        budget.deposit(t0);
        assert_eq!(withdrawals(&budget, t0), 1_000);

        for ratio in [-1.0, f32::NAN, f32::NEG_INFINITY] {
            let budget = RetryBudget::new(config(10, 0, ratio), t0);
            budget.deposit(t0);
            assert!(!budget.withdraw(t0), "{ratio}");
        }
    }

    #[test]
    fn ratio_below_one_is_not_rounded_to_a_whole_divisor() {
        // tower's integer divisor would make 0.3 behave like 1/3.
        let t0 = Instant::now();
        let budget = RetryBudget::new(config(10, 0, 0.3), t0);
        for _ in 0..100 {
            budget.deposit(t0);
        }
        assert_eq!(withdrawals(&budget, t0), 30);
    }

    #[test]
    fn time_going_backwards_counts_in_the_newest_bucket() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(5);
        let budget = RetryBudget::new(config(10, 0, 1.0), later);
        budget.deposit(later + Duration::from_secs(3));
        assert!(budget.withdraw(t0));
        assert!(!budget.withdraw(later));
    }

    #[test]
    fn extreme_settings_do_not_overflow() {
        let t0 = Instant::now();
        let budget = RetryBudget::new(
            BudgetConfig {
                ttl: Duration::MAX,
                min_per_sec: u32::MAX,
                retry_ratio: f32::INFINITY,
            },
            t0,
        );
        for _ in 0..1_000 {
            budget.deposit(t0);
            assert!(budget.withdraw(t0));
        }
        let far = t0 + Duration::from_secs(1 << 40);
        assert!(budget.withdraw(far));
    }

    #[test]
    fn is_send_sync_and_exact_under_contention() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<RetryBudget>();

        let t0 = Instant::now();
        let budget = RetryBudget::new(config(10, 10, 0.0), t0);
        let granted: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| (0..50).filter(|_| budget.withdraw(t0)).count()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
        });
        assert_eq!(granted, 100);
        assert!(!format!("{budget:?}").is_empty());
    }

    /// Deposits made on many threads at once all count, and all leave the window
    /// with their bucket, even those of a thread that deposits nothing after.
    #[test]
    fn deposits_from_many_threads_count_and_expire_together() {
        let t0 = Instant::now();
        let deposited = || {
            let budget = RetryBudget::new(config(10, 0, 0.1), t0);
            std::thread::scope(|s| {
                for _ in 0..12 {
                    s.spawn(|| {
                        for _ in 0..10 {
                            budget.deposit(t0);
                        }
                    });
                }
            });
            budget
        };
        // 120 deposits at 10%: 12 retries, until just before ttl...
        let budget = deposited();
        assert_eq!(withdrawals(&budget, t0 + Duration::from_millis(9_999)), 12);
        // ...and none at ttl.
        let budget = deposited();
        let later = t0 + Duration::from_secs(10);
        assert!(!budget.withdraw(later), "bucket 0 has left the window");
        for _ in 0..10 {
            budget.deposit(later);
        }
        assert_eq!(
            withdrawals(&budget, later),
            1,
            "ten new deposits: one retry"
        );
    }

    #[test]
    fn a_refund_gives_back_what_was_withdrawn() {
        let now = Instant::now();
        let budget = RetryBudget::new(config(10, 0, 1.0), now);
        budget.deposit(now);
        let paid = budget.try_withdraw(now).expect("one retry");
        assert!(budget.try_withdraw(now).is_none(), "spent");
        budget.refund(paid);
        assert!(budget.withdraw(now), "given back");
    }

    #[test]
    fn an_expired_withdrawal_has_nothing_to_give_back() {
        let t0 = Instant::now();
        let budget = RetryBudget::new(config(10, 1, 0.0), t0); // a floor of 10
        let paid: Vec<_> = (0..10).filter_map(|_| budget.try_withdraw(t0)).collect();
        assert!(budget.try_withdraw(t0).is_none());
        // Ten seconds later those ten no longer count, and the floor is spent again.
        let later = t0 + Duration::from_secs(10);
        assert_eq!(withdrawals(&budget, later), 10);
        for w in paid {
            budget.refund(w);
        }
        assert!(
            !budget.withdraw(later),
            "their buckets are reused: nothing given back"
        );
    }

    #[derive(Clone, Debug)]
    enum Op {
        Deposit,
        Withdraw,
        /// Give back one of the withdrawals not given back yet (any, by index).
        Refund(usize),
        Advance(u64),
    }

    proptest! {
        /// The ring of buckets agrees with a naive model that keeps every event and
        /// counts those in the 10 most recent buckets.
        #[test]
        fn matches_a_naive_model_of_the_window(
            ttl_ms in 0u64..30_000,
            min_per_sec in 0u32..20,
            ratio in prop_oneof![Just(0.0f32), 0.0f32..2.0],
            ops in proptest::collection::vec(
                prop_oneof![
                    3 => Just(Op::Deposit),
                    3 => Just(Op::Withdraw),
                    1 => any::<usize>().prop_map(Op::Refund),
                    1 => (0u64..5_000).prop_map(Op::Advance),
                ],
                0..400,
            ),
        ) {
            let t0 = Instant::now();
            let budget = RetryBudget::new(
                BudgetConfig { ttl: Duration::from_millis(ttl_ms), min_per_sec, retry_ratio: ratio },
                t0,
            );
            let ttl_ms = ttl_ms.max(1_000);
            let bucket_ns = u128::from(ttl_ms) * 1_000_000 / 10;
            let reserve = i64::from(min_per_sec) * ttl_ms as i64 * UNIT / 1_000;
            let deposit = (f64::from(ratio) * UNIT as f64).round() as i64;
            let mut elapsed_ms = 0u64;
            let mut events: Vec<(u128, i64)> = Vec::new(); // (bucket, units)
            let mut granted = 0u32;
            // Withdrawals not given back yet, with their event.
            let mut outstanding: Vec<(Withdrawal, usize)> = Vec::new();
            for op in ops {
                let now = t0 + Duration::from_millis(elapsed_ms);
                let bucket = u128::from(elapsed_ms) * 1_000_000 / bucket_ns;
                match op {
                    Op::Deposit => {
                        budget.deposit(now);
                        events.push((bucket, deposit));
                    }
                    Op::Withdraw => {
                        let counted: i64 = events
                            .iter()
                            .filter(|(b, _)| b + 10 > bucket)
                            .map(|(_, units)| units)
                            .sum();
                        let expected = reserve + counted >= UNIT;
                        let withdrawal = budget.try_withdraw(now);
                        prop_assert_eq!(withdrawal.is_some(), expected);
                        if let Some(w) = withdrawal {
                            granted += 1;
                            outstanding.push((w, events.len()));
                            events.push((bucket, -UNIT));
                        }
                    }
                    // Given back: as if it had not been made (an expired one no longer
                    // counts either way).
                    Op::Refund(pick) if !outstanding.is_empty() => {
                        let (w, event) = outstanding.swap_remove(pick % outstanding.len());
                        budget.refund(w);
                        events[event].1 = 0;
                    }
                    Op::Refund(_) => {}
                    Op::Advance(ms) => elapsed_ms += ms,
                }
            }
            if min_per_sec == 0 && ratio == 0.0 {
                prop_assert_eq!(granted, 0);
            }
        }
    }
}
