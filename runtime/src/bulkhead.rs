//! A bulkhead: a limit on how many attempts run at once, with a bounded FIFO queue.
//!
//! Isolation is the point: a slow upstream can tie up at most `concurrency` attempts,
//! and at most `queue` more callers wait behind them. Everyone beyond that is turned
//! away at once with [`BulkheadRejection::QueueFull`] instead of piling up, so load
//! is shed before it turns into memory and latency. Waiters are served first come,
//! first served, and a waiter that gives up (its future is dropped, for example by
//! the caller's deadline) leaves the queue at once, in constant time, and frees its
//! place for the next caller.
//!
//! # When to use
//! One bulkhead per partition (by default one per client, that is per upstream host),
//! optionally a second, global one. Take a permit right before an attempt and drop it
//! as soon as the attempt ends; a backoff between attempts holds no permit. There is
//! no deadline inside [`Bulkhead::acquire`]: wrap it with the call's own deadline, and
//! dropping the future is leaving the queue.
//!
//! # Defaults
//! [`BulkheadConfig::DEFAULT`]: 64 attempts at once and 256 waiters. A queue of `0`
//! means no waiting at all; a concurrency of `0` is treated as `1`.
//!
//! # Example
//! ```
//! use resilient_api::bulkhead::{Bulkhead, BulkheadConfig, BulkheadRejection};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let bulkhead = Bulkhead::new(BulkheadConfig::new(1, 0));
//!
//! let permit = bulkhead.acquire().await?;        // the one slot
//! assert_eq!(bulkhead.in_use(), 1);
//! assert_eq!(bulkhead.acquire().await.unwrap_err(), BulkheadRejection::QueueFull);
//!
//! drop(permit);                                  // released on drop
//! assert_eq!(bulkhead.in_use(), 0);
//! # Ok::<(), BulkheadRejection>(())
//! # }).unwrap();
//! ```

use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use tokio::sync::Semaphore;

/// How many attempts may run at once, and how many callers may wait for a slot.
///
/// ```
/// use resilient_api::bulkhead::BulkheadConfig;
///
/// // Eight downloads at once; a ninth caller fails fast instead of waiting.
/// let config = BulkheadConfig { queue: 0, ..BulkheadConfig::new(8, 32) };
/// assert_eq!((config.concurrency, config.queue), (8, 0));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkheadConfig {
    /// Attempts that may hold a permit at the same time. `0` is treated as `1`.
    pub concurrency: u32,
    /// Callers that may wait for a permit, in FIFO order. `0`: no waiting at all.
    pub queue: u32,
}

impl BulkheadConfig {
    /// 64 attempts at once, 256 waiters.
    ///
    /// ```
    /// use resilient_api::bulkhead::BulkheadConfig;
    /// assert_eq!(BulkheadConfig::DEFAULT, BulkheadConfig::new(64, 256));
    /// assert_eq!(BulkheadConfig::default(), BulkheadConfig::DEFAULT);
    /// ```
    pub const DEFAULT: BulkheadConfig = BulkheadConfig::new(64, 256);

    /// A configuration with `concurrency` slots and room for `queue` waiters.
    ///
    /// ```
    /// use resilient_api::bulkhead::BulkheadConfig;
    /// const SMALL: BulkheadConfig = BulkheadConfig::new(4, 16);
    /// assert_eq!(SMALL.queue, 16);
    /// ```
    pub const fn new(concurrency: u32, queue: u32) -> Self {
        BulkheadConfig { concurrency, queue }
    }
}

impl Default for BulkheadConfig {
    /// [`BulkheadConfig::DEFAULT`].
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Why [`Bulkhead::acquire`] turned a caller away.
///
/// ```
/// use resilient_api::bulkhead::{Bulkhead, BulkheadConfig, BulkheadRejection};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let bulkhead = Bulkhead::new(BulkheadConfig::new(1, 0)); // one slot, no queue
/// let _held = bulkhead.acquire().await;
/// let rejected = bulkhead.acquire().await.map(drop);
/// assert_eq!(rejected, Err(BulkheadRejection::QueueFull));
/// assert_eq!(BulkheadRejection::QueueFull.to_string(), "bulkhead queue full");
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkheadRejection {
    /// Every slot was taken and the queue was full: rejected at once, without waiting.
    QueueFull,
}

impl fmt::Display for BulkheadRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BulkheadRejection::QueueFull => f.write_str("bulkhead queue full"),
        }
    }
}

