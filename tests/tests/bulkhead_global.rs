//! The global bulkhead (an `Engine` shared by several clients) under load: an attempt
//! takes its partition's permit, then the global one; waits in either queue are
//! bounded by the deadline and end at once on cancellation; retries and hedges give
//! every permit back; partitions on one engine share their slots. And the queue's
//! bound: a waiter handed a slot has left the queue.

use resilient_api::bulkhead::BulkheadConfig;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, CancellationToken, Engine, ErrorKind, resilient_api};
use tests::{Clock, assert_nothing_leaked, ms, settle, spawn_timed};
use tokio::task::JoinHandle;

type Timed = JoinHandle<(Result<String, ApiError>, u64)>;

/// One slot and one queue place per partition, no retries.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    bulkhead(concurrency = 1, queue = 1)
)]
pub trait Narrow {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
}

fn engine(concurrency: u32, queue: u32) -> Engine {
    Engine::new().global_bulkhead(BulkheadConfig { concurrency, queue })
}

fn narrow(t: &ScriptedTransport, engine: &Engine, host: &str) -> NarrowClient {
    tests::scripted_builder(t)
        .base_url(host)
        .engine(engine.clone())
        .build()
        .expect("builds")
}

fn hosts(t: &ScriptedTransport) -> Vec<String> {
    t.requests()
        .iter()
        .map(|r| r.url.split('/').nth(2).unwrap_or_default().to_owned())
        .collect()
}

async fn settled(call: Timed) -> (Result<String, ApiError>, u64) {
    tokio::time::timeout(std::time::Duration::from_secs(10), call)
        .await
        .expect("the call never settled: a permit was lost")
        .expect("the call task panicked")
}

/// A call waiting in the global queue holds its partition's permit; cancelled, it
/// gives back both at once: the partition's next waiter moves up into the global queue.
#[tokio::test(start_paused = true)]
async fn cancelled_in_the_global_queue_frees_the_partition_permit_and_the_global_place() {
    let t = ScriptedTransport::new([
        Step::status(200).body("a").delay(ms(100)),
        Step::status(200).body("c"),
        Step::status(200).body("e"),
    ]);
    let clock = Clock::start();
    let eng = engine(1, 1);
    let x = narrow(&t, &eng, "https://x.test");
    let y = narrow(&t, &eng, "https://y.test");
    let z = narrow(&t, &eng, "https://z.test");

    let xa = x.clone();
    let a = spawn_timed(clock, async move { xa.r().await });
    settle().await;
    assert_eq!(t.attempts(), 1);

    // B: y's slot, then the global queue.
    let token = CancellationToken::new();
    let yb = y.with_options(CallOptions::new().cancel_on(token.clone()));
    let b = spawn_timed(clock, async move { yb.r().await });
    settle().await;
    // C: y's slot is B's, so C waits in y's queue.
    let yc = y.clone();
    let c = spawn_timed(clock, async move { yc.r().await });
    settle().await;
    assert!(!b.is_finished() && !c.is_finished());
    // y's queue is full; so is the global one (z's own partition is empty).
    assert_eq!(y.r().await.unwrap_err().kind(), ErrorKind::BulkheadFull);
    let e = z.r().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BulkheadFull);

    tokio::time::sleep(ms(20)).await;
    token.cancel();
    settle().await;
    assert!(
        b.is_finished(),
        "cancelled in the global queue: settles at once"
    );
    let (res, at) = b.await.unwrap();
    let e = res.unwrap_err();
    assert_eq!((e.kind(), e.attempts(), at), (ErrorKind::Cancelled, 0, 20));

    // C took y's slot and now waits in the global queue: the global queue is full again,
    // y's own queue is empty.
    let e = z.r().await.unwrap_err();
    assert_eq!(
        e.kind(),
        ErrorKind::BulkheadFull,
        "C holds the global place"
    );
    let yd = y.clone();
    let d = spawn_timed(clock, async move { yd.r().await });
    settle().await;
    assert!(!d.is_finished(), "y's queue place is free again");

    let (res, at) = settled(a).await;
    assert_eq!((res.unwrap().as_str(), at), ("a", 100));
    let (res, at) = settled(c).await;
    assert_eq!((res.unwrap().as_str(), at), ("c", 100));
    let (res, at) = settled(d).await;
    assert_eq!((res.unwrap().as_str(), at), ("e", 100));
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(100), ms(100)]);
    assert_eq!(hosts(&t), vec!["x.test", "y.test", "y.test"]);
    assert_nothing_leaked(&t);
}

