//! A model-based property test of hedged rounds (DESIGN §3.7, with §3.3 retries around
//! them and §3.6 breaker verdicts), on the paused clock with exact milliseconds.
//!
//! Each case is a hedged GET (`delay = 50ms`, `max` 2 or 3, `retry(max = 0)` or
//! `retry(max = 1)` with a fixed 100 ms backoff, attempt timeout 1 s), a breaker that
//! stays closed (`failures = 1000`) or trips at once (`failures = 1`, 10 s reset), the
//! default retry budget or one that allows nothing, an optional per-call deadline,
//! and one scripted answer per possible dispatch: 200, 503, 404 (each with the body
//! `b{j}`, `j` the dispatch index), connect error or reset, each after 0–300 ms, or a
//! hang. The scripted transport hands steps out in dispatch order,
//! so dispatch `j` gets answer `j`. The test computes the call itself and checks the
//! client matches exactly.
//!
//! The model's rules (times in ms from the call's start, `D` the deadline or none):
//! 1. Round `r` starts at `S`; its branch `k` launches at `S + 50·k`, measured from
//!    the previous launch, if `k < max`, `S + 50·k < D` (no launch at or after the
//!    deadline: a hedge whose due time does not fit `wait_fits` is never planned), and
//!    no answer that ends the round came at or before that time (an answer due in the
//!    same tick as a launch is seen first).
//! 2. A branch answers at its launch + delay; a hang ends with an attempt timeout at
//!    launch + 1000. Answers in the same tick may be seen in any order (the model
//!    accepts every order; the docs do not fix one).
//! 3. Anything due at or after `D` loses to the deadline: the call ends at `D` with
//!    `Deadline`, branches in flight are dropped (counted neither way), and the
//!    failures already seen are recorded in the breaker.
//! 4. A 200 wins at once: its body is the result, the branches in flight are dropped,
//!    the winner's success is recorded and the losers' failures are not.
//! 5. A 404 is an answer: it ends the round (and the call, never retried) at once
//!    with `Status 404` and its body; the failures seen before it count, the 404
//!    itself is not a breaker failure.
//! 6. A 503, connect error, reset or attempt timeout is held: it does not end the
//!    round while a branch is pending or may still launch. When none is, the round
//!    ends at that instant with every held failure recorded, and its error is the
//!    last failure's, or `AllHedgesFailed` (with the last failure's status and body,
//!    and the last failure as source) when more than one branch was sent.
//! 7. A failed round with a retry left waits 100 ms if `end + 100 < D` (a wait must
//!    end a tick before the deadline), else the call ends now with the round's error.
//!    If the breaker is open then (`failures = 1` and a failure was recorded), the
//!    call ends now with `CircuitOpen`, the round's error as its source.
//! 8. `attempts()` counts every dispatch of the call; the breaker's consecutive
//!    failures are the recorded failures since the last recorded success.
//! 9. With a retry budget that allows nothing (no floor, no ratio), a hedge due while
//!    the round runs is refused at its due time: no branch launches after it, the
//!    branches in flight go on (a 200 still wins, a 404 is still the answer), and a
//!    round whose sent branches all failed ends with `BudgetExhausted` (a rejection,
//!    never retried) whose source is the round's error (rule 6). When every branch
//!    sent has failed before the next hedge is due, that hedge is asked for then, and
//!    refused then: the round ends at that failure, not at the hedge's due time. A
//!    failed round whose retry fits the deadline is refused the same way.
//! 10. With the `failures = 1` breaker half-open when the call starts (a first call
//!     tripped it and its 10 s passed), the primary is the one probe and every hedge
//!     due while it is in flight is refused: no branch launches after it, but the
//!     refusal is no rejection (only the round's own probe holds the slot), and the
//!     round ends with the probe's answer, as a round of one branch does (rules 4–7).
//!     A failed probe reopens the breaker when it fails, so the round ends then with
//!     `CircuitOpen` if the next hedge is still to come, as rule 9's early refusal
//!     does (or when that hedge, due in the same tick, is refused). After the
//!     call the breaker is closed if a branch won, open if a failure was recorded, and
//!     still half-open otherwise (a 404 probe, or a probe dropped by the deadline,
//!     frees its slot and counts neither way). A call that admitted nothing (a
//!     deadline of 0) leaves the breaker reported open: the phase turns half-open at
//!     an admission, not when read.
//!
//! After the call, nothing is in flight (the losers were dropped at once), no body is
//! open, and no dispatch happens later.

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use resilient_api::circuit_breaker::state::{BreakerConfig, BreakerMode, Phase};
use resilient_api::retry::budget::BudgetConfig;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, ErrorKind, resilient_api};
use tokio::time::Instant;