impl std::error::Error for BulkheadRejection {}

/// A concurrency limit with a bounded FIFO queue.
///
/// `Send + Sync`; share it with an `Arc`.
///
/// ```
/// use resilient_api::bulkhead::{Bulkhead, BulkheadConfig};
/// use std::sync::Arc;
///
/// let shared = Arc::new(Bulkhead::new(BulkheadConfig::new(8, 32)));
/// let for_a_task = Arc::clone(&shared);
/// assert_eq!(for_a_task.config().concurrency, 8);
/// ```
// Aligned to its own cache lines (128 bytes: a line and the one the prefetcher pairs
// with it), so that the words every call writes here (and in the partition's other
// policies) are not next to words other threads only read. Measured in the engine's
// two-worker benchmark: without it, a field added elsewhere in the partition cost
// about a tenth of the second worker's gain.
#[repr(align(128))]
pub struct Bulkhead {
    /// Free slots (low 32 bits) and callers in the queue (high 32 bits), in one word,
    /// so that one atomic step tells "take a free slot" from "queue behind the
    /// waiters". Free slots are only ever added while nobody waits, so whenever a
    /// caller waits, no slot is free here, and a new caller queues behind it.
    /// Waiters are served in the order they reach `queue`: a caller counted here
    /// but not yet in `queue` (a few instructions, on another thread) can be
    /// overtaken by a newcomer, as it could before this word existed.
    ///
    /// Why not a `Semaphore` alone: giving back a permit to tokio's semaphore always
    /// locks its queue, even when nobody waits: a lock and an unlock, on a line that
    /// every call on every thread writes, on every healthy call. Measured in the
    /// engine benchmark, a call cost 4,935 instructions with the semaphore alone and
    /// 4,859 with this word in front of it (4,804 with no bulkhead at all).
    state: AtomicU64,
    /// Slots given to the queue (by [`Bulkhead::release`], into `queue`) that no
    /// caller has claimed yet: each belongs to the first waiter, which has left the
    /// queue for it even though its task has not yet run and so is still counted in
    /// `state`. The queue's length is the waiters in `state` less these. Written only
    /// when a slot passes through the queue, never on a call that finds one free.
    handed: AtomicU32,
    /// The FIFO queue. It starts with no permits: a slot given back while callers
    /// wait goes here and so to the first waiter. A dropped `acquire` future unlinks
    /// itself in O(1) and hands on any permit it was granted but never saw; with
    /// nobody left to hand it to, the permit stays here, and [`Bulkhead::try_now`]
    /// takes it from here when no slot is free in `state`.
    queue: Semaphore,
    /// Effective configuration (concurrency already clamped).
    config: BulkheadConfig,
}

/// One caller in the queue, in [`Bulkhead::state`]'s high half.
const WAITER: u64 = 1 << 32;

/// The free slots in a [`Bulkhead::state`] word.
fn free(state: u64) -> u32 {
    state as u32
}

/// The queued callers in a [`Bulkhead::state`] word.
fn waiting(state: u64) -> u32 {
    (state >> 32) as u32
}

/// Where [`Bulkhead::enter`] put a caller.
enum Entry {
    /// A free slot, taken.
    Slot,
    /// A place in the queue, reserved.
    Queued,
    /// No free slot and no room in the queue.
    Full,
}