/// A deadline passing in the global queue ends the call exactly then, and frees both.
#[tokio::test(start_paused = true)]
async fn a_deadline_in_the_global_queue_fires_exactly_and_frees_the_partition_permit() {
    let t = ScriptedTransport::new([
        Step::status(200).body("a").delay(ms(100)),
        Step::status(200).body("c"),
    ]);
    let clock = Clock::start();
    let eng = engine(1, 1);
    let x = narrow(&t, &eng, "https://x.test");
    let y = narrow(&t, &eng, "https://y.test");

    let xa = x.clone();
    let a = spawn_timed(clock, async move { xa.r().await });
    settle().await;
    let yb = y.with_options(CallOptions::new().deadline(ms(30)));
    let b = spawn_timed(clock, async move { yb.r().await });
    settle().await;
    let yc = y.clone();
    let c = spawn_timed(clock, async move { yc.r().await });
    settle().await;

    tokio::time::sleep(ms(29)).await;
    settle().await;
    assert!(!b.is_finished(), "not a tick early");
    let (res, at) = b.await.unwrap();
    let e = res.unwrap_err();
    assert_eq!((e.kind(), e.attempts(), at), (ErrorKind::Deadline, 0, 30));
    let (res, at) = settled(a).await;
    assert_eq!((res.unwrap().as_str(), at), ("a", 100));
    let (res, at) = settled(c).await;
    assert_eq!((res.unwrap().as_str(), at), ("c", 100));
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(100)]);
    assert_nothing_leaked(&t);
}

/// Retries on 503 after a fixed 100 ms.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 1, backoff = fixed(delay = "100ms"), on = [503]),
    bulkhead(concurrency = 1, queue = 1)
)]
pub trait Retrying {
    #[get("/r")]
    async fn r(&self) -> Result<String, ApiError>;
}

/// S18 across the global bulkhead: A's backoff holds no global permit, so B (another
/// client, another host) runs during it.
#[tokio::test(start_paused = true)]
async fn a_backoff_holds_no_global_permit() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        Step::status(200).body("b").delay(ms(150)),
        Step::status(200).body("a"),
    ]);
    let clock = Clock::start();
    let eng = engine(1, 1);
    let x: RetryingClient = tests::scripted_builder(&t)
        .base_url("https://x.test")
        .engine(eng.clone())
        .build()
        .unwrap();
    let y = narrow(&t, &eng, "https://y.test");
    let xa = x.clone();
    let a = spawn_timed(clock, async move { xa.r().await });
    settle().await;
    tokio::time::sleep(ms(1)).await;
    let yb = y.clone();
    let b = spawn_timed(clock, async move { yb.r().await });
    settle().await;
    assert_eq!(t.attempts(), 2, "B runs during A's backoff");
    let (res, at) = settled(b).await;
    assert_eq!((res.unwrap().as_str(), at), ("b", 151));
    let (res, at) = settled(a).await;
    assert_eq!((res.unwrap().as_str(), at), ("a", 151));
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(1), ms(151)]);
    assert_eq!(hosts(&t), vec!["x.test", "y.test", "x.test"]);
    assert_nothing_leaked(&t);
}

/// Hedged, two partition slots, no queue.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    bulkhead(concurrency = 2, queue = 0)
)]
pub trait Hedged {
    #[get("/r")]
    #[hedge(delay = "10ms", max = 2)]
    async fn r(&self) -> Result<String, ApiError>;
}

