//! The isolation policies on multi-threaded runtimes and the real clock, where every
//! other scenario runs on one thread: the bulkheads (partition and global), the
//! breaker's half-open probes, counts and stale outcomes, coalescing, the rate limiter
//! and retries through a small bulkhead, from several workers or OS threads at once.
//!
//! What is asserted never depends on how the threads are scheduled: invariants (never
//! more inside than the limit, every permit back, every caller answered, exact counts
//! where the rules fix them) and lower bounds of time, never an exact instant. Waits
//! for a state are bounded by generous timeouts, so a hang fails instead of blocking.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use resilient_api::bulkhead::BulkheadConfig;
use resilient_api::circuit_breaker::state::Phase;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::transport::{HttpRequest, SendFuture, Transport};
use resilient_api::{
    ApiError, CallOptions, CancellationToken, Engine, ErrorKind, Jitter, resilient_api,
};
use tests::{assert_nothing_leaked, ms};

/// Counts attempts inside the transport at once (and the peak); `/hold` never answers.
#[derive(Clone)]
struct Probe(Arc<ProbeInner>);

struct ProbeInner {
    inner: ScriptedTransport,
    now: AtomicUsize,
    peak: AtomicUsize,
    held: AtomicUsize,
}

struct Inside(Arc<ProbeInner>);
impl Drop for Inside {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Probe {
    fn new(t: &ScriptedTransport) -> Self {
        Probe(Arc::new(ProbeInner {
            inner: t.clone(),
            now: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            held: AtomicUsize::new(0),
        }))
    }
    fn peak(&self) -> usize {
        self.0.peak.load(Ordering::SeqCst)
    }
    fn held(&self) -> usize {
        self.0.held.load(Ordering::SeqCst)
    }
    fn inside(&self) -> usize {
        self.0.now.load(Ordering::SeqCst)
    }
}

impl Transport for Probe {
    fn send(&self, request: HttpRequest) -> SendFuture {
        let n = self.0.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.0.peak.fetch_max(n, Ordering::SeqCst);
        let guard = Inside(self.0.clone());
        if request.url.path().ends_with("/hold") {
            self.0.held.fetch_add(1, Ordering::SeqCst);
            return Box::pin(async move {
                let _g = guard;
                std::future::pending().await
            });
        }
        let fut = self.0.inner.send(request);
        Box::pin(async move {
            let _g = guard;
            fut.await
        })
    }
}

async fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let end = tokio::time::Instant::now() + limit;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < end,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(ms(2)).await;
    }
}

fn kind<T>(r: &Result<T, ApiError>) -> Option<ErrorKind> {
    r.as_ref().err().map(ApiError::kind)
}

// ---------------------------------------------------------------- bulkhead

/// Three slots and a long queue; `/hold` never answers.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    bulkhead(concurrency = 3, queue = 1000)
)]
pub trait Bh {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
    #[get("/hold")]
    async fn hold(&self) -> Result<String, ApiError>;
}

fn bh(p: &Probe) -> BhClient {
    BhClient::builder()
        .base_url("https://example.test")
        .transport(p.clone())
        .jitter(Jitter::fixed(0.5))
        .build()
        .expect("builds")
}

/// Of `n + 1` hanging calls, exactly `n` are dispatched (every permit is back, and no
/// more than the limit), then all are dropped; nothing is left in flight.
async fn burst_dispatches_all(p: &Probe, n: usize, call: impl Fn() -> tokio::task::JoinHandle<()>) {
    let before = p.held();
    let tasks: Vec<_> = (0..=n).map(|_| call()).collect();
    wait_for("every permit back", Duration::from_secs(3), || {
        p.held() == before + n
    })
    .await;
    tokio::time::sleep(ms(30)).await;
    assert_eq!(p.held(), before + n, "more than the limit dispatched");
    for t in &tasks {
        t.abort();
    }
    for t in tasks {
        let _ = t.await;
    }
    wait_for("nothing inside", Duration::from_secs(1), || p.inside() == 0).await;
}

