//! Model-based property test of coalescing (DESIGN §3.7, §3.4; `runtime/src/coalesce.rs`),
//! on the paused clock with exact milliseconds.
//!
//! Each case: 1 to 8 callers of a `#[coalesce]` GET `/items/{key}`, each starting at
//! 0–300 ms with key `a` or `b`, and each either staying, dropped (its future) 1–300 ms
//! after its start, cancelled by its token then, or given a per-call deadline of
//! 1–300 ms; and per key a script of upstream answers (200 with a body naming the
//! key's dispatch, `a1`, `b3`…, or 503; delay 0–200 ms; or a hang), padded with
//! healthy answers. A transport routes each key to a scripted transport of its own, so
//! a key's answers come in that key's dispatch order. The endpoint's attempt timeout is
//! 150 ms; it retries 503 and attempt timeouts twice, 50 ms apart.
//!
//! The model's rules, per key, in ms:
//! 1. A caller starting while an execution of its key is in flight (not finished, not
//!    dropped) joins it; otherwise it starts a new one, dispatched at once. Nothing is
//!    cached: a caller after an execution's end starts a fresh one.
//! 2. An attempt dispatched at `t` answers at `t + delay`, or times out at `t + 150`
//!    (a tie goes to the answer). After a 503 or a timeout the execution waits 50 ms
//!    and dispatches the next attempt, up to 3. The wait is bounded by the latest
//!    deadline among the callers still in the execution (no bound if one of them has
//!    no deadline; a caller that left no longer counts): it fits when `t + 50 + 1 <= bound`
//!    (`timeout::wait_fits`); else the execution ends at `t` with that failure.
//! 3. A 200 ends the execution: every caller still in it gets `Ok(body)` in that ms; a
//!    failure that ends it reaches them as the same kind (status 503, attempt timeout).
//! 4. A caller's deadline is its own: at `start + deadline` it gets `Deadline` (its
//!    deadline wins a tie with the execution's answer in the same ms), and the others
//!    are unaffected. A caller whose token is cancelled gets `Cancelled` in that ms
//!    (its word wins a tie too); a dropped caller gets nothing. In every case, when the
//!    last caller of an execution leaves, the execution is dropped at once: its
//!    in-flight request is aborted, nothing more is dispatched, and the next caller
//!    starts afresh. In one ms: callers leave, then executions move on, then callers
//!    start.
//! 5. Where two things in one ms come in no defined order, the case is only checked
//!    for leaks, late dispatches and stray errors: a caller starting in the ms its
//!    key's execution gets an answer or a timeout (it may join before or after the end,
//!    or before or after the retry decision its deadline bounds), or in the ms that
//!    execution lost its last caller; two callers starting an execution that answers
//!    in that same ms.
//!
//! Checked exactly: each key's dispatch times; each caller's outcome and the ms it
//! came; the attempts each error reports (its execution's dispatches so far: for a
//! caller that leaves, those before its ms); nothing dispatched later; nothing in flight and no open body; and a lone call
//! made afterwards on each key runs a fresh execution as the model says.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use resilient_api::client::ClientBuilder;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::transport::{HttpRequest, SendFuture, Transport};
use resilient_api::{ApiError, CallOptions, CancellationToken, ErrorKind, Jitter, resilient_api};
use tests::{Clock, assert_nothing_leaked, ms};

const ATTEMPT_MS: u64 = 150;
const BACKOFF_MS: u64 = 50;
const ATTEMPTS: u32 = 3;
/// The script of each key is padded with healthy answers up to this length (8 callers
/// with 3 attempts each cannot use more).
const SCRIPT_LEN: usize = 24;
const PAD_DELAY_MS: u64 = 10;
const KEYS: [&str; 2] = ["a", "b"];

/// One coalesced read per key; 503 and attempt timeouts retried twice, 50 ms apart; a
/// breaker that never opens here.
#[resilient_api(
    timeout(attempt = "150ms"),
    breaker(failures = 100000, reset = "1ms"),
    retry(max = 2, backoff = fixed(delay = "50ms"), on = [503])
)]
pub trait Items {
    #[get("/items/{key}")]
    #[coalesce]
    async fn item(&self, key: &str) -> Result<String, ApiError>;
}

