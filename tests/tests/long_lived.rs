//! A client is built once and lives as long as the process: nothing it holds may grow
//! with the number of calls, with time, or with what a caller or a server sends, and
//! dropping it frees everything it was given. These scenarios measure that through
//! public behaviour: a transport and hooks that count their own drops, error bodies
//! that must not pin the buffer they were read from, and exact refusals and grants
//! after long idle periods and clock jumps of days on the paused clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use resilient_api::circuit_breaker::state::Phase;
use resilient_api::retry::budget::BudgetConfig;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::transport::{HttpRequest, HttpResponse, ResponseBody, SendFuture, Transport};
use resilient_api::{ApiError, CallOptions, CancellationToken, ErrorKind, resilient_api};
use tests::{Clock, assert_nothing_leaked, ms, scripted, scripted_builder, settle};

/// Every policy that keeps state: retries, a budget, a breaker, a bulkhead, a rate
/// limit, hedging and coalescing.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 100, reset = "1s"),
    bulkhead(concurrency = 4, queue = 4),
    rate_limit(per_second = 1000, burst = 10)
)]
pub trait Everything {
    #[get("/config")]
    #[coalesce]
    async fn config(&self) -> Result<String, ApiError>;

    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;

    #[get("/export")]
    async fn export(&self) -> Result<resilient_api::ResponseStream, ApiError>;

    #[get("/plain")]
    async fn plain(&self) -> Result<String, ApiError>;
}

/// Counts how many of the things it was put in have been dropped.
#[derive(Clone, Default)]
struct Drops(Arc<AtomicUsize>);

/// One thing counted by [`Drops`]: it adds one when dropped.
struct Tracked(Arc<AtomicUsize>);

impl Drops {
    fn track(&self) -> Tracked {
        Tracked(self.0.clone())
    }