const DELAY: u64 = 50;
const BACKOFF: u64 = 100;
const ATTEMPT: u64 = 1000;

/// Hedged searches. The breaker is the builder's: one that stays closed, or one that
/// opens on the first recorded failure (`Case::tripping`).
#[resilient_api(timeout(attempt = "1s"), retry(backoff = fixed(delay = "100ms")))]
trait Hedged {
    #[get("/h2r0")]
    #[hedge(delay = "50ms", max = 2)]
    #[retry(max = 0)]
    async fn h2r0(&self) -> Result<String, ApiError>;

    #[get("/h3r0")]
    #[hedge(delay = "50ms", max = 3)]
    #[retry(max = 0)]
    async fn h3r0(&self) -> Result<String, ApiError>;

    #[get("/h2r1")]
    #[hedge(delay = "50ms", max = 2)]
    #[retry(max = 1)]
    async fn h2r1(&self) -> Result<String, ApiError>;

    #[get("/h3r1")]
    #[hedge(delay = "50ms", max = 3)]
    #[retry(max = 1)]
    async fn h3r1(&self) -> Result<String, ApiError>;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Ok,
    S503,
    S404,
    Connect,
    Reset,
    Hang,
}

#[derive(Clone, Copy, Debug)]
struct Answer {
    kind: Kind,
    delay: u64,
}

#[derive(Clone, Debug)]
struct Case {
    max: u32,
    retries: u32,
    tripping: bool,
    /// A retry budget with no floor and no ratio: every hedge and retry is refused.
    broke: bool,
    /// The (tripping) breaker is half-open when the call starts: the primary takes the
    /// one probe slot, and every hedge is refused while it is held.
    half_open: bool,
    deadline: Option<u64>,
    answers: Vec<Answer>,
}

/// An error as the test compares it: kind, status, body, attempts, and the source's
/// kind, status and body (checked only where the model names one).
type Source = (ErrorKind, Option<u16>, Option<String>);

