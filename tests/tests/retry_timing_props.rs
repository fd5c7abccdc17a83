//! Property tests of the retry loop's timing against `Retry-After` (DESIGN §3.3, §3.1,
//! §3.4), on the paused clock with exact milliseconds.
//!
//! Each case scripts up to four answers (503 or 429, both retried, or 200), each with
//! an optional response delay and an optional `Retry-After` / `retry-after-ms` header,
//! and calls an endpoint with a fixed 100 ms backoff, `max` 1 to 3, a `Retry-After`
//! cap of 60 s (default) or 2 s, and a total deadline of none, 500 ms, 2 s or 10 s.
//! The test computes the timeline itself and checks the client matches it exactly.
//!
//! The model's rules (times in µs on the paused clock; the call starts on the
//! millisecond grid, or 0.4 ms off it as a real clock's instant would be; also an
//! attempt timeout of 5 s or 250 ms):
//! 1. An attempt dispatched at `t` with delay `d` answers in the timer tick of
//!    `t + d` (at once if `d = 0`), or times out in the tick of `t + limit` if that is
//!    sooner (a tie goes to the answer); if the deadline's tick comes no later, the
//!    call ends with `Deadline` (§3.1, §3.4: the deadline wins a tie with either). An
//!    attempt timeout is retried after the computed backoff.
//! 2. The server's wait, read when the answer arrives: a valid `retry-after-ms` (whole
//!    ms), else `Retry-After` delta-seconds (× 1000), else an HTTP date taken against
//!    the injected wall clock once, `date - now` rounded *up* to the whole ms (a date
//!    at or before now: 0); malformed values (`-5`, `1.5`, `5s`, …) are no value.
//!    Then at most the cap.
//! 3. The next wait is the server's wait if any, else the computed 100 ms backoff.
//! 4. It fits the deadline `D` when it is zero (no sleep at all, so only `t < D` matters)
//!    or when `t + w + 1 ms <= D`: a sleep ends on the timer's millisecond tick, and a
//!    wait ending in the deadline's own tick would lose to the deadline (the rule of
//!    `timeout::wait_fits`, pinned by `retry_deadline.rs`). If it does not fit, the
//!    call fails now with the status error.
//! 5. A status error that ends the call (retries spent, or its wait does not fit)
//!    carries the server's wait as it asked, before the cap, as `retry_after()` and
//!    `answer + wait` as `retry_at()` (a wait too large for any clock, capped);
//!    without a valid header, neither.
//! 6. The next attempt is dispatched at once for a zero wait (even off the grid: no
//!    sleep), else when the sleep ends (see [`wake`]): never before the server's
//!    instant.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, ErrorKind, Jitter, TimeoutKind, resilient_api};
use tokio::time::Instant;

/// A fixed 100 ms backoff and the default retried statuses (429 and 503 among them).
/// One method per `max` (1 to 3), `Retry-After` cap (60 s, the default, or 2 s) and
/// attempt timeout (5 s, longer than any response, or 250 ms, shorter than some).
#[resilient_api(timeout(attempt = "5s"), retry(backoff = fixed(delay = "100ms")))]
trait Timing {
    #[get("/m1")]
    #[retry(max = 1)]
    async fn m1(&self) -> Result<String, ApiError>;

    #[get("/m2")]
    #[retry(max = 2)]
    async fn m2(&self) -> Result<String, ApiError>;

    #[get("/m3")]
    #[retry(max = 3)]
    async fn m3(&self) -> Result<String, ApiError>;

    #[get("/m1_cap2")]
    #[retry(max = 1, retry_after_cap = "2s")]
    async fn m1_cap2(&self) -> Result<String, ApiError>;

    #[get("/m2_cap2")]
    #[retry(max = 2, retry_after_cap = "2s")]
    async fn m2_cap2(&self) -> Result<String, ApiError>;

    #[get("/m3_cap2")]
    #[retry(max = 3, retry_after_cap = "2s")]
    async fn m3_cap2(&self) -> Result<String, ApiError>;

    #[get("/m1_att250")]
    #[timeout(attempt = "250ms")]
    #[retry(max = 1)]
    async fn m1_att250(&self) -> Result<String, ApiError>;

    #[get("/m2_att250")]
    #[timeout(attempt = "250ms")]
    #[retry(max = 2)]
    async fn m2_att250(&self) -> Result<String, ApiError>;

    #[get("/m3_att250")]
    #[timeout(attempt = "250ms")]
    #[retry(max = 3)]
    async fn m3_att250(&self) -> Result<String, ApiError>;