    fn dropped(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A scripted transport that is counted when the client lets go of it.
struct CountedTransport {
    inner: ScriptedTransport,
    _tracked: Tracked,
}

impl Transport for CountedTransport {
    fn send(&self, request: HttpRequest) -> SendFuture {
        self.inner.send(request)
    }
}

/// A client whose transport and three hooks are each counted by `drops`.
fn counted_client(t: &ScriptedTransport, drops: &Drops) -> EverythingClient {
    let (predicate, on_retry, middleware) = (drops.track(), drops.track(), drops.track());
    scripted_builder::<EverythingClient>(t)
        .transport(CountedTransport {
            inner: t.clone(),
            _tracked: drops.track(),
        })
        .retry_predicate(move |_| {
            let _ = &predicate;
            Ok(true)
        })
        .on_retry(move |_| {
            let _ = &on_retry;
            Ok(())
        })
        .middleware(move |_| {
            let _ = &middleware;
            Ok(())
        })
        .build()
        .expect("the client builds")
}

/// After every kind of call (plain, retried, hedged, coalesced, streamed, cancelled
/// while in flight, dropped in a backoff) and the client and every clone of it are
/// dropped, the transport and the three hooks are dropped too: nothing the client
/// made (a shared execution, a partition, a stream) keeps the client alive.
#[tokio::test(start_paused = true)]
async fn dropping_the_client_frees_its_transport_and_hooks() {
    let t = ScriptedTransport::new([
        Step::status(200).body("plain"),
        Step::status(503).body("busy"),
        Step::status(200).body("retried"),
        Step::hang(),
        Step::status(200).body("hedge"),
        Step::status(200).body("shared").delay(ms(30)),
        Step::status(200).chunks([(ms(5), "str"), (ms(5), "eam")]),
        Step::hang(),
        Step::status(503),
    ]);
    let drops = Drops::default();
    let api = counted_client(&t, &drops);
    let clone = api.clone();
    let with_token = api.with_options(CallOptions::new().cancel_on(CancellationToken::new()));

    assert_eq!(api.plain().await.expect("plain"), "plain");
    assert_eq!(clone.plain().await.expect("retried"), "retried");
    assert_eq!(with_token.search().await.expect("hedged"), "hedge");
    let (a, b) = tokio::join!(api.config(), clone.config());
    assert_eq!(
        (a.expect("shared"), b.expect("shared")),
        ("shared".into(), "shared".into())
    );
    let stream = api.export().await.expect("a stream");

    // A call left in flight, and one left in its backoff, both dropped.
    let token = CancellationToken::new();
    let hanging = api.with_options(CallOptions::new().cancel_on(token.clone()));
    let in_flight = tokio::spawn(async move { hanging.config().await });
    settle().await;
    token.cancel();
    let ended = in_flight.await.expect("the task ends");
    assert_eq!(ended.map_err(|e| e.kind()), Err(ErrorKind::Cancelled));
    let backoff = tokio::time::timeout(ms(10), clone.plain()).await;
    assert!(backoff.is_err(), "dropped during its 20 ms backoff");

    drop((api, clone, with_token));
    settle().await;
    assert_eq!(
        drops.dropped(),
        4,
        "transport, predicate, on-retry hook, middleware"
    );
    // A streamed answer needs nothing of the client to be read to its end.
    assert_eq!(stream.text().await.expect("the stream reads"), "stream");
    assert_eq!(t.attempts(), 9);
    assert_nothing_leaked(&t);
}

/// An error response's body is kept up to 64 KiB (`ApiError::body`): the memory an
/// error holds must be that, not a view into the buffer the transport read it from.
/// hyper hands out body chunks as slices of its connection's read buffer (up to about
/// 400 KiB), so a kept slice of a few bytes would keep that whole buffer alive for as
/// long as the caller keeps the error (a last-error field, a log queue, a retry
/// report). Here the transport's buffer is 1 MiB and the body its first 4 bytes:
/// once the call has returned, the test's own handle must be the buffer's only one.
#[tokio::test(start_paused = true)]
async fn an_error_body_does_not_pin_the_buffer_it_was_read_from() {
    let buffer = Bytes::from(vec![b'x'; 1 << 20]);
    let t = ScriptedTransport::new([]);
    let api = scripted::<EverythingClient>(&t);
    // Made one at a time: a step not yet sent holds its slices too.
    let steps: [&dyn Fn() -> Step; 2] = [&|| Step::status(404).body(buffer.slice(..4)), &|| {
        Step::status(404).chunks([(ms(0), buffer.slice(..2)), (ms(1), buffer.slice(2..4))])
    }];
    for (n, step) in steps.into_iter().enumerate() {
        t.push([step()]);
        let e = api.plain().await.expect_err("a 404");
        assert_eq!(
            (e.status(), e.body_text().as_deref()),
            (Some(404), Some("xxxx"))
        );
        assert!(
            buffer.is_unique(),
            "step {n}: an error holding a 4-byte body keeps the transport's 1 MiB buffer alive"
        );
    }
    assert_nothing_leaked(&t);
}

/// Answers every request as hyper does: a 503 whose header values and body are all
/// slices of one 1 MiB read buffer (`HeaderValue::from_maybe_shared` keeps the slice).
struct OneBuffer(Bytes);

impl Transport for OneBuffer {
    fn send(&self, _request: HttpRequest) -> SendFuture {
        let buffer = self.0.clone();
        Box::pin(async move {
            let mut headers = http::HeaderMap::new();
            for (name, at) in [("x-request-id", 0..8), ("retry-after", 8..9)] {
                let value = http::HeaderValue::from_maybe_shared(buffer.slice(at))
                    .expect("digits make a header value");
                headers.insert(name, value);
            }
            Ok(HttpResponse {
                status: http::StatusCode::SERVICE_UNAVAILABLE,
                headers,
                body: ResponseBody::full(buffer.slice(..4)),
            })
        })
    }
}

/// The same for an error's headers: hyper makes each header value a slice of the
/// connection's read buffer, so an error that kept those slices would pin the whole
/// buffer behind a few header bytes. Once the call (two attempts, a 503 with
/// `Retry-After: 1` each) has returned, the error's headers and body must hold
/// copies, and the test's handle must be the buffer's only one.
#[tokio::test(start_paused = true)]
async fn an_error_keeps_no_slice_of_the_transports_buffer() {
    let buffer = Bytes::from(vec![b'1'; 1 << 20]);
    let api: EverythingClient = scripted_builder(&ScriptedTransport::new([]))
        .transport(OneBuffer(buffer.clone()))
        .build()
        .expect("builds");
    let e = api.plain().await.expect_err("two 503s");
    assert_eq!((e.status(), e.attempts()), (Some(503), 2));
    assert_eq!(e.body_text().as_deref(), Some("1111"));
    let headers = e.headers().expect("an error response's headers");
    assert_eq!(headers["x-request-id"], "11111111");
    drop(api);
    assert!(
        buffer.is_unique(),
        "an error's header values keep the transport's 1 MiB buffer alive"
    );
}

/// One retry on 503 and a breaker that never trips here: the budget is measured.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 1, backoff = fixed(delay = "10ms"), on = [503]),
    breaker(failures = 1000, reset = "1s")
)]
pub trait Idle {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// A floor of exactly 10 retries per 10 s and nothing earned by traffic.
fn floor_only() -> Option<BudgetConfig> {
    Some(BudgetConfig {
        ttl: Duration::from_secs(10),
        min_per_sec: 1,
        retry_ratio: 0.0,
    })
}

/// Calls that fail once and then succeed, until one is refused a retry: how many got
/// their retry.
async fn retries_granted(t: &ScriptedTransport, api: &IdleClient) -> usize {
    let mut granted = 0;
    loop {
        t.push([Step::status(503).body("busy")]);
        match api.resource().await {
            Ok(body) => assert_eq!(body, "ok"),
            Err(e) if e.kind() == ErrorKind::BudgetExhausted => return granted,
            Err(e) => panic!("unexpected {e:?}"),
        }
        granted += 1;
        assert!(granted <= 100, "the budget never ran out");
    }
}

/// The retry budget after a long idle period and a clock jump of days: the floor is
/// exactly 10 retries per 10 s again, no more (nothing left over from the idle
/// time), no less (nothing spent long ago still counted), and a huge jump neither
/// panics nor stops the window from moving.
#[tokio::test(start_paused = true)]
async fn the_budget_holds_its_floor_after_days_idle() {
    let t = ScriptedTransport::new([]);
    let api: IdleClient = scripted_builder(&t)
        .retry_budget(floor_only())
        .on_retry({
            let t = t.clone();
            move |_| {
                t.push([Step::status(200).body("ok")]);
                Ok(())
            }
        })
        .build()
        .expect("builds");
    for idle in [
        Duration::ZERO,
        DAY * 30,
        DAY * 365 * 50,
        Duration::from_secs(10),
    ] {
        tokio::time::advance(idle).await;
        let before = t.attempts();
        assert_eq!(retries_granted(&t, &api).await, 10, "after {idle:?} idle");
        assert_eq!(
            t.attempts() - before,
            21,
            "10 retried calls and one refused"
        );
    }
    assert_nothing_leaked(&t);
}

/// No retries; a breaker that trips when half of at least 4 outcomes in 10 s failed.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 0),
    breaker(failure_rate = 0.5, window = "10s", min_calls = 4, reset = "1s")
)]
pub trait Rated {
    #[get("/resource")]
    async fn resource(&self) -> Result<String, ApiError>;
}