/// A hedge waiting in the global queue is dropped with its round: its place and its
/// partition slot are free the moment the primary wins.
#[tokio::test(start_paused = true)]
async fn a_hedge_queued_globally_leaves_with_its_round() {
    let t = ScriptedTransport::new([
        Step::status(200).body("win").delay(ms(30)),
        Step::status(200).body("y"),
        Step::status(200).body("y2"),
    ]);
    let clock = Clock::start();
    let eng = engine(1, 1);
    let x: HedgedClient = tests::scripted_builder(&t)
        .base_url("https://x.test")
        .engine(eng.clone())
        .build()
        .unwrap();
    let y = narrow(&t, &eng, "https://y.test");
    let xa = x.clone();
    let a = spawn_timed(clock, async move { xa.r().await });
    tokio::time::sleep(ms(15)).await;
    settle().await;
    // The hedge (t=10) waits in the global queue.
    let e = y.r().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BulkheadFull);
    let (res, at) = settled(a).await;
    assert_eq!((res.unwrap().as_str(), at), ("win", 30));
    assert_eq!(t.attempts(), 1, "the hedge was never sent");
    assert_eq!(y.r().await.unwrap(), "y");
    assert_eq!(clock.now_ms(), 30);
    assert_nothing_leaked(&t);
}

/// A method with a bulkhead of its own (one slot, no queue), and one in a named
/// partition with the same limit.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Own {
    #[get("/own")]
    #[bulkhead(concurrency = 1, queue = 0)]
    async fn own(&self) -> Result<String, ApiError>;

    #[get("/named")]
    #[partition("named")]
    #[bulkhead(concurrency = 1, queue = 0)]
    async fn named(&self) -> Result<String, ApiError>;
}

/// Another API in the partition `named`, asking for a generous bulkhead.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Other {
    #[get("/other")]
    #[partition("named")]
    #[bulkhead(concurrency = 8, queue = 8)]
    async fn other(&self) -> Result<String, ApiError>;
}

/// Two clients of one API on one engine share its method's own bulkhead; a named
/// partition's bulkhead is shared with another API on the engine, with the settings of
/// the client built first; a client on an engine of its own shares neither.
#[tokio::test(start_paused = true)]
async fn partitions_on_one_engine_share_their_bulkhead_slots() {
    let t = ScriptedTransport::new([
        Step::status(200).body("own").delay(ms(100)),
        Step::status(200).body("named").delay(ms(100)),
        Step::status(200).body("alone"),
    ]);
    let clock = Clock::start();
    let eng = Engine::new();
    let a: OwnClient = tests::scripted_builder(&t)
        .engine(eng.clone())
        .build()
        .unwrap();
    let b: OwnClient = tests::scripted_builder(&t)
        .engine(eng.clone())
        .build()
        .unwrap();
    let other: OtherClient = tests::scripted_builder(&t).engine(eng).build().unwrap();
    let alone: OwnClient = tests::scripted(&t);

    let a1 = a.clone();
    let own = spawn_timed(clock, async move { a1.own().await });
    let a2 = a.clone();
    let named = spawn_timed(clock, async move { a2.named().await });
    settle().await;
    assert_eq!(t.attempts(), 2);
    assert_eq!(b.own().await.unwrap_err().kind(), ErrorKind::BulkheadFull);
    assert_eq!(b.named().await.unwrap_err().kind(), ErrorKind::BulkheadFull);
    assert_eq!(
        other.other().await.unwrap_err().kind(),
        ErrorKind::BulkheadFull,
        "the partition `named` keeps its first client's one slot"
    );
    assert_eq!(alone.own().await.unwrap(), "alone");
    assert_eq!(clock.now_ms(), 0);
    let (res, at) = settled(own).await;
    assert_eq!((res.unwrap().as_str(), at), ("own", 100));
    let (res, at) = settled(named).await;
    assert_eq!((res.unwrap().as_str(), at), ("named", 100));
    assert_eq!(t.attempts(), 3);
    assert_nothing_leaked(&t);
}

/// The script of the next two tests: the first call holds the one slot until t=100,
/// and the next is made by the same task as soon as it ends.
fn a_then_w_then_n() -> ScriptedTransport {
    ScriptedTransport::new([
        Step::status(200).body("a").delay(ms(100)),
        Step::status(200).body("w").delay(ms(10)),
        Step::status(200).body("n"),
    ])
}