/// Partition bulkhead (3 slots) under 4 workers, 300 calls, a third of them
/// abandoned at random points by a short timeout: never more than 3 inside, all
/// complete, nothing leaks, and afterwards 3 (not 2, not 4) hanging calls dispatch.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn partition_bulkhead_under_threads() {
    let t = ScriptedTransport::new((0..300).map(|_| Step::status(200).body("ok").delay(ms(1))));
    let p = Probe::new(&t);
    let api = bh(&p);
    let mut tasks = Vec::new();
    for i in 0..300u64 {
        let api = api.clone();
        tasks.push(tokio::spawn(async move {
            if i % 3 == 0 {
                tokio::time::timeout(Duration::from_micros(500 + (i % 7) * 300), api.r())
                    .await
                    .ok()
            } else {
                Some(api.r().await)
            }
        }));
    }
    for (i, task) in tasks.into_iter().enumerate() {
        let ended = tokio::time::timeout(Duration::from_secs(20), task)
            .await
            .expect("a call hung")
            .expect("no panic");
        match ended {
            Some(result) => assert_eq!(result.expect("answered").as_str(), "ok", "call {i}"),
            None => assert_eq!(i % 3, 0, "call {i} was not abandoned but did not end"),
        }
    }
    assert!(p.peak() <= 3, "peak {}", p.peak());
    assert_nothing_leaked(&t);
    let a = api.clone();
    burst_dispatches_all(&p, 3, move || {
        let a = a.clone();
        tokio::spawn(async move {
            let _ = a.hold().await;
        })
    })
    .await;
    assert_eq!(p.peak(), 3);
}

/// Two slots of its own per client, under a global bulkhead of two.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    bulkhead(concurrency = 2, queue = 1000)
)]
pub trait Gb {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
    #[get("/hold")]
    async fn hold(&self) -> Result<String, ApiError>;
}

/// Global bulkhead of 2 shared by 3 clients (each with 2 partition slots), from OS
/// threads each with its own runtime: never more than 2 inside, every permit back.
#[test]
fn global_bulkhead_across_os_threads() {
    let t = ScriptedTransport::new((0..600).map(|_| Step::status(200).body("ok").delay(ms(1))));
    let p = Probe::new(&t);
    let eng = Engine::new().global_bulkhead(BulkheadConfig::new(2, 1000));
    let clients: Vec<GbClient> = ["https://a.test", "https://b.test", "https://c.test"]
        .iter()
        .map(|h| {
            GbClient::builder()
                .base_url(*h)
                .transport(p.clone())
                .engine(eng.clone())
                .jitter(Jitter::fixed(0.5))
                .build()
                .expect("builds")
        })
        .collect();
    let threads: Vec<_> = (0..4)
        .map(|th| {
            let clients = clients.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_time()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    let mut tasks = Vec::new();
                    for i in 0..150u64 {
                        let c = clients[(th + i as usize) % 3].clone();
                        tasks.push(tokio::spawn(async move {
                            if i % 4 == 0 {
                                let _ = tokio::time::timeout(
                                    Duration::from_micros(300 + (i % 5) * 400),
                                    c.r(),
                                )
                                .await;
                            } else {
                                assert_eq!(c.r().await.expect("ok"), "ok");
                            }
                        }));
                    }
                    for task in tasks {
                        tokio::time::timeout(Duration::from_secs(30), task)
                            .await
                            .expect("a call hung")
                            .expect("no panic");
                    }
                })
            })
        })
        .collect();
    for th in threads {
        th.join().expect("thread");
    }
    assert!(p.peak() <= 2, "peak {}", p.peak());
    assert_nothing_leaked(&t);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let cs = clients.clone();
        let k = AtomicUsize::new(0);
        burst_dispatches_all(&p, 2, move || {
            let c = cs[k.fetch_add(1, Ordering::SeqCst) % 3].clone();
            tokio::spawn(async move {
                let _ = c.hold().await;
            })
        })
        .await;
    });
    assert_eq!(p.peak(), 2);
}

// ---------------------------------------------------------------- breaker

/// One failure trips it for 50 ms; two probes.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 1, reset = "50ms", probes = 2)
)]
pub trait Half {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
    #[get("/hold")]
    async fn hold(&self) -> Result<String, ApiError>;
}

