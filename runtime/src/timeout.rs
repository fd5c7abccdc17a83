//! Time limits: one per attempt, one for the whole call.
//!
//! # When to use
//! Every endpoint has an attempt timeout (the compiler insists; `attempt = "none"`
//! says no limit on purpose) and may have a total deadline:
//!
//! - The **attempt timeout** covers connecting, sending, the response head *and* the
//!   body read of one attempt, redirects included. When it fires, the attempt ends
//!   with [`ErrorKind::AttemptTimeout`](crate::ErrorKind::AttemptTimeout), which is
//!   retried for idempotent endpoints. One exception: an error status (a 503, a 404)
//!   whose head has come and whose body is still arriving ends as that status, with
//!   as much of its body as has come (an error's body is only context for it), so its
//!   `Retry-After` is honoured, a status that is not retried (a 404) is not, and the
//!   breaker judges the status as it would any other (a 5xx is a failure, a 4xx
//!   neither way). Its message says the body was cut short.
//! - The **total deadline** covers the whole call: queue waits, rate-limit waits,
//!   backoffs and `Retry-After` waits included. When it passes, everything the call
//!   started is dropped at once and the call ends with
//!   [`ErrorKind::Deadline`](crate::ErrorKind::Deadline), never retried. That holds
//!   for an error status whose body is still arriving too: the exception above is the
//!   attempt timeout's alone, because the deadline is the caller's limit on the whole
//!   call and ends it wherever it is (the cut attempt counts neither way in the
//!   breaker). A caller can shorten it per call with
//!   [`CallOptions::deadline`](crate::CallOptions::deadline).
//!
//! Both read time only through `tokio::time`, so under a paused clock they fire at
//! exactly their instant, never a millisecond early or late. A plain call has one
//! timer for both, armed at whichever comes first (the deadline, or the running
//! attempt's limit) and re-armed as attempts start and end; hedged branches and a
//! coalesced execution's attempts keep a timer of their own. For a
//! [`ResponseStream`](crate::ResponseStream) result, reading the body after the call
//! returned stays bounded by the total deadline and by an idle limit between chunks
//! (the attempt timeout).
//!
//! # Defaults
//! No default: the trait or the method declares `timeout(attempt = "...")`; `total`
//! is optional.
//!
//! # Example
//! ```no_run
//! use resilient_api::{resilient_api, ApiError, ErrorKind, TimeoutKind};
//!
//! #[resilient_api(base_url = "http://127.0.0.1:8080", timeout(attempt = "100ms", total = "1s"))]
//! pub trait Slow {
//!     #[get("/slow")]
//!     async fn slow(&self) -> Result<String, ApiError>;
//! }
//!
//! # async fn run(api: SlowClient) {
//! match api.slow().await {
//!     Err(e) if e.timeout() == Some(TimeoutKind::Attempt) => { /* every attempt was slow */ }
//!     Err(e) if e.kind() == ErrorKind::Deadline => { /* the whole call ran out of time */ }
//!     _ => {}
//! }
//! # }
//! ```
//!
//! Under a paused clock, with a [`ScriptedTransport`](crate::testing::ScriptedTransport)
//! whose server never answers, both limits fire at their exact instant:
//!
//! ```
//! use resilient_api::testing::{ScriptedTransport, Step};
//! use resilient_api::{resilient_api, ApiError, ErrorKind};
//! use std::time::Duration;
//!
//! #[resilient_api(timeout(attempt = "100ms", total = "250ms"), retry(max = 5, backoff = fixed(delay = "10ms")))]
//! pub trait Slow { #[get("/slow")] async fn slow(&self) -> Result<String, ApiError>; }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), resilient_api::ApiError> {
//! let t = ScriptedTransport::new([Step::hang(), Step::hang(), Step::hang()]);
//! let api = SlowClient::builder().base_url("http://api.test").transport(t.clone()).build()?;
//! let start = tokio::time::Instant::now();
//! let err = api.slow().await.err();
//! assert_eq!(err.map(|e| e.kind()), Some(ErrorKind::Deadline));
//! assert_eq!(start.elapsed(), Duration::from_millis(250));
//! assert_eq!(t.dispatch_times(), [0, 110, 220].map(Duration::from_millis)); // 100 ms each, 10 ms apart
//! # Ok(()) }
//! ```

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// No attempt is running, or the running one has no time limit.
const UNARMED: u64 = u64::MAX;

/// tokio's timer wakes on whole milliseconds: it rounds a sleep's end up to its next
/// tick. A wait that ends less than one tick before a limit (the call's deadline) may
/// end in the limit's own tick, where the limit's timer, checked first, fires.
pub(crate) const TICK: Duration = Duration::from_millis(1);

