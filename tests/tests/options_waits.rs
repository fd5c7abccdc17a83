//! Per-call options (a shorter deadline, cancellation tokens, options added to a
//! client that already has some) combined with the policies' waits: a retry's
//! rate-limit token, a `Retry-After` wait, a method's own bulkhead queue and breaker,
//! and the retry budget's refund of a retry paid for but never sent; then a random
//! model of all of them at once.

use std::error::Error as _;

use resilient_api::retry::budget::BudgetConfig;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, CancellationToken, ErrorKind, resilient_api};
use tests::{Clock, assert_nothing_leaked, ms, settle, spawn_timed};

/// A budget with no floor that earns `retry_ratio` retries per call.
fn budget(retry_ratio: f32) -> Option<BudgetConfig> {
    Some(BudgetConfig {
        min_per_sec: 0,
        retry_ratio,
        ..BudgetConfig::DEFAULT
    })
}

/// The status of an error's source, when that source is an `ApiError`.
fn source_status(e: &ApiError) -> Option<u16> {
    e.source()
        .and_then(|s| s.downcast_ref::<ApiError>())
        .and_then(ApiError::status)
}

/// The budget got back the retry the last call paid for: `call` (one retry per call,
/// no floor) still retries twice, the fourth request its answer.
async fn two_retries_were_left(
    t: &ScriptedTransport,
    call: impl std::future::Future<Output = Result<String, ApiError>>,
) {
    t.push([
        Step::status(503),
        Step::status(503),
        Step::status(200).body("ok"),
    ]);
    assert_eq!(call.await.expect("two retries were left"), "ok");
    assert_eq!(t.attempts(), 4);
    assert_nothing_leaked(t);
}

/// 10 per second, burst 1 (a token every 100 ms); two retries 20 ms apart.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 100, reset = "1s"),
    rate_limit(per_second = 10, burst = 1)
)]
pub trait Limited {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// The 503 at 0 ms takes the bucket's token; the 20 ms backoff fits the caller's
/// 100 ms deadline, but the retry's token is due at 100 ms, the deadline itself: the
/// retry is refused at once (at 20 ms, not 100) with `RateLimited`, whose source is
/// the 503, and the budget gets back the retry it paid for before the backoff (one
/// retry per call, no floor: the next call can still retry twice).
#[tokio::test(start_paused = true)]
async fn a_retry_whose_token_is_due_at_the_callers_deadline_is_refused_at_once_and_repaid() {
    let t = ScriptedTransport::new([Step::status(503).body("busy")]);
    let api: LimitedClient = tests::scripted_builder(&t)
        .retry_budget(budget(1.0))
        .build()
        .expect("builds");
    let clock = Clock::start();
    let e = api
        .with_options(CallOptions::new().deadline(ms(100)))
        .resource()
        .await
        .expect_err("refused by the rate limiter");
    assert_eq!(
        (e.kind(), e.attempts(), clock.now_ms(), source_status(&e)),
        (ErrorKind::RateLimited, 1, 20, Some(503))
    );
    tests::assert_no_late_dispatch(&t, 1, ms(1000)).await;
    // Two deposits and nothing spent: two retries.
    two_retries_were_left(&t, api.resource()).await;
}

/// `search` has a breaker of its own (its partition, `Parted::search`): one failure
/// opens it for 1 s.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503])
)]
pub trait Parted {
    #[get("/search")]
    #[breaker(failures = 1, reset = "1s")]
    async fn search(&self) -> Result<String, ApiError>;
}

/// Through a client derived twice (a deadline, then a token and a longer deadline),
/// the method's own breaker is what the "still open at the end of the backoff" rule
/// asks: the call ends at 0 ms with `CircuitOpen`, source the 503, and the next call
/// is refused without a dispatch.
#[tokio::test(start_paused = true)]
async fn a_methods_own_breaker_still_open_after_the_backoff_ends_a_derived_call_at_once() {
    let t = ScriptedTransport::new([Step::status(503).body("busy")]);
    let api: PartedClient = tests::scripted(&t);
    let derived = api
        .with_options(CallOptions::new().deadline(ms(500)))
        .with_options(
            CallOptions::new()
                .cancel_on(CancellationToken::new())
                .deadline(ms(900)),
        );
    let clock = Clock::start();
    let e = derived.search().await.expect_err("the breaker opened");
    assert_eq!(
        (e.kind(), e.attempts(), clock.now_ms(), source_status(&e)),
        (ErrorKind::CircuitOpen, 1, 0, Some(503))
    );
    let e = derived.search().await.expect_err("refused");
    assert_eq!((e.kind(), e.attempts()), (ErrorKind::CircuitOpen, 0));
    assert_eq!(t.attempts(), 1);
    assert_nothing_leaked(&t);
}