/// Routes `/items/a` and `/items/b` to a scripted transport each.
#[derive(Clone)]
struct Router([ScriptedTransport; 2]);

impl Transport for Router {
    fn send(&self, request: HttpRequest) -> SendFuture {
        let i = match request.url.path() {
            "/items/a" => 0,
            "/items/b" => 1,
            other => panic!("unexpected path {other}"),
        };
        self.0[i].send(request)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Ok,
    Busy,
    Hang,
}

#[derive(Clone, Copy, Debug)]
struct Answer {
    kind: Kind,
    delay: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Leave {
    Stays,
    /// Dropped this many ms after its start.
    Drops(u64),
    /// A per-call deadline of this many ms.
    Deadline(u64),
    /// Its cancellation token (`CallOptions::cancel_on`) cancelled this many ms after
    /// its start.
    Cancels(u64),
}

#[derive(Clone, Copy, Debug)]
struct Caller {
    start: u64,
    key: usize,
    leave: Leave,
}

#[derive(Clone, Debug)]
struct Case {
    callers: Vec<Caller>,
    scripts: [Vec<Answer>; 2],
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Ok(String),
    Status(u16),
    AttemptTimeout,
    Deadline,
    Cancelled,
    Dropped,
    Other(String),
}

fn answer() -> impl Strategy<Value = Answer> {
    (
        prop_oneof![4 => Just(Kind::Ok), 4 => Just(Kind::Busy), 1 => Just(Kind::Hang)],
        prop_oneof![1 => Just(0u64), 3 => 0u64..=200],
    )
        .prop_map(|(kind, delay)| Answer { kind, delay })
}

fn caller() -> impl Strategy<Value = Caller> {
    (
        0u64..=300,
        0usize..2,
        prop_oneof![
            2 => Just(Leave::Stays),
            1 => (1u64..=300).prop_map(Leave::Drops),
            1 => (1u64..=300).prop_map(Leave::Deadline),
            1 => (1u64..=300).prop_map(Leave::Cancels),
        ],
    )
        .prop_map(|(start, key, leave)| Caller { start, key, leave })
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(caller(), 1..=8),
        prop::collection::vec(answer(), 0..=6),
        prop::collection::vec(answer(), 0..=6),
    )
        .prop_map(|(callers, a, b)| Case {
            callers,
            scripts: [a, b],
        })
}

/// A key's script, padded with healthy answers.
fn script(case: &Case, key: usize) -> Vec<Answer> {
    let mut s = case.scripts[key].clone();
    s.resize(
        SCRIPT_LEN,
        Answer {
            kind: Kind::Ok,
            delay: PAD_DELAY_MS,
        },
    );
    s
}

fn body(key: usize, n: usize) -> String {
    format!("{}{}", KEYS[key], n)
}

fn step(key: usize, n: usize, a: &Answer) -> Step {
    let s = match a.kind {
        Kind::Ok => Step::status(200).body(body(key, n)),
        Kind::Busy => Step::status(503).body("busy"),
        Kind::Hang => return Step::hang(),
    };
    if a.delay > 0 { s.delay(ms(a.delay)) } else { s }
}

// ---------------------------------------------------------------- the model

enum Phase {
    InFlight {
        answer_at: Option<u64>,
        timeout_at: u64,
        kind: Kind,
        n: usize,
    },
    Backoff {
        until: u64,
    },
}

struct Exec {
    /// The callers still in it.
    callers: Vec<usize>,
    attempts: u32,
    phase: Phase,
}

struct Expected {
    dispatches: [Vec<u64>; 2],
    outcomes: Vec<(Outcome, u64)>,
    /// Per caller, the attempts its error reports.
    attempts: Vec<Option<u32>>,
    /// Per key, a lone call made afterwards: its outcome and its dispatches.
    fresh: [(Outcome, usize); 2],
}

fn deadline_of(c: &Caller) -> Option<u64> {
    match c.leave {
        Leave::Deadline(d) => Some(c.start + d),
        _ => None,
    }
}

/// The latest deadline among the callers still in an execution; `None`: no bound (one
/// of them has no deadline).
fn bound_of(exec: &Exec, callers: &[Caller]) -> Option<u64> {
    exec.callers
        .iter()
        .map(|&i| deadline_of(&callers[i]))
        .try_fold(0, |latest, d| d.map(|d| latest.max(d)))
}

struct Model<'a> {
    scripts: [Vec<Answer>; 2],
    cursor: [usize; 2],
    dispatches: [Vec<u64>; 2],
    callers: &'a [Caller],
}