    #[get("/m1_cap2_att250")]
    #[timeout(attempt = "250ms")]
    #[retry(max = 1, retry_after_cap = "2s")]
    async fn m1_cap2_att250(&self) -> Result<String, ApiError>;

    #[get("/m2_cap2_att250")]
    #[timeout(attempt = "250ms")]
    #[retry(max = 2, retry_after_cap = "2s")]
    async fn m2_cap2_att250(&self) -> Result<String, ApiError>;

    #[get("/m3_cap2_att250")]
    #[timeout(attempt = "250ms")]
    #[retry(max = 3, retry_after_cap = "2s")]
    async fn m3_cap2_att250(&self) -> Result<String, ApiError>;
}

/// The wall clock's whole second (2001-09-09T01:46:40Z), the base of every HTTP date.
const BASE_SECS: u64 = 1_000_000_000;

fn wall_whole() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(BASE_SECS)
}
fn wall_plus_250ms() -> SystemTime {
    wall_whole() + Duration::from_millis(250)
}
fn wall_plus_400us() -> SystemTime {
    wall_whole() + Duration::from_micros(400)
}

/// The injected wall clocks, each with its offset after the whole second in µs.
const WALLS: [(fn() -> SystemTime, u64); 3] = [
    (wall_whole, 0),
    (wall_plus_250ms, 250_000),
    (wall_plus_400us, 400),
];

/// How far off the timer's millisecond grid an off-grid call starts, as a real
/// clock's would.
const OFF_GRID_US: u64 = 400;

const GARBAGE: &[&str] = &["-5", "1.5", "5s", "+3", "soon", "Mon, 99 Foo 2001"];