#[derive(Clone, Debug, PartialEq, Eq)]
enum End {
    Ok(String),
    Err {
        kind: ErrorKind,
        status: Option<u16>,
        body: Option<String>,
        attempts: u32,
        source: Option<Source>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Expected {
    dispatch: Vec<u64>,
    end_ms: u64,
    end: End,
    /// The breaker's consecutive failures after the call (the closed breaker).
    consecutive: u32,
    /// The tripping breaker's phase after the call.
    phase: Phase,
}

fn body(j: usize) -> String {
    format!("b{j}")
}

/// The error one failed branch ends with.
fn single(kind: Kind, j: usize) -> Source {
    match kind {
        Kind::S503 => (ErrorKind::Status, Some(503), Some(body(j))),
        Kind::S404 => (ErrorKind::Status, Some(404), Some(body(j))),
        Kind::Connect => (ErrorKind::Connect, None, None),
        Kind::Reset => (ErrorKind::Transport, None, None),
        Kind::Hang => (ErrorKind::AttemptTimeout, None, None),
        Kind::Ok => unreachable!("a success is no failure"),
    }
}

/// The model, with `prio[j]` breaking ties between answers due in the same tick.
fn model(case: &Case, prio: &[usize]) -> Expected {
    let d = case.deadline.unwrap_or(u64::MAX);
    let m = case.max as usize;
    let mut dispatch: Vec<u64> = Vec::new();
    // Consecutive failures recorded, and whether any failure was recorded after the
    // last success (the tripping breaker's state).
    let mut consecutive = 0u32;
    let mut start = 0u64;
    let done = |dispatch: Vec<u64>, end_ms, end: End, consecutive: u32| Expected {
        phase: if matches!(end, End::Ok(_)) {
            Phase::Closed
        } else if consecutive > 0 {
            Phase::Open
        } else if case.half_open {
            // The cooldown is over: half-open, whether the probe ended without a
            // verdict (a 404, or dropped: its slot is free) or nothing was admitted (a
            // deadline of 0; the state is read after the cooldown all the same).
            Phase::HalfOpen
        } else {
            Phase::Closed
        },
        dispatch,
        end_ms,
        end,
        consecutive,
    };
    let err = |kind, status, body, attempts: usize, source| End::Err {
        kind,
        status,
        body,
        attempts: attempts as u32,
        source,
    };
    for round in 0..=case.retries {
        let first = dispatch.len();
        let mut launched = 0usize;
        // (dispatch index, due time)
        let mut pending: Vec<(usize, u64)> = Vec::new();
        let mut held = 0u32;
        let mut last: Option<usize> = None;
        let mut refused = false;
        // Whether a refusal ends the round (as a rejection, the round's error its source).
        let mut rejected = false;
        let mut now = start;
        loop {
            let at = start + DELAY * launched as u64;
            let next_launch = (launched < m && at < d && !refused).then_some(at);
            let event = pending
                .iter()
                .copied()
                .enumerate()
                .min_by_key(|&(_, (j, t))| (t, prio[j]));
            let event = event.filter(|&(_, (_, t))| next_launch.is_none_or(|l| t <= l));
            match (event, next_launch) {
                (Some((i, (j, t))), _) => {
                    if t >= d {
                        return done(
                            dispatch.clone(),
                            d,
                            err(ErrorKind::Deadline, None, None, dispatch.len(), None),
                            consecutive + held,
                        );
                    }
                    now = t;
                    pending.swap_remove(i);
                    match case.answers[j].kind {
                        Kind::Ok => return done(dispatch, t, End::Ok(body(j)), 0),
                        Kind::S404 => {
                            let n = dispatch.len();
                            return done(
                                dispatch,
                                t,
                                err(ErrorKind::Status, Some(404), Some(body(j)), n, None),
                                consecutive + held,
                            );
                        }
                        _ => {
                            held += 1;
                            last = Some(j);
                            // Every branch sent has failed before the next is due: the
                            // budget is asked now, and refuses now. Half-open, the
                            // failed probe has reopened the breaker now, and it will
                            // still be open when the hedge is due.
                            if (case.broke || case.half_open)
                                && pending.is_empty()
                                && next_launch.is_some_and(|l| l > t)
                            {
                                refused = true;
                                rejected = true;
                            }
                        }
                    }
                }
                (_, Some(l)) if (case.broke || case.half_open) && launched > 0 => {
                    // The budget, or the half-open breaker, refuses the hedge: no more
                    // launches, the branches in flight go on. The breaker's refusal while
                    // the round's own probe is in flight decides nothing.
                    now = l;
                    refused = true;
                    rejected = case.broke || pending.is_empty();
                }
                (_, Some(l)) => {
                    now = l;
                    let j = first + launched;
                    dispatch.push(l);
                    let a = case.answers[j];
                    let due = if a.kind == Kind::Hang {
                        l + ATTEMPT
                    } else {
                        l + a.delay
                    };
                    pending.push((j, due));
                    launched += 1;
                }
                (None, None) => break,
            }
        }
        let Some(last) = last else {
            // Nothing launched: the deadline had already come.
            let n = dispatch.len();
            return done(
                dispatch,
                d,
                err(ErrorKind::Deadline, None, None, n, None),
                consecutive,
            );
        };
        consecutive += held;
        let n = dispatch.len();
        let (kind, status, b) = single(case.answers[last].kind, last);
        let into_source = |e: End| match e {
            End::Err {
                kind, status, body, ..
            } => Some((kind, status, body)),
            End::Ok(_) => unreachable!(),
        };
        let round_error = if launched > 1 {
            err(
                ErrorKind::AllHedgesFailed,
                status,
                b.clone(),
                n,
                Some((kind, status, b)),
            )
        } else {
            err(kind, status, b, n, None)
        };
        if rejected {
            // A rejection is final: the round ends with it, what was sent as source.
            let source = into_source(round_error);
            let kind = if case.half_open {
                ErrorKind::CircuitOpen
            } else {
                ErrorKind::BudgetExhausted
            };
            let e = err(kind, None, None, n, source);
            return done(dispatch, now, e, consecutive);
        }
        if round == case.retries || now + BACKOFF >= d {
            return done(dispatch, now, round_error, consecutive);
        }
        if case.tripping && consecutive > 0 {
            let source = into_source(round_error);
            let e = err(ErrorKind::CircuitOpen, None, None, n, source);
            return done(dispatch, now, e, consecutive);
        }
        if case.broke {
            let source = into_source(round_error);
            let e = err(ErrorKind::BudgetExhausted, None, None, n, source);
            return done(dispatch, now, e, consecutive);
        }
        start = now + BACKOFF;
    }
    unreachable!("every round ends the call or retries")
}

/// Every permutation of `0..n`.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for i in 0..=p.len() {
            let mut q = p.clone();
            q.insert(i, n - 1);
            out.push(q);
        }
    }
    out
}