/// Half-open with probes = 2: 24 calls from 4 workers at once; exactly 2 are
/// dispatched (they hang), the other 22 are refused with CircuitOpen. Dropping the two
/// probes gives both slots back. Five rounds, each on a breaker of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn half_open_admits_exactly_probes_across_threads() {
    for _round in 0..5 {
        let t = ScriptedTransport::new([Step::status(503)]);
        let p = Probe::new(&t);
        let api = HalfClient::builder()
            .base_url("https://example.test")
            .transport(p.clone())
            .jitter(Jitter::fixed(0.5))
            .build()
            .unwrap();
        assert_eq!(kind(&api.r().await), Some(ErrorKind::Status));
        assert_eq!(api.circuit_state().phase, Phase::Open);
        tokio::time::sleep(ms(70)).await;
        let start = Arc::new(tokio::sync::Barrier::new(24));
        let tasks: Vec<_> = (0..24)
            .map(|_| {
                let a = api.clone();
                let s = start.clone();
                tokio::spawn(async move {
                    s.wait().await;
                    a.hold().await
                })
            })
            .collect();
        wait_for("2 probes", Duration::from_secs(5), || p.held() >= 2).await;
        wait_for("22 refusals", Duration::from_secs(5), || {
            tasks.iter().filter(|t| t.is_finished()).count() >= 22
        })
        .await;
        let mut still = Vec::new();
        let mut refused = 0;
        for task in tasks {
            if task.is_finished() {
                let r = task.await.expect("no panic");
                assert_eq!(kind(&r), Some(ErrorKind::CircuitOpen));
                refused += 1;
            } else {
                still.push(task);
            }
        }
        assert_eq!(p.held(), 2);
        assert_eq!((still.len(), refused), (2, 22));
        let s = api.circuit_state();
        assert_eq!((s.phase, s.probes_in_flight), (Phase::HalfOpen, 2));
        for task in &still {
            task.abort();
        }
        for task in still {
            let _ = task.await;
        }
        let s = api.circuit_state();
        assert_eq!((s.phase, s.probes_in_flight), (Phase::HalfOpen, 0));
        assert_eq!(p.inside(), 0);
    }
}

/// A breaker that counts 2,000 failures without tripping.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 5000, reset = "1s")
)]
pub trait Many {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
}

/// A failure-rate breaker whose window holds 4,000 calls without tripping.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failure_rate = 0.99, window = "30s", min_calls = 5000, reset = "1s")
)]
pub trait Rate {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
}

/// 2000 concurrent failures (and, in rate mode, 2000 + 2000 successes) from 4
/// workers: every one is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn breaker_counts_every_concurrent_outcome() {
    let t = ScriptedTransport::new((0..2000).map(|_| Step::status(503)));
    let api: ManyClient = tests::scripted(&t);
    let tasks: Vec<_> = (0..2000)
        .map(|_| {
            let a = api.clone();
            tokio::spawn(async move { a.r().await })
        })
        .collect();
    for task in tasks {
        assert_eq!(kind(&task.await.unwrap()), Some(ErrorKind::Status));
    }
    let s = api.circuit_state();
    assert_eq!((s.phase, s.consecutive_failures), (Phase::Closed, 2000));

    let t = ScriptedTransport::new((0..4000).map(|i| {
        if i % 2 == 0 {
            Step::status(503)
        } else {
            Step::status(200).body("ok")
        }
    }));
    let api: RateClient = tests::scripted(&t);
    let tasks: Vec<_> = (0..4000)
        .map(|_| {
            let a = api.clone();
            tokio::spawn(async move { a.r().await })
        })
        .collect();
    for task in tasks {
        let _ = task.await.unwrap();
    }
    let s = api.circuit_state();
    assert_eq!((s.calls_in_window, s.failures_in_window), (4000, 2000));
}

// ---------------------------------------------------------------- coalescing

/// Coalesced.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Co {
    #[get("/c")]
    #[coalesce]
    async fn c(&self) -> Result<String, ApiError>;
}

/// 4 workers × 300 coalesced calls, some abandoned by a short timeout: every caller
/// that waits gets a value, and callers sharing an execution all started before any
/// of them ended (a finished execution is never handed to a later call).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn coalesce_never_serves_a_finished_execution() {
    const N: usize = 1200;
    let t = ScriptedTransport::new((0..N).map(|i| {
        Step::status(200)
            .body(i.to_string())
            .delay(Duration::from_micros(300))
    }));
    let api: CoClient = tests::scripted(&t);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let api = api.clone();
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut inner = Vec::new();
                for i in 0..(N / 4) {
                    let api = api.clone();
                    let seen = seen.clone();
                    inner.push(tokio::spawn(async move {
                        let started = tokio::time::Instant::now();
                        if (i + w) % 5 == 0 {
                            let _ = tokio::time::timeout(Duration::from_micros(200), api.c()).await;
                            return;
                        }
                        let r = api.c().await;
                        let ended = tokio::time::Instant::now();
                        let body = r.expect("every caller gets a value");
                        seen.lock().unwrap().push((body, started, ended));
                    }));
                    if i % 8 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
                for x in inner {
                    x.await.unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        tokio::time::timeout(Duration::from_secs(20), w)
            .await
            .expect("hung")
            .unwrap();
    }
    let seen = seen.lock().unwrap();
    let mut by: std::collections::HashMap<String, (tokio::time::Instant, tokio::time::Instant)> =
        Default::default();
    for (b, s, e) in seen.iter() {
        let x = by.entry(b.clone()).or_insert((*s, *e));
        x.0 = x.0.max(*s);
        x.1 = x.1.min(*e);
    }
    for (b, (last_start, first_end)) in &by {
        assert!(
            last_start < first_end,
            "execution {b} served a caller that started after it ended"
        );
    }
    assert_nothing_leaked(&t);
}