#[derive(Clone, Debug)]
enum Hint {
    /// `Retry-After: <secs>`.
    Secs(u64),
    /// `Retry-After: <HTTP date secs after the wall clock's whole second>`.
    Date(i64, DateForm),
    /// `retry-after-ms: <ms>`.
    Ms(u64),
    /// A malformed `Retry-After` (or `retry-after-ms`, by the flag).
    Garbage(&'static str, bool),
    /// `Retry-After` delta-seconds too large for any clock: saturates, then capped.
    Huge,
    /// Both headers: `retry-after-ms` (valid or not) and `Retry-After`.
    Both(Box<Hint>, Box<Hint>),
}

/// How an HTTP date is written (RFC 9110's three forms).
#[derive(Clone, Copy, Debug)]
enum DateForm {
    Imf,
    Rfc850,
    Asctime,
}

#[derive(Clone, Debug)]
struct Answer {
    status: u16,
    hint: Option<Hint>,
    delay_ms: u64,
}

#[derive(Clone, Debug)]
struct Case {
    max: u32,
    small_cap: bool,
    short_attempt: bool,
    off_grid: bool,
    deadline_ms: Option<u64>,
    wall: usize,
    answers: Vec<Answer>,
}

/// Milliseconds, weighted towards the edges of the deadlines and caps.
fn ms_value() -> impl Strategy<Value = u64> {
    prop_oneof![
        prop::sample::select(vec![
            0u64, 1, 99, 100, 101, 199, 200, 249, 250, 299, 399, 400, 499, 500, 999, 1000, 1499,
            1500, 1999, 2000, 2001, 2999, 3000,
        ]),
        0u64..=3000,
    ]
}

fn date_form() -> impl Strategy<Value = DateForm> {
    prop::sample::select(vec![DateForm::Imf, DateForm::Rfc850, DateForm::Asctime])
}

/// One header's worth of hint.
fn single_hint() -> impl Strategy<Value = Hint> {
    prop_oneof![
        3 => (0u64..=5).prop_map(Hint::Secs),
        3 => (-10i64..=10, date_form()).prop_map(|(k, f)| Hint::Date(k, f)),
        3 => ms_value().prop_map(Hint::Ms),
        2 => (prop::sample::select(GARBAGE), any::<bool>()).prop_map(|(g, ms)| Hint::Garbage(g, ms)),
        1 => Just(Hint::Huge),
    ]
}

fn hint() -> impl Strategy<Value = Hint> {
    prop_oneof![
        6 => single_hint(),
        1 => (
            prop_oneof![
                ms_value().prop_map(Hint::Ms),
                prop::sample::select(GARBAGE).prop_map(|g| Hint::Garbage(g, true)),
            ],
            prop_oneof![
                (0u64..=5).prop_map(Hint::Secs),
                (-10i64..=10, date_form()).prop_map(|(k, f)| Hint::Date(k, f)),
                prop::sample::select(GARBAGE).prop_map(|g| Hint::Garbage(g, false)),
            ],
        )
            .prop_map(|(a, b)| Hint::Both(Box::new(a), Box::new(b))),
    ]
}

fn answer() -> impl Strategy<Value = Answer> {
    (
        prop::sample::select(vec![503u16, 503, 429, 200]),
        proptest::option::of(hint()),
        prop_oneof![
            1 => Just(0u64),
            1 => prop::sample::select(vec![50u64, 100, 150, 200, 249, 250, 251, 300]),
            2 => 0u64..=300,
        ],
    )
        .prop_map(|(status, hint, delay_ms)| Answer {
            status,
            hint,
            delay_ms,
        })
}

fn case() -> impl Strategy<Value = Case> {
    (
        1u32..=3,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop::sample::select(vec![None, Some(500u64), Some(2_000), Some(10_000)]),
        0usize..WALLS.len(),
        prop::collection::vec(answer(), 1..=4),
    )
        .prop_map(
            |(max, small_cap, short_attempt, off_grid, deadline_ms, wall, answers)| Case {
                max,
                small_cap,
                short_attempt,
                off_grid,
                deadline_ms,
                wall,
                answers,
            },
        )
}

fn config() -> ProptestConfig {
    tests::proptest_config!(512, "retry_timing_props")
}

/// The HTTP date `secs` seconds after (or before) the wall clock's whole second, in
/// `form`. The wall clock's day is 2001-09-09, a Sunday, far from any month's end.
fn http_date(secs: i64, form: DateForm) -> String {
    let base = wall_whole();
    let at = if secs >= 0 {
        base + Duration::from_secs(secs.unsigned_abs())
    } else {
        base - Duration::from_secs(secs.unsigned_abs())
    };
    let imf = httpdate::fmt_http_date(at);
    // "Sun, 09 Sep 2001 01:46:40 GMT"
    let (day, month, year, time) = (&imf[5..7], &imf[8..11], &imf[12..16], &imf[17..25]);
    match form {
        DateForm::Imf => imf,
        DateForm::Rfc850 => format!("Sunday, {day}-{month}-{} {time} GMT", &year[2..]),
        DateForm::Asctime => format!(
            "Sun {month} {day:>2} {time} {year}",
            day = day.trim_start_matches('0')
        ),
    }
}

/// The server's wait in ms by the model's rule 2 (before the cap).
fn server_wait_ms(hint: &Hint, wall_offset_us: u64) -> Option<u64> {
    match hint {
        Hint::Secs(s) => Some(s * 1000),
        Hint::Ms(m) => Some(*m),
        Hint::Huge => Some(u64::MAX),
        // A valid `retry-after-ms` wins; otherwise `Retry-After`.
        Hint::Both(ms, ra) => {
            server_wait_ms(ms, wall_offset_us).or_else(|| server_wait_ms(ra, wall_offset_us))
        }
        Hint::Date(k, _) => {
            let date_us = k * 1_000_000;
            let now_us = wall_offset_us as i64;
            // At or before now: no wait; after: rounded up to the whole ms.
            Some(if date_us <= now_us {
                0
            } else {
                ((date_us - now_us) as u64).div_ceil(1000)
            })
        }
        Hint::Garbage(..) => None,
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Ok,
    /// Status, the server's wait and when it ends (µs).
    Status(u16, Option<(u64, u64)>),
    Deadline,
    AttemptTimeout,
}

#[derive(Debug)]
struct Expected {
    dispatches: Vec<u64>,
    outcome: Outcome,
    attempts: u32,
    /// For each retry after a server's wait: the attempt, and the server's instant.
    server_instants: Vec<(usize, u64)>,
}

/// The model: the expected timeline and outcome, or `None` when the script is too
/// short for the attempts the call would make.
/// The first timer tick at or after `us`: tokio's timer fires on whole milliseconds.
fn tick(us: u64) -> u64 {
    us.div_ceil(1000) * 1000
}

/// When a sleep of `x` µs from `t` ends on tokio's paused clock: its timer fires in
/// the tick `t + x` falls in (rounded up), and the paused clock gets there by whole
/// milliseconds from the tick `t` is in (rounded down), so an off-grid start keeps its
/// offset: `x` of whole ms from 0.4 ms ends at `x + 1.4` ms. (A real clock would wake
/// on the tick itself; either way, never before `t + x`.)
fn wake(t: u64, x: u64) -> u64 {
    t + (tick(t + x) - t / 1000 * 1000)
}

/// The model (in µs after the transport was made; the call starts at `OFF_GRID_US`
/// when `off_grid`): the expected timeline and outcome, or `None` when the script is
/// too short for the attempts the call would make.
fn expect(case: &Case) -> Option<Expected> {
    let cap = if case.small_cap { 2_000 } else { 60_000 };
    let wall_us = WALLS[case.wall].1;
    let attempt_us = if case.short_attempt {
        250_000
    } else {
        5_000_000
    };
    let start = if case.off_grid { OFF_GRID_US } else { 0 };
    let deadline = case.deadline_ms.map(|d| start + d * 1000);
    let mut t = start;
    let mut dispatches = Vec::new();
    let mut server_instants = Vec::new();
    let done = |dispatches, outcome, attempts, server_instants| {
        Some(Expected {
            dispatches,
            outcome,
            attempts,
            server_instants,
        })
    };
    for i in 0..=case.max {
        let a = case.answers.get(i as usize)?;
        dispatches.push(t);
        let attempts = i + 1;
        let delay = a.delay_ms * 1000;
        // The answer comes at once without a delay, or on the tick its delay ends in,
        // unless the attempt's limit comes first (a tie goes to the answer: the work
        // is polled before the limit is seen).
        let timed_out = delay > attempt_us;
        let first = delay.min(attempt_us);
        let ends = if delay == 0 { t } else { wake(t, first) };
        // The deadline is seen before both: it wins a tie (the same tick) with either.
        if delay > 0 && deadline.is_some_and(|d| tick(t + first) >= tick(d)) {
            return done(dispatches, Outcome::Deadline, attempts, server_instants);
        }
        t = ends;
        let (server, fail) = if timed_out {
            // Retried (a GET) after the computed backoff; no server wait.
            (None, Outcome::AttemptTimeout)
        } else if a.status == 200 {
            return done(dispatches, Outcome::Ok, attempts, server_instants);
        } else {
            let asked = a.hint.as_ref().and_then(|h| server_wait_ms(h, wall_us));
            let server = asked.map(|w| w.min(cap) * 1000);
            // Rule 5: the error says what the server asked; `Huge` is past any clock.
            let told = asked
                .filter(|&w| w != u64::MAX)
                .map(|w| w * 1000)
                .or(server);
            (server, Outcome::Status(a.status, told.map(|w| (w, t + w))))
        };
        if i == case.max {
            return done(dispatches, fail, attempts, server_instants);
        }
        let wait = server.unwrap_or(100_000);
        // A zero wait does not sleep, so it only has to start before the deadline;
        // any other must end a whole tick before it.
        let fits = match deadline {
            None => true,
            Some(d) if wait == 0 => t < d,
            Some(d) => t + wait + 1000 <= d,
        };
        if !fits {
            return done(dispatches, fail, attempts, server_instants);
        }
        if let Some(w) = server {
            server_instants.push((i as usize + 1, t + w));
        }
        // No wait, no sleep.
        if wait > 0 {
            t = wake(t, wait);
        }
    }
    unreachable!("the loop returns at `i == max`")
}

fn with_hint(s: Step, hint: &Hint) -> Step {
    match hint {
        Hint::Secs(n) => s.header("retry-after", &n.to_string()),
        Hint::Date(k, form) => s.header("retry-after", &http_date(*k, *form)),
        Hint::Ms(n) => s.header("retry-after-ms", &n.to_string()),
        Hint::Garbage(g, true) => s.header("retry-after-ms", g),
        Hint::Garbage(g, false) => s.header("retry-after", g),
        Hint::Huge => s.header("retry-after", "99999999999999999999999"),
        Hint::Both(ms, ra) => with_hint(with_hint(s, ms), ra),
    }
}

fn step(a: &Answer) -> Step {
    let mut s = Step::status(a.status).body(if a.status == 200 { "ok" } else { "busy" });
    if let Some(h) = &a.hint {
        s = with_hint(s, h);
    }
    if a.delay_ms > 0 {
        s = s.delay(Duration::from_millis(a.delay_ms));
    }
    s
}

/// Run the case's call on a fresh paused-clock runtime: its result, the dispatch
/// times in whole ms (checked to be whole), the call's start, and the transport.
fn run(
    case: &Case,
) -> (
    Result<String, ApiError>,
    Vec<Duration>,
    Instant,
    ScriptedTransport,
) {
    let rt = tests::case_runtime(true);
    rt.block_on(async {
        let t = ScriptedTransport::new(case.answers.iter().map(step));
        let origin = Instant::now();
        let api: TimingClient = tests::scripted_builder(&t)
            .jitter(Jitter::fixed(0.5))
            .wall_clock(WALLS[case.wall].0)
            .build()
            .expect("the client builds");
        let api = match case.deadline_ms {
            Some(d) => api.with_options(CallOptions::new().deadline(Duration::from_millis(d))),
            None => api,
        };
        if case.off_grid {
            tokio::time::advance(Duration::from_micros(OFF_GRID_US)).await;
        }
        let r = match (case.max, case.small_cap, case.short_attempt) {
            (1, false, false) => api.m1().await,
            (2, false, false) => api.m2().await,
            (3, false, false) => api.m3().await,
            (1, true, false) => api.m1_cap2().await,
            (2, true, false) => api.m2_cap2().await,
            (3, true, false) => api.m3_cap2().await,
            (1, false, true) => api.m1_att250().await,
            (2, false, true) => api.m2_att250().await,
            (3, false, true) => api.m3_att250().await,
            (1, true, true) => api.m1_cap2_att250().await,
            (2, true, true) => api.m2_cap2_att250().await,
            (3, true, true) => api.m3_cap2_att250().await,
            _ => unreachable!("max is 1 to 3"),
        };
        tests::assert_nothing_leaked(&t);
        (r, t.dispatch_times(), origin, t)
    })
}

fn check(case: &Case) -> Result<(), TestCaseError> {
    let Some(exp) = expect(case) else {
        // The script ends before the call would: not a case.
        return Err(TestCaseError::reject("script too short"));
    };
    let (r, times, origin, t) = run(case);
    let times_us: Vec<u64> = times.iter().map(|d| d.as_micros() as u64).collect();
    prop_assert_eq!(&times_us, &exp.dispatches, "dispatch times (µs)");
    prop_assert_eq!(t.attempts(), exp.dispatches.len());
    // No attempt starts before the server's instant.
    for &(i, at) in &exp.server_instants {
        prop_assert!(
            times_us[i] >= at,
            "attempt {} at {} before {}",
            i,
            times_us[i],
            at
        );
    }
    match (&exp.outcome, r) {
        (Outcome::Ok, Ok(body)) => prop_assert_eq!(body, "ok"),
        (Outcome::Status(status, server), Err(e)) => {
            prop_assert_eq!(
                (e.kind(), e.status(), e.attempts()),
                (ErrorKind::Status, Some(*status), exp.attempts)
            );
            prop_assert_eq!(
                e.retry_after(),
                server.map(|(w, _)| Duration::from_micros(w))
            );
            prop_assert_eq!(
                e.retry_at(),
                server.map(|(_, at)| origin + Duration::from_micros(at))
            );
        }
        (Outcome::AttemptTimeout, Err(e)) => {
            prop_assert_eq!(
                (e.kind(), e.timeout(), e.attempts()),
                (
                    ErrorKind::AttemptTimeout,
                    Some(TimeoutKind::Attempt),
                    exp.attempts
                )
            );
            prop_assert_eq!((e.retry_after(), e.retry_at()), (None, None));
        }
        (Outcome::Deadline, Err(e)) => {
            prop_assert_eq!(
                (e.kind(), e.timeout(), e.attempts()),
                (ErrorKind::Deadline, Some(TimeoutKind::Total), exp.attempts)
            );
        }
        (want, got) => {
            return Err(TestCaseError::fail(format!(
                "expected {want:?}, got {:?}",
                got.map_err(|e| (e.kind(), e.status(), e.attempts()))
            )));
        }
    }
    Ok(())
}

/// Pad a case's script so that it is never too short: every extra answer is a 503.
fn padded(mut case: Case) -> Case {
    while case.answers.len() <= case.max as usize {
        case.answers.push(Answer {
            status: 503,
            hint: None,
            delay_ms: 0,
        });
    }
    case
}

proptest! {
    #![proptest_config(config())]

    /// The simplest setting first: delta-seconds only, no deadline, default cap.
    #[test]
    fn delta_seconds_without_deadline(
        max in 1u32..=3,
        answers in prop::collection::vec(
            (prop::sample::select(vec![503u16, 429, 200]), proptest::option::of(0u64..=5), 0u64..=300)
                .prop_map(|(status, secs, delay_ms)| Answer { status, hint: secs.map(Hint::Secs), delay_ms }),
            1..=4,
        ),
    ) {
        let case = padded(Case {
            max,
            small_cap: false,
            short_attempt: false,
            off_grid: false,
            deadline_ms: None,
            wall: 0,
            answers,
        });
        check(&case)?;
    }

    /// Everything: dates against three wall clocks, `retry-after-ms`, garbage, both
    /// caps, four deadlines.
    #[test]
    fn retry_after_timeline_matches_the_model(case in case()) {
        check(&padded(case))?;
    }
}
