//! A plain call's first attempt takes a path of its own, without the retry loop
//! around it (README, Performance, twelfth round). It must be seen to behave exactly
//! as the loop's first round. This file runs every script twice, once as a plain
//! call and once carrying a cancellation token that never fires (which sends the
//! call through the loop from the start), and requires the two runs to agree on
//! everything a caller can see: each call's result, error kind, status, source and
//! attempt count, when it ended, how many attempts were dispatched and when, and
//! the breaker's state at the end.

use std::time::Duration;

use resilient_api::circuit_breaker::state::CircuitState;
use resilient_api::retry::budget::BudgetConfig;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, CancellationToken, resilient_api};
use tests::{Clock, ms};

/// A breaker that opens on one failure; a total timeout of three attempts.
#[resilient_api(
    timeout(attempt = "100ms", total = "300ms"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 1, reset = "50ms")
)]
pub trait OneFailure {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
}

/// A slow-call rule, and a total timeout equal to the attempt's: the two limits tie.
#[resilient_api(
    timeout(attempt = "100ms", total = "100ms"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 2, reset = "50ms", slow_call = "30ms")
)]
pub trait SlowCalls {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
}

/// A failure-rate breaker: every outcome goes through its window.
#[resilient_api(
    timeout(attempt = "100ms"),
    retry(max = 3, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failure_rate = 0.5, window = "1s", min_calls = 2, reset = "10ms")
)]
pub trait FailureRate {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
}

/// Two half-open probes.
#[resilient_api(
    timeout(attempt = "40ms"),
    retry(max = 3, backoff = fixed(delay = "25ms"), on = [503]),
    breaker(failures = 1, reset = "20ms", probes = 2)
)]
pub trait Probes {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
}

/// One slot: a second caller finds none and is handed to the loop.
#[resilient_api(
    timeout(attempt = "100ms", total = "250ms"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 1, reset = "50ms"),
    bulkhead(concurrency = 1, queue = 4)
)]
pub trait OneSlot {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
}

/// The scripts, each followed by successes so that no call runs out of answers.
fn script(which: usize) -> Vec<Step> {
    let ok = || Step::status(200).body("ok");
    let mut steps = match which {
        // A retried status, a hang past the attempt's limit, a slow success.
        0 => vec![Step::status(503), ok()],
        1 => vec![Step::hang(), ok()],
        2 => vec![Step::status(200).body("slow").delay(ms(100))],
        // Slow enough for the slow-call rule; a 503 just inside the limit.
        3 => vec![Step::status(200).body("slowish").delay(ms(40)), ok(), ok()],
        4 => vec![Step::status(503).delay(ms(99)), Step::status(503), ok()],
        // A reset, a refused connection, a `Retry-After`, a streamed body, a 404.
        5 => vec![Step::reset(), ok()],
        6 => vec![Step::connect_error(), ok()],
        7 => vec![Step::status(503).header("retry-after", "1"), ok()],
        8 => vec![
            Step::status(200).chunks([(ms(50), "ab"), (ms(80), "cd")]),
            ok(),
        ],
        9 => vec![Step::status(404).body("nf"), ok()],
        // Enough failures to open the breaker, then a probe; nothing but hangs;
        // a 503 at the attempt's limit; two slow successes; calls at the slow line.
        10 => vec![
            Step::status(503),
            Step::status(503),
            Step::status(503),
            Step::status(200).body("p").delay(ms(10)),
            Step::status(503).delay(ms(30)),
        ],
        11 => vec![Step::hang(), Step::hang(), Step::hang(), Step::hang()],
        12 => vec![
            Step::status(503).delay(ms(100)),
            Step::status(503).delay(ms(20)),
        ],
        13 => vec![
            Step::status(200).body("slow").delay(ms(40)),
            Step::status(200).body("slow").delay(ms(40)),
            ok(),
        ],
        _ => vec![
            Step::status(200).body("ok").delay(ms(30)),
            Step::status(200).body("ok").delay(ms(29)),
            Step::reset().delay(ms(31)),
        ],
    };
    steps.extend((0..8).map(|_| Step::status(200).body("tail")));
    steps
}

const SCRIPTS: usize = 15;

/// `n` calls 60 ms apart, each written down with what a caller sees of it.
async fn calls<F, Fut>(t: &ScriptedTransport, clock: Clock, n: usize, call: F) -> String
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<String, ApiError>>,
{
    let mut out = String::new();
    for _ in 0..n {
        let seen = match call().await {
            Ok(v) => format!("ok({v})"),
            Err(e) => format!(
                "err({:?}, {:?}, attempts {}, source {:?})",
                e.kind(),
                e.status(),
                e.attempts(),
                std::error::Error::source(&e).map(ToString::to_string)
            ),
        };
        out.push_str(&format!(
            "[at {} ms: {seen}, {} dispatched] ",
            clock.now_ms(),
            t.attempts()
        ));
        tokio::time::sleep(ms(60)).await;
    }
    out
}