impl Model<'_> {
    fn dispatch(&mut self, key: usize, t: u64) -> Phase {
        let a = self.scripts[key][self.cursor[key]];
        self.cursor[key] += 1;
        self.dispatches[key].push(t);
        Phase::InFlight {
            answer_at: match a.kind {
                Kind::Hang => None,
                _ => Some(t + a.delay),
            },
            timeout_at: t + ATTEMPT_MS,
            kind: a.kind,
            n: self.cursor[key],
        }
    }

    /// Move `exec` on through ms `t`: its end, if it ends now, and whether an answer
    /// or a timeout came in this ms.
    fn advance(&mut self, key: usize, exec: &mut Exec, t: u64) -> (Option<Outcome>, bool) {
        let mut event = false;
        loop {
            match exec.phase {
                Phase::InFlight {
                    answer_at,
                    timeout_at,
                    kind,
                    n,
                } => {
                    let failure = if answer_at == Some(t) {
                        event = true;
                        match kind {
                            Kind::Ok => return (Some(Outcome::Ok(body(key, n))), true),
                            _ => Outcome::Status(503),
                        }
                    } else if timeout_at == t {
                        event = true;
                        Outcome::AttemptTimeout
                    } else {
                        return (None, event);
                    };
                    if exec.attempts >= ATTEMPTS
                        || bound_of(exec, self.callers).is_some_and(|b| t + BACKOFF_MS + 1 > b)
                    {
                        return (Some(failure), true);
                    }
                    exec.phase = Phase::Backoff {
                        until: t + BACKOFF_MS,
                    };
                }
                Phase::Backoff { until } if until == t => {
                    exec.attempts += 1;
                    exec.phase = self.dispatch(key, t);
                }
                Phase::Backoff { .. } => return (None, event),
            }
        }
    }

    fn start(&mut self, key: usize, callers: Vec<usize>, t: u64) -> Exec {
        let phase = self.dispatch(key, t);
        Exec {
            callers,
            attempts: 1,
            phase,
        }
    }
}

/// The model's timeline, or `None` when the case hangs on an undefined order (rule 5).
/// An execution ended at `t` with `outcome`: every caller still in it gets that, and
/// an error also reports the execution's attempts.
fn settle(
    exec: &Exec,
    outcome: &Outcome,
    t: u64,
    outcomes: &mut [Option<(Outcome, u64)>],
    attempts: &mut [Option<u32>],
) {
    for &i in &exec.callers {
        outcomes[i] = Some((outcome.clone(), t));
        if !matches!(outcome, Outcome::Ok(_)) {
            attempts[i] = Some(exec.attempts);
        }
    }
}

