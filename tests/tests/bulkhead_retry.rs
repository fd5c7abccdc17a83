//! S18 bulkhead_retry: a backoff holds no bulkhead slot.
//!
//! Concurrency 1, queue 1. Call A (`GET /a`) gets a 503 at t=0 and retries after a
//! fixed 100 ms; call B (`GET /b`, same client, same default partition) arrives at
//! t=1 and runs during A's backoff. Dispatch order A, B, A; never two attempts at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, resilient_api};
use tests::{Clock, assert_follow_up_succeeds, ms, scripted, settle, spawn_timed};
use tokio::task::JoinHandle;

/// Two endpoints sharing the default partition (and its bulkhead).
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 1, backoff = fixed(delay = "100ms"), on = [503]),
    bulkhead(concurrency = 1, queue = 1)
)]
pub trait Pair {
    #[get("/a")]
    async fn a(&self) -> Result<String, ApiError>;
    #[get("/b")]
    async fn b(&self) -> Result<String, ApiError>;
}

/// Samples the transport every millisecond and keeps the highest `in_flight` seen.
struct Sampler {
    max: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl Sampler {
    fn start(t: &ScriptedTransport) -> Self {
        let (max, stop) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (t, m, s) = (t.clone(), max.clone(), stop.clone());
        let task = tokio::spawn(async move {
            while !s.load(Ordering::SeqCst) {
                m.fetch_max(t.in_flight(), Ordering::SeqCst);
                tokio::task::yield_now().await;
                m.fetch_max(t.in_flight(), Ordering::SeqCst);
                tokio::time::sleep(ms(1)).await;
            }
        });
        Sampler { max, stop, task }
    }

    async fn finish(self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.expect("the sampler ends cleanly");
        self.max.load(Ordering::SeqCst)
    }
}

fn paths(t: &ScriptedTransport) -> Vec<String> {
    t.requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.url))
        .collect()
}

const A: &str = "GET https://example.test/a";
const B: &str = "GET https://example.test/b";

/// B answers in 10 ms, well inside A's backoff.
#[tokio::test(start_paused = true)]
async fn s18_bulkhead_retry() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        Step::status(200).body("b").delay(ms(10)),
        Step::status(200).body("a"),
    ]);
    let clock = Clock::start();
    let api = scripted::<PairClient>(&t);
    let sampler = Sampler::start(&t);

    let api_a = api.clone();
    let a = spawn_timed(clock, async move { api_a.a().await });
    settle().await;
    assert_eq!(t.attempts(), 1, "A's first attempt at t=0");
    assert_eq!(t.in_flight(), 0, "its 503 came back at once");

    // B at t=1, while A backs off: the slot is free, B is dispatched at once.
    tokio::time::sleep(ms(1)).await;
    let api_b = api.clone();
    let b = spawn_timed(clock, async move { api_b.b().await });
    settle().await;
    assert_eq!(t.attempts(), 2, "B does not wait for A's backoff");
    assert_eq!(t.in_flight(), 1);

    let (res, at) = b.await.unwrap();
    assert_eq!((res.unwrap().as_str(), at), ("b", 11));
    let (res, at) = a.await.unwrap();
    assert_eq!((res.unwrap().as_str(), at), ("a", 100));

    assert_eq!(sampler.finish().await, 1, "never two attempts at once");
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(1), ms(100)]);
    assert_eq!(paths(&t), vec![A, B, A]);
    assert_follow_up_succeeds(&t, || api.b()).await;
}

/// B takes 150 ms: A's retry, due at t=100, waits in the queue until B is done at 151.
#[tokio::test(start_paused = true)]
async fn s18_bulkhead_retry_slow_b() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        Step::status(200).body("b").delay(ms(150)),
        Step::status(200).body("a"),
    ]);
    let clock = Clock::start();
    let api = scripted::<PairClient>(&t);
    let sampler = Sampler::start(&t);

    let api_a = api.clone();
    let a = spawn_timed(clock, async move { api_a.a().await });
    settle().await;
    assert_eq!(t.attempts(), 1);

    tokio::time::sleep(ms(1)).await;
    let api_b = api.clone();
    let b = spawn_timed(clock, async move { api_b.b().await });
    settle().await;
    assert_eq!(t.attempts(), 2);

    // A's backoff is over at t=100, but B holds the only slot: A's retry queues.
    tokio::time::sleep(ms(119)).await;
    assert_eq!(clock.now_ms(), 120);
    assert_eq!(t.attempts(), 2, "A's retry is not dispatched while B runs");
    assert_eq!(t.in_flight(), 1);
    assert!(!a.is_finished());

    let (res, at) = b.await.unwrap();
    assert_eq!((res.unwrap().as_str(), at), ("b", 151));
    let (res, at) = a.await.unwrap();
    assert_eq!((res.unwrap().as_str(), at), ("a", 151));

    assert_eq!(sampler.finish().await, 1, "never two attempts at once");
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(1), ms(151)]);
    assert_eq!(paths(&t), vec![A, B, A]);
    assert_follow_up_succeeds(&t, || api.b()).await;
}