/// The failure-rate window after a long idle period: three failures counted days
/// ago are gone (a new failure is alone in the window, and the breaker stays closed
/// until three more), and after a jump of fifty years the window still counts
/// exactly, bucket by bucket.
#[tokio::test(start_paused = true)]
async fn the_failure_rate_window_forgets_what_came_before_an_idle_period() {
    let t = ScriptedTransport::new([]);
    let api = scripted::<RatedClient>(&t);
    for idle in [DAY * 3, DAY * 365 * 50] {
        t.push((0..3).map(|_| Step::status(503)));
        for _ in 0..3 {
            let e = api.resource().await.expect_err("a 503");
            assert_eq!(e.status(), Some(503));
        }
        let state = api.circuit_state();
        assert_eq!(
            (state.phase, state.calls_in_window, state.failures_in_window),
            (Phase::Closed, 3, 3)
        );
        tokio::time::advance(idle).await;
        let state = api.circuit_state();
        assert_eq!(
            (state.calls_in_window, state.failures_in_window),
            (0, 0),
            "after {idle:?}"
        );
        t.push((0..3).map(|_| Step::status(503)));
        for n in 1..=3 {
            let e = api.resource().await.expect_err("a 503");
            assert_eq!(e.status(), Some(503));
            assert_eq!(api.circuit_state().calls_in_window, n);
        }
        assert_eq!(
            api.circuit_state().phase,
            Phase::Closed,
            "3 outcomes are fewer than 4"
        );
        t.push([Step::status(503)]);
        let _ = api.resource().await;
        assert_eq!(
            api.circuit_state().phase,
            Phase::Open,
            "the fourth failure trips it"
        );
        // Past the cooldown, a successful probe closes it for the next round.
        tokio::time::advance(Duration::from_secs(1)).await;
        t.push([Step::status(200).body("ok")]);
        assert_eq!(api.resource().await.expect("the probe"), "ok");
        assert_eq!(api.circuit_state().phase, Phase::Closed);
        tokio::time::advance(Duration::from_secs(10)).await;
    }
    assert_nothing_leaked(&t);
}