// ---------------------------------------------------------------- rate limit

/// 100 tokens a second, a burst of 5.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    rate_limit(per_second = 100, burst = 5)
)]
pub trait Rl {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
}

/// 60 calls at once from 4 workers, 100/s with a burst of 5: the last dispatch is at
/// least (60 - 5) × 10 ms after the start, and no 6 dispatches fall within 50 ms - 5 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rate_limit_holds_across_threads() {
    let t = ScriptedTransport::new((0..60).map(|_| Step::status(200).body("ok")));
    let api: RlClient = tests::scripted(&t);
    let start = tokio::time::Instant::now();
    let tasks: Vec<_> = (0..60)
        .map(|_| {
            let a = api.clone();
            tokio::spawn(async move { a.r().await })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap().expect("ok"), "ok");
    }
    assert!(start.elapsed() >= ms(545), "{:?}", start.elapsed());
    let times = t.dispatch_times();
    assert_eq!(times.len(), 60);
    let mut sorted = times.clone();
    sorted.sort();
    // GCRA: 5 + k dispatches span at least k intervals (less 3 ms of clock slop).
    for k in 1..=20usize {
        for w in sorted.windows(5 + k) {
            let span = w[4 + k] - w[0];
            assert!(
                span + ms(3) >= ms(10) * k as u32,
                "{} dispatches within {span:?}",
                5 + k
            );
        }
    }
}

// ---------------------------------------------------------------- stale outcomes

/// One failure trips it for 30 ms; one probe.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 1, reset = "30ms", probes = 1)
)]
pub trait Stale {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
}

/// 10 calls admitted while closed fail late (at 1 s), on 4 workers at once, after the
/// breaker tripped (t≈0), half-opened and closed again on a probe (t≈60 ms): their
/// failures are stale and change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stale_failures_across_threads_change_nothing() {
    let mut steps: Vec<Step> = (0..10)
        .map(|_| Step::status(503).delay(ms(1_000)))
        .collect();
    steps.push(Step::status(503));
    steps.push(Step::status(200).body("ok"));
    let t = ScriptedTransport::new(steps);
    let api: StaleClient = tests::scripted(&t);
    let slow: Vec<_> = (0..10)
        .map(|_| {
            let a = api.clone();
            tokio::spawn(async move { a.r().await })
        })
        .collect();
    wait_for("10 slow", Duration::from_secs(1), || t.attempts() == 10).await;
    assert_eq!(kind(&api.r().await), Some(ErrorKind::Status));
    assert_eq!(api.circuit_state().phase, Phase::Open);
    tokio::time::sleep(ms(60)).await;
    assert_eq!(api.r().await.expect("probe"), "ok");
    let closed = api.circuit_state();
    assert_eq!(closed.phase, Phase::Closed);
    for s in slow {
        assert_eq!(kind(&s.await.unwrap()), Some(ErrorKind::Status));
    }
    let s = api.circuit_state();
    assert_eq!(
        (s.phase, s.consecutive_failures, s.generation),
        (Phase::Closed, 0, closed.generation)
    );
    assert_nothing_leaked(&t);
}

// ---------------------------------------------------------------- coalesce half-open

/// Coalesced; one failure trips it for 30 ms; one probe.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    breaker(failures = 1, reset = "30ms", probes = 1)
)]
pub trait CoHalf {
    #[get("/c")]
    #[coalesce]
    async fn c(&self) -> Result<String, ApiError>;
}

/// Half-open, probes = 1: 20 identical coalesced calls at once on 4 workers share the
/// one probe (it answers after 500 ms, time for all to join): exactly 1 dispatch,
/// every caller gets "ok", and the breaker closes. Three rounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn coalesced_callers_share_the_one_probe() {
    for _ in 0..3 {
        let t = ScriptedTransport::new([
            Step::status(503),
            Step::status(200).body("ok").delay(ms(500)),
        ]);
        let api: CoHalfClient = tests::scripted(&t);
        assert_eq!(kind(&api.c().await), Some(ErrorKind::Status));
        tokio::time::sleep(ms(50)).await;
        let b = Arc::new(tokio::sync::Barrier::new(20));
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let a = api.clone();
                let b = b.clone();
                tokio::spawn(async move {
                    b.wait().await;
                    a.c().await
                })
            })
            .collect();
        for task in tasks {
            assert_eq!(task.await.unwrap().expect("shares the probe"), "ok");
        }
        assert_eq!(t.attempts(), 2);
        assert_eq!(api.circuit_state().phase, Phase::Closed);
        assert_nothing_leaked(&t);
    }
}