/// Whether a wait from `now` until `at` surely ends before `limit` fires. No wait at
/// all (`at` not after `now`) does not sleep, so it only has to come before `limit`;
/// any other must end at least a whole tick before it, wherever the timer's ticks
/// fall (a real clock is never on them).
pub(crate) fn wait_fits(now: Instant, at: Instant, limit: Instant) -> bool {
    if at <= now {
        at < limit
    } else {
        at.checked_add(TICK).is_some_and(|end| end <= limit)
    }
}

/// Whether `deadline` has passed as its own timer would tell: read only once another
/// timer has fired (an attempt's or an idle limit), to decide whether the deadline
/// wins that tie.
///
/// The clock reading the deadline's instant is not enough. A timer fires by whole
/// ticks, and a paused clock that woke for an earlier timer keeps the sub-millisecond
/// offset of its start: it can read exactly the deadline's instant while the
/// deadline's tick is still to come (an answer due at 499.4 ms, seen at 500.4 ms,
/// before a deadline at 500.4 ms whose timer fires at 501 ms). Within a tick of the
/// deadline, the timer driver is asked, through a timer at the deadline polled once:
/// it is ready at once if the deadline's tick has come, and is otherwise dropped
/// unfired. Further past it, the deadline has passed whatever the driver has seen.
pub(crate) fn deadline_due(deadline: Option<Instant>) -> bool {
    let Some(deadline) = deadline else {
        return false;
    };
    let now = Instant::now();
    if now < deadline {
        return false;
    }
    if deadline.checked_add(TICK).is_none_or(|late| now >= late) {
        return true;
    }
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let timer = std::pin::pin!(tokio::time::sleep_until(deadline));
    std::future::Future::poll(timer, &mut cx).is_ready()
}

/// The running attempt's time limit, kept where the call's one timer can see it.
///
/// A call's retry loop has a single tokio timer, armed at whichever comes first of
/// the deadline and the running attempt's limit, and re-armed as attempts start and
/// end: one timer registration for the loop instead of two per attempt. (A plain
/// call's first attempt, made before the loop, has a timer of its own; a call whose
/// first attempt succeeds never starts the loop's.) When the timer fires for the
/// attempt, the call marks it fired and polls the attempt, which ends with
/// `AttemptTimeout`. Attempts the call's timer does not drive (hedged branches, a
/// coalesced execution) keep a timer of their own.
#[derive(Debug)]
pub(crate) struct AttemptClock {
    /// The limit, in nanoseconds after the call's start; [`UNARMED`] if none.
    until: AtomicU64,
    fired: AtomicBool,
}

impl AttemptClock {
    pub(crate) const fn new() -> Self {
        AttemptClock {
            until: AtomicU64::new(UNARMED),
            fired: AtomicBool::new(false),
        }
    }

    /// An attempt starts; it must end `limit` after the call's start (if given). A
    /// limit too far away to count in nanoseconds (about 584 years) is no limit.
    pub(crate) fn arm(&self, limit: Option<Duration>) {
        let nanos = limit.map_or(UNARMED, |l| u64::try_from(l.as_nanos()).unwrap_or(UNARMED));
        self.until.store(nanos, Ordering::Relaxed);
        self.fired.store(false, Ordering::Relaxed);
    }

    /// The attempt ended.
    pub(crate) fn disarm(&self) {
        self.until.store(UNARMED, Ordering::Relaxed);
        self.fired.store(false, Ordering::Relaxed);
    }

    /// The running attempt's limit, if any.
    pub(crate) fn until(&self, start: Instant) -> Option<Instant> {
        match self.until.load(Ordering::Relaxed) {
            UNARMED => None,
            nanos => start.checked_add(Duration::from_nanos(nanos)),
        }
    }

    /// The call's timer reached the running attempt's limit.
    pub(crate) fn fire(&self) {
        self.fired.store(true, Ordering::Relaxed);
    }

    /// Whether the running attempt's limit was reached.
    pub(crate) fn fired(&self) -> bool {
        self.fired.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_clock_keeps_the_limit_and_forgets_it() {
        let start = Instant::now();
        let clock = AttemptClock::new();
        assert_eq!(clock.until(start), None);
        clock.arm(Some(Duration::from_millis(100)));
        assert_eq!(clock.until(start), Some(start + Duration::from_millis(100)));
        assert!(!clock.fired());
        clock.fire();
        assert!(clock.fired());
        clock.arm(Some(Duration::from_millis(101)));
        assert!(!clock.fired(), "a new attempt starts unfired");
        clock.disarm();
        assert_eq!(clock.until(start), None);
        clock.arm(None);
        assert_eq!(clock.until(start), None);
        clock.arm(Some(Duration::MAX));
        assert_eq!(clock.until(start), None, "beyond what nanoseconds count");
    }
}