fn expect(case: &Case) -> Option<Expected> {
    let callers = &case.callers;
    let mut m = Model {
        scripts: [script(case, 0), script(case, 1)],
        cursor: [0, 0],
        dispatches: [Vec::new(), Vec::new()],
        callers,
    };
    let mut outcomes: Vec<Option<(Outcome, u64)>> = vec![None; callers.len()];
    // The attempts an error reports: its execution's so far.
    let mut attempts: Vec<Option<u32>> = vec![None; callers.len()];
    let mut execs: [Option<Exec>; 2] = [None, None];
    let last_start = callers.iter().map(|c| c.start).max().unwrap_or(0);
    let mut t = 0;
    while t <= last_start || execs.iter().any(Option::is_some) {
        let mut emptied = [false; 2];
        // 1. Callers leave.
        for (i, c) in callers.iter().enumerate() {
            let (at, outcome) = match c.leave {
                Leave::Stays => continue,
                Leave::Drops(d) => (c.start + d, Outcome::Dropped),
                Leave::Deadline(d) => (c.start + d, Outcome::Deadline),
                Leave::Cancels(d) => (c.start + d, Outcome::Cancelled),
            };
            if at != t || outcomes[i].is_some() {
                continue;
            }
            outcomes[i] = Some((outcome.clone(), t));
            if let Some(exec) = &mut execs[c.key] {
                if outcome != Outcome::Dropped {
                    attempts[i] = Some(exec.attempts);
                }
                exec.callers.retain(|&j| j != i);
                if exec.callers.is_empty() {
                    execs[c.key] = None;
                    emptied[c.key] = true;
                }
            }
        }
        // 2. Executions move on.
        let mut event = [false; 2];
        for key in 0..2 {
            let Some(mut exec) = execs[key].take() else {
                continue;
            };
            let (end, ev) = m.advance(key, &mut exec, t);
            event[key] = ev;
            match end {
                Some(outcome) => settle(&exec, &outcome, t, &mut outcomes, &mut attempts),
                None => execs[key] = Some(exec),
            }
        }
        // 3. Callers start.
        for key in 0..2 {
            let starting: Vec<usize> = (0..callers.len())
                .filter(|&i| callers[i].start == t && callers[i].key == key)
                .collect();
            if starting.is_empty() {
                continue;
            }
            if event[key] || emptied[key] {
                return None;
            }
            match &mut execs[key] {
                Some(exec) => {
                    exec.callers.extend(starting);
                }
                None => {
                    let together = starting.len() > 1;
                    let mut exec = m.start(key, starting, t);
                    let (end, ev) = m.advance(key, &mut exec, t);
                    if ev && together {
                        return None;
                    }
                    match end {
                        Some(outcome) => settle(&exec, &outcome, t, &mut outcomes, &mut attempts),
                        None => execs[key] = Some(exec),
                    }
                }
            }
        }
        t += 1;
    }
    // A lone call (no deadline) made afterwards on each key: a fresh execution.
    let fresh = [0, 1].map(|key| {
        let before = m.cursor[key];
        let lone = Caller {
            start: 0,
            key,
            leave: Leave::Stays,
        };
        let mut later = Model {
            scripts: m.scripts.clone(),
            cursor: m.cursor,
            dispatches: [Vec::new(), Vec::new()],
            callers: std::slice::from_ref(&lone),
        };
        let mut exec = later.start(key, vec![0], 0);
        let mut t = 0;
        loop {
            if let (Some(end), _) = later.advance(key, &mut exec, t) {
                break (end, later.cursor[key] - before);
            }
            t += 1;
        }
    });
    Some(Expected {
        fresh,
        attempts,
        dispatches: m.dispatches,
        outcomes: outcomes
            .into_iter()
            .map(|o| o.expect("every caller ends"))
            .collect(),
    })
}

// ---------------------------------------------------------------- the client

fn outcome(r: Result<String, ApiError>) -> Outcome {
    match r {
        Ok(s) => Outcome::Ok(s),
        Err(e) => match e.kind() {
            ErrorKind::Status => Outcome::Status(e.status().unwrap_or(0)),
            ErrorKind::AttemptTimeout => Outcome::AttemptTimeout,
            ErrorKind::Deadline => Outcome::Deadline,
            ErrorKind::Cancelled => Outcome::Cancelled,
            k => Outcome::Other(format!("{k:?}: {e}")),
        },
    }
}

/// The outcome, and the attempts an error reports.
fn observe(r: Result<String, ApiError>) -> (Outcome, Option<u32>) {
    let attempts = r.as_ref().err().map(|e| e.attempts());
    (outcome(r), attempts)
}

