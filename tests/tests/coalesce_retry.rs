//! S16 coalesce_retry: concurrent identical calls share one execution, its retries
//! included; every caller gets its own value; a call after completion starts afresh.
//! Callers stay independent: one caller's shorter deadline ends only that caller.

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, ErrorKind, TimeoutKind, resilient_api};
use tests::{Clock, assert_nothing_leaked, ms, script_follow_up, scripted, spawn_timed};

/// A coalesced read with retries.
#[resilient_api(timeout(attempt = "10s"), retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]))]
pub trait Config {
    #[get("/config")]
    #[coalesce]
    async fn config(&self) -> Result<String, ApiError>;
}

/// A later call dispatches afresh and succeeds; nothing is left over.
async fn follow_up(t: &ScriptedTransport, api: &ConfigClient) {
    let before = script_follow_up(t);
    assert_eq!(
        api.config().await.expect("the follow-up call succeeds"),
        "ok"
    );
    assert_eq!(
        t.attempts(),
        before + 1,
        "a later call is not served from the past"
    );
    assert_nothing_leaked(t);
}

/// Start `n` callers at the current instant, each on its own task.
fn spawn_callers(
    api: &ConfigClient,
    clock: Clock,
    n: usize,
) -> Vec<tokio::task::JoinHandle<(Result<String, ApiError>, u64)>> {
    (0..n)
        .map(|_| {
            let api = api.clone();
            spawn_timed(clock, async move { api.config().await })
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn s16_coalesce_retry() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        Step::status(503).body("busy"),
        Step::status(200).chunks([(ms(5), "rea"), (ms(5), "dy")]),
    ]);
    let clock = Clock::start();
    let api = scripted::<ConfigClient>(&t);

    let callers = spawn_callers(&api, clock, 4);
    for caller in callers {
        let (result, at) = caller.await.unwrap();
        assert_eq!(result.unwrap(), "ready");
        assert_eq!(at, 50, "the body's last chunk arrives at t=50");
    }
    assert_eq!(t.attempts(), 3, "one execution for four callers");
    assert_eq!(t.dispatch_times(), [ms(0), ms(20), ms(40)]);
    assert_nothing_leaked(&t);

    // A later call dispatches afresh: the 4th dispatch.
    follow_up(&t, &api).await;
    assert_eq!(t.attempts(), 4);
    assert_eq!(t.dispatch_times()[3], ms(50));
}

#[tokio::test(start_paused = true)]
async fn s16_coalesce_retry_late_joiner_shares_the_remaining_retries() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        Step::status(503).body("busy"),
        Step::status(200).chunks([(ms(5), "rea"), (ms(5), "dy")]),
    ]);
    let clock = Clock::start();
    let api = scripted::<ConfigClient>(&t);

    let early = spawn_callers(&api, clock, 2);
    // t=25: the shared execution is in its second attempt; a new caller joins it.
    tokio::time::sleep(ms(25)).await;
    let late = spawn_callers(&api, clock, 1);
    for caller in early.into_iter().chain(late) {
        let (result, at) = caller.await.unwrap();
        assert_eq!(result.unwrap(), "ready");
        assert_eq!(at, 50);
    }
    assert_eq!(t.attempts(), 3);
    assert_eq!(t.dispatch_times(), [ms(0), ms(20), ms(40)]);
    follow_up(&t, &api).await;
}

#[tokio::test(start_paused = true)]
async fn s16_coalesce_retry_exhaustion_reaches_every_caller() {
    let t = ScriptedTransport::new([
        Step::status(503).body("overloaded"),
        Step::status(503).body("overloaded"),
        Step::status(503).body("overloaded"),
    ]);
    let clock = Clock::start();
    let api = scripted::<ConfigClient>(&t);

    let callers = spawn_callers(&api, clock, 3);
    for caller in callers {
        let (result, at) = caller.await.unwrap();
        let e = result.unwrap_err();
        assert_eq!(at, 40);
        assert_eq!(e.kind(), ErrorKind::Status);
        assert_eq!(e.status(), Some(503));
        assert_eq!(e.body_text().as_deref(), Some("overloaded"));
        assert_eq!(e.attempts(), 3);
        assert_eq!(e.endpoint(), "config");
    }
    assert_eq!(t.attempts(), 3);
    assert_eq!(t.dispatch_times(), [ms(0), ms(20), ms(40)]);
    follow_up(&t, &api).await;
}