impl Bulkhead {
    /// A bulkhead with all slots free and an empty queue.
    ///
    /// A `concurrency` of `0` is clamped to `1` (configurations are validated at
    /// compile time; this only keeps a hand-written `0` from deadlocking every call),
    /// and to tokio's `Semaphore::MAX_PERMITS` on platforms where that is smaller
    /// than `u32::MAX`. [`Bulkhead::config`] reports the clamped value.
    ///
    /// ```
    /// use resilient_api::bulkhead::{Bulkhead, BulkheadConfig};
    ///
    /// let bulkhead = Bulkhead::new(BulkheadConfig::new(0, 4));
    /// assert_eq!(bulkhead.config(), BulkheadConfig::new(1, 4));
    /// assert_eq!((bulkhead.in_use(), bulkhead.queued()), (0, 0));
    /// ```
    pub fn new(config: BulkheadConfig) -> Self {
        let max = u32::try_from(Semaphore::MAX_PERMITS).unwrap_or(u32::MAX);
        let concurrency = config.concurrency.clamp(1, max);
        Bulkhead {
            state: AtomicU64::new(u64::from(concurrency)),
            handed: AtomicU32::new(0),
            queue: Semaphore::new(0),
            config: BulkheadConfig {
                concurrency,
                queue: config.queue,
            },
        }
    }

