//! Streamed results read after the call returned: the deadline, the idle limit and
//! the call's token while the caller reads, how the breaker and the bulkhead account
//! for a streamed attempt (it ends with the head), `Response<ResponseStream>`, and the
//! 30 s idle limit of a method without an attempt timeout.

use std::time::Duration;

use resilient_api::circuit_breaker::state::Phase;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{
    ApiError, CallOptions, CancellationToken, ErrorKind, Response, ResponseStream, TimeoutKind,
    resilient_api,
};
use tests::{Clock, assert_nothing_leaked, ms, scripted};

/// Idle limit 50 ms (the attempt timeout), total deadline 100 ms.
#[resilient_api(timeout(attempt = "50ms", total = "100ms"), retry(max = 0))]
pub trait Short {
    #[get("/download")]
    async fn download(&self) -> Result<ResponseStream, ApiError>;
    #[get("/wrapped")]
    async fn wrapped(&self) -> Result<Response<ResponseStream>, ApiError>;
}

/// No attempt timeout: a streamed body still has a 30 s idle limit.
#[resilient_api(timeout(attempt = "none"), retry(max = 0))]
pub trait NoAttempt {
    #[get("/download")]
    async fn download(&self) -> Result<ResponseStream, ApiError>;
}

/// A breaker that one failure trips for 100 ms, and one slot with no queue.
#[resilient_api(
    timeout(attempt = "1s", total = "10s"),
    retry(max = 0),
    breaker(failures = 1, reset = "100ms", probes = 1),
    bulkhead(concurrency = 1, queue = 0)
)]
pub trait Guarded {
    #[get("/download")]
    async fn download(&self) -> Result<ResponseStream, ApiError>;
    #[get("/text")]
    async fn text(&self) -> Result<String, ApiError>;
}

/// One retry on a 503 after 20 ms, total deadline 100 ms.
#[resilient_api(
    timeout(attempt = "100ms", total = "100ms"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [503])
)]
pub trait Retried {
    #[get("/download")]
    async fn download(&self) -> Result<ResponseStream, ApiError>;
}

fn kind<T: std::fmt::Debug>(r: &Result<T, ApiError>) -> Option<ErrorKind> {
    r.as_ref().err().map(ApiError::kind)
}

/// Regression: the idle limit (99.9 ms) falls in the deadline's (100 ms) timer tick,
/// just before it. The read armed only the idle timer, which fires at that tick (100.9
/// ms on the clock), past the deadline, and ended with `AttemptTimeout` ("no data
/// within the idle limit"). The deadline wins the tie, as it does for an attempt's
/// limit in the call itself
/// (`an_attempt_limit_in_the_deadlines_tick_ends_the_call_as_the_deadline`) and for
/// any read made at that instant.
#[tokio::test(start_paused = true)]
async fn an_idle_limit_in_the_deadlines_tick_ends_the_read_as_the_deadline() {
    let t = ScriptedTransport::new([Step::status(200).chunks([(ms(500), "late")])]);
    let api = scripted::<ShortClient>(&t);
    let start = tokio::time::Instant::now();
    let mut body = api.download().await.unwrap();
    // The caller comes back 49.9 ms later: the idle limit is at 99.9 ms.
    tokio::time::advance(Duration::from_micros(49_900)).await;
    let r = body.chunk().await;
    let at = start.elapsed();
    assert!(at >= ms(100), "the read ended at {at:?}");
    assert_eq!(
        (at, kind(&r), r.as_ref().err().and_then(ApiError::timeout)),
        (
            Duration::from_micros(100_900),
            Some(ErrorKind::Deadline),
            Some(TimeoutKind::Total)
        )
    );
    drop(body);
    assert_nothing_leaked(&t);
}

/// Regression: a call cancelled through its token at t=20 (long before its deadline
/// at 100) whose body is next read at t=150 read as `Deadline`: the read asked the
/// deadline before the token. The call itself puts the caller's own word first
/// ("Cancellation first, then the deadline ... the caller's own word wins", as it does
/// "at every later step"), and the call was cancelled 80 ms before its deadline.
#[tokio::test(start_paused = true)]
async fn a_cancelled_calls_body_reads_as_cancelled_after_its_deadline() {
    let t = ScriptedTransport::new([Step::status(200).chunks([(ms(10), "a"), (ms(500), "b")])]);
    let clock = Clock::start();
    let token = CancellationToken::new();
    let api = scripted::<ShortClient>(&t).with_options(CallOptions::new().cancel_on(token.clone()));
    let mut body = api.download().await.unwrap();
    assert_eq!(body.chunk().await.unwrap().as_deref(), Some(&b"a"[..]));
    tokio::time::sleep(ms(10)).await;
    token.cancel(); // t=20
    tokio::time::sleep(ms(130)).await; // the caller is busy past the deadline
    let r = body.chunk().await;
    assert_eq!(
        (clock.now_ms(), kind(&r)),
        (150, Some(ErrorKind::Cancelled))
    );
    drop(body);
    assert_nothing_leaked(&t);
}