/// The rate limiter after a long idle period: the bucket is full again, with exactly
/// its burst (10) and no more: the eleventh attempt waits one token's interval (1 ms
/// at 1,000 per second), however long the idle time before it.
#[tokio::test(start_paused = true)]
async fn the_rate_limit_grants_exactly_its_burst_after_days_idle() {
    let t = ScriptedTransport::new([]);
    let api = scripted::<EverythingClient>(&t);
    let clock = Clock::start();
    for idle in [DAY * 2, DAY * 365 * 50] {
        tokio::time::advance(idle).await;
        let started = clock.now_ms();
        t.push((0..11).map(|_| Step::status(200).body("ok")));
        let before = t.attempts();
        for _ in 0..11 {
            assert_eq!(api.plain().await.expect("served"), "ok");
        }
        let times = t.dispatch_times();
        let mine: Vec<u64> = times[before..]
            .iter()
            .map(|d| d.as_millis() as u64 - started)
            .collect();
        assert_eq!(
            mine,
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            "after {idle:?} idle"
        );
    }
    assert_nothing_leaked(&t);
}

/// How many partitions `engine` holds, from its `Debug` (`Engine { partitions: N }`).
fn partitions(engine: &resilient_api::Engine) -> usize {
    let shown = format!("{engine:?}");
    let n = shown
        .trim_start_matches("Engine { partitions: ")
        .trim_end_matches(" }");
    n.parse()
        .unwrap_or_else(|_| panic!("unexpected Debug: {shown}"))
}

/// One engine shared by clients built for many upstreams, one after another (a client
/// per tenant's base URL, say, all under one global bulkhead): a partition that no
/// client uses any more and whose state is as a new one's would be (breaker closed
/// with nothing counted, bucket full, budget with nothing counted, nobody holding a
/// slot) is forgotten, so the engine's map does not grow with the number of
/// upstreams it has ever seen. It forgets them in batches, so it may hold a few (at
/// most 16 here); before, it held every one of the 200.
#[tokio::test(start_paused = true)]
async fn an_engine_forgets_partitions_no_client_uses() {
    let engine = resilient_api::Engine::new();
    let t = ScriptedTransport::new([]);
    for tenant in 0..200 {
        let api: EverythingClient = scripted_builder(&t)
            .base_url(format!("https://tenant-{tenant}.example.test"))
            .engine(engine.clone())
            .build()
            .expect("builds");
        t.push([Step::status(200).body("ok")]);
        assert_eq!(api.plain().await.expect("served"), "ok");
        drop(api);
        // Past the rate limit's refill and the budget's window: nothing left counted.
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(
            partitions(&engine) <= 16,
            "tenant {tenant}: {}",
            partitions(&engine)
        );
    }
    assert_nothing_leaked(&t);
}

/// What an engine forgets is only what a new partition would hold anyway: a host
/// whose breaker has counted failures (or is open) keeps its partition after its last
/// client is dropped, however many other hosts come and go, so a client built for it
/// later finds the same breaker, as sharing an engine promises; and a partition in
/// use by a live client is never forgotten.
#[tokio::test(start_paused = true)]
async fn an_engine_keeps_partitions_with_state_or_clients() {
    let engine = resilient_api::Engine::new();
    let t = ScriptedTransport::new([]);
    let build = |host: &str| -> EverythingClient {
        scripted_builder(&t)
            .base_url(format!("https://{host}.example.test"))
            .engine(engine.clone())
            .build()
            .expect("builds")
    };
    let live = build("live");
    let failing = build("failing");
    t.push([Step::status(404), Step::status(503), Step::status(503)]);
    let _ = live.plain().await;
    let _ = failing.plain().await; // one failure and its retry's: two counted
    assert_eq!(failing.circuit_state().consecutive_failures, 2);
    drop(failing);
    for other in 0..100 {
        let api = build(&format!("other-{other}"));
        drop(api);
        tokio::time::advance(Duration::from_secs(11)).await;
    }
    let again = build("failing");
    assert_eq!(
        again.circuit_state().consecutive_failures,
        2,
        "the same breaker"
    );
    let state = live.circuit_state();
    assert_eq!((state.phase, state.generation), (Phase::Closed, 0));
    assert!(partitions(&engine) <= 18, "{}", partitions(&engine));
    assert_nothing_leaked(&t);
}

