//! A call dropped (or cancelled through its token) at any point leaves nothing behind.
//!
//! Each scenario is run again and again on a fresh client: the call under test is
//! polled exactly `k` times (the clock moving 1 ms between polls that leave it
//! waiting, and not at all after a poll that leaves it woken), then dropped, or its
//! token is cancelled and it is polled once more (it must end then, `Cancelled`). `k`
//! runs from 0 until the call finishes on its own, so every await point of the call
//! is a point where it stops. After each stop, everything the call could have held is
//! measured through public behaviour, exactly: nothing in flight and no open body, no
//! later dispatch, every bulkhead slot and queue place back (N new calls: exactly the
//! slots run at once, exactly the queue waits, the next one is refused), no probe slot
//! held and no outcome counted for an attempt that never answered, no rate-limit token
//! spent for an attempt that was never sent (the next calls leave at the exact
//! milliseconds the bucket's own arithmetic gives), no coalescing entry left (an
//! identical call starts a new execution), and a healthy follow-up succeeds.
//!
//! Every call's answers come from a route of its own (its `who` query), so a call
//! stopped early leaves no scripted step behind for the next call to take.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use resilient_api::circuit_breaker::state::Phase;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::transport::{HttpRequest, SendFuture, Transport};
use resilient_api::{ApiError, CallOptions, CancellationToken, ErrorKind, Jitter, resilient_api};
use tests::{Clock, ms, settle, spawn_timed};
use tokio::task::JoinHandle;
use tokio::time::Instant;

// ---------------------------------------------------------------------------------
// The harness
// ---------------------------------------------------------------------------------

/// A transport that sends each request to the scripted transport of its route: the
/// request's `who` query. Each route counts its own dispatches, attempts in flight and
/// open bodies.
#[derive(Clone, Default)]
struct Routed(Arc<Mutex<HashMap<String, ScriptedTransport>>>);

impl Routed {
    /// A route `who` answering with `steps`, one per dispatch.
    fn route(&self, who: &str, steps: impl IntoIterator<Item = Step>) -> ScriptedTransport {
        let t = ScriptedTransport::new(steps);
        self.0
            .lock()
            .expect("routes")
            .insert(who.to_owned(), t.clone());
        t
    }

    /// Every route: nothing in flight, no open body.
    fn assert_idle(&self, when: &str) {
        for (who, t) in self.0.lock().expect("routes").iter() {
            assert_eq!(t.in_flight(), 0, "{when}: `{who}` has an attempt in flight");
            assert_eq!(t.open_bodies(), 0, "{when}: `{who}` has an open body");
        }
    }
}

impl Transport for Routed {
    fn send(&self, request: HttpRequest) -> SendFuture {
        let who = request
            .url
            .query_pairs()
            .find(|(k, _)| k == "who")
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default();
        let t = self.0.lock().expect("routes").get(&who).cloned();
        match t {
            Some(t) => t.send(request),
            None => panic!("no route for `{who}`"),
        }
    }
}

/// A waker that only remembers that it was woken.
#[derive(Default)]
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Polls `call` at most `polls` times: after a poll that leaves it woken, other tasks
/// run (the clock stays); after one that leaves it waiting, the clock moves 1 ms and
/// then other tasks run.
/// `Some` with its output if it finished within those polls.
async fn drive<F: Future + ?Sized>(call: &mut Pin<Box<F>>, polls: usize) -> Option<F::Output> {
    let flag = Arc::new(Flag::default());
    let waker = Waker::from(flag.clone());
    let mut cx = Context::from_waker(&waker);
    for _ in 0..polls {
        if let Poll::Ready(out) = call.as_mut().poll(&mut cx) {
            return Some(out);
        }
        // Other tasks (the calls around it) run before the next poll, as they would
        // with the call on a task of its own.
        if !flag.0.swap(false, Ordering::SeqCst) {
            tokio::time::advance(ms(1)).await;
        }
        settle().await;
    }
    None
}

/// How the call under test is stopped after its `k` polls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    /// Its future is dropped.
    Drop,
    /// Its token is cancelled and it is polled once more: it must end then.
    Cancel,
}

/// Runs `scenario(k, stop)` for k = 0, 1, 2, ... until the call under test finishes
/// on its own (`true`), for both ways of stopping it. Fails if that takes more than
/// `max` polls, and returns how many stops were made (at least `min`, so that a
/// scenario whose call finished at once cannot pass for one that stopped it).
async fn every_stop<S, Fut>(max: usize, min: usize, mut scenario: S)
where
    S: FnMut(usize, Stop) -> Fut,
    Fut: Future<Output = bool>,
{
    for stop in [Stop::Drop, Stop::Cancel] {
        let mut stops = 0;
        let mut k = 0;
        loop {
            assert!(k <= max, "{stop:?}: the call never finished on its own");
            if scenario(k, stop).await {
                break;
            }
            stops += 1;
            k += 1;
        }
        assert!(
            stops >= min,
            "{stop:?}: only {stops} stops before the call finished"
        );
    }
}

/// Awaits a spawned call, failing instead of hanging forever.
async fn settled<T>(call: JoinHandle<T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(30), call)
        .await
        .expect("a call never settled: something was lost")
        .expect("a call's task panicked")
}

/// Every call's options: its token (and nothing else).
fn with_token(token: &CancellationToken) -> CallOptions {
    CallOptions::new().cancel_on(token.clone())
}

/// Stops `call`, which `drive` left pending after its `k` polls, as `stop` says: a
/// cancelled call must end in its next poll, with `Cancelled`, in the same tick.
fn stop_now<F>(mut call: Pin<Box<F>>, k: usize, stop: Stop, token: &CancellationToken)
where
    F: Future + ?Sized,
    F::Output: std::fmt::Debug + IntoKind,
{
    if stop == Stop::Cancel {
        token.cancel();
        let at = Instant::now();
        let waker = Waker::from(Arc::new(Flag::default()));
        match call.as_mut().poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(out) => assert_eq!(
                out.kind(),
                Some(ErrorKind::Cancelled),
                "k={k}: a cancelled call ends Cancelled: {out:?}"
            ),
            Poll::Pending => panic!("k={k}: a cancelled call ends in its next poll"),
        }
        assert_eq!(Instant::now(), at, "k={k}: settled in the same tick");
    }
    drop(call);
}

/// The error kind of a call's output, if it failed.
trait IntoKind {
    fn kind(&self) -> Option<ErrorKind>;
}

impl<T> IntoKind for Result<T, ApiError> {
    fn kind(&self) -> Option<ErrorKind> {
        self.as_ref().err().map(ApiError::kind)
    }
}

/// The options of the call under test: none when it is dropped (so that a plain
/// call takes its own fast path), its token when it is cancelled.
fn options(stop: Stop, token: &CancellationToken) -> CallOptions {
    match stop {
        Stop::Drop => CallOptions::new(),
        Stop::Cancel => with_token(token),
    }
}

/// A client of `C` over `routes`, with a fixed jitter.
fn client<C: resilient_api::client::GeneratedClient>(routes: &Routed) -> C {
    resilient_api::client::ClientBuilder::<C>::new()
        .base_url("https://example.test")
        .transport(routes.clone())
        .jitter(Jitter::fixed(0.5))
        .build()
        .expect("the client builds")
}

// ---------------------------------------------------------------------------------
// Retries (backoff and Retry-After), a bulkhead with a queue, attempt and total
// timeouts, a body in chunks
// ---------------------------------------------------------------------------------