// ---------------------------------------------------------------- retries through the bulkhead

/// Three retries on 503 through two slots and a queue of three.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 3, backoff = fixed(delay = "1ms"), on = [503]),
    breaker(failures = 100000, reset = "1s"),
    bulkhead(concurrency = 2, queue = 3)
)]
pub trait Rb {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
    #[get("/hold")]
    async fn hold(&self) -> Result<String, ApiError>;
}

/// 400 calls on 4 workers, alternating 503 and 200, retried through a 2 + 3 bulkhead
/// (retries queue again, some are turned away): never 3 inside, every call ends, the
/// budget's refunds and the permits all come back (2 hanging calls dispatch after).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retries_through_a_small_bulkhead() {
    let t = ScriptedTransport::new((0..4000).map(|i| {
        if i % 2 == 0 {
            Step::status(503).delay(Duration::from_micros(200))
        } else {
            Step::status(200)
                .body("ok")
                .delay(Duration::from_micros(200))
        }
    }));
    let p = Probe::new(&t);
    let api = RbClient::builder()
        .base_url("https://example.test")
        .transport(p.clone())
        .jitter(Jitter::fixed(0.5))
        .build()
        .unwrap();
    let tasks: Vec<_> = (0..400)
        .map(|i| {
            let a = api.clone();
            tokio::spawn(async move {
                if i % 5 == 0 {
                    let _ = tokio::time::timeout(Duration::from_micros(700), a.r()).await;
                    None
                } else {
                    Some(a.r().await)
                }
            })
        })
        .collect();
    for task in tasks {
        if let Some(Err(e)) = tokio::time::timeout(Duration::from_secs(20), task)
            .await
            .expect("hung")
            .unwrap()
        {
            assert!(
                matches!(
                    e.kind(),
                    ErrorKind::BulkheadFull | ErrorKind::Status | ErrorKind::BudgetExhausted
                ),
                "{e}"
            );
        }
    }
    assert!(p.peak() <= 2, "peak {}", p.peak());
    assert_nothing_leaked(&t);
    let a = api.clone();
    burst_dispatches_all(&p, 2, move || {
        let a = a.clone();
        tokio::spawn(async move {
            let _ = a.hold().await;
        })
    })
    .await;
    assert_eq!(p.peak(), 2);
}

/// The last caller of a shared execution cancelled (from another OS thread) just as
/// a new identical call starts: the new call always gets its answer, whether it
/// joined the old execution or started a fresh one; nothing leaks.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn coalesce_joiner_racing_the_last_leaver() {
    for i in 0..150 {
        let t = ScriptedTransport::new([
            Step::status(200).body("ok").delay(ms(4)),
            Step::status(200).body("ok").delay(ms(4)),
        ]);
        let api: CoClient = tests::scripted(&t);
        let token = CancellationToken::new();
        let a = {
            let h = api.with_options(CallOptions::new().cancel_on(token.clone()));
            tokio::spawn(async move { h.c().await })
        };
        wait_for("A dispatched", Duration::from_secs(1), || t.attempts() == 1).await;
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let canceller = {
            let b = barrier.clone();
            let spin = i % 20;
            std::thread::spawn(move || {
                b.wait();
                for _ in 0..spin * 50 {
                    std::hint::spin_loop();
                }
                token.cancel();
            })
        };
        let b = {
            let api = api.clone();
            let barrier = barrier.clone();
            tokio::spawn(async move {
                tokio::task::spawn_blocking(move || barrier.wait())
                    .await
                    .unwrap();
                api.c().await
            })
        };
        canceller.join().unwrap();
        let rb = tokio::time::timeout(Duration::from_secs(2), b)
            .await
            .expect("B hung")
            .unwrap();
        assert_eq!(rb.expect("B gets its answer"), "ok");
        let ra = a.await.unwrap();
        assert!(ra.is_ok() || kind(&ra) == Some(ErrorKind::Cancelled));
        wait_for("nothing in flight", Duration::from_secs(1), || {
            t.in_flight() == 0
        })
        .await;
        assert_nothing_leaked(&t);
    }
}