/// A streamed attempt ends with its head (README, timeouts): its bulkhead slot is free
/// while the caller reads, a half-open probe closes the breaker at the head, and a
/// body cut short afterwards is a transport error for the caller, not a breaker
/// failure.
#[tokio::test(start_paused = true)]
async fn a_streamed_attempt_ends_with_its_head_for_the_bulkhead_and_breaker() {
    let t = ScriptedTransport::new([
        Step::status(503),
        Step::status(200).chunks([(ms(10), "a")]).cut_after(ms(20)),
        Step::status(200).body("ok"),
        Step::status(200).body("ok"),
    ]);
    let clock = Clock::start();
    let api = scripted::<GuardedClient>(&t);
    assert_eq!(kind(&api.download().await), Some(ErrorKind::Status));
    assert_eq!(api.circuit_state().phase, Phase::Open);
    tokio::time::sleep(ms(100)).await;
    // The probe.
    let mut body = api.download().await.unwrap();
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    // The only slot is free while the body is read.
    assert_eq!(api.text().await.unwrap(), "ok");
    assert_eq!(body.chunk().await.unwrap().as_deref(), Some(&b"a"[..]));
    let r = body.chunk().await;
    assert_eq!(
        (clock.now_ms(), kind(&r)),
        (130, Some(ErrorKind::Transport))
    );
    assert_eq!(t.open_bodies(), 0);
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    assert_eq!(api.text().await.unwrap(), "ok");
    assert_eq!(t.attempts(), 4);
    drop(body);
    assert_nothing_leaked(&t);
}

/// `Response<ResponseStream>` (no other test uses it): its stream is bounded by the
/// call's deadline and ends with the call's token, as a plain `ResponseStream` is.
#[tokio::test(start_paused = true)]
async fn a_wrapped_stream_is_bounded_by_the_deadline_and_the_token() {
    let t = ScriptedTransport::new([
        Step::status(200).chunks([(ms(30), "a"), (ms(30), "b"), (ms(30), "c"), (ms(30), "d")]),
        Step::status(200).chunks([(ms(10), "a"), (ms(30), "b")]),
    ]);
    let clock = Clock::start();
    let api = scripted::<ShortClient>(&t);
    let response = api.wrapped().await.unwrap();
    assert_eq!(response.status(), 200);
    let r = response.into_value().bytes().await;
    assert_eq!((clock.now_ms(), kind(&r)), (100, Some(ErrorKind::Deadline)));
    assert_nothing_leaked(&t);

    let token = CancellationToken::new();
    let api = api.with_options(CallOptions::new().cancel_on(token.clone()));
    let mut body = api.wrapped().await.unwrap().into_value();
    assert_eq!(body.chunk().await.unwrap().as_deref(), Some(&b"a"[..]));
    let cancel = async {
        tokio::time::sleep(ms(5)).await;
        token.cancel();
    };
    let (r, ()) = tokio::join!(body.chunk(), cancel);
    assert_eq!(
        (clock.now_ms(), kind(&r)),
        (115, Some(ErrorKind::Cancelled))
    );
    assert_nothing_leaked(&t);
}

/// `attempt = "none"`: a chunk exactly 30 s after the last is delivered; the next
/// silence of 30 s ends the read with `AttemptTimeout` at exactly 30 s.
#[tokio::test(start_paused = true)]
async fn without_an_attempt_timeout_the_idle_limit_is_30_s() {
    let t =
        ScriptedTransport::new([Step::status(200).chunks([(ms(30_000), "a"), (ms(30_001), "b")])]);
    let clock = Clock::start();
    let api = scripted::<NoAttemptClient>(&t);
    let mut body = api.download().await.unwrap();
    assert_eq!(body.chunk().await.unwrap().as_deref(), Some(&b"a"[..]));
    assert_eq!(clock.now_ms(), 30_000);
    let r = body.chunk().await;
    assert_eq!(
        (clock.now_ms(), kind(&r)),
        (60_000, Some(ErrorKind::AttemptTimeout))
    );
    assert_nothing_leaked(&t);
}

/// The stream's deadline counts from the call's start, not from the attempt that
/// answered: a retry's streamed body (head at 20) still ends at 100.
#[tokio::test(start_paused = true)]
async fn a_retried_streams_deadline_counts_from_the_calls_start() {
    let t = ScriptedTransport::new([
        Step::status(503),
        Step::status(200).chunks([(ms(50), "a"), (ms(50), "b")]),
    ]);
    let clock = Clock::start();
    let api = scripted::<RetriedClient>(&t);
    let mut body = api.download().await.unwrap();
    assert_eq!(clock.now_ms(), 20);
    assert_eq!(body.chunk().await.unwrap().as_deref(), Some(&b"a"[..]));
    let r = body.chunk().await;
    assert_eq!((clock.now_ms(), kind(&r)), (100, Some(ErrorKind::Deadline)));
    assert_eq!(t.attempts(), 2);
    assert_nothing_leaked(&t);
}