/// One slot and one queue place; two retries 20 ms apart; a breaker that only counts.
#[resilient_api(
    timeout(attempt = "40ms", total = "250ms"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 100, reset = "1s"),
    bulkhead(concurrency = 1, queue = 1)
)]
pub trait Queued {
    #[get("/r")]
    async fn r(&self, #[query] who: &str) -> Result<String, ApiError>;
}

/// After a stop: the bulkhead has its one slot and its one queue place back. Two new
/// calls that take 30 ms each: the first runs at once, the second waits and runs at
/// +30; a third, while they hold slot and place, is refused at once.
async fn assert_one_slot_one_place(api: &QueuedClient, routes: &Routed) {
    let clock = Clock::start();
    let a = routes.route("a", [Step::status(200).body("a").delay(ms(30))]);
    let b = routes.route("b", [Step::status(200).body("b").delay(ms(30))]);
    let c = routes.route("c", [Step::status(200).body("c")]);
    let first = spawn_timed(clock, {
        let api = api.clone();
        async move { api.r("a").await }
    });
    let second = spawn_timed(clock, {
        let api = api.clone();
        async move { api.r("b").await }
    });
    settle().await;
    assert_eq!((a.attempts(), b.attempts()), (1, 0), "one runs, one waits");
    let refused = api.r("c").await.expect_err("slot and place are taken");
    assert_eq!(refused.kind(), ErrorKind::BulkheadFull);
    assert_eq!(c.attempts(), 0);
    let (first, at) = settled(first).await;
    assert_eq!((first.expect("a").as_str(), at), ("a", 30));
    let (second, at) = settled(second).await;
    assert_eq!((second.expect("b").as_str(), at), ("b", 60));
}

/// Another call holds the only slot until t=15, so the call under test first waits
/// in the queue; then 503 (t=20), a 20 ms backoff, 503 with `retry-after-ms: 30`
/// (t=45), and at t=75 a 200 whose body comes in two chunks, whole at t=85. Stopped
/// anywhere: none of its attempts is in flight, nothing is sent later, the breaker
/// counts exactly the 503s it received (a success whose body never came whole counts
/// as nothing), the bulkhead is whole, and a follow-up succeeds.
#[tokio::test(start_paused = true)]
async fn retries_behind_a_bulkhead_queue_stop_anywhere() {
    every_stop(400, 80, |k, stop| async move {
        let routes = Routed::default();
        let api: QueuedClient = client(&routes);
        let clock = Clock::start();
        let hold = routes.route("hold", [Step::status(200).body("held").delay(ms(15))]);
        let me = routes.route(
            "me",
            [
                Step::status(503).body("busy").delay(ms(5)),
                Step::status(503)
                    .header("retry-after-ms", "30")
                    .body("busy")
                    .delay(ms(5)),
                Step::status(200).chunks([(ms(5), "o"), (ms(5), "k")]),
            ],
        );
        let holder = spawn_timed(clock, {
            let api = api.clone();
            async move { api.r("hold").await }
        });
        settle().await;
        assert_eq!(hold.attempts(), 1);
        let token = CancellationToken::new();
        let h = api.with_options(options(stop, &token));
        let mut call = Box::pin(h.r("me"));
        let finished = drive(&mut call, k).await;
        let answered = me.attempts() - me.in_flight();
        let sent = me.attempts();
        let done = finished.is_some();
        match finished {
            Some(out) => {
                assert_eq!(out.expect("the third attempt succeeds"), "ok");
                assert_eq!(me.dispatch_times(), [ms(15), ms(40), ms(75)]);
                assert_eq!(clock.now_ms(), 85);
            }
            None => stop_now(call, k, stop, &token),
        }
        assert_eq!(me.in_flight(), 0, "k={k}: the stopped attempt is aborted");
        assert_eq!(me.open_bodies(), 0, "k={k}: the body is dropped");
        let (held, at) = settled(holder).await;
        assert_eq!((held.expect("held").as_str(), at), ("held", 15.max(at)));
        tokio::time::sleep(ms(300)).await;
        assert_eq!(me.attempts(), sent, "k={k}: nothing is sent after the stop");
        let state = api.circuit_state();
        let failures = if done { 0 } else { answered.min(2) as u32 };
        assert_eq!(
            (state.phase, state.consecutive_failures, state.generation),
            (Phase::Closed, failures, 0),
            "k={k}: the breaker counts the 503s received, nothing else"
        );
        assert_eq!(state.probes_in_flight, 0);
        assert_one_slot_one_place(&api, &routes).await;
        routes.route("ok", [Step::status(200).body("ok")]);
        assert_eq!(api.r("ok").await.expect("a healthy follow-up"), "ok");
        routes.assert_idle(&format!("k={k} {stop:?}"));
        done
    })
    .await;
}

// ---------------------------------------------------------------------------------
// A half-open breaker's probe
// ---------------------------------------------------------------------------------

/// One failure trips the breaker for 50 ms; half-open, one probe; one retry.
#[resilient_api(
    timeout(attempt = "40ms"),
    retry(max = 1, backoff = fixed(delay = "10ms"), on = [503]),
    breaker(failures = 1, reset = "50ms", probes = 1)
)]
pub trait Probed {
    #[get("/r")]
    async fn r(&self, #[query] who: &str) -> Result<String, ApiError>;
}

/// How the probe under test is answered.
#[derive(Clone, Copy, Debug)]
enum ProbeAnswer {
    /// A 200 at +10 whose body comes in two chunks, whole at +30.
    Success,
    /// A 503 at +10.
    Failure,
    /// Nothing: its attempt times out at +40.
    Hang,
}

/// The call under test is a half-open breaker's probe. Stopped anywhere before its
/// answer is whole, it gives the probe slot back and counts as nothing: the breaker
/// is still half-open in the same generation, with no probe out, and the next call
/// probes and closes it. A probe that answered counts as it answered.
async fn probe_stopped(answer: ProbeAnswer) {
    every_stop(200, 10, |k, stop| async move {
        let routes = Routed::default();
        let api: ProbedClient = client(&routes);
        routes.route("trip", [Step::status(503).body("down")]);
        // Its 503 trips the breaker: its retry would be refused, so it ends now.
        let e = api.r("trip").await.expect_err("tripped");
        assert_eq!(e.kind(), ErrorKind::CircuitOpen);
        tokio::time::sleep(ms(50)).await;
        let half_open = api.circuit_state();
        assert_eq!(
            (half_open.phase, half_open.probes_in_flight),
            (Phase::HalfOpen, 0)
        );
        let step = match answer {
            ProbeAnswer::Success => Step::status(200)
                .chunks([(ms(10), "o"), (ms(10), "k")])
                .delay(ms(10)),
            ProbeAnswer::Failure => Step::status(503).body("down").delay(ms(10)),
            ProbeAnswer::Hang => Step::hang(),
        };
        let me = routes.route("me", [step]);
        let token = CancellationToken::new();
        let h = api.with_options(options(stop, &token));
        let mut call = Box::pin(h.r("me"));
        let finished = drive(&mut call, k).await;
        let sent = me.attempts();
        let done = finished.is_some();
        let state = api.circuit_state();
        match finished {
            Some(out) => match answer {
                ProbeAnswer::Success => {
                    assert_eq!(out.expect("the probe succeeds"), "ok");
                    assert_eq!(
                        (state.phase, state.generation),
                        (Phase::Closed, half_open.generation + 1)
                    );
                }
                ProbeAnswer::Failure | ProbeAnswer::Hang => {
                    // Reopened by the probe: the retry would find it open.
                    let e = out.expect_err("the probe fails");
                    assert_eq!(e.kind(), ErrorKind::CircuitOpen, "{e}");
                    assert_eq!(
                        (state.phase, state.generation),
                        (Phase::Open, half_open.generation + 1)
                    );
                }
            },
            None => {
                stop_now(call, k, stop, &token);
                let state = api.circuit_state();
                assert_eq!(
                    (state.phase, state.generation, state.probes_in_flight),
                    (Phase::HalfOpen, half_open.generation, 0),
                    "k={k} {stop:?}: a stopped probe gives its slot back and counts as nothing"
                );
            }
        }
        assert_eq!(me.in_flight(), 0, "k={k}: the probe's request is aborted");
        assert_eq!(me.open_bodies(), 0, "k={k}");
        tokio::time::sleep(ms(200)).await;
        assert_eq!(me.attempts(), sent, "k={k}: nothing is sent after the stop");
        // Whatever happened, the next call (after any fresh cooldown) probes and
        // closes the breaker.
        routes.route("next", [Step::status(200).body("ok")]);
        assert_eq!(api.r("next").await.expect("the next call probes"), "ok");
        let closed = api.circuit_state();
        assert_eq!((closed.phase, closed.probes_in_flight), (Phase::Closed, 0));
        routes.assert_idle(&format!("k={k} {stop:?}"));
        done
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_successful_probe_stopped_anywhere_counts_as_nothing() {
    probe_stopped(ProbeAnswer::Success).await;
}

#[tokio::test(start_paused = true)]
async fn a_failing_probe_stopped_anywhere_counts_as_nothing() {
    probe_stopped(ProbeAnswer::Failure).await;
}

#[tokio::test(start_paused = true)]
async fn a_hanging_probe_stopped_anywhere_counts_as_nothing() {
    probe_stopped(ProbeAnswer::Hang).await;
}

// ---------------------------------------------------------------------------------
// A rate limit's line
// ---------------------------------------------------------------------------------

/// Ten tokens a second (one every 100 ms), a burst of two; one retry 10 ms after a 503.
#[resilient_api(
    timeout(attempt = "40ms"),
    retry(max = 1, backoff = fixed(delay = "10ms"), on = [503]),
    breaker(failures = 100, reset = "1s"),
    rate_limit(per_second = 10, burst = 2)
)]
pub trait Limited {
    #[get("/r")]
    async fn r(&self, #[query] who: &str) -> Result<String, ApiError>;
}

/// A token bucket's own arithmetic, in whole ms since the client was built: a token
/// every `interval`, at most `burst` in the bucket.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    interval: u64,
    burst: u64,
}

impl Bucket {
    /// The theoretical arrival time after a token was taken at each of `taken`.
    fn arrival_after(self, taken: &[u64]) -> u64 {
        let mut sorted = taken.to_vec();
        sorted.sort_unstable();
        sorted
            .into_iter()
            .fold(0, |tat, at| tat.max(at) + self.interval)
    }

    /// When each of `line` callers (in FIFO order, all in line at `now`) takes its
    /// token, with the bucket at `tat`: at once if it holds one, else when the next
    /// one comes, each after the one before it.
    fn served_at(self, mut tat: u64, now: u64, line: usize) -> Vec<u64> {
        let mut at = now;
        (0..line)
            .map(|_| {
                at = at.max((tat + self.interval).saturating_sub(self.burst * self.interval));
                tat = tat.max(at) + self.interval;
                at
            })
            .collect()
    }
}

/// Every dispatch of every route, in ms since the routes were made.
fn all_dispatches(routes: &[&ScriptedTransport]) -> Vec<u64> {
    routes
        .iter()
        .flat_map(|t| t.dispatch_times())
        .map(|d| d.as_millis() as u64)
        .collect()
}

/// After a stop, at `clock`'s now: the bucket holds exactly what the tokens spent (one
/// per dispatch of `spent`, nothing for an attempt never sent) leave it, and its line
/// holds no ghost. Two calls join the line now behind `ahead` callers still in it:
/// the first leaves at exactly the time the bucket's arithmetic gives, and the second
/// too, with a deadline one tick after that time (a ghost ahead of it, or a token
/// spent for nothing, would make it refused at once). `call` makes a call of a route
/// with the given options.
async fn assert_tokens_exact<F, Fut>(
    routes: &Routed,
    bucket: Bucket,
    spent: &[&ScriptedTransport],
    ahead: usize,
    clock: Clock,
    what: &str,
    call: F,
) where
    F: Fn(String, CallOptions) -> Fut,
    Fut: Future<Output = Result<String, ApiError>> + Send + 'static,
{
    let now = clock.now_ms();
    let taken = all_dispatches(spent);
    let tat = bucket.arrival_after(&taken);
    let mut due = bucket.served_at(tat, now, ahead + 2);
    let c2_due = due.pop().expect("c2's time");
    let c1_due = due.pop().expect("c1's time");
    let c1 = routes.route("c1", [Step::status(200).body("c1")]);
    let c2 = routes.route("c2", [Step::status(200).body("c2")]);
    let one = spawn_timed(clock, call("c1".to_owned(), CallOptions::new()));
    let bounded = CallOptions::new().deadline(ms(c2_due - now + 1));
    let two = spawn_timed(clock, call("c2".to_owned(), bounded));
    let (r1, at1) = settled(one).await;
    let (r2, at2) = settled(two).await;
    let context = format!("{what}: at {now}, tokens spent at {taken:?}");
    assert_eq!(
        (r1.map_err(|e| e.kind()), at1),
        (Ok("c1".to_owned()), c1_due),
        "{context}"
    );
    assert_eq!(
        (r2.map_err(|e| e.kind()), at2),
        (Ok("c2".to_owned()), c2_due),
        "{context}"
    );
    assert_eq!((c1.attempts(), c2.attempts()), (1, 1));
}

/// At t=0 one call takes the first token and another the second; `front` then waits
/// in line for the token of t=100 and the call under test behind it for t=200 (a 503
/// at +5, its retry at +10 waits for the token of t=300, and its 200 ends it). Stopped
/// anywhere, it leaves the line and takes nothing: two calls that join the line then
/// (the second with a deadline one tick after its due time, which a ghost ahead of it
/// would make it miss) leave at exactly the times the bucket's arithmetic gives from
/// the tokens actually spent, one per dispatch.
#[tokio::test(start_paused = true)]
async fn waiting_in_a_rate_limit_line_stops_anywhere() {
    every_stop(1200, 150, |k, stop| async move {
        let routes = Routed::default();
        let api: LimitedClient = client(&routes);
        let clock = Clock::start();
        let first = routes.route("first", [Step::status(200).body("first")]);
        let second = routes.route("second", [Step::status(200).body("second")]);
        let front = routes.route("front", [Step::status(200).body("front")]);
        let me = routes.route(
            "me",
            [
                Step::status(503).body("busy").delay(ms(5)),
                Step::status(200).body("ok"),
            ],
        );
        assert_eq!(api.r("first").await.expect("a token"), "first");
        assert_eq!(api.r("second").await.expect("a token"), "second");
        let ahead = spawn_timed(clock, {
            let api = api.clone();
            async move { api.r("front").await }
        });
        settle().await;
        assert_eq!(front.attempts(), 0, "in line");
        let token = CancellationToken::new();
        let h = api.with_options(options(stop, &token));
        let mut call = Box::pin(h.r("me"));
        let finished = drive(&mut call, k).await;
        let sent = me.attempts();
        let done = finished.is_some();
        match finished {
            Some(out) => {
                assert_eq!(out.expect("the retry succeeds"), "ok");
                assert_eq!(me.dispatch_times(), [ms(200), ms(300)]);
            }
            None => stop_now(call, k, stop, &token),
        }
        assert_eq!(me.in_flight(), 0, "k={k}");
        // The front call, if still in line, is served before the two that join now.
        assert_tokens_exact(
            &routes,
            Bucket {
                interval: 100,
                burst: 2,
            },
            &[&first, &second, &front, &me],
            usize::from(front.attempts() == 0),
            clock,
            &format!("k={k} {stop:?}"),
            |who, options| {
                let h = api.with_options(options);
                async move { h.r(&who).await }
            },
        )
        .await;
        let (r, _) = settled(ahead).await;
        assert_eq!(r.expect("front"), "front");
        assert_eq!(me.attempts(), sent, "k={k}: nothing is sent after the stop");
        routes.assert_idle(&format!("k={k} {stop:?}"));
        done
    })
    .await;
}

// ---------------------------------------------------------------------------------
// The retry budget
// ---------------------------------------------------------------------------------

/// One slot and one queue place; one retry 20 ms after a 503 (`many`: five); 0.7 of
/// a retry earned per call, no floor.
#[resilient_api(
    timeout(attempt = "40ms"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 100, reset = "1s"),
    bulkhead(concurrency = 1, queue = 1)
)]
pub trait Budgeted {
    #[get("/r")]
    async fn r(&self, #[query] who: &str) -> Result<String, ApiError>;

    #[get("/r")]
    #[retry(max = 5)]
    async fn many(&self, #[query] who: &str) -> Result<String, ApiError>;
}

/// Another call holds the only slot until t=10, so the call under test first waits in
/// the queue; then 503 at t=15, its retry (paid for then) at t=35, 200. The budget
/// earns 0.7 of a retry per call that sent its first attempt and loses one per retry
/// sent. Stopped anywhere, the call has deposited only if its first attempt went out,
/// and spent only if its retry did: a later call that keeps failing is retried exactly
/// as many times as the holder's, the stopped call's and its own deposits less what
/// was spent allow, then ends `BudgetExhausted`.
///
/// Found: a call stopped while it waited in the bulkhead's queue for its first
/// attempt had deposited already (the retry loop deposited before that wait), so the
/// later call was retried twice instead of once; so did every call the bulkhead
/// turned away.
#[tokio::test(start_paused = true)]
async fn the_budget_counts_only_attempts_sent_when_stopped_anywhere() {
    every_stop(200, 30, |k, stop| async move {
        let routes = Routed::default();
        let api: BudgetedClient = resilient_api::client::ClientBuilder::<BudgetedClient>::new()
            .base_url("https://example.test")
            .transport(routes.clone())
            .jitter(Jitter::fixed(0.5))
            .retry_budget(Some(resilient_api::retry::budget::BudgetConfig {
                ttl: std::time::Duration::from_secs(10),
                min_per_sec: 0,
                retry_ratio: 0.7,
            }))
            .build()
            .expect("builds");
        let clock = Clock::start();
        routes.route("hold", [Step::status(200).body("held").delay(ms(10))]);
        // (`clock` times the holder.)
        let me = routes.route(
            "me",
            [
                Step::status(503).body("busy").delay(ms(5)),
                Step::status(200).body("ok"),
            ],
        );
        let holder = spawn_timed(clock, {
            let api = api.clone();
            async move { api.r("hold").await }
        });
        settle().await;
        let token = CancellationToken::new();
        let h = api.with_options(options(stop, &token));
        let mut call = Box::pin(h.r("me"));
        let finished = drive(&mut call, k).await;
        let done = finished.is_some();
        match finished {
            Some(out) => {
                assert_eq!(out.expect("the retry succeeds"), "ok");
                assert_eq!(me.dispatch_times(), [ms(10), ms(35)]);
            }
            None => stop_now(call, k, stop, &token),
        }
        let sent = me.attempts();
        assert_eq!(me.in_flight(), 0, "k={k}");
        let (held, _) = settled(holder).await;
        assert_eq!(held.expect("held"), "held");
        // In units of 1/10 000 of a retry. Deposits: the holder's, the stopped call's
        // if it sent its first attempt, and the next call's; spent: the stopped call's
        // retry, if sent.
        let units = 7_000 * (2 + usize::from(sent >= 1)) - 10_000 * usize::from(sent >= 2);
        let retries = units / 10_000;
        let next = routes.route("next", (0..6).map(|_| Step::status(503).body("busy")));
        let e = api.many("next").await.expect_err("it keeps failing");
        assert_eq!(
            (e.kind(), next.attempts()),
            (ErrorKind::BudgetExhausted, retries + 1),
            "k={k} {stop:?}: {sent} sent"
        );
        assert_eq!(me.attempts(), sent, "k={k}: nothing is sent after the stop");
        routes.assert_idle(&format!("k={k} {stop:?}"));
        done
    })
    .await;
}

/// The calls a full bulkhead turns away never send anything, so they earn the budget
/// nothing: with one call holding the slot and one in the queue, four more are
/// refused; a later call that keeps failing is then retried as the three calls that
/// were sent allow (0.7 each: two retries), not as seven would (four).
///
/// Found with the test above: every refused call had deposited before it asked the
/// bulkhead for a slot, so load shed at the bulkhead paid for retries against the
/// same upstream.
#[tokio::test(start_paused = true)]
async fn calls_the_bulkhead_turns_away_earn_the_budget_nothing() {
    let routes = Routed::default();
    let api: BudgetedClient = resilient_api::client::ClientBuilder::<BudgetedClient>::new()
        .base_url("https://example.test")
        .transport(routes.clone())
        .jitter(Jitter::fixed(0.5))
        .retry_budget(Some(resilient_api::retry::budget::BudgetConfig {
            ttl: std::time::Duration::from_secs(10),
            min_per_sec: 0,
            retry_ratio: 0.7,
        }))
        .build()
        .expect("builds");
    let clock = Clock::start();
    routes.route("hold", [Step::status(200).body("held").delay(ms(10))]);
    let queued = routes.route("queued", [Step::status(200).body("queued")]);
    let refused = routes.route("refused", []);
    let holder = spawn_timed(clock, {
        let api = api.clone();
        async move { api.r("hold").await }
    });
    let waiter = spawn_timed(clock, {
        let api = api.clone();
        async move { api.r("queued").await }
    });
    settle().await;
    assert_eq!(queued.attempts(), 0, "in the queue");
    for _ in 0..4 {
        let e = api
            .r("refused")
            .await
            .expect_err("slot and place are taken");
        assert_eq!(e.kind(), ErrorKind::BulkheadFull);
    }
    assert_eq!(refused.attempts(), 0);
    let (held, at) = settled(holder).await;
    assert_eq!((held.expect("held").as_str(), at), ("held", 10));
    let (served, at) = settled(waiter).await;
    assert_eq!((served.expect("queued").as_str(), at), ("queued", 10));
    let next = routes.route("next", (0..6).map(|_| Step::status(503).body("busy")));
    let e = api.many("next").await.expect_err("it keeps failing");
    assert_eq!((e.kind(), next.attempts()), (ErrorKind::BudgetExhausted, 3));
    routes.assert_idle("the end");
}

// ---------------------------------------------------------------------------------
// Coalescing, hedging, a global bulkhead, a streamed body
// ---------------------------------------------------------------------------------

/// After a stop: a bulkhead of `slots` slots and `places` queue places is whole.
/// `slots + places` new calls of 30 ms each (routes `s0`, `s1`, ...): exactly `slots`
/// run at once and the rest wait, a call more is refused at once, and the waiters
/// run in turn. `call` makes the call of a route.
async fn assert_bulkhead_whole<F, Fut>(routes: &Routed, slots: usize, places: usize, call: F)
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Result<String, ApiError>> + Send + 'static,
{
    let clock = Clock::start();
    let n = slots + places;
    let ts: Vec<_> = (0..n)
        .map(|i| {
            routes.route(
                &format!("s{i}"),
                [Step::status(200).body("s").delay(ms(30))],
            )
        })
        .collect();
    let calls: Vec<_> = (0..n)
        .map(|i| spawn_timed(clock, call(format!("s{i}"))))
        .collect();
    settle().await;
    let running: usize = ts.iter().map(ScriptedTransport::attempts).sum();
    assert_eq!(running, slots, "exactly the slots run at once");
    routes.route("over", []);
    let e = call("over".to_owned())
        .await
        .expect_err("slots and places taken");
    assert_eq!(e.kind(), ErrorKind::BulkheadFull, "{e}");
    for (i, c) in calls.into_iter().enumerate() {
        let (r, at) = settled(c).await;
        assert_eq!(r.expect("served").as_str(), "s");
        assert_eq!(at, 30 * (1 + (i / slots) as u64), "s{i} in its turn");
    }
}

/// Two retries' worth: a 503, then a 200 in two chunks; one slot and two places.
#[resilient_api(
    timeout(attempt = "40ms"),
    retry(max = 1, backoff = fixed(delay = "10ms"), on = [503]),
    breaker(failures = 100, reset = "1s"),
    bulkhead(concurrency = 1, queue = 2)
)]
pub trait Coalesced {
    #[get("/r")]
    #[coalesce]
    async fn r(&self, #[query] who: &str) -> Result<String, ApiError>;
}

/// A shared execution: queued behind a call holding the only slot until t=10, a 503
/// at t=15, its retry at t=25, a 200 whose body is whole at t=35. The call under test
/// starts it; with `joined`, an identical call joins it at once and must get its
/// answer at t=35 whatever happens to the first, from exactly two dispatches. Stopped
/// anywhere: when it was the only caller, the shared request is aborted and nothing
/// is sent later; either way the entry is gone (an identical call then dispatches
/// afresh, exactly once), the bulkhead is whole and nothing is left open.
async fn coalesced_stopped(joined: bool) {
    every_stop(200, 30, |k, stop| async move {
        let routes = Routed::default();
        let api: CoalescedClient = client(&routes);
        let clock = Clock::start();
        routes.route("hold", [Step::status(200).body("held").delay(ms(10))]);
        let me = routes.route(
            "me",
            [
                Step::status(503).body("busy").delay(ms(5)),
                Step::status(200).chunks([(ms(5), "o"), (ms(5), "k")]),
            ],
        );
        let holder = spawn_timed(clock, {
            let api = api.clone();
            async move { api.r("hold").await }
        });
        settle().await;
        let token = CancellationToken::new();
        let h = api.with_options(options(stop, &token));
        let mut call = Box::pin(h.r("me"));
        // Polled once first, so that the other caller joins its execution.
        let first = drive(&mut call, k.min(1)).await;
        assert!(first.is_none(), "still queued");
        let other = joined.then(|| {
            spawn_timed(clock, {
                let api = api.clone();
                async move { api.r("me").await }
            })
        });
        // The other call joins before the first can be stopped.
        settle().await;
        let finished = drive(&mut call, k.saturating_sub(1)).await;
        let done = finished.is_some();
        match finished {
            Some(out) => assert_eq!(out.expect("the shared answer"), "ok"),
            None => stop_now(call, k, stop, &token),
        }
        if let Some(other) = other {
            let (r, at) = settled(other).await;
            assert_eq!(
                (r.expect("the other caller's answer").as_str(), at),
                ("ok", 35),
                "k={k} {stop:?}: the other caller is undisturbed"
            );
            assert_eq!(me.dispatch_times(), [ms(10), ms(25)]);
        } else {
            assert_eq!(
                me.in_flight(),
                0,
                "k={k} {stop:?}: the shared request is aborted"
            );
            if done {
                assert_eq!(me.dispatch_times(), [ms(10), ms(25)]);
            }
        }
        let (held, _) = settled(holder).await;
        assert_eq!(held.expect("held"), "held");
        let sent = me.attempts();
        tokio::time::sleep(ms(200)).await;
        assert_eq!(me.attempts(), sent, "k={k} {stop:?}: nothing is sent later");
        routes.assert_idle(&format!("k={k} {stop:?}"));
        // The entry is gone: an identical call is a new execution.
        let again = routes.route("me", [Step::status(200).body("again")]);
        assert_eq!(api.r("me").await.expect("a fresh execution"), "again");
        assert_eq!(again.attempts(), 1);
        assert_bulkhead_whole(&routes, 1, 2, |who| {
            let api = api.clone();
            async move { api.r(&who).await }
        })
        .await;
        routes.assert_idle(&format!("k={k} {stop:?}"));
        done
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_lone_coalesced_caller_stopped_anywhere_leaves_no_entry() {
    coalesced_stopped(false).await;
}

#[tokio::test(start_paused = true)]
async fn a_coalesced_caller_stopped_anywhere_leaves_the_other_undisturbed() {
    coalesced_stopped(true).await;
}

/// A hedge after 10 ms, two branches at most; two slots, one place.
#[resilient_api(
    timeout(attempt = "60ms"),
    retry(max = 1, backoff = fixed(delay = "10ms"), on = [503]),
    breaker(failures = 100, reset = "1s"),
    bulkhead(concurrency = 2, queue = 1)
)]
pub trait Hedged {
    #[get("/r")]
    #[hedge(delay = "10ms", max = 2)]
    async fn r(&self, #[query] who: &str) -> Result<String, ApiError>;
}

/// The primary (sent at t=0) fails with a 503 at t=25; the hedge (sent at t=10) has
/// its head at t=30 and its body whole at t=40, and wins. Stopped anywhere: both
/// requests are aborted, nothing is sent later, the breaker counts the primary's 503
/// only if it came (a round cut short records what had already failed, and a hedge
/// that won counts nothing against it), the bulkhead is whole, and a follow-up works.
#[tokio::test(start_paused = true)]
async fn a_hedged_round_stopped_anywhere_leaves_nothing() {
    every_stop(200, 35, |k, stop| async move {
        let routes = Routed::default();
        let api: HedgedClient = client(&routes);
        let me = routes.route(
            "me",
            [
                Step::status(503).body("busy").delay(ms(25)),
                Step::status(200)
                    .chunks([(ms(5), "o"), (ms(5), "k")])
                    .delay(ms(20)),
            ],
        );
        let token = CancellationToken::new();
        let h = api.with_options(options(stop, &token));
        let mut call = Box::pin(h.r("me"));
        let finished = drive(&mut call, k).await;
        let answered = me.attempts() - me.in_flight();
        let done = finished.is_some();
        match finished {
            Some(out) => {
                assert_eq!(out.expect("the hedge wins"), "ok");
                assert_eq!(me.dispatch_times(), [ms(0), ms(10)]);
            }
            None => stop_now(call, k, stop, &token),
        }
        assert_eq!(
            me.in_flight(),
            0,
            "k={k} {stop:?}: both branches are aborted"
        );
        assert_eq!(me.open_bodies(), 0, "k={k} {stop:?}");
        let sent = me.attempts();
        tokio::time::sleep(ms(200)).await;
        assert_eq!(me.attempts(), sent, "k={k} {stop:?}: nothing is sent later");
        let state = api.circuit_state();
        let failures = u32::from(!done && answered >= 1);
        assert_eq!(
            (
                state.phase,
                state.consecutive_failures,
                state.probes_in_flight
            ),
            (Phase::Closed, failures, 0),
            "k={k} {stop:?}: {answered} answered"
        );
        assert_bulkhead_whole(&routes, 2, 1, |who| {
            let api = api.clone();
            async move { api.r(&who).await }
        })
        .await;
        routes.assert_idle(&format!("k={k} {stop:?}"));
        done
    })
    .await;
}

/// A streamed result, read to its end by the caller; one slot, one place; a total
/// deadline that covers the read.
#[resilient_api(
    timeout(attempt = "30ms", total = "200ms"),
    retry(max = 1, backoff = fixed(delay = "10ms"), on = [503]),
    breaker(failures = 100, reset = "1s"),
    bulkhead(concurrency = 1, queue = 1)
)]
pub trait Streamed {
    #[get("/r")]
    async fn r(&self, #[query] who: &str) -> Result<resilient_api::ResponseStream, ApiError>;

    #[get("/r")]
    async fn plain(&self, #[query] who: &str) -> Result<String, ApiError>;
}

/// A 503 at t=5, the retry at t=15 with its head at t=20 and three chunks 10 ms apart,
/// read whole at t=50, the call and the read being one future. Stopped anywhere (in
/// the call or in the read of its body, which the token covers too), the body is
/// dropped and nothing is in flight, nothing is sent later, the bulkhead is whole.
#[tokio::test(start_paused = true)]
async fn a_streamed_body_stopped_anywhere_is_closed() {
    every_stop(200, 40, |k, stop| async move {
        let routes = Routed::default();
        let api: StreamedClient = client(&routes);
        let me = routes.route(
            "me",
            [
                Step::status(503).body("busy").delay(ms(5)),
                Step::status(200)
                    .chunks([(ms(10), "a"), (ms(10), "b"), (ms(10), "c")])
                    .delay(ms(5)),
            ],
        );
        let token = CancellationToken::new();
        let h = api.with_options(options(stop, &token));
        let mut call = Box::pin(async move { h.r("me").await?.text().await });
        let finished = drive(&mut call, k).await;
        let done = finished.is_some();
        match finished {
            Some(out) => {
                assert_eq!(out.expect("the whole body"), "abc");
                assert_eq!(me.dispatch_times(), [ms(0), ms(15)]);
            }
            None => stop_now(call, k, stop, &token),
        }
        assert_eq!(me.in_flight(), 0, "k={k} {stop:?}");
        assert_eq!(me.open_bodies(), 0, "k={k} {stop:?}: the body is closed");
        let sent = me.attempts();
        tokio::time::sleep(ms(300)).await;
        assert_eq!(me.attempts(), sent, "k={k} {stop:?}: nothing is sent later");
        assert_bulkhead_whole(&routes, 1, 1, |who| {
            let api = api.clone();
            async move { api.plain(&who).await }
        })
        .await;
        routes.assert_idle(&format!("k={k} {stop:?}"));
        done
    })
    .await;
}

/// Two slots per partition, none queued there; the engine's global bulkhead has one
/// slot and one place.
#[resilient_api(
    timeout(attempt = "40ms"),
    retry(max = 1, backoff = fixed(delay = "10ms"), on = [503]),
    breaker(failures = 100, reset = "1s"),
    bulkhead(concurrency = 2, queue = 0)
)]
pub trait Global {
    #[get("/r")]
    async fn r(&self, #[query] who: &str) -> Result<String, ApiError>;
}

/// A call on another client of the same engine holds the one global slot until t=10;
/// the call under test waits in the global queue (holding its partition's slot), then
/// a 503 at t=15, its retry at t=25, a 200. Stopped anywhere: the global slot and
/// place are both back (one call runs, one waits, the next is refused with the global
/// limit), and so is its partition slot.
#[tokio::test(start_paused = true)]
async fn waiting_for_the_global_bulkhead_stops_anywhere() {
    every_stop(200, 25, |k, stop| async move {
        let routes = Routed::default();
        let engine =
            resilient_api::Engine::new().global_bulkhead(resilient_api::bulkhead::BulkheadConfig {
                concurrency: 1,
                queue: 1,
            });
        let build = |host: &str| -> GlobalClient {
            resilient_api::client::ClientBuilder::<GlobalClient>::new()
                .base_url(host)
                .transport(routes.clone())
                .jitter(Jitter::fixed(0.5))
                .engine(engine.clone())
                .build()
                .expect("builds")
        };
        let api = build("https://example.test");
        let neighbour = build("https://other.test");
        let clock = Clock::start();
        routes.route("hold", [Step::status(200).body("held").delay(ms(10))]);
        let me = routes.route(
            "me",
            [
                Step::status(503).body("busy").delay(ms(5)),
                Step::status(200).body("ok"),
            ],
        );
        let holder = spawn_timed(clock, {
            let neighbour = neighbour.clone();
            async move { neighbour.r("hold").await }
        });
        settle().await;
        let token = CancellationToken::new();
        let h = api.with_options(options(stop, &token));
        let mut call = Box::pin(h.r("me"));
        let finished = drive(&mut call, k).await;
        let done = finished.is_some();
        match finished {
            Some(out) => {
                assert_eq!(out.expect("the retry succeeds"), "ok");
                assert_eq!(me.dispatch_times(), [ms(10), ms(25)]);
            }
            None => stop_now(call, k, stop, &token),
        }
        assert_eq!(me.in_flight(), 0, "k={k} {stop:?}");
        let (held, _) = settled(holder).await;
        assert_eq!(held.expect("held"), "held");
        let sent = me.attempts();
        tokio::time::sleep(ms(200)).await;
        assert_eq!(me.attempts(), sent, "k={k} {stop:?}: nothing is sent later");
        // The global slot and place: one runs, one waits, one more is refused.
        assert_bulkhead_whole(&routes, 1, 1, |who| {
            let api = api.clone();
            async move { api.r(&who).await }
        })
        .await;
        // The partition's two slots: two calls at once while the neighbour holds
        // nothing; with the global slot, the second waits in the global queue.
        routes.route("p1", [Step::status(200).body("p").delay(ms(5))]);
        routes.route("p2", [Step::status(200).body("p").delay(ms(5))]);
        let (a, b) = tokio::join!(api.r("p1"), api.r("p2"));
        assert_eq!(
            (a.expect("p1"), b.expect("p2")),
            ("p".to_owned(), "p".to_owned())
        );
        routes.assert_idle(&format!("k={k} {stop:?}"));
        done
    })
    .await;
}

/// A hedge after 10 ms; one token every 50 ms, a burst of one; one retry.
#[resilient_api(
    timeout(attempt = "60ms"),
    retry(max = 1, backoff = fixed(delay = "10ms"), on = [503]),
    breaker(failures = 100, reset = "1s"),
    rate_limit(per_second = 20, burst = 1)
)]
pub trait HedgedLimited {
    #[get("/r")]
    #[hedge(delay = "10ms", max = 2)]
    async fn r(&self, #[query] who: &str) -> Result<String, ApiError>;

    #[get("/r")]
    async fn plain(&self, #[query] who: &str) -> Result<String, ApiError>;
}

/// The primary takes the only token at t=0; the hedge, launched at t=10, waits in
/// the rate limit's line for the token of t=50. The primary fails with a 503 at t=25.
/// With `asks_to_wait` it says `retry-after-ms: 60`: the hedge still in line is
/// withdrawn at once (it must not leave before the server's instant) and the retry
/// takes the token of t=85; otherwise the hedge is sent at t=50 and wins. Stopped
/// anywhere: no branch in flight, nothing sent later, and the bucket holds exactly
/// what the dispatches spent (a branch withdrawn or stopped in line spent nothing).
async fn hedge_in_a_rate_limit_line_stopped(asks_to_wait: bool) {
    every_stop(400, 40, |k, stop| async move {
        let routes = Routed::default();
        let api: HedgedLimitedClient = client(&routes);
        let clock = Clock::start();
        let primary = if asks_to_wait {
            Step::status(503)
                .header("retry-after-ms", "60")
                .body("busy")
                .delay(ms(25))
        } else {
            Step::status(503).body("busy").delay(ms(25))
        };
        let me = routes.route("me", [primary, Step::status(200).body("ok")]);
        let token = CancellationToken::new();
        let h = api.with_options(options(stop, &token));
        let mut call = Box::pin(h.r("me"));
        let finished = drive(&mut call, k).await;
        let done = finished.is_some();
        match finished {
            Some(out) => {
                assert_eq!(out.expect("the second request succeeds"), "ok");
                let second = if asks_to_wait { 85 } else { 50 };
                assert_eq!(me.dispatch_times(), [ms(0), ms(second)]);
            }
            None => stop_now(call, k, stop, &token),
        }
        assert_eq!(me.in_flight(), 0, "k={k} {stop:?}");
        let sent = me.attempts();
        assert_tokens_exact(
            &routes,
            Bucket {
                interval: 50,
                burst: 1,
            },
            &[&me],
            0,
            clock,
            &format!("k={k} {stop:?}"),
            |who, options| {
                let h = api.with_options(options);
                async move { h.plain(&who).await }
            },
        )
        .await;
        assert_eq!(me.attempts(), sent, "k={k} {stop:?}: nothing is sent later");
        routes.assert_idle(&format!("k={k} {stop:?}"));
        done
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_hedge_stopped_in_a_rate_limit_line_spends_nothing() {
    hedge_in_a_rate_limit_line_stopped(false).await;
}

#[tokio::test(start_paused = true)]
async fn a_hedge_withdrawn_from_a_rate_limit_line_spends_nothing() {
    hedge_in_a_rate_limit_line_stopped(true).await;
}

// ---------------------------------------------------------------------------------
// Every policy at once, random scripts
// ---------------------------------------------------------------------------------

/// Every policy at once: retries on 429 and 503 with an exponential backoff, a breaker
/// that two failures trip for 40 ms, two slots and two queue places, a rate limit of
/// one token every 20 ms with a burst of three, attempt and total timeouts; plain,
/// hedged, coalesced and streamed methods on one partition.
#[resilient_api(
    timeout(attempt = "30ms", total = "300ms"),
    retry(max = 3, backoff = exponential(base = "5ms"), on = [429, 503]),
    breaker(failures = 2, reset = "40ms", probes = 1),
    bulkhead(concurrency = 2, queue = 2),
    rate_limit(per_second = 50, burst = 3)
)]
pub trait Everything {
    #[get("/r")]
    async fn plain(&self, #[query] who: &str) -> Result<String, ApiError>;

    #[get("/r")]
    #[hedge(delay = "10ms", max = 2)]
    async fn hedged(&self, #[query] who: &str) -> Result<String, ApiError>;

    #[get("/r")]
    #[coalesce]
    async fn shared(&self, #[query] who: &str) -> Result<String, ApiError>;

    #[get("/r")]
    async fn streamed(&self, #[query] who: &str)
    -> Result<resilient_api::ResponseStream, ApiError>;
}

/// One scripted answer.
#[derive(Clone, Debug)]
enum Answer {
    Ok(u64),
    Chunked(u64, u64),
    Status(u16, u64),
    RetryAfterMs(u64, u64),
    Reset,
    ConnectError,
    Hang,
    Cut,
    /// A 302 back to the same route, after `.0` ms.
    Redirect(u64),
}

impl Answer {
    fn step(&self) -> Step {
        match *self {
            Answer::Ok(d) => Step::status(200).body("ok").delay(ms(d)),
            Answer::Chunked(d, gap) => Step::status(200)
                .chunks([(ms(gap), "o"), (ms(gap), "k")])
                .delay(ms(d)),
            Answer::Status(s, d) => Step::status(s).body("no").delay(ms(d)),
            Answer::RetryAfterMs(wait, d) => Step::status(503)
                .header("retry-after-ms", &wait.to_string())
                .body("wait")
                .delay(ms(d)),
            Answer::Reset => Step::reset(),
            Answer::ConnectError => Step::connect_error(),
            Answer::Hang => Step::hang(),
            Answer::Cut => Step::status(200).chunks([(ms(3), "o")]).cut_after(ms(5)),
            Answer::Redirect(d) => Step::status(302)
                .header("location", "/r?who=me")
                .delay(ms(d)),
        }
    }
}

fn answer() -> impl proptest::strategy::Strategy<Value = Answer> {
    use proptest::prelude::*;
    prop_oneof![
        (0..25u64).prop_map(Answer::Ok),
        (0..15u64, 0..10u64).prop_map(|(d, g)| Answer::Chunked(d, g)),
        (
            prop_oneof![Just(429u16), Just(503), Just(500), Just(404)],
            0..25u64
        )
            .prop_map(|(s, d)| Answer::Status(s, d)),
        (prop_oneof![Just(0u64), Just(15)], 0..10u64).prop_map(|(w, d)| Answer::RetryAfterMs(w, d)),
        Just(Answer::Reset),
        Just(Answer::ConnectError),
        Just(Answer::Hang),
        Just(Answer::Cut),
        (0..10u64).prop_map(Answer::Redirect),
    ]
}

/// Which method the call under test uses.
#[derive(Clone, Copy, Debug)]
enum Method {
    Plain,
    Hedged,
    Shared,
    Streamed,
}

/// The call under test, of `method`, on `h`, as one future (a streamed body read to
/// its end).
fn call_of(
    h: EverythingClient,
    method: Method,
) -> Pin<Box<dyn Future<Output = Result<String, ApiError>> + Send>> {
    match method {
        Method::Plain => Box::pin(async move { h.plain("me").await }),
        Method::Hedged => Box::pin(async move { h.hedged("me").await }),
        Method::Shared => Box::pin(async move { h.shared("me").await }),
        Method::Streamed => Box::pin(async move { h.streamed("me").await?.text().await }),
    }
}

/// One random case: `holders` calls of 20 ms start first, then the call under test
/// answered by `script` (then 200s), stopped after `k` polls as `stop` says. After
/// it: nothing of it in flight or open, nothing sent later; if the breaker is closed
/// and nothing else runs, the bucket holds exactly what the dispatches spent; no
/// probe slot is held; once healed, the bulkhead is whole and a call succeeds.
async fn everything_case(
    method: Method,
    script: Vec<Answer>,
    holders: usize,
    joined: bool,
    k: usize,
    stop: Stop,
) {
    let routes = Routed::default();
    let api: EverythingClient = client(&routes);
    let clock = Clock::start();
    let mut steps: Vec<Step> = script.iter().map(Answer::step).collect();
    steps.extend((0..8).map(|_| Step::status(200).body("ok")));
    let me = routes.route("me", steps);
    let held: Vec<_> = (0..holders)
        .map(|i| {
            let who = format!("hold{i}");
            let t = routes.route(&who, [Step::status(200).body("held").delay(ms(20))]);
            let api = api.clone();
            (t, spawn_timed(clock, async move { api.plain(&who).await }))
        })
        .collect();
    settle().await;
    let token = CancellationToken::new();
    let h = api.with_options(options(stop, &token));
    let mut call = call_of(h, method);
    // With `joined`, an identical call (of the same method) starts after the first
    // poll and runs on its own task: coalesced, it joins the execution.
    let mut other = None;
    let mut finished = drive(&mut call, k.min(1)).await.is_some();
    if joined && !finished {
        other = Some(tokio::spawn(call_of(api.clone(), method)));
        settle().await;
    }
    if !finished {
        finished = drive(&mut call, k.saturating_sub(1)).await.is_some();
    }
    if !finished {
        stop_now(call, k, stop, &token);
    }
    let what = format!("k={k} {stop:?} {method:?} {script:?} holders={holders} joined={joined}");
    if let Some(other) = other {
        // It ends on its own, whatever happened to the first.
        let _ = settled(other).await;
    }
    assert_eq!(me.in_flight(), 0, "{what}: in flight after the stop");
    assert_eq!(me.open_bodies(), 0, "{what}: a body open after the stop");
    let state = api.circuit_state();
    assert_eq!(state.probes_in_flight, 0, "{what}: a probe slot is held");
    let others_idle = held.iter().all(|(t, _)| t.in_flight() == 0);
    if state.phase == Phase::Closed && others_idle {
        let mut spent: Vec<&ScriptedTransport> = vec![&me];
        spent.extend(held.iter().map(|(t, _)| t));
        assert_tokens_exact(
            &routes,
            Bucket {
                interval: 20,
                burst: 3,
            },
            &spent,
            0,
            clock,
            &what,
            |who, options| {
                let h = api.with_options(options);
                async move { h.plain(&who).await }
            },
        )
        .await;
    }
    for (_, holder) in held {
        let (r, _) = settled(holder).await;
        assert_eq!(r.expect("a holder").as_str(), "held", "{what}");
    }
    let sent = me.attempts();
    tokio::time::sleep(ms(300)).await;
    assert_eq!(me.attempts(), sent, "{what}: sent after the stop");
    if api.circuit_state().phase != Phase::Closed {
        routes.route("heal", [Step::status(200).body("ok")]);
        assert_eq!(api.plain("heal").await.expect("the probe heals it"), "ok");
    }
    assert_eq!(api.circuit_state().phase, Phase::Closed, "{what}");
    // The bucket full again, so that only the bulkhead orders the calls below.
    tokio::time::sleep(ms(100)).await;
    assert_bulkhead_whole(&routes, 2, 2, |who| {
        let api = api.clone();
        async move { api.plain(&who).await }
    })
    .await;
    routes.assert_idle(&what);
}

proptest::proptest! {
    #![proptest_config(tests::proptest_config!(256, "drop_anywhere"))]

    /// Random scripts, methods and stopping points against every policy at once.
    #[test]
    fn every_policy_at_once_stopped_anywhere(
        method in proptest::prop_oneof![
            proptest::strategy::Just(Method::Plain),
            proptest::strategy::Just(Method::Hedged),
            proptest::strategy::Just(Method::Shared),
            proptest::strategy::Just(Method::Streamed),
        ],
        script in proptest::collection::vec(answer(), 1..5),
        holders in 0..3usize,
        joined in proptest::bool::ANY,
        k in 0..160usize,
        cancel in proptest::bool::ANY,
    ) {
        let stop = if cancel { Stop::Cancel } else { Stop::Drop };
        tests::case_runtime(true)
            .block_on(everything_case(method, script, holders, joined, k, stop));
    }
}

// ---------------------------------------------------------------------------------
// A shared execution as a half-open breaker's probe
// ---------------------------------------------------------------------------------

/// One failure trips the breaker for 50 ms; half-open, one probe; coalesced reads.
#[resilient_api(
    timeout(attempt = "40ms"),
    retry(max = 1, backoff = fixed(delay = "10ms"), on = [503]),
    breaker(failures = 1, reset = "50ms", probes = 1)
)]
pub trait SharedProbe {
    #[get("/r")]
    #[coalesce]
    async fn r(&self, #[query] who: &str) -> Result<String, ApiError>;
}

/// The call under test starts a shared execution that is a half-open breaker's probe
/// (a 200 at +10 whose body is whole at +20); with `joined`, an identical call joins
/// it after its first poll (half-open with the slot taken, it may join, not probe).
/// Stopped anywhere: alone, the probe is aborted and counts as nothing (still
/// half-open in the same generation, no probe out); joined, the other caller still
/// gets the probe's answer, which closes the breaker. Either way the next call works.
async fn shared_probe_stopped(joined: bool) {
    every_stop(200, 15, |k, stop| async move {
        let routes = Routed::default();
        let api: SharedProbeClient = client(&routes);
        let clock = Clock::start();
        routes.route("trip", [Step::status(503).body("down")]);
        let e = api.r("trip").await.expect_err("tripped");
        assert_eq!(e.kind(), ErrorKind::CircuitOpen);
        tokio::time::sleep(ms(50)).await;
        let half_open = api.circuit_state();
        assert_eq!(half_open.phase, Phase::HalfOpen);
        let me = routes.route(
            "me",
            [Step::status(200)
                .chunks([(ms(5), "o"), (ms(5), "k")])
                .delay(ms(10))],
        );
        let token = CancellationToken::new();
        let h = api.with_options(options(stop, &token));
        let mut call = Box::pin(h.r("me"));
        let mut finished = drive(&mut call, k.min(1)).await;
        let other = (joined && finished.is_none()).then(|| {
            spawn_timed(clock, {
                let api = api.clone();
                async move { api.r("me").await }
            })
        });
        // The other call joins before the first can be stopped.
        settle().await;
        if finished.is_none() {
            finished = drive(&mut call, k.saturating_sub(1)).await;
        }
        let done = finished.is_some();
        match finished {
            Some(out) => assert_eq!(out.expect("the probe succeeds"), "ok"),
            None => stop_now(call, k, stop, &token),
        }
        match other {
            Some(other) => {
                let (r, at) = settled(other).await;
                assert_eq!(
                    (r.expect("the probe's answer").as_str(), at),
                    ("ok", 70),
                    "k={k} {stop:?}"
                );
                assert_eq!(me.attempts(), 1, "k={k} {stop:?}: one probe for both");
                assert_eq!(api.circuit_state().phase, Phase::Closed);
            }
            None if !done && k > 0 => {
                let state = api.circuit_state();
                assert_eq!(
                    (state.phase, state.generation, state.probes_in_flight),
                    (Phase::HalfOpen, half_open.generation, 0),
                    "k={k} {stop:?}: a stopped probe counts as nothing"
                );
            }
            None => {}
        }
        assert_eq!(me.in_flight(), 0, "k={k} {stop:?}");
        assert_eq!(me.open_bodies(), 0, "k={k} {stop:?}");
        let sent = me.attempts();
        tokio::time::sleep(ms(200)).await;
        assert_eq!(me.attempts(), sent, "k={k} {stop:?}: nothing is sent later");
        routes.route("next", [Step::status(200).body("ok")]);
        assert_eq!(api.r("next").await.expect("the next call"), "ok");
        assert_eq!(api.circuit_state().phase, Phase::Closed);
        routes.assert_idle(&format!("k={k} {stop:?}"));
        done
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_lone_shared_probe_stopped_anywhere_counts_as_nothing() {
    shared_probe_stopped(false).await;
}

#[tokio::test(start_paused = true)]
async fn a_shared_probe_whose_first_caller_stops_still_answers_the_other() {
    shared_probe_stopped(true).await;
}
