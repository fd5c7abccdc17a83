//! Hedged requests: when an answer is slow, ask again, and take the first good one.
//!
//! # When to use
//! On idempotent endpoints whose latency has a long tail (search, reads from
//! replicas). `#[hedge(delay = "50ms", max = 2)]` launches a second attempt when the
//! first has not answered within 50 ms; whichever succeeds first wins and the other is
//! dropped at once (its request aborted). The compiler refuses hedging on a POST or
//! PATCH that is neither `#[idempotent]` nor keyed.
//!
//! Rules, in the order they matter:
//! - A new branch starts every `delay` while no acceptable answer has come, up to
//!   `max` branches. None starts at or after the call's deadline (the deadline wins a
//!   tie), and each needs the retry budget's permission, as a retry would. When every
//!   branch sent has failed before the next is due, the next is decided at once, as a
//!   retry is when its backoff starts: the budget pays for it then (it still leaves at
//!   its time, and the payment is given back if it never does), and if the budget
//!   refuses, or the breaker will still be open when it is due, the round ends then
//!   with that rejection rather than at the hedge's time. In a shared (coalesced)
//!   execution, a hedge that no caller still waiting could use (the one who could
//!   has left) is not waited for either: the round ends then with the failure.
//! - A branch refused by a policy (the breaker, the bulkhead, the rate limiter, or the
//!   retry budget before a hedge) is a rejection, and a rejection is final for the
//!   call: shed load is never retried. No further branch starts, but the branches
//!   already in flight keep running: one of them may still win, and a non-retryable
//!   failure is still the answer. When none is left, the round ends with the first
//!   rejection (its kind, and its `retry_at`, or the server's `Retry-After` from
//!   its source when that is later: see [`ApiError::retry_after`]), whose source is
//!   what the sent branches got (a 503, or [`ErrorKind::AllHedgesFailed`] when several were sent),
//!   and the retry loop does not retry it. The rejection rather than the 503,
//!   because it is why the call stopped short of its retry policy (as when a plain
//!   call's retry is refused) and [`ApiError::is_rejection`] tells the caller so;
//!   the server's answer stays in the source. A branch refused because the call's
//!   own branches fill the bulkhead is refused like any other: give a hedged method
//!   room for `max` attempts (or a queue) if its hedges should run. The exception is
//!   a half-open breaker's refusal while one of the round's own branches holds a
//!   probe slot: nobody else was refused, so it is no rejection. No further branch
//!   starts (none would be admitted while that probe is out), and the round ends
//!   with its probe's answer, as an unhedged call does: a 429 is retried, and a
//!   failed probe reopens the breaker, which then refuses the retry.
//! - The first success wins. A non-retryable failure (a 404, a decode error) is an
//!   answer too and ends the round. A retryable failure (a 5xx, a 429, a reset) does
//!   not win while another branch is pending or may still start.
//! - A retryable failure that carries the server's `Retry-After` stops the hedging:
//!   the server said when to come back, and a hedge is a new request like a retry,
//!   so none may leave before that instant: a branch launched but not sent yet (in a
//!   bulkhead queue, waiting for a token) is withdrawn, at once once no sent branch is
//!   left (the round does not wait for its slot or token to withdraw it). Branches already in flight
//!   keep running and one may still win; a redirect such a branch then follows is
//!   part of its attempt, already sent, and is followed as it would be otherwise. When none is left, the round ends with the failure that
//!   asked to wait (the one whose instant is latest, if several did), and the retry
//!   loop decides what follows as it would after a single attempt: it waits until
//!   exactly that instant, or ends the call at once when the deadline or the budget
//!   does not allow it. A wait that has already passed (`Retry-After: 0`, a past
//!   date) does not stop the hedging.
//! - Every branch goes through breaker admission, bulkhead, rate limiter and its own
//!   attempt timeout. A losing branch's failure is not a breaker failure when another
//!   branch wins; when every branch fails, every failure counts. So do the failures
//!   of a round that the call's deadline or its cancellation cuts short: those
//!   branches did fail. A half-open breaker's probe is the exception to waiting for
//!   the round: its failure is recorded when it fails, and reopens the breaker then,
//!   whatever the other branches do.
//! - All branches failed (none refused): [`ErrorKind::AllHedgesFailed`],
//!   with the status and body of the last branch to fail (or of the one that asked to
//!   wait) and that failure as its source. If retries remain, the retry loop may start
//!   a new round after its backoff, or at the server's instant. A round is one attempt
//!   of the retry loop however many branches it sent: `retry(max = 2)` makes at most
//!   three rounds (with `max = 2` hedges, up to six requests).
//! - Branches are futures polled by the caller's own future: nothing is spawned, so
//!   dropping the call drops every branch.
//!
//! # Defaults
//! Off. `max` defaults to 2 when only `delay` is given.
//!
//! # Example
//! ```no_run
//! use resilient_api::{resilient_api, ApiError};
//!
//! #[resilient_api(base_url = "http://127.0.0.1:8080", timeout(attempt = "1s", total = "3s"))]
//! pub trait Search {
//!     #[get("/search")]
//!     #[hedge(delay = "50ms", max = 2)]
//!     async fn search(&self, #[query] q: &str) -> Result<Vec<String>, ApiError>;
//! }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::time::{Instant, sleep_until};