/// `call`, left at `stop` if it has not ended by then (leaving wins a tie with its
/// answer): dropped, or with `token` given, that token is cancelled and the call
/// polled once more (it must end at once, `Cancelled`). Both in this task, so that
/// nothing else can run in between.
async fn leaving_at(
    stop: Option<tokio::time::Instant>,
    token: Option<CancellationToken>,
    call: impl Future<Output = Result<String, ApiError>>,
) -> (Outcome, Option<u32>) {
    let mut call = pin!(call);
    let mut stop = pin!(stop.map(tokio::time::sleep_until));
    std::future::poll_fn(|cx| {
        if let Some(s) = stop.as_mut().as_pin_mut()
            && s.poll(cx).is_ready()
        {
            let Some(token) = &token else {
                return Poll::Ready((Outcome::Dropped, None));
            };
            token.cancel();
            return Poll::Ready(match call.as_mut().poll(cx) {
                Poll::Ready(r) => observe(r),
                Poll::Pending => (Outcome::Other("still pending once cancelled".into()), None),
            });
        }
        call.as_mut().poll(cx).map(observe)
    })
    .await
}

struct Observed {
    dispatches: [Vec<u64>; 2],
    outcomes: Vec<(Outcome, u64)>,
    attempts: Vec<Option<u32>>,
    later: [usize; 2],
    leaked: Option<String>,
    /// Per key: a later call's outcome and its dispatches.
    fresh: Vec<(Outcome, usize)>,
}

fn whole_ms(times: &[Duration]) -> Vec<u64> {
    times
        .iter()
        .map(|d| {
            assert_eq!(d.subsec_nanos() % 1_000_000, 0, "dispatch off the ms grid");
            d.as_millis() as u64
        })
        .collect()
}

fn run(case: &Case) -> Observed {
    let rt = tests::case_runtime(true);
    rt.block_on(async {
        let ts = [0, 1].map(|key| {
            ScriptedTransport::new(
                script(case, key)
                    .iter()
                    .enumerate()
                    .map(|(i, a)| step(key, i + 1, a)),
            )
        });
        let api = ClientBuilder::<ItemsClient>::new()
            .base_url("https://example.test")
            .transport(Router(ts.clone()))
            .jitter(Jitter::fixed(0.5))
            .build()
            .expect("the client builds");
        let clock = Clock::start();
        let origin = tokio::time::Instant::now();
        let tasks: Vec<_> = case
            .callers
            .iter()
            .map(|&c| {
                let api = api.clone();
                tokio::spawn(async move {
                    tokio::time::sleep_until(origin + ms(c.start)).await;
                    let token = match c.leave {
                        Leave::Cancels(_) => Some(CancellationToken::new()),
                        _ => None,
                    };
                    let api = match (c.leave, &token) {
                        (Leave::Deadline(d), _) => {
                            api.with_options(CallOptions::new().deadline(ms(d)))
                        }
                        (_, Some(token)) => {
                            api.with_options(CallOptions::new().cancel_on(token.clone()))
                        }
                        _ => api,
                    };
                    let stop = match c.leave {
                        Leave::Drops(d) | Leave::Cancels(d) => Some(origin + ms(c.start + d)),
                        _ => None,
                    };
                    let (o, attempts) = leaving_at(stop, token, api.item(KEYS[c.key])).await;
                    (o, clock.now_ms(), attempts)
                })
            })
            .collect();
        let mut outcomes = Vec::new();
        let mut attempts = Vec::new();
        for task in tasks {
            let (o, at, a) = task.await.expect("a caller's task");
            outcomes.push((o, at));
            attempts.push(a);
        }
        let dispatches = [0, 1].map(|k| whole_ms(&ts[k].dispatch_times()));
        tokio::time::sleep(ms(5000)).await;
        let later = [0, 1].map(|k| ts[k].attempts());
        let leaked = std::panic::catch_unwind(|| {
            for t in &ts {
                assert_nothing_leaked(t);
            }
        })
        .err()
        .map(|p| {
            p.downcast_ref::<&str>()
                .map(|s| s.to_string())
                .unwrap_or_else(|| "leak".into())
        });
        // A call now starts afresh on each key (nothing cached, nothing stuck).
        let mut fresh = Vec::new();
        for (key, t) in ts.iter().enumerate() {
            let before = t.attempts();
            let o = outcome(api.item(KEYS[key]).await);
            fresh.push((o, t.attempts() - before));
        }
        Observed {
            dispatches,
            outcomes,
            attempts,
            later,
            leaked,
            fresh,
        }
    })
}

