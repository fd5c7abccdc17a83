//! Time limits and cancellation: the attempt timeout (body read included), the total
//! deadline, a per-call deadline, a cancellation token, a dropped call, and a streamed
//! result read after the call returned. Every limit fires at its exact millisecond.

use std::time::Duration;

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{
    ApiError, CallOptions, CancellationToken, ErrorKind, ResponseStream, TimeoutKind, resilient_api,
};
use tests::{Clock, assert_nothing_leaked, ms, script_follow_up, scripted};

/// An attempt limit a millisecond short of a caller's 100 ms deadline.
#[resilient_api(timeout(attempt = "99ms"), retry(max = 0))]
pub trait Tight {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// An attempt timeout, no retries, no total deadline.
#[resilient_api(timeout(attempt = "100ms"), retry(max = 0))]
pub trait Quick {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// Attempts time out and are retried until the total deadline.
#[resilient_api(
    timeout(attempt = "100ms", total = "250ms"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503])
)]
pub trait Bounded {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// A long total deadline that a caller can shorten.
#[resilient_api(
    timeout(attempt = "1s", total = "1500ms"),
    retry(max = 1, backoff = fixed(delay = "100ms"), on = [503])
)]
pub trait Patient {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// A streamed result: the idle limit is the attempt timeout (80 ms); the total
/// deadline (100 ms) still bounds the read after the call returned.
#[resilient_api(timeout(attempt = "80ms", total = "100ms"), retry(max = 0))]
pub trait Streams {
    #[get("/download")]
    async fn download(&self) -> Result<ResponseStream, ApiError>;

    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// A streamed result with a short idle limit (50 ms) and a long total deadline.
#[resilient_api(timeout(attempt = "50ms", total = "1s"), retry(max = 0))]
pub trait IdleStreams {
    #[get("/download")]
    async fn download(&self) -> Result<ResponseStream, ApiError>;

    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn attempt_timeout_fires_exactly() {
    let t = ScriptedTransport::new([Step::status(200).body("late").delay(ms(150))]);
    let clock = Clock::start();
    let api = scripted::<QuickClient>(&t);
    let api2 = api.clone();
    let call = tokio::spawn(async move { api2.resource().await });

    tokio::time::sleep(ms(99)).await;
    assert!(!call.is_finished(), "the attempt timeout fired early");
    assert_eq!(t.in_flight(), 1);
    let e = call.await.unwrap().unwrap_err();
    assert_eq!(clock.now_ms(), 100);
    assert_eq!(e.kind(), ErrorKind::AttemptTimeout);
    assert_eq!(e.timeout(), Some(TimeoutKind::Attempt));
    assert_eq!(e.attempts(), 1);
    assert_nothing_leaked(&t);

    tests::assert_no_late_dispatch(&t, 1, Duration::from_secs(1)).await;
    tests::assert_follow_up_succeeds(&t, || api.resource()).await;
}

#[tokio::test(start_paused = true)]
async fn attempt_timeout_covers_the_body_read() {
    // Head at once, first chunk at t=50, second at t=150.
    let t = ScriptedTransport::new([Step::status(200).chunks([(ms(50), "slo"), (ms(100), "w")])]);
    let clock = Clock::start();
    let api = scripted::<QuickClient>(&t);
    let api2 = api.clone();
    let call = tokio::spawn(async move { api2.resource().await });

    tokio::time::sleep(ms(99)).await;
    assert!(!call.is_finished(), "the attempt timeout fired early");
    assert_eq!(t.open_bodies(), 1);
    let e = call.await.unwrap().unwrap_err();
    assert_eq!(clock.now_ms(), 100);
    assert_eq!(e.kind(), ErrorKind::AttemptTimeout);
    assert_eq!(e.timeout(), Some(TimeoutKind::Attempt));
    assert_eq!(t.attempts(), 1);

    script_follow_up(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn attempt_timeout_allows_a_body_that_ends_in_time() {
    let t = ScriptedTransport::new([Step::status(200).chunks([(ms(40), "in "), (ms(59), "time")])]);
    let clock = Clock::start();
    let api = scripted::<QuickClient>(&t);

    assert_eq!(api.resource().await.unwrap(), "in time");
    assert_eq!(clock.now_ms(), 99);
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn total_deadline_fires_exactly() {
    // Attempts time out at 100 and 220; the third, sent at 240, is cut by the
    // deadline at 250.
    let t = ScriptedTransport::new([Step::hang(), Step::hang(), Step::hang()]);
    let clock = Clock::start();
    let api = scripted::<BoundedClient>(&t);
    let api2 = api.clone();
    let call = tokio::spawn(async move { api2.resource().await });

    tokio::time::sleep(ms(249)).await;
    assert!(!call.is_finished(), "the deadline fired early");
    assert_eq!(t.in_flight(), 1);
    let e = call.await.unwrap().unwrap_err();
    assert_eq!(clock.now_ms(), 250);
    assert_eq!(e.kind(), ErrorKind::Deadline);
    assert_eq!(e.timeout(), Some(TimeoutKind::Total));
    assert_eq!(e.attempts(), 3);
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(120), ms(240)]);
    assert_nothing_leaked(&t);

    tests::assert_no_late_dispatch(&t, 3, Duration::from_secs(1)).await;
    tests::assert_follow_up_succeeds(&t, || api.resource()).await;
}

#[tokio::test(start_paused = true)]
async fn per_call_deadline_shorter_than_the_total_wins() {
    let t = ScriptedTransport::new([Step::hang()]);
    let clock = Clock::start();
    let api = scripted::<PatientClient>(&t);
    let quick = api.with_options(CallOptions::new().deadline(ms(100)));
    let call = tokio::spawn(async move { quick.resource().await });

    tokio::time::sleep(ms(99)).await;
    assert!(!call.is_finished(), "the per-call deadline fired early");
    let e = call.await.unwrap().unwrap_err();
    assert_eq!(clock.now_ms(), 100);
    assert_eq!(e.kind(), ErrorKind::Deadline);
    assert_eq!(e.timeout(), Some(TimeoutKind::Total));
    assert_eq!(t.attempts(), 1);

    script_follow_up(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn per_call_deadline_longer_than_the_total_does_not_extend_it() {
    // Attempt 1 times out at 1000, the retry goes at 1100, the trait's 1500 ms ends it.
    let t = ScriptedTransport::new([Step::hang(), Step::hang()]);
    let clock = Clock::start();
    let api = scripted::<PatientClient>(&t);
    let lenient = api.with_options(CallOptions::new().deadline(Duration::from_secs(5)));

    let e = lenient.resource().await.unwrap_err();
    assert_eq!(clock.now_ms(), 1500);
    assert_eq!(e.kind(), ErrorKind::Deadline);
    assert_eq!(t.dispatch_times(), vec![ms(0), ms(1100)]);
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn per_call_deadline_applies_without_a_trait_total() {
    let t = ScriptedTransport::new([Step::hang()]);
    let clock = Clock::start();
    let api = scripted::<QuickClient>(&t);

    let e = api
        .with_options(CallOptions::new().deadline(ms(60)))
        .resource()
        .await
        .unwrap_err();
    assert_eq!(clock.now_ms(), 60);
    assert_eq!(e.kind(), ErrorKind::Deadline);
    assert_eq!(t.attempts(), 1);
    assert_nothing_leaked(&t);
}

/// Options given one after the other add up: a token given after a deadline keeps
/// the deadline, and of two deadlines the shorter applies (a deadline only
/// shortens), in either order.
#[tokio::test(start_paused = true)]
async fn options_given_in_turn_add_up() {
    let t = ScriptedTransport::new([Step::hang(), Step::hang(), Step::hang()]);
    let api = scripted::<PatientClient>(&t);
    let token = CancellationToken::new();
    let short = CallOptions::new().deadline(ms(300));
    let long = CallOptions::new().deadline(ms(500));

    let chained = [
        api.with_options(short.clone())
            .with_options(CallOptions::new().cancel_on(token.clone())),
        api.with_options(short.clone()).with_options(long.clone()),
        api.with_options(long).with_options(short),
    ];
    for (i, client) in chained.into_iter().enumerate() {
        let clock = Clock::start();
        let e = client.resource().await.unwrap_err();
        assert_eq!(
            (e.kind(), clock.now_ms()),
            (ErrorKind::Deadline, 300),
            "{i}"
        );
    }

    // A token given after a token: either one cancels the call. A library handed a
    // client cannot escape its caller's token by adding its own.
    for which in 0..2 {
        t.push([Step::hang()]);
        let (outer, inner) = (CancellationToken::new(), CancellationToken::new());
        let clock = Clock::start();
        let nested = api
            .with_options(CallOptions::new().cancel_on(outer.clone()))
            .with_options(CallOptions::new().cancel_on(inner.clone()));
        let call = tokio::spawn(async move { nested.resource().await });
        tokio::time::sleep(ms(20)).await;
        [&outer, &inner][which].cancel();
        let e = call.await.unwrap().unwrap_err();
        assert_eq!(
            (e.kind(), clock.now_ms()),
            (ErrorKind::Cancelled, 20),
            "{which}"
        );
    }

    // A deadline given after a token keeps the token.
    t.push([Step::hang()]);
    let clock = Clock::start();
    let both = api
        .with_options(CallOptions::new().cancel_on(token.clone()))
        .with_options(CallOptions::new().deadline(ms(400)));
    let call = tokio::spawn(async move { both.resource().await });
    tokio::time::sleep(ms(50)).await;
    token.cancel();
    let e = call.await.unwrap().unwrap_err();
    assert_eq!((e.kind(), clock.now_ms()), (ErrorKind::Cancelled, 50));
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn token_cancel_settles_in_the_same_tick() {
    let t = ScriptedTransport::new([Step::hang()]);
    let clock = Clock::start();
    let api = scripted::<PatientClient>(&t);
    let token = CancellationToken::new();
    let cancellable = api.with_options(CallOptions::new().cancel_on(token.clone()));
    let call = tokio::spawn(async move { cancellable.resource().await });

    tokio::time::sleep(ms(30)).await;
    assert_eq!(t.in_flight(), 1);
    token.cancel();
    tokio::time::advance(Duration::ZERO).await;
    let e = call.await.unwrap().unwrap_err();
    assert_eq!(clock.now_ms(), 30);
    assert_eq!(e.kind(), ErrorKind::Cancelled);
    assert_eq!(e.timeout(), None);
    assert_nothing_leaked(&t);

    tests::assert_no_late_dispatch(&t, 1, Duration::from_secs(2)).await;
    tests::assert_follow_up_succeeds(&t, || api.resource()).await;
}

#[tokio::test(start_paused = true)]
async fn token_cancelled_before_the_call_sends_nothing() {
    let t = ScriptedTransport::new([]);
    let clock = Clock::start();
    let api = scripted::<PatientClient>(&t);
    let token = CancellationToken::new();
    token.cancel();

    let e = api
        .with_options(CallOptions::new().cancel_on(token))
        .resource()
        .await
        .unwrap_err();
    assert_eq!(clock.now_ms(), 0);
    assert_eq!(e.kind(), ErrorKind::Cancelled);
    assert_eq!(t.attempts(), 0);
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_call_aborts_the_in_flight_attempt() {
    let t = ScriptedTransport::new([Step::hang()]);
    let clock = Clock::start();
    let api = scripted::<PatientClient>(&t);
    let api2 = api.clone();
    let call = tokio::spawn(async move { api2.resource().await });

    tokio::time::sleep(ms(30)).await;
    assert_eq!(t.in_flight(), 1);
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    assert_eq!(clock.now_ms(), 30);
    assert_nothing_leaked(&t);

    tests::assert_no_late_dispatch(&t, 1, Duration::from_secs(2)).await;
    tests::assert_follow_up_succeeds(&t, || api.resource()).await;
}

#[tokio::test(start_paused = true)]
async fn dropping_the_call_in_select_aborts_the_in_flight_attempt() {
    let t = ScriptedTransport::new([Step::hang()]);
    let clock = Clock::start();
    let api = scripted::<PatientClient>(&t);

    tokio::select! {
        r = api.resource() => panic!("a hanging call ended: {r:?}"),
        () = tokio::time::sleep(ms(30)) => {}
    }
    assert_eq!(clock.now_ms(), 30);
    assert_eq!(t.attempts(), 1);
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_call_during_backoff_dispatches_nothing_more() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        Step::status(200).body("ready"),
    ]);
    let clock = Clock::start();
    let api = scripted::<PatientClient>(&t);

    tokio::select! {
        r = api.resource() => panic!("the call ended during its backoff: {r:?}"),
        () = tokio::time::sleep(ms(50)) => {}
    }
    assert_eq!(clock.now_ms(), 50);
    tests::assert_no_late_dispatch(&t, 1, Duration::from_secs(2)).await;
    assert_nothing_leaked(&t);

    assert_eq!(api.resource().await.unwrap(), "ready");
    assert_eq!(t.attempts(), 2);
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn streamed_result_is_bounded_by_the_total_deadline() {
    // Chunks at 30, 60, 90 and 120; the deadline is at 100.
    let t = ScriptedTransport::new([Step::status(200).chunks([
        (ms(30), "a"),
        (ms(30), "b"),
        (ms(30), "c"),
        (ms(30), "d"),
    ])]);
    let clock = Clock::start();
    let api = scripted::<StreamsClient>(&t);

    let mut body = api.download().await.unwrap();
    assert_eq!(clock.now_ms(), 0);
    assert_eq!(body.status(), http::StatusCode::OK);
    let mut got = Vec::new();
    let e = loop {
        match body.chunk().await {
            Ok(Some(c)) => got.push((clock.now_ms(), c)),
            Ok(None) => panic!("the body ended after the deadline"),
            Err(e) => break e,
        }
    };
    assert_eq!(
        got,
        vec![(30, "a".into()), (60, "b".into()), (90, "c".into())]
    );
    assert_eq!(clock.now_ms(), 100);
    assert_eq!(e.kind(), ErrorKind::Deadline);
    assert_eq!(e.timeout(), Some(TimeoutKind::Total));
    drop(body);

    script_follow_up(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn streamed_result_is_bounded_by_the_idle_limit() {
    // The first chunk at 20; the next would come at 120, but 50 ms of silence ends it.
    let t = ScriptedTransport::new([Step::status(200).chunks([(ms(20), "a"), (ms(100), "b")])]);
    let clock = Clock::start();
    let api = scripted::<IdleStreamsClient>(&t);

    let mut body = api.download().await.unwrap();
    assert_eq!(clock.now_ms(), 0);
    assert_eq!(body.chunk().await.unwrap().as_deref(), Some(&b"a"[..]));
    assert_eq!(clock.now_ms(), 20);
    let e = body.chunk().await.unwrap_err();
    assert_eq!(clock.now_ms(), 70);
    assert_eq!(e.kind(), ErrorKind::AttemptTimeout);
    assert_eq!(e.timeout(), Some(TimeoutKind::Attempt));
    drop(body);

    script_follow_up(&t);
    assert_eq!(api.resource().await.unwrap(), "ok");
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn streamed_result_reads_past_the_attempt_timeout_while_chunks_keep_coming() {
    // Chunks every 40 ms (under the 50 ms idle limit) until t=160, past the attempt
    // timeout: the stream is bounded by silence and the total deadline, not by 50 ms.
    let t = ScriptedTransport::new([Step::status(200).chunks([
        (ms(40), "a"),
        (ms(40), "b"),
        (ms(40), "c"),
        (ms(40), "d"),
    ])]);
    let clock = Clock::start();
    let api = scripted::<IdleStreamsClient>(&t);

    let body = api.download().await.unwrap();
    assert_eq!(body.text().await.unwrap(), "abcd");
    assert_eq!(clock.now_ms(), 160);
    assert_nothing_leaked(&t);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_streamed_result_closes_its_body() {
    let t = ScriptedTransport::new([Step::status(200).chunks([(ms(10), "a"), (ms(10), "b")])]);
    let api = scripted::<IdleStreamsClient>(&t);

    let mut body = api.download().await.unwrap();
    assert_eq!(body.chunk().await.unwrap().as_deref(), Some(&b"a"[..]));
    assert_eq!(t.open_bodies(), 1);
    drop(body);
    assert_nothing_leaked(&t);
}

/// Regression: a call 0.4 ms off the timer's millisecond grid, whose attempt limit
/// (100 ms) falls in the same timer tick as its deadline (100.5 ms), just before it.
/// The call's one timer is armed at the limit and fires at that tick (101 ms after
/// the call's start), when the
/// deadline has passed too; the call ended with `AttemptTimeout`, past its deadline,
/// where two timers would have let the deadline win the tie. It ends with `Deadline`
/// now, as a plain call and in the retry loop alike.
///
/// Each case has a runtime of its own, so that both start 0.4 ms off the grid: run
/// one after the other on one runtime, the second started 0.8 ms off it, where its
/// deadline (tick 203) is a tick after its limit (tick 202), and no tie.
#[test]
fn an_attempt_limit_in_the_deadlines_tick_ends_the_call_as_the_deadline() {
    for token in [false, true] {
        tests::case_runtime(true).block_on(async {
            let t = ScriptedTransport::new([Step::hang()]);
            let api: BoundedClient = scripted(&t);
            tokio::time::advance(Duration::from_micros(400)).await;
            let start = tokio::time::Instant::now();
            let mut options = CallOptions::new().deadline(Duration::from_micros(100_500));
            if token {
                options = options.cancel_on(CancellationToken::new());
            }
            let e = api.with_options(options).resource().await.unwrap_err();
            assert_eq!(
                (e.kind(), e.timeout(), e.attempts()),
                (ErrorKind::Deadline, Some(TimeoutKind::Total), 1),
                "with a token: {token}"
            );
            assert_eq!(start.elapsed(), ms(101), "with a token: {token}");
            assert_nothing_leaked(&t);
        });
    }
}

/// Regression (found by `retry_timing_props`): an answer due in the tick before the
/// deadline's is the call's answer, though the clock reads the deadline's instant
/// when it is seen. The call starts 0.4 ms off the timer's grid with a deadline of
/// 100 ms (at 100.4 ms, whose timer fires at the tick of 101 ms); the answer and the
/// attempt's limit are both due at 99.4 ms, fire at the tick of 100 ms, and are seen
/// with the clock at 100.4 ms. The deadline's tick has not come: the answer wins its
/// tie with the limit, as it does anywhere else. The call ended with `Deadline`.
#[test]
fn an_answer_in_the_tick_before_the_deadlines_is_the_answer() {
    for token in [false, true] {
        tests::case_runtime(true).block_on(async {
            let t = ScriptedTransport::new([Step::status(200).body("in time").delay(ms(99))]);
            let api: TightClient = scripted(&t);
            tokio::time::advance(Duration::from_micros(400)).await;
            let start = tokio::time::Instant::now();
            let mut options = CallOptions::new().deadline(ms(100));
            if token {
                options = options.cancel_on(CancellationToken::new());
            }
            let r = api.with_options(options).resource().await;
            assert_eq!(
                r.expect("answered in time"),
                "in time",
                "with a token: {token}"
            );
            assert_eq!(start.elapsed(), ms(100), "with a token: {token}");
            assert_nothing_leaked(&t);
        });
    }
}

/// One endpoint for each way a call can go.
#[resilient_api(timeout(attempt = "100ms"), retry(max = 2, backoff = fixed(delay = "20ms")))]
pub trait Paths {
    #[get("/plain")]
    async fn plain(&self) -> Result<String, ApiError>;

    #[get("/items/{id}")]
    async fn item(&self, id: u32) -> Result<String, ApiError>;

    #[get("/shared")]
    #[coalesce]
    async fn shared(&self) -> Result<String, ApiError>;

    #[get("/hedged")]
    #[hedge(delay = "10ms", max = 2)]
    async fn hedged(&self) -> Result<String, ApiError>;

    #[get("/download")]
    async fn download(&self) -> Result<ResponseStream, ApiError>;
}

/// Pins a per-call deadline of zero, passed when the call starts: on every path (a
/// plain call, a path parameter, coalesced, hedged, a streamed result) the call ends
/// at once with `Deadline` and no attempt, and nothing is sent.
#[tokio::test(start_paused = true)]
async fn a_deadline_passed_at_the_start_sends_nothing_on_any_path() {
    let t = ScriptedTransport::new([]);
    let api = scripted::<PathsClient>(&t);
    let zero = api.with_options(CallOptions::new().deadline(Duration::ZERO));
    let clock = Clock::start();
    let ended = [
        ("plain", zero.plain().await.map(drop)),
        ("item", zero.item(1).await.map(drop)),
        ("shared", zero.shared().await.map(drop)),
        ("hedged", zero.hedged().await.map(drop)),
        ("download", zero.download().await.map(drop)),
    ];
    for (path, result) in ended {
        let e = result.expect_err(path);
        assert_eq!((e.kind(), e.attempts()), (ErrorKind::Deadline, 0), "{path}");
    }
    assert_eq!((clock.now_ms(), t.attempts()), (0, 0));
}

/// Pins a per-call deadline too far to represent (`Duration::MAX`, or ten years) as
/// no deadline at all: the attempt's limit still ends the call at 100 ms, and on a
/// trait with a total deadline the total still ends it at 250 ms.
#[tokio::test(start_paused = true)]
async fn a_deadline_too_far_to_reach_leaves_the_attempt_limit_and_the_total() {
    let t = ScriptedTransport::new([Step::hang(), Step::hang()]);
    let api = scripted::<QuickClient>(&t);
    for far in [Duration::MAX, Duration::from_secs(10 * 365 * 86_400)] {
        let clock = Clock::start();
        let e = api
            .with_options(CallOptions::new().deadline(far))
            .resource()
            .await
            .expect_err("the attempt's limit");
        assert_eq!(
            (e.kind(), clock.now_ms()),
            (ErrorKind::AttemptTimeout, 100),
            "{far:?}"
        );
    }

    let t = ScriptedTransport::new([Step::hang(), Step::hang(), Step::hang()]);
    let api = scripted::<BoundedClient>(&t);
    let clock = Clock::start();
    let e = api
        .with_options(CallOptions::new().deadline(Duration::MAX))
        .resource()
        .await
        .expect_err("the trait's total");
    assert_eq!((e.kind(), clock.now_ms()), (ErrorKind::Deadline, 250));
    assert_eq!(t.dispatch_times(), [ms(0), ms(120), ms(240)]);
    assert_nothing_leaked(&t);
}

/// A 1 s attempt limit, two retries on 503 (20 ms apart), and a breaker that trips at
/// the third failure in a row.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 3, reset = "30s")
)]
pub trait SlowErrors {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;

    #[get("/once")]
    #[retry(max = 0)]
    async fn once(&self) -> Result<String, ApiError>;
}

/// An error status whose head came at once and whose body is still arriving when the
/// attempt's limit fires: `Retry-After: 5` asked for 5 s.
fn slow_busy() -> Step {
    Step::status(503)
        .header("retry-after", "5")
        .chunks([(ms(10), "bu"), (ms(5000), "sy")])
}

/// Regression: the attempt ended as `AttemptTimeout` at 1000, so the server's
/// `Retry-After: 5` was ignored and the retry left after the 20 ms backoff (at 1020).
/// The head was received: the attempt ends as that 503, its body cut short, and the
/// retry leaves at the server's instant, 5 s after the attempt ended.
#[tokio::test(start_paused = true)]
async fn an_error_status_whose_body_outlasts_the_attempt_limit_keeps_its_retry_after() {
    let t = ScriptedTransport::new([slow_busy(), Step::status(200).body("ok")]);
    let clock = Clock::start();
    let api = scripted::<SlowErrorsClient>(&t);

    assert_eq!(api.resource().await.unwrap(), "ok");
    assert_eq!(clock.now_ms(), 6000);
    assert_eq!(t.dispatch_times(), [ms(0), ms(6000)]);
    assert_eq!(api.circuit_state().consecutive_failures, 0);
    assert_nothing_leaked(&t);
}

/// The same in the retry loop (an attempt after the first, driven by the call's one
/// timer): the second attempt's slow 503 ends at 1020 and the third leaves at 6020.
#[tokio::test(start_paused = true)]
async fn a_retry_whose_error_body_outlasts_the_attempt_limit_keeps_its_retry_after() {
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        slow_busy(),
        Step::status(200).body("ok"),
    ]);
    let clock = Clock::start();
    let api = scripted::<SlowErrorsClient>(&t);

    assert_eq!(api.resource().await.unwrap(), "ok");
    assert_eq!(clock.now_ms(), 6020);
    assert_eq!(t.dispatch_times(), [ms(0), ms(20), ms(6020)]);
    assert_nothing_leaked(&t);
}

/// With no retry left, the error is the 503 itself: its status, the body received
/// (cut short), the server's wait, one breaker failure as any 5xx is.
#[tokio::test(start_paused = true)]
async fn an_error_status_cut_short_by_the_attempt_limit_is_that_status() {
    let t = ScriptedTransport::new([slow_busy()]);
    let start = tokio::time::Instant::now();
    let clock = Clock::start();
    let api = scripted::<SlowErrorsClient>(&t);

    let e = api.once().await.unwrap_err();
    assert_eq!(clock.now_ms(), 1000);
    assert_eq!(
        (e.kind(), e.status(), e.attempts(), e.timeout()),
        (ErrorKind::Status, Some(503), 1, None)
    );
    assert_eq!(e.body_text().as_deref(), Some("bu"));
    assert_eq!(e.retry_after(), Some(Duration::from_secs(5)));
    assert_eq!(e.retry_at(), Some(start + ms(6000)));
    assert_eq!(
        e.to_string(),
        "error status 503 in `once`: the body was cut short at the attempt's time limit of 1s"
    );
    assert_eq!(api.circuit_state().consecutive_failures, 1);
    assert_nothing_leaked(&t);
}

/// Regression: a 404 whose body was still arriving at the attempt's limit ended as
/// `AttemptTimeout`, so it was retried (three dispatches) and each attempt counted as
/// a breaker failure (three in a row tripped it). It is a 404: not retried, and
/// nothing against the upstream.
#[tokio::test(start_paused = true)]
async fn a_slow_404_is_not_retried_and_not_a_breaker_failure() {
    let t =
        ScriptedTransport::new([Step::status(404).chunks([(ms(10), "no "), (ms(5000), "such")])]);
    let clock = Clock::start();
    let api = scripted::<SlowErrorsClient>(&t);

    let e = api.resource().await.unwrap_err();
    assert_eq!(clock.now_ms(), 1000);
    assert_eq!(
        (e.kind(), e.status(), e.attempts()),
        (ErrorKind::Status, Some(404), 1)
    );
    assert_eq!(e.body_text().as_deref(), Some("no "));
    assert_eq!(t.dispatch_times(), [ms(0)]);
    let s = api.circuit_state();
    assert_eq!(
        (s.phase, s.consecutive_failures),
        (resilient_api::circuit_breaker::state::Phase::Closed, 0)
    );
    assert_nothing_leaked(&t);
    tests::assert_no_late_dispatch(&t, 1, Duration::from_secs(10)).await;
    tests::assert_follow_up_succeeds(&t, || api.resource()).await;
}

/// The same slow 404 under a total deadline shorter than the attempt's limit: the
/// deadline ends the call where it is, the error body's read included, so the call
/// ends as `Deadline` at 500 ms, not as the 404 (the exception for an error body is
/// the attempt's limit's alone, `timeout`'s module docs). Nothing is retried, and the
/// cut attempt counts neither way in the breaker, as any the deadline cuts.
#[tokio::test(start_paused = true)]
async fn a_slow_error_body_cut_by_the_total_deadline_ends_as_deadline() {
    let t = ScriptedTransport::new([
        Step::status(404).chunks([(ms(10), "no "), (ms(5000), "such")]),
        Step::status(503).chunks([(ms(10), "bu"), (ms(5000), "sy")]),
    ]);
    let api = scripted::<SlowErrorsClient>(&t);
    for (n, status) in [(1, 404), (2, 503)] {
        let clock = Clock::start();
        let e = api
            .with_options(CallOptions::new().deadline(ms(500)))
            .once()
            .await
            .unwrap_err();
        assert_eq!(clock.now_ms(), 500, "{status}");
        assert_eq!(
            (e.kind(), e.timeout(), e.status(), e.attempts()),
            (ErrorKind::Deadline, Some(TimeoutKind::Total), None, 1),
            "{status}"
        );
        assert_eq!(t.dispatch_times().len(), n);
        assert_eq!(api.circuit_state().consecutive_failures, 0, "{status}");
    }
    assert_nothing_leaked(&t);
}

/// A success's body is the answer: one still arriving at the limit is an attempt
/// timeout, as before, and is retried.
#[tokio::test(start_paused = true)]
async fn a_slow_success_body_is_still_an_attempt_timeout() {
    let t = ScriptedTransport::new([
        Step::status(200).chunks([(ms(10), "sl"), (ms(5000), "ow")]),
        Step::status(200).body("ok"),
    ]);
    let clock = Clock::start();
    let api = scripted::<SlowErrorsClient>(&t);

    let e = api.once().await.unwrap_err();
    assert_eq!(clock.now_ms(), 1000);
    assert_eq!(
        (e.kind(), e.timeout(), e.status()),
        (ErrorKind::AttemptTimeout, Some(TimeoutKind::Attempt), None)
    );
    assert_eq!(api.circuit_state().consecutive_failures, 1);
    assert_eq!(api.once().await.unwrap(), "ok");
    assert_nothing_leaked(&t);
}