/// Coalesced reads keyed by a value the caller chooses, decoded as JSON.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 1, backoff = fixed(delay = "20ms"), on = [503]),
    breaker(failures = 100000, reset = "1s")
)]
pub trait Lookup {
    #[get("/items")]
    #[coalesce]
    async fn item(&self, #[query] id: u32) -> Result<u32, ApiError>;
}

/// The handle under a [`LookupClient`], kept to look at the client's coalescing map.
struct LookupProbe(resilient_api::__private::Handle);

impl resilient_api::client::GeneratedClient for LookupProbe {
    const API: &'static resilient_api::__private::ApiSpec =
        <LookupClient as resilient_api::client::GeneratedClient>::API;
    fn from_handle(handle: resilient_api::__private::Handle) -> Self {
        LookupProbe(handle)
    }
}

/// Coalescing keys are the caller's values (here a query parameter): a key is
/// forgotten however its execution ends, so a long-lived client that has looked up
/// hundreds of distinct values holds none once their calls are over. Each id ends a
/// different way: answered, a 404, a retried 503 that stays one, past its deadline
/// while in flight, dropped in its backoff, undecodable, and a retry predicate that
/// panics inside the shared execution.
#[tokio::test(start_paused = true)]
async fn coalescing_keys_do_not_outlive_their_calls() {
    use resilient_api::client::GeneratedClient;
    let t = ScriptedTransport::new([]);
    let panics = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let LookupProbe(handle) = scripted_builder::<LookupProbe>(&t)
        .retry_predicate({
            let panics = panics.clone();
            move |_| {
                assert!(!panics.load(Ordering::SeqCst), "the predicate panicked");
                Ok(true)
            }
        })
        .build()
        .expect("builds");
    let api = LookupClient::from_handle(handle.clone());
    let keys = || resilient_api::__private::coalescing_keys(&handle);
    for id in 0..700u32 {
        match id % 7 {
            0 => {
                t.push([Step::status(200)
                    .header("content-type", "application/json")
                    .body(id.to_string())]);
                assert_eq!(api.item(id).await.expect("answered"), id);
            }
            1 => {
                t.push([Step::status(404)]);
                assert_eq!(api.item(id).await.expect_err("a 404").status(), Some(404));
            }
            2 => {
                t.push([Step::status(503), Step::status(503)]);
                assert_eq!(api.item(id).await.expect_err("503s").attempts(), 2);
            }
            3 => {
                t.push([Step::hang()]);
                let short = api.with_options(CallOptions::new().deadline(ms(5)));
                let e = short.item(id).await.expect_err("past its deadline");
                assert_eq!(e.kind(), ErrorKind::Deadline);
            }
            4 => {
                t.push([Step::status(503)]);
                let dropped = tokio::time::timeout(ms(10), api.item(id)).await;
                assert!(dropped.is_err(), "dropped in its backoff");
            }
            5 => {
                t.push([Step::status(200)
                    .header("content-type", "application/json")
                    .body("\"no\"")]);
                assert_eq!(
                    api.item(id).await.expect_err("a string").kind(),
                    ErrorKind::Decode
                );
            }
            _ => {
                t.push([Step::status(503)]);
                panics.store(true, Ordering::SeqCst);
                let call = tokio::spawn({
                    let api = api.clone();
                    async move { api.item(id).await }
                });
                let e = call
                    .await
                    .expect_err("the predicate's panic reaches the caller");
                assert!(e.is_panic());
                panics.store(false, Ordering::SeqCst);
            }
        }
        assert_eq!(keys(), 0, "id {id} left its key behind");
    }
    assert_nothing_leaked(&t);
}

/// Three per second, one at a time: an interval of 333.33... ms, which no timer tick
/// meets.
#[resilient_api(
    timeout(attempt = "1s"),
    retry(max = 0),
    rate_limit(per_second = 3, burst = 1)
)]
pub trait Thirds {
    #[get("/tick")]
    async fn tick(&self) -> Result<String, ApiError>;
}

/// An hour of back-to-back calls through a rate limit whose interval is not a whole
/// number of milliseconds: each waiter takes its token on the tick that wakes it, so
/// the k-th call goes at exactly k × 334 ms, from the first to the 10,800th. The
/// spacing neither drifts below the rate (a rounding error that accumulates would let
/// calls come closer than 333.33 ms) nor grows beyond that one tick per call.
#[tokio::test(start_paused = true)]
async fn an_hour_of_calls_keeps_the_rate_limit_exact() {
    let t = ScriptedTransport::new([]);
    let api = scripted::<ThirdsClient>(&t);
    const CALLS: u64 = 10_800;
    for _ in 0..CALLS {
        t.push([Step::status(200).body("ok")]);
        assert_eq!(api.tick().await.expect("served"), "ok");
    }
    let times = t.dispatch_times();
    assert_eq!(times.len() as u64, CALLS);
    for (k, at) in times.iter().enumerate() {
        assert_eq!(at.as_millis(), k as u128 * 334, "call {k}");
    }
    assert_nothing_leaked(&t);
}
