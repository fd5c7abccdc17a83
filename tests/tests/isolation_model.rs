//! A model test of the isolation policies together: random interleavings of calls
//! (that succeed, fail with 503, or hang), cancellations, dropped calls and clock
//! advances against one client with a bulkhead (2 at once, 2 queued), a breaker and a
//! rate limit, on a paused clock.
//!
//! After every step (and every millisecond of an advance): at most 2 attempts in
//! flight, no dispatch while the breaker is open, a cancelled call has settled, and
//! every finished call ended in a way its script allows. At the end, once every call
//! is cancelled or finished: nothing in flight, no open body, no probe slot held, and
//! a call after the breaker's reset succeeds.

use std::time::Duration;

use proptest::prelude::*;
use resilient_api::circuit_breaker::state::Phase;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::transport::{HttpRequest, SendFuture};
use resilient_api::{
    ApiError, CallOptions, CancellationToken, ErrorKind, Jitter, Transport, resilient_api,
};
use tests::{ms, settle};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Every isolation policy at once; the query says how the upstream answers.
#[resilient_api(
    timeout(attempt = "200ms"),
    retry(max = 1, backoff = fixed(delay = "10ms"), on = [503]),
    breaker(failures = 2, reset = "50ms", probes = 1),
    bulkhead(concurrency = 2, queue = 2),
    rate_limit(per_second = 20, burst = 2)
)]
pub trait Model {
    #[get("/work")]
    async fn work(&self, #[query] mode: &str, #[query] delay: u64) -> Result<String, ApiError>;
}

/// The scripted transport, fed one step per dispatch from the request's own query,
/// so each call's outcome does not depend on the order of dispatches.
#[derive(Clone)]
struct ByQuery(ScriptedTransport);

impl Transport for ByQuery {
    fn send(&self, request: HttpRequest) -> SendFuture {
        let query = request.url.query().unwrap_or_default().to_owned();
        let (mut mode, mut delay) = ("", 0);
        for pair in query.split('&') {
            match pair.split_once('=') {
                Some(("mode", m)) => mode = m,
                Some(("delay", d)) => delay = d.parse().unwrap_or(0),
                _ => {}
            }
        }
        let step = match mode {
            "ok" => Step::status(200).body("ok").delay(ms(delay)),
            "fail" => Step::status(503).body("busy").delay(ms(delay)),
            _ => Step::hang(),
        };
        self.0.push([step]);
        self.0.send(request)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Ok,
    Fail,
    Hang,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::Ok => "ok",
            Mode::Fail => "fail",
            Mode::Hang => "hang",
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Call {
        mode: Mode,
        delay: u64,
        deadline: Option<u64>,
    },
    Cancel(usize),
    Drop(usize),
    Advance(u64),
    /// While the breaker is open: to the end of its cooldown, or one tick before.
    ToReset {
        early: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let mode = prop_oneof![3 => Just(Mode::Ok), 2 => Just(Mode::Fail), 1 => Just(Mode::Hang)];
    prop_oneof![
        4 => (mode, 0..60u64, proptest::option::of(1..300u64))
            .prop_map(|(mode, delay, deadline)| Op::Call { mode, delay, deadline }),
        1 => any::<usize>().prop_map(Op::Cancel),
        1 => any::<usize>().prop_map(Op::Drop),
        3 => (1..120u64).prop_map(Op::Advance),
        1 => any::<bool>().prop_map(|early| Op::ToReset { early }),
    ]
}

struct Live {
    mode: Mode,
    token: CancellationToken,
    handle: JoinHandle<Result<String, ApiError>>,
}

struct World {
    api: ModelClient,
    t: ScriptedTransport,
    base: Instant,
    live: Vec<Live>,
}

/// What a finished call may have ended with, given its script.
fn check_result(
    mode: Mode,
    result: Result<Result<String, ApiError>, tokio::task::JoinError>,
) -> Result<(), TestCaseError> {
    let result = match result {
        Ok(r) => r,
        Err(join) => {
            prop_assert!(!join.is_panic(), "a call panicked: {join:?}");
            return Ok(()); // dropped on purpose
        }
    };
    match result {
        Ok(body) => {
            prop_assert_eq!(mode, Mode::Ok, "only a call scripted to succeed succeeds");
            prop_assert_eq!(body, "ok");
        }
        Err(e) => {
            let allowed = match e.kind() {
                ErrorKind::Cancelled
                | ErrorKind::Deadline
                | ErrorKind::CircuitOpen
                | ErrorKind::BulkheadFull
                | ErrorKind::RateLimited
                | ErrorKind::BudgetExhausted => true,
                ErrorKind::Status => mode == Mode::Fail && e.status() == Some(503),
                ErrorKind::AttemptTimeout => mode == Mode::Hang,
                _ => false,
            };
            prop_assert!(
                allowed,
                "a {:?} call ended with {:?}: {}",
                mode,
                e.kind(),
                e
            );
        }
    }
    Ok(())
}

impl World {
    /// The invariants that hold between any two moments; `open` is the breaker's
    /// state and the dispatch count observed at the start of the step.
    fn check(&self, open: Option<Instant>, attempts_before: usize) -> Result<(), TestCaseError> {
        prop_assert!(
            self.t.in_flight() <= 2,
            "{} attempts in flight",
            self.t.in_flight()
        );
        if let Some(until) = open {
            for at in self.t.dispatch_times().into_iter().skip(attempts_before) {
                prop_assert!(
                    self.base + at >= until,
                    "dispatched at {:?} while the breaker was open until {:?}",
                    at,
                    until - self.base
                );
            }
        }
        Ok(())
    }

    fn observe(&self) -> (Option<Instant>, usize) {
        let s = self.api.circuit_state();
        let open = (s.phase == Phase::Open).then_some(s.open_until).flatten();
        (open, self.t.attempts())
    }

    /// Collect and check every call that has finished.
    async fn reap(&mut self) -> Result<(), TestCaseError> {
        let mut i = 0;
        while i < self.live.len() {
            if self.live[i].handle.is_finished() {
                let call = self.live.swap_remove(i);
                check_result(call.mode, call.handle.await)?;
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// Move the clock `n` ms, one millisecond at a time, checking after each.
    async fn advance(&mut self, n: u64) -> Result<(), TestCaseError> {
        for _ in 0..n {
            let (open, before) = self.observe();
            tokio::time::sleep(ms(1)).await;
            settle().await;
            self.check(open, before)?;
        }
        Ok(())
    }

    async fn step(&mut self, op: Op) -> Result<(), TestCaseError> {
        match op {
            Op::Call {
                mode,
                delay,
                deadline,
            } => {
                let (open, before) = self.observe();
                let token = CancellationToken::new();
                let mut options = CallOptions::new().cancel_on(token.clone());
                if let Some(d) = deadline {
                    options = options.deadline(ms(d));
                }
                let api = self.api.with_options(options);
                let handle = tokio::spawn(async move { api.work(mode.as_str(), delay).await });
                settle().await;
                self.check(open, before)?;
                self.live.push(Live {
                    mode,
                    token,
                    handle,
                });
            }
            Op::Cancel(i) if !self.live.is_empty() => {
                let (open, before) = self.observe();
                let call = self.live.swap_remove(i % self.live.len());
                let was_running = !call.handle.is_finished();
                call.token.cancel();
                settle().await;
                prop_assert!(
                    call.handle.is_finished(),
                    "a cancelled call settles in the same tick"
                );
                let result = call.handle.await;
                if was_running {
                    let kind = result
                        .as_ref()
                        .ok()
                        .and_then(|r| r.as_ref().err())
                        .map(ApiError::kind);
                    prop_assert_eq!(kind, Some(ErrorKind::Cancelled));
                }
                check_result(call.mode, result)?;
                self.check(open, before)?;
            }
            Op::Drop(i) if !self.live.is_empty() => {
                let (open, before) = self.observe();
                let call = self.live.swap_remove(i % self.live.len());
                call.handle.abort();
                settle().await;
                prop_assert!(call.handle.is_finished());
                check_result(call.mode, call.handle.await)?;
                self.check(open, before)?;
            }
            Op::Cancel(_) | Op::Drop(_) => {}
            Op::Advance(n) => self.advance(n).await?,
            Op::ToReset { early } => {
                if let Some(until) = self.observe().0 {
                    let target = if early { until - ms(1) } else { until };
                    let n = target.saturating_duration_since(Instant::now()).as_millis();
                    self.advance(n as u64).await?;
                }
            }
        }
        self.reap().await
    }
}

async fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let t = ScriptedTransport::new([]);
    let base = Instant::now();
    let api = ModelClient::builder()
        .base_url("https://example.test")
        .transport(ByQuery(t.clone()))
        .jitter(Jitter::fixed(0.5))
        .build()
        .expect("the client builds");
    let mut world = World {
        api,
        t,
        base,
        live: Vec::new(),
    };
    for op in ops {
        world.step(op).await?;
    }

    // Cancel whatever is left: every call settles at once.
    let (open, before) = world.observe();
    for call in &world.live {
        call.token.cancel();
    }
    settle().await;
    for call in world.live.drain(..) {
        prop_assert!(
            call.handle.is_finished(),
            "a cancelled call settles in the same tick"
        );
        check_result(call.mode, call.handle.await)?;
    }
    world.check(open, before)?;

    let t = &world.t;
    prop_assert_eq!(t.in_flight(), 0);
    prop_assert_eq!(t.open_bodies(), 0);
    prop_assert_eq!(
        world.api.circuit_state().probes_in_flight,
        0,
        "no probe slot held"
    );

    // After the breaker's reset (and a refilled bucket) a healthy call succeeds.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let ok = world.api.work("ok", 0).await;
    prop_assert!(ok.is_ok(), "follow-up failed: {:?}", ok.err());
    prop_assert_eq!(world.api.circuit_state().phase, Phase::Closed);
    prop_assert_eq!(t.in_flight(), 0);
    prop_assert_eq!(t.open_bodies(), 0);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn isolation_model(ops in proptest::collection::vec(op(), 1..40)) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(run(ops))?;
    }
}