/// The breaker's state after the calls, and when each attempt was dispatched.
fn at_the_end(st: &CircuitState, t0: tokio::time::Instant, t: &ScriptedTransport) -> String {
    format!(
        "breaker {:?}, {} consecutive, {}/{} in window, open until {:?}, generation {}; \
         dispatched at {:?}",
        st.phase,
        st.consecutive_failures,
        st.failures_in_window,
        st.calls_in_window,
        st.open_until.map(|u| u.duration_since(t0)),
        st.generation,
        t.dispatch_times()
    )
}

/// Script `which`'s two runs, plain and with a token, side by side if they differ.
fn difference(which: usize, runs: &[String]) -> Option<String> {
    (runs[0] != runs[1]).then(|| {
        format!(
            "script {which}:\n  plain: {}\n  token: {}",
            runs[0], runs[1]
        )
    })
}

/// Runs every script as a plain call and as a call with a token, `$client` built
/// with `$budget` and called with the per-call deadline `$deadline` (milliseconds),
/// and fails with every script whose two runs differ.
macro_rules! parity {
    ($name:ident, $client:ty, $budget:expr, $deadline:expr) => {
        #[tokio::test(start_paused = true)]
        async fn $name() {
            let mut differ = Vec::new();
            for which in 0..SCRIPTS {
                let mut runs = Vec::new();
                for token in [false, true] {
                    let t = ScriptedTransport::new(script(which));
                    let clock = Clock::start();
                    let t0 = tokio::time::Instant::now();
                    let api: $client = tests::scripted_builder(&t)
                        .retry_budget($budget)
                        .build()
                        .expect("a valid client");
                    let mut options = CallOptions::new();
                    if let Some(d) = $deadline {
                        options = options.deadline(ms(d));
                    }
                    if token {
                        options = options.cancel_on(CancellationToken::new());
                    }
                    let api = api.with_options(options);
                    let mut seen = calls(&t, clock, 5, || api.r()).await;
                    seen.push_str(&at_the_end(&api.circuit_state(), t0, &t));
                    runs.push(seen);
                }
                differ.extend(difference(which, &runs));
            }
            assert!(differ.is_empty(), "{}", differ.join("\n"));
        }
    };
}

const DEFAULT_BUDGET: Option<BudgetConfig> = Some(BudgetConfig::DEFAULT);
/// A budget with no floor: retries only as deposits allow.
const TIGHT_BUDGET: Option<BudgetConfig> = Some(BudgetConfig {
    ttl: Duration::from_secs(10),
    min_per_sec: 0,
    retry_ratio: 0.5,
});
const NO_DEADLINE: Option<u64> = None;

parity!(one_failure, OneFailureClient, DEFAULT_BUDGET, NO_DEADLINE);
parity!(
    one_failure_deadline_50,
    OneFailureClient,
    DEFAULT_BUDGET,
    Some(50)
);
parity!(
    one_failure_deadline_100,
    OneFailureClient,
    DEFAULT_BUDGET,
    Some(100)
);
parity!(
    one_failure_deadline_130,
    OneFailureClient,
    DEFAULT_BUDGET,
    Some(130)
);
parity!(
    one_failure_tight_budget,
    OneFailureClient,
    TIGHT_BUDGET,
    NO_DEADLINE
);
parity!(slow_calls, SlowCallsClient, DEFAULT_BUDGET, NO_DEADLINE);
parity!(
    slow_calls_deadline_30,
    SlowCallsClient,
    DEFAULT_BUDGET,
    Some(30)
);
parity!(
    slow_calls_tight_budget,
    SlowCallsClient,
    TIGHT_BUDGET,
    NO_DEADLINE
);
parity!(failure_rate, FailureRateClient, DEFAULT_BUDGET, NO_DEADLINE);
parity!(
    failure_rate_no_budget_deadline_99,
    FailureRateClient,
    None,
    Some(99)
);
parity!(probes, ProbesClient, DEFAULT_BUDGET, NO_DEADLINE);
parity!(probes_deadline_150, ProbesClient, DEFAULT_BUDGET, Some(150));

/// Two callers share one slot: the second of them, 5 ms later, finds it taken.
#[tokio::test(start_paused = true)]
async fn one_slot_two_callers() {
    let mut differ = Vec::new();
    for which in 0..SCRIPTS {
        let mut runs = Vec::new();
        for token in [false, true] {
            let t = ScriptedTransport::new(script(which));
            let clock = Clock::start();
            let t0 = tokio::time::Instant::now();
            let api: OneSlotClient = tests::scripted(&t);
            let api = if token {
                api.with_options(CallOptions::new().cancel_on(CancellationToken::new()))
            } else {
                api
            };
            let (other, t2) = (api.clone(), t.clone());
            let second = tokio::spawn(async move {
                tokio::time::sleep(ms(5)).await;
                calls(&t2, clock, 3, || other.r()).await
            });
            let mut seen = calls(&t, clock, 3, || api.r()).await;
            seen.push_str(&second.await.expect("the second caller"));
            seen.push_str(&at_the_end(&api.circuit_state(), t0, &t));
            runs.push(seen);
        }
        differ.extend(difference(which, &runs));
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