/// `first` makes call A, then at once call N; `waiter` makes call W at t=1, which
/// waits for A's slot. At t=100 the slot goes to W, whose queue place is then free:
/// N queues behind W and is served when W is done, at t=110.
async fn next_call_queues_behind_the_waiter(
    t: &ScriptedTransport,
    first: NarrowClient,
    waiter: NarrowClient,
) {
    let clock = Clock::start();
    let both = tokio::spawn(async move {
        let a = first.r().await;
        let n = first.r().await;
        (a, n, clock.now_ms())
    });
    settle().await;
    tokio::time::sleep(ms(1)).await;
    let w = spawn_timed(clock, async move { waiter.r().await });
    settle().await;
    assert!(!w.is_finished(), "W waits");

    let (a, n, at) = tokio::time::timeout(ms(10_000), both)
        .await
        .expect("both calls end")
        .expect("the task joins");
    assert_eq!(a.map_err(|e| e.kind()), Ok("a".to_owned()));
    let (wr, wat) = settled(w).await;
    assert_eq!((wr.map_err(|e| e.kind()), wat), (Ok("w".to_owned()), 110));
    assert_eq!(
        n.map_err(|e| e.kind()),
        Ok("n".to_owned()),
        "the call made at t=100 queues behind the waiter"
    );
    assert_eq!(at, 110);
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(100), ms(110)]);
    assert_nothing_leaked(t);
}

/// Regression: a slot given to the first waiter left its queue place taken until that
/// waiter's task ran, so a call made in that same instant from the task that just
/// gave the slot back (its next call) found the queue "full" and was rejected, though
/// the waiter had left the queue for the slot. Partition: one slot, one queue place.
#[tokio::test(start_paused = true)]
async fn a_call_right_after_a_waiter_is_let_in_queues_instead_of_being_rejected() {
    let t = a_then_w_then_n();
    let api: NarrowClient = tests::scripted(&t);
    next_call_queues_behind_the_waiter(&t, api.clone(), api).await;
}

/// Regression: the same in the global queue: a client's next call, made as its
/// previous one gives the global slot to another client's waiter, was refused with
/// the global queue "full" although that waiter had just left it.
#[tokio::test(start_paused = true)]
async fn a_call_right_after_a_global_waiter_is_let_in_queues_instead_of_being_rejected() {
    let t = a_then_w_then_n();
    let eng = engine(1, 1);
    let x = narrow(&t, &eng, "https://x.test");
    let y = narrow(&t, &eng, "https://y.test");
    next_call_queues_behind_the_waiter(&t, x, y).await;
    assert_eq!(hosts(&t), vec!["x.test", "y.test", "x.test"]);
}

/// Retries on 503 at once when the server says `Retry-After: 0`.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 1, backoff = fixed(delay = "100ms"), on = [503]),
    bulkhead(concurrency = 1, queue = 1)
)]
pub trait Eager {
    #[get("/a")]
    async fn a(&self) -> Result<String, ApiError>;
    #[get("/w")]
    async fn w(&self) -> Result<String, ApiError>;
}

/// Regression: a retry with no wait (`Retry-After: 0`) is made in the same poll in
/// which its failed attempt handed the slot to the waiter behind it; it was refused
/// with `BulkheadFull` (a rejection, so the call ended) instead of queueing in the
/// place that waiter had just left.
#[tokio::test(start_paused = true)]
async fn an_immediate_retry_queues_behind_the_waiter_it_let_in() {
    let t = ScriptedTransport::new([
        Step::status(503).header("retry-after", "0").delay(ms(50)),
        Step::status(200).body("w").delay(ms(10)),
        Step::status(200).body("a"),
    ]);
    let clock = Clock::start();
    let api: EagerClient = tests::scripted(&t);
    let aa = api.clone();
    let a = spawn_timed(clock, async move { aa.a().await });
    settle().await;
    tokio::time::sleep(ms(1)).await;
    let aw = api.clone();
    let w = spawn_timed(clock, async move { aw.w().await });
    settle().await;
    assert!(!w.is_finished(), "W waits in the queue");

    let (wr, wat) = settled(w).await;
    assert_eq!((wr.unwrap().as_str(), wat), ("w", 60));
    let (ar, aat) = settled(a).await;
    assert_eq!(
        ar.map_err(|e| e.kind()),
        Ok("a".to_owned()),
        "A's retry at t=50 queues behind the waiter"
    );
    assert_eq!(aat, 60);
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(50), ms(60)]);
    assert_nothing_leaked(&t);
}