/// `Retry-After` honoured; two retries.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 100, reset = "1s")
)]
pub trait Polite {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// A client derived from one with a token, with a token of its own: the second token,
/// cancelled at 300 ms during the 1 s `Retry-After` wait, ends the call in that tick;
/// nothing is sent later, and the retry paid for before the wait is given back (one
/// retry per call, no floor: the next call can still retry twice).
#[tokio::test(start_paused = true)]
async fn either_token_of_a_derived_client_ends_a_retry_after_wait_and_repays_it() {
    let t = ScriptedTransport::new([Step::status(503).header("retry-after", "1")]);
    let api: PoliteClient = tests::scripted_builder(&t)
        .retry_budget(budget(1.0))
        .build()
        .expect("builds");
    let (first, second) = (CancellationToken::new(), CancellationToken::new());
    let derived = api
        .with_options(CallOptions::new().cancel_on(first))
        .with_options(CallOptions::new().cancel_on(second.clone()));
    let clock = Clock::start();
    let call = spawn_timed(clock, async move { derived.resource().await });
    tokio::time::sleep(ms(300)).await;
    second.cancel();
    settle().await;
    assert!(call.is_finished(), "settles in the tick of the cancel");
    let (r, at) = call.await.expect("joins");
    let e = r.expect_err("cancelled");
    assert_eq!((e.kind(), e.attempts(), at), (ErrorKind::Cancelled, 1, 300));
    tests::assert_no_late_dispatch(&t, 1, ms(2000)).await;
    two_retries_were_left(&t, api.resource()).await;
}

/// `slow` has a bulkhead of its own: 1 slot, 1 queue place; one retry 20 ms.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 100, reset = "1s")
)]
pub trait OwnBulk {
    #[get("/slow")]
    #[bulkhead(concurrency = 1, queue = 1)]
    async fn slow(&self) -> Result<String, ApiError>;
}

/// A's 503 at 0 ms; B takes the method's only slot at 10 ms for 100 ms; A's retry
/// queues at 20 ms and A's token cancels it at 30 ms: A settles then, never sent
/// again, and its queue place goes to C (arriving at 30 ms), served at 110 ms.
#[tokio::test(start_paused = true)]
async fn a_retry_queued_in_a_methods_own_bulkhead_leaves_on_its_token_and_frees_its_place() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        Step::status(200).body("holder").delay(ms(100)),
        Step::status(200).body("replacement"),
    ]);
    let api: OwnBulkClient = tests::scripted(&t);
    let clock = Clock::start();
    let token = CancellationToken::new();
    let a = api.with_options(
        CallOptions::new()
            .cancel_on(token.clone())
            .deadline(ms(500)),
    );
    let first = spawn_timed(clock, async move { a.slow().await });
    let b = api.clone();
    let holder = spawn_timed(clock, async move {
        tokio::time::sleep(ms(10)).await;
        b.slow().await
    });
    tokio::time::sleep(ms(30)).await;
    token.cancel();
    let c = api.clone();
    let replacement = spawn_timed(clock, async move { c.slow().await });
    settle().await;
    assert!(first.is_finished(), "settles in the tick of the cancel");
    let (r, at) = first.await.expect("joins");
    let e = r.expect_err("cancelled");
    assert_eq!((e.kind(), e.attempts(), at), (ErrorKind::Cancelled, 1, 30));
    let (r, at) = holder.await.expect("joins");
    assert_eq!((r.expect("served").as_str(), at), ("holder", 110));
    let (r, at) = replacement.await.expect("joins");
    assert_eq!((r.expect("admitted").as_str(), at), ("replacement", 110));
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(10), ms(110)]);
    assert_nothing_leaked(&t);
}