fn check(case: &Case) -> Result<(), TestCaseError> {
    let obs = run(case);
    let Some(exp) = expect(case) else {
        // Either order may come, but not a leak, a late dispatch or a stray error.
        prop_assert_eq!(obs.leaked, None);
        for key in 0..2 {
            prop_assert_eq!(obs.later[key], obs.dispatches[key].len());
        }
        for (i, (o, _)) in obs.outcomes.iter().enumerate() {
            prop_assert!(!matches!(o, Outcome::Other(_)), "caller {}: {:?}", i, o);
        }
        // Not a reject: about 2% of cases, too many for a long run's reject limit.
        return Ok(());
    };
    for (key, name) in KEYS.iter().enumerate() {
        prop_assert_eq!(
            &obs.dispatches[key],
            &exp.dispatches[key],
            "dispatch times of key {}",
            name
        );
        prop_assert_eq!(
            obs.later[key],
            exp.dispatches[key].len(),
            "a dispatch came later on key {}",
            name
        );
    }
    for (i, (got, want)) in obs.outcomes.iter().zip(&exp.outcomes).enumerate() {
        prop_assert_eq!(got, want, "caller {}: (outcome, ms)", i);
    }
    prop_assert_eq!(
        &obs.attempts,
        &exp.attempts,
        "the attempts each error reports"
    );
    prop_assert_eq!(obs.leaked, None);
    for (key, name) in KEYS.iter().enumerate() {
        prop_assert_eq!(
            &obs.fresh[key],
            &exp.fresh[key],
            "a later call on key {}: (outcome, dispatches)",
            name
        );
    }
    Ok(())
}

fn config() -> ProptestConfig {
    tests::proptest_config!(512, "coalesce_model")
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn coalesced_calls_follow_the_model(case in case()) {
        check(&case)?;
    }
}

// ---------------------------------------------------------------- fixed cases

fn c(start: u64, key: usize, leave: Leave) -> Caller {
    Caller { start, key, leave }
}

fn a(kind: Kind, delay: u64) -> Answer {
    Answer { kind, delay }
}

/// The model's basic rules, pinned on hand-made schedules (and checked on the client).
#[test]
fn hand_made_schedules() {
    let cases = [
        // Two identical calls share one execution; a third after it starts fresh.
        Case {
            callers: vec![
                c(0, 0, Leave::Stays),
                c(10, 0, Leave::Stays),
                c(100, 0, Leave::Stays),
            ],
            scripts: [vec![a(Kind::Ok, 50)], vec![]],
        },
        // Retries serve every caller; different keys do not share.
        Case {
            callers: vec![
                c(0, 0, Leave::Stays),
                c(5, 0, Leave::Stays),
                c(5, 1, Leave::Stays),
            ],
            scripts: [
                vec![a(Kind::Busy, 10), a(Kind::Ok, 10)],
                vec![a(Kind::Ok, 0)],
            ],
        },
        // The only caller is dropped mid-request: aborted; a later caller starts fresh.
        Case {
            callers: vec![c(0, 0, Leave::Drops(30)), c(40, 0, Leave::Stays)],
            scripts: [vec![a(Kind::Hang, 0)], vec![]],
        },
        // One caller's deadline does not disturb the other.
        Case {
            callers: vec![c(0, 0, Leave::Deadline(30)), c(1, 0, Leave::Stays)],
            scripts: [vec![a(Kind::Busy, 20), a(Kind::Ok, 100)], vec![]],
        },
    ];
    for (n, case) in cases.iter().enumerate() {
        if let Err(e) = check(case) {
            panic!("case {n}: {e}");
        }
    }
}