#[tokio::test(start_paused = true)]
async fn s16_coalesce_caller_with_a_shorter_deadline_leaves_alone() {
    // The caller with a 30 ms deadline starts (and so owns) the shared execution;
    // it alone gets Deadline at t=30, the others get the answer at t=50.
    let t = ScriptedTransport::new([Step::status(200).body("ready").delay(ms(50))]);
    let clock = Clock::start();
    let api = scripted::<ConfigClient>(&t);
    let short = api.with_options(CallOptions::new().deadline(ms(30)));

    let timed = |r: Result<String, ApiError>| (r, clock.now_ms());
    let (hasty, a, b) = tokio::join!(
        async { timed(short.config().await) },
        async { timed(api.config().await) },
        async { timed(api.config().await) },
    );
    let (e, at) = hasty;
    let e = e.unwrap_err();
    assert_eq!(at, 30);
    assert_eq!(e.kind(), ErrorKind::Deadline, "{e:?}");
    assert_eq!(e.timeout(), Some(TimeoutKind::Total));
    for (result, at) in [a, b] {
        assert_eq!(result.unwrap(), "ready");
        assert_eq!(at, 50);
    }
    assert_eq!(t.attempts(), 1);
    assert_eq!(t.dispatch_times(), [ms(0)]);
    follow_up(&t, &api).await;
}

#[tokio::test(start_paused = true)]
async fn s16_coalesce_caller_with_a_shorter_deadline_joining_late() {
    // Same, with the short-deadline caller joining second: the shared execution is
    // not bounded by the newcomer's deadline either way.
    let t = ScriptedTransport::new([Step::status(200).body("ready").delay(ms(50))]);
    let clock = Clock::start();
    let api = scripted::<ConfigClient>(&t);
    let short = api.with_options(CallOptions::new().deadline(ms(30)));

    let timed = |r: Result<String, ApiError>| (r, clock.now_ms());
    let (a, hasty) = tokio::join!(async { timed(api.config().await) }, async {
        timed(short.config().await)
    },);
    let (e, at) = hasty;
    assert_eq!(e.unwrap_err().kind(), ErrorKind::Deadline);
    assert_eq!(at, 30);
    let (result, at) = a;
    assert_eq!(result.unwrap(), "ready");
    assert_eq!(at, 50);
    assert_eq!(t.attempts(), 1);
    follow_up(&t, &api).await;
}

/// Coalesced, retried once on a 503, and rate limited to one request per 100 ms.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [503]),
    rate_limit(per_second = 10, burst = 1)
)]
pub trait Limited {
    #[get("/resource")]
    #[coalesce]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// Regression: every caller of a shared execution got a copy of its error whose
/// source was a private wrapper, so the source chain could not be read as types: a
/// refused retry's source did not downcast to the `ApiError` it was retrying, nor a
/// reset's to its `TransportError`, as they do on a call of one's own (DESIGN §3.8
/// and §3.9: classify by the source chain). Each caller's source is now the shared
/// error's own.
#[tokio::test(start_paused = true)]
async fn every_coalesced_caller_reads_the_source_chain_as_types() {
    // The retry at 20 ms is refused: the next token comes at 100 ms, the deadline.
    let t = ScriptedTransport::new([Step::status(503).body("overloaded").delay(ms(5))]);
    let clock = Clock::start();
    let api = scripted::<LimitedClient>(&t).with_options(CallOptions::new().deadline(ms(100)));
    let (a, b) = tokio::join!(api.resource(), api.resource());
    assert_eq!(clock.now_ms(), 25);
    for e in [a.unwrap_err(), b.unwrap_err()] {
        assert_eq!((e.kind(), e.attempts()), (ErrorKind::RateLimited, 1));
        let retried = std::error::Error::source(&e)
            .and_then(|s| s.downcast_ref::<ApiError>())
            .map(|s| (s.kind(), s.status(), s.body_text()));
        let overloaded = Some("overloaded".to_owned());
        assert_eq!(retried, Some((ErrorKind::Status, Some(503), overloaded)));
    }
    assert_eq!(t.attempts(), 1);
    assert_nothing_leaked(&t);

    let t = ScriptedTransport::new([Step::reset().delay(ms(5))]);
    let api = scripted::<ConfigClient>(&t);
    t.push([Step::reset(), Step::reset()]);
    let (a, b) = tokio::join!(api.config(), api.config());
    assert_eq!(t.attempts(), 3, "one shared execution, retried twice");
    for e in [a.unwrap_err(), b.unwrap_err()] {
        assert_eq!(e.kind(), ErrorKind::Transport);
        let cause = std::error::Error::source(&e)
            .and_then(|s| s.downcast_ref::<resilient_api::transport::TransportError>())
            .map(resilient_api::transport::TransportError::kind);
        assert_eq!(
            cause,
            Some(resilient_api::transport::TransportErrorKind::Io)
        );
    }
    assert_nothing_leaked(&t);
}