/// Every policy at once, for the random model at the end.
#[resilient_api(
    timeout(attempt = "60ms"),
    retry(max = 3, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 3, reset = "100ms"),
    bulkhead(concurrency = 1, queue = 2),
    rate_limit(per_second = 20, burst = 2)
)]
pub trait Model {
    #[get("/work")]
    async fn work(&self, #[query] id: u32) -> Result<String, ApiError>;
}

/// The scripted transport, fed each call's next step by the call's `id` query, so a
/// call's outcome does not depend on how the calls' dispatches interleave.
#[derive(Clone)]
struct ByCall {
    inner: ScriptedTransport,
    scripts: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<u32, Vec<Step>>>>,
}

impl resilient_api::Transport for ByCall {
    fn send(
        &self,
        request: resilient_api::transport::HttpRequest,
    ) -> resilient_api::transport::SendFuture {
        let id: u32 = request
            .url
            .query()
            .and_then(|q| q.strip_prefix("id="))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let step = {
            let mut m = self.scripts.lock().unwrap_or_else(|p| p.into_inner());
            let v = m.entry(id).or_default();
            if v.is_empty() {
                Step::status(200).body("ok")
            } else {
                v.remove(0)
            }
        };
        self.inner.push([step]);
        self.inner.send(request)
    }
}

/// xorshift64: the model's seeded source of randomness.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random step, and the wait a retry after it takes (`None`: not retried).
fn random_step(r: &mut Rng) -> (Step, Option<u64>) {
    match r.below(7) {
        0 => (Step::status(200).body("ok").delay(ms(r.below(40))), None),
        1 | 2 => (
            Step::status(503).body("busy").delay(ms(r.below(30))),
            Some(20),
        ),
        3 => {
            let ra = r.below(120);
            (
                Step::status(503)
                    .body("busy")
                    .header("retry-after-ms", &ra.to_string()),
                Some(ra),
            )
        }
        4 => (Step::hang(), Some(20)),
        5 => (Step::connect_error(), Some(20)),
        _ => (
            Step::status(429)
                .body("slow down")
                .header("retry-after-ms", "10"),
            None,
        ),
    }
}

/// Random calls (up to four at once, each with its own script of 200s, 503s, 503s
/// with `retry-after-ms`, hangs, connect errors and 429s) with random per-call
/// deadlines and tokens, some cancelled, against every policy at once. For each call:
/// nothing is sent before it starts, at or after its deadline, or after its token is
/// cancelled; a `Deadline` ends exactly at the deadline and a `Cancelled` exactly at
/// the cancel; `RateLimited` only under a deadline; a retryable failure with retries
/// left ends the call only when its wait could not fit (ending a whole tick before
/// the deadline). At the end nothing is in flight.
#[tokio::test(start_paused = true)]
async fn random_calls_with_deadlines_and_tokens_keep_every_waits_rule() {
    for seed in 1..1000u64 {
        let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let t = ScriptedTransport::new(Vec::<Step>::new());
        let scripts = std::sync::Arc::new(std::sync::Mutex::new(std::collections::HashMap::new()));
        let by = ByCall {
            inner: t.clone(),
            scripts: scripts.clone(),
        };
        let api: ModelClient = tests::scripted_builder::<ModelClient>(&t)
            .transport(by)
            .build()
            .unwrap();
        let base = tokio::time::Instant::now();
        let n = 1 + r.below(4) as u32;
        let mut calls = Vec::new();
        for id in 1..=n {
            let (steps, waits): (Vec<Step>, Vec<Option<u64>>) =
                (0..4).map(|_| random_step(&mut r)).unzip();
            scripts.lock().unwrap().insert(id, steps);
            let start = r.below(60);
            let deadline = if r.below(3) == 0 {
                None
            } else {
                Some(1 + r.below(250))
            };
            let cancel = if r.below(3) == 0 {
                Some(start + r.below(200))
            } else {
                None
            };
            let token = CancellationToken::new();
            let mut o = CallOptions::new();
            if let Some(d) = deadline {
                o = o.deadline(ms(d));
            }
            if cancel.is_some() || r.below(2) == 0 {
                o = o.cancel_on(token.clone());
            }
            let c = api.with_options(o);
            let h = tokio::spawn(async move {
                tokio::time::sleep_until(base + ms(start)).await;
                let r = c.work(id).await;
                (r, base.elapsed().as_millis() as u64)
            });
            if let Some(at) = cancel {
                let tk = token.clone();
                tokio::spawn(async move {
                    tokio::time::sleep_until(base + ms(at)).await;
                    tk.cancel();
                });
            }
            calls.push((id, start, deadline, cancel, h, waits));
        }
        for (id, start, deadline, cancel, h, waits) in calls {
            let (res, end) = h.await.unwrap();
            let ctx = format!(
                "seed {seed} call {id} start {start} deadline {deadline:?} cancel {cancel:?} -> {:?} at {end}",
                res.as_ref()
                    .map_err(|e| (e.kind(), e.status(), e.attempts()))
            );
            let limit = deadline.map(|d| start + d);
            let stop = [limit, cancel.map(|c| c.max(start))]
                .into_iter()
                .flatten()
                .min();
            for req in t
                .requests()
                .iter()
                .filter(|q| q.url.ends_with(&format!("id={id}")))
            {
                let at = req.at.as_millis() as u64;
                assert!(at >= start, "{ctx}");
                if let Some(l) = limit {
                    assert!(at < l, "dispatch at {at}: {ctx}");
                }
                if let Some(c) = cancel {
                    assert!(at <= c.max(start), "dispatch at {at}: {ctx}");
                }
            }
            if let Some(s) = stop {
                assert!(end <= s, "{ctx}");
            }
            if let Err(e) = &res {
                match e.kind() {
                    ErrorKind::Deadline => assert_eq!(Some(end), limit, "{ctx}"),
                    ErrorKind::Cancelled => {
                        assert_eq!(Some(end), cancel.map(|c| c.max(start)), "{ctx}")
                    }
                    ErrorKind::RateLimited => assert!(limit.is_some(), "{ctx}"),
                    ErrorKind::Status | ErrorKind::Connect | ErrorKind::AttemptTimeout
                        if e.status() != Some(429) =>
                    {
                        let a = e.attempts() as usize;
                        if a < 4 {
                            // Not retried: the wait did not fit the deadline.
                            let wait = waits[a - 1].unwrap_or(0);
                            let l = limit
                                .unwrap_or_else(|| panic!("not retried without a deadline: {ctx}"));
                            assert!(end + wait + 1 > l || (wait == 0 && end >= l), "{ctx}");
                        }
                    }
                    _ => {}
                }
            }
        }
        settle().await;
        assert_eq!(t.in_flight(), 0, "seed {seed}");
        tokio::time::sleep(ms(1000)).await;
    }
}