/// Every outcome the model allows (one per order of same-tick answers).
fn expectations(case: &Case) -> Vec<Expected> {
    let mut out: Vec<Expected> = Vec::new();
    for prio in permutations(case.answers.len()) {
        let e = model(case, &prio);
        if !out.contains(&e) {
            out.push(e);
        }
    }
    out
}

fn step(j: usize, a: Answer) -> Step {
    let s = match a.kind {
        Kind::Ok => Step::status(200).body(body(j)),
        Kind::S503 => Step::status(503).body(body(j)),
        Kind::S404 => Step::status(404).body(body(j)),
        Kind::Connect => Step::connect_error(),
        Kind::Reset => Step::reset(),
        Kind::Hang => return Step::hang(),
    };
    s.delay(Duration::from_millis(a.delay))
}

fn seen(r: &Result<String, ApiError>, with_source: bool) -> End {
    match r {
        Ok(b) => End::Ok(b.clone()),
        Err(e) => End::Err {
            kind: e.kind(),
            status: e.status(),
            body: e.body_text(),
            attempts: e.attempts(),
            source: if with_source {
                std::error::Error::source(e)
                    .and_then(|s| s.downcast_ref::<ApiError>())
                    .map(|s| (s.kind(), s.status(), s.body_text()))
            } else {
                None
            },
        },
    }
}

/// What the client did: dispatch times, end time, result, breaker state.
struct Run {
    dispatch: Vec<u64>,
    end_ms: u64,
    result: Result<String, ApiError>,
    consecutive: u32,
    phase: Phase,
}

fn run(case: &Case) -> Result<Run, TestCaseError> {
    let rt = tests::case_runtime(true);
    rt.block_on(async {
        let created = Instant::now();
        // Half-open: a first call whose two branches fail trips the breaker first.
        let pre = if case.half_open { 2 } else { 0 };
        let t = ScriptedTransport::new(
            (0..pre)
                .map(|_| Step::connect_error())
                .chain(case.answers.iter().enumerate().map(|(j, a)| step(j, *a))),
        );
        let options = match case.deadline {
            Some(d) => CallOptions::new().deadline(Duration::from_millis(d)),
            None => CallOptions::new(),
        };
        let failures = if case.tripping { 1 } else { 1000 };
        let mut builder =
            tests::scripted_builder::<HedgedClient>(&t).default_breaker(BreakerConfig {
                mode: BreakerMode::ConsecutiveFailures { failures },
                reset: Duration::from_secs(10),
                ..BreakerConfig::DEFAULT
            });
        if case.broke {
            builder = builder.retry_budget(Some(BudgetConfig {
                min_per_sec: 0,
                retry_ratio: 0.0,
                ..BudgetConfig::DEFAULT
            }));
        }
        let api = builder.build().expect("the client builds");
        let mut origin = Instant::now();
        if case.half_open {
            let e = api.h2r0().await.expect_err("the first call fails");
            prop_assert_eq!(e.kind(), ErrorKind::AllHedgesFailed);
            let state = api.circuit_state();
            prop_assert_eq!(state.phase, Phase::Open);
            let until = state.open_until.expect("open until");
            tokio::time::sleep_until(until).await;
            origin = Instant::now();
        }
        let api = api.with_options(options);
        let result = match (case.max, case.retries) {
            (2, 0) => api.h2r0().await,
            (3, 0) => api.h3r0().await,
            (2, _) => api.h2r1().await,
            _ => api.h3r1().await,
        };
        let state = api.circuit_state();
        let end_ms = origin.elapsed().as_millis() as u64;
        // The losers were dropped with the call, at once.
        prop_assert_eq!(t.in_flight(), 0, "a losing branch is still in flight");
        prop_assert_eq!(t.open_bodies(), 0, "a response body is still open");
        let offset = origin - created;
        let dispatch: Vec<u64> = t
            .dispatch_times()
            .iter()
            .skip(pre)
            .map(|d| (*d - offset).as_millis() as u64)
            .collect();
        // Nothing is dispatched later.
        tokio::time::sleep(Duration::from_secs(3)).await;
        prop_assert_eq!(
            t.attempts(),
            pre + dispatch.len(),
            "a dispatch after the call ended"
        );
        Ok(Run {
            dispatch,
            end_ms,
            result,
            consecutive: state.consecutive_failures,
            phase: state.phase,
        })
    })
}

