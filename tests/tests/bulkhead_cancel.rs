//! S5 bulkhead_queued_cancel, and the bulkhead queue's other ways out: a full queue,
//! a waiter's deadline, a dropped waiter.
//!
//! Concurrency 1, queue 1: the first call holds the only slot for 100 ms.

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, CancellationToken, ErrorKind, resilient_api};
use tests::{Clock, assert_follow_up_succeeds, ms, scripted, settle, spawn_timed};
use tokio::task::JoinHandle;

/// One endpoint behind a bulkhead of 1 slot and 1 queue place.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 0),
    bulkhead(concurrency = 1, queue = 1)
)]
pub trait Bulk {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// Awaits a call's task, failing (at 10 s on the paused clock) instead of hanging when
/// it never settles: a slot lost on its way to a queued call leaves that call waiting
/// with no timer of its own, and the paused clock would then wait forever.
async fn settled<T>(call: JoinHandle<T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(10), call)
        .await
        .expect("the call never settled: a slot was lost")
        .expect("the call task panicked")
}

/// Starts the call that holds the only slot from t=0 to t=100.
async fn hold_the_slot(
    api: &BulkClient,
    t: &ScriptedTransport,
    clock: Clock,
) -> JoinHandle<(Result<String, ApiError>, u64)> {
    let api = api.clone();
    let first = spawn_timed(clock, async move { api.resource().await });
    settle().await;
    assert_eq!(t.attempts(), 1, "the first call is dispatched at once");
    first
}

#[tokio::test(start_paused = true)]
async fn s5_bulkhead_queued_cancel() {
    let t = ScriptedTransport::new([
        Step::status(200).body("first").delay(ms(100)),
        Step::status(200).body("replacement"),
    ]);
    let clock = Clock::start();
    let api = scripted::<BulkClient>(&t);

    let first = hold_the_slot(&api, &t, clock).await;

    // The second call queues behind it.
    let token = CancellationToken::new();
    let queued = api.with_options(CallOptions::new().cancel_on(token.clone()));
    let second = spawn_timed(clock, async move { queued.resource().await });
    settle().await;
    assert!(!second.is_finished(), "the second call waits in the queue");
    assert_eq!(t.attempts(), 1);

    // Cancelled at t=20: it settles in the same tick, never dispatched.
    tokio::time::sleep(ms(20)).await;
    assert_eq!(clock.now_ms(), 20);
    token.cancel();
    settle().await;
    assert!(second.is_finished(), "a cancelled waiter settles at once");
    let (res, at) = second.await.unwrap();
    let e = res.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled);
    assert_eq!(e.attempts(), 0, "the cancelled call was never dispatched");
    assert_eq!(at, 20);
    assert_eq!(clock.now_ms(), 20, "settled in the same tick");
    assert_eq!(t.attempts(), 1);

    // Its place is free: a replacement arriving at t=20 is queued, not turned away.
    let api3 = api.clone();
    let replacement = spawn_timed(clock, async move { api3.resource().await });
    settle().await;
    assert!(
        !replacement.is_finished(),
        "the replacement waits in the freed place"
    );
    assert_eq!(t.attempts(), 1);

    let (res, at) = settled(first).await;
    assert_eq!(res.unwrap(), "first");
    assert_eq!(at, 100);
    let (res, at) = settled(replacement).await;
    assert_eq!(res.unwrap(), "replacement");
    assert_eq!(at, 100);

    assert_eq!(t.attempts(), 2);
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(100)]);
    assert_follow_up_succeeds(&t, || api.resource()).await;
}