    /// Takes a permit: at once if a slot is free; otherwise joins the FIFO queue if it
    /// has room; otherwise fails at once with [`BulkheadRejection::QueueFull`].
    ///
    /// Cancel-safe: dropping the future while it waits leaves the queue at once, in
    /// O(1), and frees its queue place; a permit granted to it in the meantime goes to
    /// the next waiter. There is no deadline inside: wrap the future with your own.
    ///
    /// ```
    /// use resilient_api::bulkhead::{Bulkhead, BulkheadConfig};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true)
    /// #     .build().unwrap().block_on(async {
    /// let bulkhead = Bulkhead::new(BulkheadConfig::new(1, 8));
    /// let held = bulkhead.acquire().await.unwrap();
    /// // Waiting is bounded by the caller's deadline; timing out leaves the queue.
    /// let waited = tokio::time::timeout(Duration::from_millis(50), bulkhead.acquire()).await;
    /// assert!(waited.is_err());
    /// assert_eq!(bulkhead.queued(), 0);
    /// # drop(held); });
    /// ```
    pub async fn acquire(&self) -> Result<BulkheadPermit<'_>, BulkheadRejection> {
        self.acquire_counted(|| ()).await
    }

    /// [`acquire`](Self::acquire), calling `queued` only if the caller joins the
    /// queue, and holding what it returns until the wait ends however it ends: a
    /// caller let in at once, or turned away, was never queued (the queue-depth gauge
    /// does not move for it).
    pub(crate) async fn acquire_counted<Q>(
        &self,
        queued: impl FnOnce() -> Q,
    ) -> Result<BulkheadPermit<'_>, BulkheadRejection> {
        match self.enter(self.config.queue) {
            Entry::Slot => Ok(BulkheadPermit { bulkhead: self }),
            // The queue is full, but a slot freed since, or one a dropped waiter left in
            // `queue`, is still taken: never reject while a slot is there.
            Entry::Full => self.try_now().ok_or(BulkheadRejection::QueueFull),
            Entry::Queued => {
                let place = QueuePlace { bulkhead: self };
                let counted = queued();
                let acquired = self.queue.acquire().await;
                drop((place, counted));
                match acquired {
                    Ok(permit) => {
                        // The slot is this bulkhead's to count from here on. Claimed
                        // after the place is given back: in between, the queue reads
                        // one shorter, never one longer, than it is.
                        permit.forget();
                        self.handed.fetch_sub(1, Ordering::AcqRel);
                        Ok(BulkheadPermit { bulkhead: self })
                    }
                    // The semaphore is owned here and never closed.
                    Err(_closed) => Err(BulkheadRejection::QueueFull),
                }
            }
        }
    }

    /// Attempts holding a permit now (a permit granted to a waiter that has not yet
    /// run counts as in use).
    ///
    /// ```
    /// use resilient_api::bulkhead::{Bulkhead, BulkheadConfig};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let bulkhead = Bulkhead::new(BulkheadConfig::new(2, 0));
    /// let permit = bulkhead.acquire().await.expect("a slot is free");
    /// assert_eq!(bulkhead.in_use(), 1);
    /// drop(permit); // the slot goes back
    /// assert_eq!(bulkhead.in_use(), 0);
    /// # }
    /// ```
    pub fn in_use(&self) -> u32 {
        let parked = u32::try_from(self.queue.available_permits()).unwrap_or(u32::MAX);
        self.config
            .concurrency
            .saturating_sub(free(self.state.load(Ordering::Acquire)))
            .saturating_sub(parked)
    }

    /// Callers waiting in the queue now.
    ///
    /// ```
    /// use resilient_api::bulkhead::{Bulkhead, BulkheadConfig};
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let bulkhead = Arc::new(Bulkhead::new(BulkheadConfig::new(1, 4)));
    /// let _held = bulkhead.acquire().await.expect("a slot is free");
    /// let shared = Arc::clone(&bulkhead);
    /// tokio::spawn(async move { shared.acquire().await.map(drop) });
    /// tokio::task::yield_now().await; // the task runs and joins the queue
    /// assert_eq!(bulkhead.queued(), 1);
    /// # }
    /// ```
    pub fn queued(&self) -> u32 {
        self.waiting_now(self.state.load(Ordering::Acquire))
    }

    /// The callers still waiting in `state`: those counted there, less the first
    /// ones, which have been handed a slot (see `handed`).
    fn waiting_now(&self, state: u64) -> u32 {
        waiting(state).saturating_sub(self.handed.load(Ordering::Acquire))
    }

    /// The effective configuration (concurrency clamped to at least 1).
    ///
    /// ```
    /// use resilient_api::bulkhead::{Bulkhead, BulkheadConfig};
    ///
    /// let bulkhead = Bulkhead::new(BulkheadConfig::new(0, 0));
    /// assert_eq!(bulkhead.config().concurrency, 1);
    /// ```
    pub fn config(&self) -> BulkheadConfig {
        self.config
    }

    /// A permit if one is free now, never queueing.
    pub(crate) fn try_now(&self) -> Option<BulkheadPermit<'_>> {
        // A queue of no room: a free slot or nothing.
        if let Entry::Slot = self.enter(0) {
            return Some(BulkheadPermit { bulkhead: self });
        }
        // A slot left in the queue's semaphore with nobody to take it (see `queue`).
        // Taking it overtakes no waiter in `queue`: the semaphore gives a released
        // permit to its waiters first, so it only has permits when none is in it.
        let permit = self.queue.try_acquire().ok()?;
        permit.forget();
        self.handed.fetch_sub(1, Ordering::AcqRel);
        Some(BulkheadPermit { bulkhead: self })
    }

    /// Takes a free slot if nobody waits, else reserves a place in the queue if fewer
    /// than `queue` callers wait, in one atomic step. A waiter handed a slot no longer
    /// counts: a caller in that instant queues behind it.
    fn enter(&self, queue: u32) -> Entry {
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            let (next, entry) = if waiting(state) == 0 && free(state) > 0 {
                (state - 1, Entry::Slot)
            } else if self.waiting_now(state) < queue {
                (state + WAITER, Entry::Queued)
            } else {
                return Entry::Full;
            };
            match self
                .state
                .compare_exchange_weak(state, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return entry,
                Err(now) => state = now,
            }
        }
    }

    /// Gives a slot back: to the first waiter if anyone waits, else to the free slots.
    /// A slot for a waiter is counted in `handed` before the waiter can claim it: in
    /// between, the queue reads one shorter, never one longer, than it is.
    fn release(&self) {
        let mut state = self.state.load(Ordering::Acquire);
        while waiting(state) == 0 {
            match self.state.compare_exchange_weak(
                state,
                state + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(now) => state = now,
            }
        }
        self.handed.fetch_add(1, Ordering::AcqRel);
        self.queue.add_permits(1);
    }
}

impl fmt::Debug for Bulkhead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bulkhead")
            .field("config", &self.config)
            .field("in_use", &self.in_use())
            .field("queued", &self.queued())
            .finish()
    }
}

/// A queue place; given back when the waiting future completes or is dropped.
struct QueuePlace<'a> {
    bulkhead: &'a Bulkhead,
}

impl Drop for QueuePlace<'_> {
    fn drop(&mut self) {
        self.bulkhead.state.fetch_sub(WAITER, Ordering::AcqRel);
    }
}

