//! hedge_retry_after: a branch that fails with the server's `Retry-After` stops the
//! round's hedging. No branch leaves before the server's instant; branches already in
//! flight keep running (one may still win); when none is left, the round ends with
//! the failure that asked to wait and the retry loop honours it. A failure without
//! `Retry-After` hedges on schedule, as before.

use std::time::Duration;

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, ErrorKind, resilient_api};
use tests::{Clock, assert_follow_up_succeeds, assert_no_late_dispatch, ms, scripted};

/// Hedged searches with one retry (50 ms unless the server says otherwise).
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 1, backoff = fixed(delay = "50ms"), on = [429, 503])
)]
pub trait Search {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;

    #[get("/search")]
    #[hedge(delay = "10ms", max = 3)]
    async fn search_3(&self) -> Result<String, ApiError>;
}

/// A 429 asking to come back in `secs` seconds.
fn too_many(secs: &str) -> Step {
    Step::status(429)
        .body("slow down")
        .header("retry-after", secs)
}

#[tokio::test(start_paused = true)]
async fn retry_after_stops_the_hedge_and_the_retry_waits_for_it() {
    // The primary's 429 (t=0) asks for 5 s: no hedge at t=10. The retry's round
    // leaves at exactly t=5000 and its first branch answers at once.
    let t = ScriptedTransport::new([too_many("5"), Step::status(200).body("ok")]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    assert_eq!(api.search().await.unwrap(), "ok");
    assert_eq!(clock.now_ms(), 5000);
    assert_eq!(t.dispatch_times(), [ms(0), ms(5000)]);
    assert_no_late_dispatch(&t, 2, ms(100)).await;
    assert_follow_up_succeeds(&t, || api.search()).await;
}

#[tokio::test(start_paused = true)]
async fn retry_after_then_a_slow_retry_round_hedges_again() {
    // The retry's round is a normal hedged round: its first branch is slow, so its
    // hedge leaves 10 ms later and wins.
    let t = ScriptedTransport::new([too_many("5"), Step::hang(), Step::status(200).body("hedge")]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    assert_eq!(api.search().await.unwrap(), "hedge");
    assert_eq!(clock.now_ms(), 5010);
    assert_eq!(t.dispatch_times(), [ms(0), ms(5000), ms(5010)]);
    assert_follow_up_succeeds(&t, || api.search()).await;
}

#[tokio::test(start_paused = true)]
async fn a_429_without_retry_after_still_hedges_on_schedule() {
    // Unchanged: without a server wait the hedge leaves at t=10 and wins.
    let t = ScriptedTransport::new([
        Step::status(429).body("slow down"),
        Step::status(200).body("ok"),
    ]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    assert_eq!(api.search().await.unwrap(), "ok");
    assert_eq!(clock.now_ms(), 10);
    assert_eq!(t.dispatch_times(), [ms(0), ms(10)]);
    assert_follow_up_succeeds(&t, || api.search()).await;
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_of_zero_still_hedges_on_schedule() {
    // "Come back now" names no instant in the future: the hedge leaves at t=10.
    let t = ScriptedTransport::new([too_many("0"), Step::status(200).body("ok")]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    assert_eq!(api.search().await.unwrap(), "ok");
    assert_eq!(clock.now_ms(), 10);
    assert_eq!(t.dispatch_times(), [ms(0), ms(10)]);
    assert_follow_up_succeeds(&t, || api.search()).await;
}

#[tokio::test(start_paused = true)]
async fn a_branch_in_flight_still_wins_after_retry_after() {
    // Branch 1 answers 200 at t=30. Branch 2 (t=10) answers 429 Retry-After: 5 at
    // t=15: branch 3 (due at t=20, `max = 3`) never leaves, and branch 1 still wins.
    let t = ScriptedTransport::new([
        Step::status(200).body("primary").delay(ms(30)),
        too_many("5").delay(ms(5)),
    ]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    assert_eq!(api.search_3().await.unwrap(), "primary");
    assert_eq!(clock.now_ms(), 30);
    assert_eq!(t.attempts(), 2);
    assert_eq!(t.dispatch_times(), [ms(0), ms(10)]);
    assert_no_late_dispatch(&t, 2, ms(100)).await;
    assert_follow_up_succeeds(&t, || api.search()).await;
}

#[tokio::test(start_paused = true)]
async fn the_round_keeps_the_server_instant_when_a_later_branch_fails_without_one() {
    // Branch 2's 429 at t=15 asks for 5 s (until t=5015); branch 1's 503 at t=30 says
    // nothing. The round ends at t=30 with the 429, and the retry leaves at exactly
    // t=5015: the server's instant, not 5 s after the round ended, nor the 50 ms
    // backoff.
    let t = ScriptedTransport::new([
        Step::status(503).body("busy").delay(ms(30)),
        too_many("5").delay(ms(5)),
        Step::status(200).body("ok"),
    ]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    assert_eq!(api.search_3().await.unwrap(), "ok");
    assert_eq!(clock.now_ms(), 5015);
    assert_eq!(t.dispatch_times(), [ms(0), ms(10), ms(5015)]);
    assert_follow_up_succeeds(&t, || api.search()).await;
}

#[tokio::test(start_paused = true)]
async fn a_server_wait_past_the_deadline_ends_the_call_with_it() {
    // Same round under a 1 s deadline: the server's instant (t=5015) does not fit, so
    // the call ends when the last branch fails (t=30), reporting the 429 and when the
    // server said to come back.
    let t = ScriptedTransport::new([
        Step::status(503).body("busy").delay(ms(30)),
        too_many("5").delay(ms(5)),
    ]);
    let start = tokio::time::Instant::now();
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    let e = api
        .with_options(CallOptions::new().deadline(Duration::from_secs(1)))
        .search_3()
        .await
        .unwrap_err();
    assert_eq!(clock.now_ms(), 30);
    assert_eq!(e.kind(), ErrorKind::AllHedgesFailed, "{e:?}");
    assert_eq!(e.attempts(), 2);
    assert_eq!(e.status(), Some(429));
    assert_eq!(e.body_text().as_deref(), Some("slow down"));
    assert_eq!(e.retry_at(), Some(start + ms(5015)));
    assert_eq!(e.retry_after(), Some(ms(4985)));
    assert_eq!(t.dispatch_times(), [ms(0), ms(10)]);
    assert_no_late_dispatch(&t, 2, Duration::from_secs(10)).await;
    assert_follow_up_succeeds(&t, || api.search()).await;
}

#[tokio::test(start_paused = true)]
async fn the_latest_server_instant_wins_when_several_branches_ask_to_wait() {
    // Branch 2 asks at t=15 for 1 s (until t=1015); branch 1 asks at t=20 for 2 s
    // (until t=2020). The retry leaves at the later instant, t=2020.
    let t = ScriptedTransport::new([
        too_many("2").delay(ms(20)),
        too_many("1").delay(ms(5)),
        Step::status(200).body("ok"),
    ]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    assert_eq!(api.search_3().await.unwrap(), "ok");
    assert_eq!(clock.now_ms(), 2020);
    assert_eq!(t.dispatch_times(), [ms(0), ms(10), ms(2020)]);
    assert_follow_up_succeeds(&t, || api.search()).await;
}

/// Hedged after 10 ms, no retries.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Once {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;
}

/// Regression: when every branch failed, `AllHedgesFailed` carried the 503's status
/// and headers but not the wait its `Retry-After` asked for.
#[tokio::test(start_paused = true)]
async fn all_hedges_failed_keeps_the_servers_retry_after() {
    let t = ScriptedTransport::new([
        Step::status(503).header("retry-after", "5").delay(ms(20)),
        Step::status(503).delay(ms(20)),
    ]);
    let start = tokio::time::Instant::now();
    let api = tests::scripted::<OnceClient>(&t);
    let e = api.search().await.unwrap_err();
    assert_eq!(
        (e.kind(), e.status()),
        (ErrorKind::AllHedgesFailed, Some(503))
    );
    assert_eq!(e.retry_after(), Some(Duration::from_secs(5)));
    assert_eq!(e.retry_at(), Some(start + ms(5020)));
    assert_eq!(t.attempts(), 2);
}

/// Hedged searches with one retry, one bulkhead slot and a queue of one: a hedge waits
/// in the queue while the primary holds the slot.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 1, backoff = fixed(delay = "50ms"), on = [429, 503]),
    bulkhead(concurrency = 1, queue = 1)
)]
pub trait Queued {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;
}

/// Regression: the hedge launched at t=10 waited in the bulkhead queue behind the
/// primary; the primary's 429 at t=20 asked for 1 s and gave back the slot, and the
/// queued hedge took it and was dispatched at once, at t=20, although the server had
/// just asked for no request before t=1020. A branch not yet sent when the server asks
/// to wait is withdrawn: only the retry leaves, at exactly t=1020.
#[tokio::test(start_paused = true)]
async fn a_hedge_still_queued_when_the_server_asks_to_wait_is_not_sent() {
    let t = ScriptedTransport::new([too_many("1").delay(ms(20)), Step::status(200).body("ok")]);
    let clock = Clock::start();
    let api = scripted::<QueuedClient>(&t);

    let result = api.search().await;
    assert_eq!(
        t.dispatch_times(),
        [ms(0), ms(1020)],
        "nothing leaves between the 429 and the server's instant"
    );
    assert_eq!(
        (result.expect("the retry succeeds").as_str(), clock.now_ms()),
        ("ok", 1020)
    );
    assert_no_late_dispatch(&t, 2, ms(100)).await;
    assert_follow_up_succeeds(&t, || api.search()).await;
}

/// Hedged branches with a 100 ms attempt limit and one retry on 503.
#[resilient_api(
    timeout(attempt = "100ms"),
    retry(max = 1, backoff = fixed(delay = "50ms"), on = [503])
)]
pub trait Limited {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<String, ApiError>;
}

/// Regression: a branch's 503 with `Retry-After: 5`, whose body was still arriving at
/// the branch's limit (t=100), ended as `AttemptTimeout`; the round ended as
/// `AllHedgesFailed` when the hedge timed out too (t=110) and the retry left after
/// the 50 ms backoff (t=160). The branch ends as that 503 at t=100: the round waits
/// for the hedge in flight, then ends with the 503, and the retry leaves at the
/// server's instant (t=5100).
#[tokio::test(start_paused = true)]
async fn a_branch_whose_error_body_outlasts_its_limit_keeps_its_retry_after() {
    let t = ScriptedTransport::new([
        Step::status(503)
            .header("retry-after", "5")
            .chunks([(ms(5), "bu"), (ms(1000), "sy")]),
        Step::hang(),
        Step::status(200).body("ok"),
    ]);
    let clock = Clock::start();
    let api = scripted::<LimitedClient>(&t);

    assert_eq!(api.search().await.unwrap(), "ok");
    assert_eq!(clock.now_ms(), 5100);
    assert_eq!(t.dispatch_times(), [ms(0), ms(10), ms(5100)]);
    assert_no_late_dispatch(&t, 3, ms(100)).await;
    assert_follow_up_succeeds(&t, || api.search()).await;
}

/// A branch in flight when a sibling's `Retry-After` stops the hedging keeps running,
/// and a redirect it then gets is part of that attempt, already sent: it is followed
/// (at t=30, while the server's 5 s run), and its answer wins the round. Only new
/// branches wait for the server's instant.
#[tokio::test(start_paused = true)]
async fn a_branch_in_flight_follows_its_redirect_after_a_siblings_retry_after() {
    let t = ScriptedTransport::new([
        Step::status(302)
            .header("location", "/search/moved")
            .delay(ms(30)),
        too_many("5").delay(ms(5)),
        Step::status(200).body("moved"),
    ]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    assert_eq!(api.search().await.unwrap(), "moved");
    assert_eq!(clock.now_ms(), 30);
    assert_eq!(t.dispatch_times(), [ms(0), ms(10), ms(30)]);
    let urls: Vec<String> = t.requests().into_iter().map(|r| r.url).collect();
    assert_eq!(
        urls,
        [
            "https://example.test/search",
            "https://example.test/search",
            "https://example.test/search/moved"
        ]
    );
    assert_no_late_dispatch(&t, 3, ms(100)).await;
}