use crate::error::{ApiError, ErrorKind};
use crate::pipeline::{Attempted, Call, Failure, Paid, Prepared, Verdict};
use crate::request::HedgeConfig;
use crate::response::RawResponse;

/// The verdicts of the branches that failed while others were still pending: held
/// until the round ends, which decides whether they count (ignored when a branch
/// wins, recorded otherwise). A round dropped before that, by the call's deadline or
/// its cancellation, records them as it goes: the deadline cut the round short, not
/// those attempts, which had already failed. What that records (a trip of the
/// breaker) is logged in the call's span, as every attempt's outcome is, even when
/// the round is dropped after the call left it or by a caller dropping the call.
struct Failed<'a> {
    held: Vec<Verdict<'a>>,
    call_span: Option<&'a tracing::Span>,
}

impl<'a> Failed<'a> {
    /// Hold a failed branch's verdict, unless it holds a half-open breaker's probe
    /// slot: a probe's verdict is recorded when the probe ends, so a failed probe
    /// reopens the breaker at once (DESIGN §3.6), whatever the other branches do (and
    /// an answer that is no breaker failure, such as a 429, counts as an unhedged
    /// call's would). Held, it would keep the probe slot, so the breaker would refuse
    /// this round's next hedge and still say nothing to other callers until the round
    /// ended.
    fn hold(&mut self, verdict: Verdict<'a>) {
        if verdict.probe() {
            verdict.record();
        } else {
            self.held.push(verdict);
        }
    }

    /// Record every held verdict: the round ends in failure.
    fn record_all(&mut self) {
        for v in self.held.drain(..) {
            v.record();
        }
    }
}

impl Drop for Failed<'_> {
    fn drop(&mut self) {
        if self.held.is_empty() {
            return;
        }
        // Entered again if it already is (a round that ended inside the call's poll).
        let _entered = self.call_span.map(tracing::Span::enter);
        self.record_all();
    }
}

/// What a round's branches share: whether the server asked to wait (a branch not yet
/// sent is then withdrawn), how many branches have been sent, and how many of them
/// hold a half-open breaker's probe slot and have not ended yet.
pub(crate) struct Hold {
    held: AtomicBool,
    sent: AtomicU32,
    probes: AtomicU32,
}

impl Hold {
    /// Whether the server asked to wait.
    pub(crate) fn held(&self) -> bool {
        self.held.load(Ordering::Relaxed)
    }