/// A slot in a [`Bulkhead`], released when dropped.
///
/// ```
/// use resilient_api::bulkhead::{Bulkhead, BulkheadConfig};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), resilient_api::bulkhead::BulkheadRejection> {
/// let bulkhead = Bulkhead::new(BulkheadConfig::new(2, 0));
/// let permit = bulkhead.acquire().await?;
/// assert_eq!(bulkhead.in_use(), 1);
/// drop(permit);
/// assert_eq!(bulkhead.in_use(), 0);
/// # Ok(()) }
/// ```
#[must_use = "the slot is released as soon as the permit is dropped"]
pub struct BulkheadPermit<'a> {
    bulkhead: &'a Bulkhead,
}

impl Drop for BulkheadPermit<'_> {
    fn drop(&mut self) {
        self.bulkhead.release();
    }
}

impl fmt::Debug for BulkheadPermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BulkheadPermit").finish_non_exhaustive()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};
    use std::time::Duration;
    use tokio::time::{Instant, sleep, sleep_until};

    type Waiting<'a> =
        Pin<Box<dyn Future<Output = Result<BulkheadPermit<'a>, BulkheadRejection>> + 'a>>;

    fn poll_once<'a>(fut: &mut Waiting<'a>) -> Poll<Result<BulkheadPermit<'a>, BulkheadRejection>> {
        fut.as_mut().poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn is_send_sync_debug() {
        fn check<T: Send + Sync + fmt::Debug>() {}
        fn send<T: Send + fmt::Debug>() {}
        check::<Bulkhead>();
        send::<BulkheadPermit<'static>>();
        fn future_is_send(b: &Bulkhead) -> impl Send + '_ {
            b.acquire()
        }
        let _ = future_is_send;
    }

    #[test]
    fn defaults_and_clamp() {
        assert_eq!(BulkheadConfig::default(), BulkheadConfig::new(64, 256));
        let b = Bulkhead::new(BulkheadConfig::new(0, 3));
        assert_eq!(b.config(), BulkheadConfig::new(1, 3));
        assert_eq!(
            BulkheadRejection::QueueFull.to_string(),
            "bulkhead queue full"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn permits_return_on_drop() {
        let b = Bulkhead::new(BulkheadConfig::new(3, 0));
        let p1 = b.acquire().await.unwrap();
        let p2 = b.acquire().await.unwrap();
        let p3 = b.acquire().await.unwrap();
        assert_eq!(b.in_use(), 3);
        assert_eq!(b.acquire().await.unwrap_err(), BulkheadRejection::QueueFull);
        drop(p2);
        assert_eq!(b.in_use(), 2);
        drop((p1, p3));
        assert_eq!(b.in_use(), 0);
        assert_eq!(b.queued(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn waiters_are_served_fifo() {
        let b = Arc::new(Bulkhead::new(BulkheadConfig::new(1, 3)));
        let holder = b.acquire().await.unwrap();
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for id in 0..3 {
            let (b, order) = (Arc::clone(&b), Arc::clone(&order));
            tasks.push(tokio::spawn(async move {
                let _p = b.acquire().await.unwrap();
                order.lock().unwrap().push(id);
                sleep(Duration::from_millis(10)).await;
            }));
            // Let this waiter join the queue before the next one is spawned.
            tokio::task::yield_now().await;
        }
        assert_eq!(b.queued(), 3);
        drop(holder);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
        assert_eq!((b.in_use(), b.queued()), (0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn full_queue_rejects_at_once() {
        let b = Bulkhead::new(BulkheadConfig::new(1, 1));
        let _holder = b.acquire().await.unwrap();
        let mut waiter: Waiting<'_> = Box::pin(b.acquire());
        assert!(poll_once(&mut waiter).is_pending());
        let start = Instant::now();
        assert_eq!(b.acquire().await.unwrap_err(), BulkheadRejection::QueueFull);
        assert_eq!(Instant::now(), start);
        assert_eq!(b.queued(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn zero_queue_never_waits() {
        let b = Bulkhead::new(BulkheadConfig::new(1, 0));
        let _holder = b.acquire().await.unwrap();
        assert_eq!(b.acquire().await.unwrap_err(), BulkheadRejection::QueueFull);
        assert_eq!(b.queued(), 0);
    }

    /// CONFORMANCE S5 (bulkhead_queued_cancel), at the bulkhead level.
    #[tokio::test(start_paused = true)]
    async fn s5_dropped_waiter_frees_its_place_at_once() {
        let b = Arc::new(Bulkhead::new(BulkheadConfig::new(1, 1)));
        let start = Instant::now();
        let at = move |ms| start + Duration::from_millis(ms);

        let holder = {
            let b = Arc::clone(&b);
            tokio::spawn(async move {
                let _p = b.acquire().await.unwrap();
                sleep_until(at(100)).await;
            })
        };
        tokio::task::yield_now().await;
        assert_eq!(b.in_use(), 1);

        let cancelled = {
            let b = Arc::clone(&b);
            tokio::spawn(async move {
                let _p = b.acquire().await;
                unreachable!("the cancelled waiter must never get a permit");
            })
        };
        tokio::task::yield_now().await;
        assert_eq!(b.queued(), 1);

        sleep_until(at(20)).await;
        cancelled.abort();
        let _ = cancelled.await;
        assert_eq!(b.queued(), 0, "the place is freed at once");
        assert_eq!(Instant::now(), at(20));

        let replacement = b.acquire().await.unwrap();
        assert_eq!(Instant::now(), at(100));
        holder.await.unwrap();
        drop(replacement);
        assert_eq!((b.in_use(), b.queued()), (0, 0));
    }

    /// Regression: a slot handed to the first waiter, whose task has not run yet, left
    /// that waiter counted in the queue, so a caller in the same instant found the
    /// queue full and was turned away, though the waiter had left the queue for the
    /// slot. It queues behind it.
    #[test]
    fn a_waiter_handed_a_slot_has_left_the_queue() {
        let b = Bulkhead::new(BulkheadConfig::new(1, 1));
        let holder = b.try_now().unwrap();
        let mut first: Waiting<'_> = Box::pin(b.acquire());
        assert!(poll_once(&mut first).is_pending());
        drop(holder); // handed to `first`, which has not run since
        assert_eq!((b.in_use(), b.queued()), (1, 0));
        let mut next: Waiting<'_> = Box::pin(b.acquire());
        assert!(poll_once(&mut next).is_pending(), "queued, not turned away");
        assert_eq!(b.queued(), 1);
        // A third caller finds the queue full: its one place is taken.
        let mut third: Waiting<'_> = Box::pin(b.acquire());
        assert!(matches!(
            poll_once(&mut third),
            Poll::Ready(Err(BulkheadRejection::QueueFull))
        ));
        // In order: the first waiter has the slot, the next one gets it after.
        let Poll::Ready(Ok(permit)) = poll_once(&mut first) else {
            panic!("the first waiter holds the slot");
        };
        assert!(poll_once(&mut next).is_pending());
        drop(permit);
        assert!(matches!(poll_once(&mut next), Poll::Ready(Ok(_))));
        drop((first, next, third));
        assert_eq!((b.in_use(), b.queued()), (0, 0));
    }

    #[test]
    fn granted_then_dropped_waiter_returns_the_permit() {
        let b = Bulkhead::new(BulkheadConfig::new(1, 2));
        let holder = b.try_now().unwrap();
        let mut first: Waiting<'_> = Box::pin(b.acquire());
        let mut second: Waiting<'_> = Box::pin(b.acquire());
        assert!(poll_once(&mut first).is_pending());
        assert!(poll_once(&mut second).is_pending());
        drop(holder); // granted to `first`, which never sees it
        drop(first);
        assert!(matches!(poll_once(&mut second), Poll::Ready(Ok(_))));
        drop(second);
        assert_eq!((b.in_use(), b.queued()), (0, 0));
    }

    /// A permit granted to a waiter that is then dropped, with nobody left in the
    /// queue, stays a slot: taken by the next caller, and never one slot too many.
    #[test]
    fn a_slot_handed_to_a_dropped_waiter_is_not_lost_or_doubled() {
        let b = Bulkhead::new(BulkheadConfig::new(2, 2));
        let first = b.try_now().unwrap();
        let second = b.try_now().unwrap();
        let mut w1: Waiting<'_> = Box::pin(b.acquire());
        let mut w2: Waiting<'_> = Box::pin(b.acquire());
        assert!(poll_once(&mut w1).is_pending());
        assert!(poll_once(&mut w2).is_pending());
        drop(first); // granted to w1, which never sees it...
        drop(w1); // ...and hands it to w2, which never sees it either
        drop(w2);
        assert_eq!((b.in_use(), b.queued()), (1, 0));
        let third = b.try_now().expect("the slot w2 left behind");
        assert_eq!(b.in_use(), 2);
        assert!(b.try_now().is_none(), "two slots, both held");
        assert_eq!(
            b.acquire_now_or_reject(),
            None,
            "a caller queues when the queue has room"
        );
        drop((second, third));
        assert_eq!((b.in_use(), b.queued()), (0, 0));
        let all: Vec<_> = std::iter::from_fn(|| b.try_now()).take(3).collect();
        assert_eq!(all.len(), 2);
    }

    /// Many threads taking and giving back slots at once, queueing and leaving the
    /// queue: never more than `concurrency` inside, and every slot back at the end.
    #[test]
    fn threads_racing_never_exceed_the_limit_or_lose_a_slot() {
        use std::sync::atomic::AtomicU32;
        const CONCURRENCY: u32 = 3;
        let b = Arc::new(Bulkhead::new(BulkheadConfig::new(CONCURRENCY, 4)));
        let inside = Arc::new(AtomicU32::new(0));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_time()
            .build()
            .unwrap();
        let race = async {
            let mut tasks = Vec::new();
            for task in 0..8u32 {
                let (b, inside) = (Arc::clone(&b), Arc::clone(&inside));
                tasks.push(tokio::spawn(async move {
                    let (mut admitted, mut rejected) = (0u32, 0u32);
                    for i in 0..3_000u32 {
                        // Every seventh waiter gives up almost at once.
                        let patience = if (task + i) % 7 == 0 {
                            Duration::from_micros(1)
                        } else {
                            Duration::from_secs(5)
                        };
                        match tokio::time::timeout(patience, b.acquire()).await {
                            Ok(Ok(permit)) => {
                                let now = inside.fetch_add(1, Ordering::AcqRel) + 1;
                                assert!(now <= CONCURRENCY, "{now} inside");
                                tokio::task::yield_now().await;
                                inside.fetch_sub(1, Ordering::AcqRel);
                                drop(permit);
                                admitted += 1;
                            }
                            Ok(Err(BulkheadRejection::QueueFull)) | Err(_) => rejected += 1,
                        }
                    }
                    (admitted, rejected)
                }));
            }
            let (mut admitted, mut rejected) = (0, 0);
            for t in tasks {
                let (a, r) = t.await.unwrap();
                admitted += a;
                rejected += r;
            }
            (admitted, rejected)
        };
        // A lost slot would leave waiters waiting out their patience: a hang here.
        let (admitted, rejected) = rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(30), race).await })
            .expect("the race ends in well under 30 s");
        assert_eq!(admitted + rejected, 8 * 3_000);
        assert!(admitted > 0);
        assert_eq!((b.in_use(), b.queued()), (0, 0));
        let all: Vec<_> = std::iter::from_fn(|| b.try_now()).take(4).collect();
        assert_eq!(
            all.len(),
            CONCURRENCY as usize,
            "every slot is back, none extra"
        );
    }

    #[test]
    fn hundred_thousand_dropped_waiters_leave_the_queue() {
        const N: u32 = 100_000;
        let b = Bulkhead::new(BulkheadConfig::new(1, N));
        let holder = b.try_now().unwrap();
        let mut waiters: Vec<Waiting<'_>> = (0..N).map(|_| Box::pin(b.acquire()) as _).collect();
        for w in &mut waiters {
            assert!(poll_once(w).is_pending());
        }
        assert_eq!(b.queued(), N);
        assert_eq!(
            b.acquire_now_or_reject(),
            Some(BulkheadRejection::QueueFull)
        );
        // Drop from the middle outwards, the worst order for a list scan.
        let tail = waiters.split_off(N as usize / 2);
        drop(tail);
        drop(waiters);
        assert_eq!(b.queued(), 0);
        drop(holder);
        assert_eq!(b.in_use(), 0);
        assert!(b.try_now().is_some());
    }

    impl Bulkhead {
        /// Polls one fresh `acquire` once; `Some` if it was rejected.
        fn acquire_now_or_reject(&self) -> Option<BulkheadRejection> {
            let mut fut: Waiting<'_> = Box::pin(self.acquire());
            match poll_once(&mut fut) {
                Poll::Ready(Err(e)) => Some(e),
                _ => None,
            }
        }
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        #[derive(Debug, Clone)]
        enum Op {
            Acquire,
            DropPermit(usize),
            DropWaiter(usize),
            PollWaiters,
            /// What a plain call's first attempt does: a slot now, or none.
            TryNow,
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                3 => Just(Op::Acquire),
                2 => any::<usize>().prop_map(Op::DropPermit),
                2 => any::<usize>().prop_map(Op::DropWaiter),
                1 => Just(Op::PollWaiters),
                1 => Just(Op::TryNow),
            ]
        }

        proptest! {
            #[test]
            fn random_acquire_drop_keeps_bounds(
                concurrency in 1u32..5,
                queue in 0u32..5,
                ops in proptest::collection::vec(op(), 0..200),
            ) {
                let b = Bulkhead::new(BulkheadConfig::new(concurrency, queue));
                let mut permits = Vec::new();
                let mut waiters: Vec<Waiting<'_>> = Vec::new();
                for op in ops {
                    match op {
                        Op::Acquire => {
                            let mut fut: Waiting<'_> = Box::pin(b.acquire());
                            match poll_once(&mut fut) {
                                Poll::Ready(Ok(p)) => permits.push(p),
                                Poll::Ready(Err(BulkheadRejection::QueueFull)) => {
                                    prop_assert_eq!(b.in_use(), concurrency);
                                    prop_assert_eq!(b.queued(), queue);
                                }
                                Poll::Pending => {
                                    // Only ever queued when no slot is free.
                                    prop_assert_eq!(b.in_use(), concurrency);
                                    waiters.push(fut);
                                }
                            }
                        }
                        Op::DropPermit(i) if !permits.is_empty() => {
                            drop(permits.remove(i % permits.len()));
                        }
                        Op::DropWaiter(i) if !waiters.is_empty() => {
                            drop(waiters.remove(i % waiters.len()));
                        }
                        Op::PollWaiters => {
                            let mut still = Vec::new();
                            for mut w in waiters.drain(..) {
                                match poll_once(&mut w) {
                                    Poll::Ready(r) => permits.push(r.unwrap()),
                                    Poll::Pending => still.push(w),
                                }
                            }
                            waiters = still;
                        }
                        Op::TryNow => match b.try_now() {
                            Some(p) => permits.push(p),
                            // Never turned away while a slot is free or parked.
                            None => prop_assert_eq!(b.in_use(), concurrency),
                        },
                        _ => {}
                    }
                    prop_assert!(b.in_use() <= concurrency);
                    prop_assert!(b.queued() <= queue);
                    prop_assert!(permits.len() <= concurrency as usize);
                    // In use: the permits held, and at most the waiters granted one
                    // they have not yet seen.
                    prop_assert!(b.in_use() as usize >= permits.len());
                    prop_assert!(b.in_use() as usize <= permits.len() + waiters.len());
                    // Every waiter is either still in the queue or granted a slot it
                    // has not yet seen (in use, not queued).
                    let granted = b.in_use() as usize - permits.len();
                    prop_assert_eq!(b.queued() as usize + granted, waiters.len());
                }
                drop(waiters);
                drop(permits);
                prop_assert_eq!(b.in_use(), 0);
                prop_assert_eq!(b.queued(), 0);
            }
        }
    }
}