fn check(case: &Case) -> Result<(), TestCaseError> {
    let wanted = expectations(case);
    let got = run(case)?;
    let with_source = wanted.iter().any(|e| {
        matches!(
            e.end,
            End::Err {
                source: Some(_),
                ..
            }
        )
    });
    let end = seen(&got.result, with_source);
    let matches = |e: &Expected| {
        let end_ok = match (&e.end, &end) {
            (
                End::Err {
                    kind,
                    status,
                    body,
                    attempts,
                    source: None,
                },
                End::Err {
                    kind: k,
                    status: s,
                    body: b,
                    attempts: a,
                    ..
                },
            ) => (kind, status, body, attempts) == (k, s, b, a),
            (want, seen) => want == seen,
        };
        let breaker_ok = if case.tripping {
            got.phase == e.phase
        } else {
            got.phase == Phase::Closed && got.consecutive == e.consecutive
        };
        e.dispatch == got.dispatch && e.end_ms == got.end_ms && end_ok && breaker_ok
    };
    if !wanted.iter().any(matches) {
        return Err(TestCaseError::fail(format!(
            "the client: dispatches {:?}, ended at {} ms with {:?}, breaker {:?} with {} \
             consecutive failures;\nthe model allows: {:#?}",
            got.dispatch, got.end_ms, end, got.phase, got.consecutive, wanted
        )));
    }
    Ok(())
}

fn delay() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => prop::sample::select(vec![0u64, 1, 25, 49, 50, 51, 99, 100, 101, 150, 200, 300]),
        2 => 0u64..=300,
    ]
}

fn answer() -> impl Strategy<Value = Answer> {
    let kind = prop_oneof![
        3 => Just(Kind::Ok),
        3 => Just(Kind::S503),
        1 => Just(Kind::S404),
        2 => Just(Kind::Connect),
        1 => Just(Kind::Reset),
        1 => Just(Kind::Hang),
    ];
    (kind, delay()).prop_map(|(kind, delay)| Answer { kind, delay })
}

fn deadline() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![
        2 => Just(None),
        1 => prop::sample::select(vec![0u64, 1, 50, 51, 100, 101, 150, 200, 250, 300, 400, 1000, 1050])
            .prop_map(Some),
        2 => (1u64..=1500).prop_map(Some),
    ]
}

fn case(tripping: bool, broke: bool, half_open: bool) -> impl Strategy<Value = Case> {
    (2u32..=3, 0u32..=1, deadline()).prop_flat_map(move |(max, retries, deadline)| {
        let n = (max * (retries + 1)) as usize;
        prop::collection::vec(answer(), n).prop_map(move |answers| Case {
            max,
            retries,
            tripping,
            broke,
            half_open,
            deadline,
            answers,
        })
    })
}

fn config() -> ProptestConfig {
    tests::proptest_config!(512, "hedge_model")
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn hedged_round_matches_the_model(case in case(false, false, false)) {
        check(&case)?;
    }

    #[test]
    fn hedged_round_verdicts_trip_the_breaker_as_the_model_says(case in case(true, false, false)) {
        check(&case)?;
    }

    #[test]
    fn hedges_refused_by_a_half_open_breaker_end_the_round_as_the_model_says(
        case in case(true, false, true)
    ) {
        check(&case)?;
    }

    #[test]
    fn hedges_refused_by_the_budget_end_the_round_as_the_model_says(case in case(false, true, false)) {
        check(&case)?;
    }
}