    /// A branch was dispatched.
    pub(crate) fn sent(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    /// A branch was admitted as a half-open breaker's probe.
    pub(crate) fn probing(&self) {
        self.probes.fetch_add(1, Ordering::Relaxed);
    }

    /// A branch that held a probe slot has ended.
    fn probe_ended(&self) {
        self.probes.fetch_sub(1, Ordering::Relaxed);
    }

    /// Whether a branch of the round holds a probe slot and has not ended yet.
    fn probing_now(&self) -> bool {
        self.probes.load(Ordering::Relaxed) > 0
    }
}

type Branch<'a> = Pin<Box<dyn Future<Output = Attempted<'a>> + Send + 'a>>;

impl Call<'_> {
    /// One hedged round. `first_attempt` is the number of the round's first attempt.
    pub(crate) async fn hedged_round(
        &self,
        prepared: &Prepared,
        config: HedgeConfig,
        first_attempt: u32,
        mut paid: Option<Paid<'_>>,
    ) -> Result<RawResponse, Failure> {
        // Set once the server asked to wait: a branch not yet sent is withdrawn.
        let hold = Hold {
            held: AtomicBool::new(false),
            sent: AtomicU32::new(0),
            probes: AtomicU32::new(0),
        };
        // Branches that were sent and have ended.
        let mut ended: u32 = 0;
        let mut branches: FuturesUnordered<Branch<'_>> = FuturesUnordered::new();
        let mut launched: u32 = 0;
        let mut failed = Failed {
            held: Vec::new(),
            call_span: self.call_span,
        };
        let mut last: Option<Failure> = None;
        // The first refusal by a policy (breaker, bulkhead, rate limiter, budget), and
        // how many launched branches were refused before dispatch.
        let mut rejection: Option<ApiError> = None;
        let mut refused: u32 = 0;
        // The failure whose server wait ends latest, with that instant (`None`: too
        // far to represent). Once set, no branch starts and the round ends with it.
        let mut asked_to_wait: Option<(Option<Instant>, Failure)> = None;
        let mut next_launch = Some(Instant::now());
        // A shared execution's hedge that its callers' latest deadline ruled out when it
        // was planned (at `.0`, due at `.1`): a caller who joins later with a later
        // deadline (or none) raises that bound, and the hedge is due again.
        let mut ruled_out: Option<(Instant, Instant)> = None;
        // The next hedge, paid for when every branch sent had failed before it was due.
        let mut prepaid: Option<Paid<'_>> = None;
        loop {
            if let Some((planned, at)) = ruled_out {
                if self
                    .wait_limit()
                    .is_none_or(|limit| crate::timeout::wait_fits(planned, at, limit))
                {
                    ruled_out = None;
                    next_launch = Some(at);
                } else if at <= Instant::now() {
                    // Its time came and nobody joined who could still use it.
                    ruled_out = None;
                }
            }
            // Launch every branch that is due.
            while let Some(at) = next_launch {
                let now = Instant::now();
                if at > now {
                    break;
                }
                let allowed = launched < config.max.max(1) && self.deadline.is_none_or(|d| now < d);
                if !allowed {
                    next_launch = None;
                    break;
                }
                // A hedge is a new request, as a retry is: the budget must allow it,
                // and its refusal is a rejection like any other. The round's first
                // branch is paid for by the retry loop when it is a retry, a hedge
                // decided early already is; a branch not sent gives its payment back.
                let payment = if launched == 0 {
                    paid.take()
                } else if prepaid.is_some() {
                    prepaid.take()
                } else {
                    match self.pay(now) {
                        Ok(payment) => payment,
                        Err(()) => {
                            next_launch = None;
                            budget_refused(&mut rejection);
                            break;
                        }
                    }
                };
                let n = first_attempt + launched;
                branches.push(Box::pin(self.attempt_deferred(
                    prepared,
                    None,
                    n - 1,
                    Some(&hold),
                    payment,
                )));
                launched += 1;
                // A hedge due at or after the deadline (for a shared execution, its
                // callers' latest) could never be sent: the round does not wait for it,
                // and a failure of the branches in flight ends it at once.
                next_launch = if launched < config.max {
                    now.checked_add(config.delay).filter(|at| {
                        let fits = self
                            .wait_limit()
                            .is_none_or(|limit| crate::timeout::wait_fits(now, *at, limit));
                        if !fits && self.callers.is_some() {
                            ruled_out = Some((now, *at));
                        }
                        fits
                    })
                } else {
                    None
                };
                if launched > 1 {
                    tracing::debug!(branch = launched, "hedging");
                }
            }
            // The server asked to wait and every branch left is one not sent yet (in a
            // bulkhead queue, waiting for a token): withdrawn now, leaving its queue place
            // or its token, rather than when it would have been let through.
            if hold.held() && hold.sent.load(Ordering::Relaxed) == ended && !branches.is_empty() {
                refused += branches.len() as u32;
                branches.clear();
            }
            if branches.is_empty() && next_launch.is_none() {
                break;
            }
            let done = tokio::select! {
                biased;
                Some(done) = branches.next(), if !branches.is_empty() => done,
                () = async {
                    match next_launch.or(ruled_out.map(|(_, at)| at)) {
                        Some(at) => sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                } => continue,
            };
            let Attempted { result, verdict } = done;
            if let Some(v) = &verdict {
                ended += 1;
                if v.probe() {
                    hold.probe_ended();
                }
            }
            match result {
                Ok(raw) => {
                    if let Some(v) = verdict {
                        v.record();
                    }
                    // Losers still in flight are dropped with `branches`; losers that
                    // already failed count as nothing.
                    for v in failed.held.drain(..) {
                        v.ignore();
                    }
                    return Ok(raw);
                }
                // A branch withdrawn before it was sent, because the server asked to
                // wait: it never happened.
                Err(failure)
                    if verdict.is_none()
                        && failure.error.kind() == ErrorKind::Cancelled
                        && hold.held() =>
                {
                    refused += 1;
                }
                // A branch a half-open breaker refused because this round's own probe
                // holds the slot it would need: no other caller was refused anything,
                // so it decides nothing. No more hedging (the breaker would refuse every
                // hedge while that probe is out), and the round's result is its probe's
                // answer, as an unhedged call's is.
                Err(failure)
                    if verdict.is_none()
                        && failure.error.kind() == ErrorKind::CircuitOpen
                        && failure.error.retry_at().is_none()
                        && hold.probing_now() =>
                {
                    next_launch = None;
                    ruled_out = None;
                    refused += 1;
                    tracing::debug!("the round's own probe holds the breaker: no more hedging");
                }
                // A branch refused before admission (breaker, bulkhead, rate limit) is
                // not an answer: stop hedging, keep waiting for the branches in flight.
                // The refusal is kept: it decides how the round ends if none wins.
                Err(failure) if verdict.is_none() && failure.error.is_rejection() => {
                    next_launch = None;
                    ruled_out = None;
                    refused += 1;
                    // Said here: if a branch in flight wins, nothing else would.
                    tracing::debug!(
                        error = %failure.error,
                        "a policy refused a branch: no more hedging"
                    );
                    if rejection.is_none() {
                        rejection = Some(failure.error);
                    }
                }
                Err(failure) if !failure.retryable => {
                    if let Some(v) = verdict {
                        v.record();
                    }
                    failed.record_all();
                    return Err(failure);
                }
                // The server asked to wait: no branch may leave before its instant,
                // so stop hedging; the branches in flight may still win.
                Err(failure) if failure.server_wait.is_some_and(|w| !w.is_zero()) => {
                    if let Some(v) = verdict {
                        failed.hold(v);
                    }
                    ruled_out = None;
                    if next_launch.take().is_some() {
                        tracing::debug!("the server asked to wait: no more hedging");
                    }
                    // Nor may a branch launched but still queued leave before then.
                    hold.held.store(true, Ordering::Relaxed);
                    let at = failure
                        .server_wait
                        .and_then(|w| Instant::now().checked_add(w));
                    let later =
                        asked_to_wait
                            .as_ref()
                            .is_none_or(|(earlier, _)| match (at, *earlier) {
                                (_, None) => false,
                                (None, Some(_)) => true,
                                (Some(a), Some(e)) => a >= e,
                            });
                    if later {
                        asked_to_wait = Some((at, failure));
                    }
                }
                Err(mut failure) => {
                    if let Some(v) = verdict {
                        failed.hold(v);
                    }
                    // Every branch sent has failed: the next hedge would send the
                    // request again after a failure, as a retry would, so the retry
                    // predicate has its say first. A no is final: the round ends with
                    // this failure, which the loop then does not retry either.
                    if branches.is_empty() && next_launch.is_some() {
                        match self.may_resend(&mut failure.error) {
                            Ok(true) => {}
                            Ok(false) => {
                                next_launch = None;
                                failure.retryable = false;
                            }
                            Err(hook) => {
                                failed.record_all();
                                return Err(Failure::fatal(hook));
                            }
                        }
                    }
                    last = Some(failure);
                    if branches.is_empty() {
                        self.decide_next_hedge(&mut next_launch, &mut prepaid, &mut rejection);
                    }
                }
            }
        }
        // The round ends with the failure that asked to wait, its wait measured from
        // now so that the retry loop resumes at the server's instant, not later.
        if let Some((at, mut failure)) = asked_to_wait {
            if let Some(at) = at {
                failure.server_wait = Some(at.saturating_duration_since(Instant::now()));
            }
            last = Some(failure);
        }
        failed.record_all();
        // A half-open breaker refuses a hedge without a time (its probe slot is taken,
        // by another call: a refusal for this round's own probe is no rejection);
        // if this round's failures have opened it since, say until when.
        if let Some(r) = &mut rejection
            && r.kind() == ErrorKind::CircuitOpen
            && r.retry_at().is_none()
        {
            let now = Instant::now();
            if let Some(until) = self.ep.partition.breaker.open_at(now) {
                r.set_retry_at(until, until.saturating_duration_since(now));
            }
        }
        // The refusal may have come well before the round's end (a hedge refused while
        // the primary was still in flight): how long to wait is counted from now, when
        // the call ends with it, as a server's wait is.
        if let Some(r) = &mut rejection
            && let Some(at) = r.retry_at()
        {
            r.set_retry_at(at, at.saturating_duration_since(Instant::now()));
        }
        // The round's own failure, from the branches that were sent.
        let answered = launched - refused;
        let failure = last.map(|last| {
            if answered <= 1 {
                return last;
            }
            let Failure {
                mut error,
                retryable,
                server_wait,
            } = last;
            // The source of the round's error: named as a retried call's is.
            self.stamp(&mut error);
            let mut wrapped = ApiError::new(ErrorKind::AllHedgesFailed)
                .with_message(format!("{answered} hedged attempts"));
            if let (Some(status), Some(headers), Some(body)) = (
                error.status(),
                error.headers().cloned(),
                error.body().cloned(),
            ) {
                wrapped = wrapped.with_status(status, headers, body);
            }
            if let (Some(at), Some(wait)) = (error.retry_at(), error.retry_after()) {
                wrapped.set_retry_at(at, wait);
            }
            Failure {
                error: wrapped.with_source(error),
                retryable,
                server_wait,
            }
        });
        match (rejection, failure) {
            // A rejection is final for the call: the round ends with it, not with a
            // failure the retry loop would retry; what the sent branches got is its
            // source.
            (Some(rejection), failure) => Err(Failure {
                error: match failure {
                    Some(mut f) => {
                        self.stamp(&mut f.error);
                        rejection.refusing(f.error)
                    }
                    None => rejection,
                },
                retryable: false,
                server_wait: None,
            }),
            (None, Some(failure)) => Err(failure),
            (None, None) => Err(Failure {
                error: ApiError::new(ErrorKind::AllHedgesFailed),
                retryable: false,
                server_wait: None,
            }),
        }
    }

    /// Every branch sent has failed and the next hedge is still to come: it is now the
    /// round's only way on, so it is decided now, as a retry is when its backoff
    /// starts. The budget pays for it now (kept until it leaves, given back if it
    /// never does), and a refusal by the budget, or by a breaker that will still be
    /// open when the hedge is due, ends the round now instead of at the hedge's time.
    #[cold]
    fn decide_next_hedge<'s>(
        &'s self,
        next_launch: &mut Option<Instant>,
        prepaid: &mut Option<Paid<'s>>,
        rejection: &mut Option<ApiError>,
    ) {
        let Some(at) = *next_launch else {
            return;
        };
        let now = Instant::now();
        if at <= now || prepaid.is_some() {
            return;
        }
        // A shared execution's bound may have shrunk since the hedge was planned (a
        // caller left): a hedge no caller still waiting can use is not waited for.
        if self
            .wait_limit()
            .is_some_and(|limit| !crate::timeout::wait_fits(now, at, limit))
        {
            *next_launch = None;
            return;
        }
        if let Some(open) = self.still_open(at, now, "the hedge is due") {
            *next_launch = None;
            rejection.get_or_insert(open);
            tracing::debug!("the breaker will refuse the next hedge: no more hedging");
            return;
        }
        match self.pay(now) {
            Ok(payment) => *prepaid = payment,
            Err(()) => {
                *next_launch = None;
                budget_refused(rejection);
            }
        }
    }
}

/// The budget refused a hedge: the round's rejection, unless it has one already.
fn budget_refused(rejection: &mut Option<ApiError>) {
    rejection.get_or_insert_with(|| ApiError::new(ErrorKind::BudgetExhausted));
    tracing::debug!("the retry budget refused a hedge: no more hedging");
}