#[tokio::test(start_paused = true)]
async fn bulkhead_full_queue_rejects_at_once_without_dispatch() {
    let t = ScriptedTransport::new([
        Step::status(200).body("first").delay(ms(100)),
        Step::status(200).body("second"),
    ]);
    let clock = Clock::start();
    let api = scripted::<BulkClient>(&t);

    let first = hold_the_slot(&api, &t, clock).await;
    let api2 = api.clone();
    let second = spawn_timed(clock, async move { api2.resource().await });
    settle().await;
    assert!(!second.is_finished());

    // Slot taken, queue full: the third call is turned away now, with no dispatch.
    tokio::time::sleep(ms(10)).await;
    let err = api.resource().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BulkheadFull);
    assert!(err.is_rejection());
    assert_eq!(err.status(), None);
    assert_eq!(clock.now_ms(), 10, "rejected without waiting");
    assert_eq!(t.attempts(), 1);

    let (res, at) = settled(first).await;
    assert_eq!((res.unwrap().as_str(), at), ("first", 100));
    let (res, at) = settled(second).await;
    assert_eq!((res.unwrap().as_str(), at), ("second", 100));
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(100)]);
    assert_follow_up_succeeds(&t, || api.resource()).await;
}

#[tokio::test(start_paused = true)]
async fn bulkhead_queued_waiter_leaves_at_exactly_its_deadline() {
    let t = ScriptedTransport::new([
        Step::status(200).body("first").delay(ms(100)),
        Step::status(200).body("replacement"),
    ]);
    let clock = Clock::start();
    let api = scripted::<BulkClient>(&t);

    let first = hold_the_slot(&api, &t, clock).await;
    let bounded = api.with_options(CallOptions::new().deadline(ms(30)));
    let second = spawn_timed(clock, async move { bounded.resource().await });
    settle().await;
    assert!(!second.is_finished());

    // Still waiting one tick before its deadline.
    tokio::time::sleep(ms(29)).await;
    settle().await;
    assert!(!second.is_finished(), "the deadline does not fire early");

    let (res, at) = second.await.unwrap();
    let err = res.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Deadline);
    assert_eq!(err.timeout(), Some(resilient_api::TimeoutKind::Total));
    assert_eq!(at, 30, "the deadline fires exactly, not late");
    assert_eq!(clock.now_ms(), 30);
    assert_eq!(t.attempts(), 1, "never dispatched");

    // Its place is free: the replacement queues instead of being turned away...
    let api3 = api.clone();
    let replacement = spawn_timed(clock, async move { api3.resource().await });
    settle().await;
    assert!(!replacement.is_finished());
    // ...and the queue is full again behind it.
    let err = api.resource().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BulkheadFull);
    assert_eq!(clock.now_ms(), 30);

    let (res, at) = settled(first).await;
    assert_eq!((res.unwrap().as_str(), at), ("first", 100));
    let (res, at) = settled(replacement).await;
    assert_eq!((res.unwrap().as_str(), at), ("replacement", 100));
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(100)]);
    assert_follow_up_succeeds(&t, || api.resource()).await;
}

#[tokio::test(start_paused = true)]
async fn bulkhead_dropped_queued_call_frees_its_place() {
    let t = ScriptedTransport::new([
        Step::status(200).body("first").delay(ms(100)),
        Step::status(200).body("replacement"),
    ]);
    let clock = Clock::start();
    let api = scripted::<BulkClient>(&t);

    let first = hold_the_slot(&api, &t, clock).await;

    // The caller gives up on the queued call at t=20 by dropping its future.
    let dropped = tokio::time::timeout(ms(20), api.resource()).await;
    assert!(dropped.is_err(), "still queued when dropped");
    assert_eq!(clock.now_ms(), 20);
    assert_eq!(t.attempts(), 1);

    // The place it held is free at once.
    let api3 = api.clone();
    let replacement = spawn_timed(clock, async move { api3.resource().await });
    settle().await;
    assert!(!replacement.is_finished(), "queued, not turned away");
    let err = api.resource().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BulkheadFull, "the queue holds one");

    let (res, at) = settled(first).await;
    assert_eq!((res.unwrap().as_str(), at), ("first", 100));
    let (res, at) = settled(replacement).await;
    assert_eq!((res.unwrap().as_str(), at), ("replacement", 100));
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(100)]);
    assert_follow_up_succeeds(&t, || api.resource()).await;
}
