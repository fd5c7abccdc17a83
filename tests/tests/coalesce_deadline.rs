//! A shared (coalesced) execution has no deadline of its own: it stops only when every
//! caller has left. Its waits are bounded by the latest deadline among its callers: a
//! `Retry-After` that would end after every caller's deadline fails now with the
//! status that asked for it, as for a plain call, instead of sleeping for nobody.

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, ErrorKind, resilient_api};
use tests::{Clock, assert_nothing_leaked, ms, scripted, spawn_timed};

/// A coalesced read under a 100 ms total deadline, and the same without coalescing.
#[resilient_api(
    timeout(attempt = "100ms", total = "100ms"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503])
)]
pub trait Config {
    #[get("/config")]
    #[coalesce]
    async fn shared(&self) -> Result<String, ApiError>;

    #[get("/config")]
    async fn plain(&self) -> Result<String, ApiError>;
}

/// A 503 whose `retry-after-ms` asks for `wait` milliseconds.
fn busy_for(wait: &str) -> Step {
    Step::status(503)
        .header("retry-after-ms", wait)
        .body("busy")
}

#[tokio::test(start_paused = true)]
async fn a_wait_past_every_callers_deadline_fails_now_with_the_status() {
    for coalesced in [false, true] {
        let t = ScriptedTransport::new([busy_for("5000")]);
        let clock = Clock::start();
        let api = scripted::<ConfigClient>(&t);
        let e = if coalesced {
            api.shared().await
        } else {
            api.plain().await
        }
        .expect_err("503");
        assert_eq!(
            (e.kind(), e.status(), clock.now_ms()),
            (ErrorKind::Status, Some(503), 0),
            "coalesced: {coalesced}"
        );
        assert_eq!(t.dispatch_times(), [ms(0)]);
        tokio::time::sleep(ms(6000)).await;
        assert_eq!(t.attempts(), 1, "nothing later");
        assert_nothing_leaked(&t);
    }
}

#[tokio::test(start_paused = true)]
async fn a_wait_that_fits_a_later_callers_deadline_is_waited_for() {
    // The first caller (deadline 100) starts at 0, a second one (deadline 150) joins
    // at 50. The 503 at t=60 asks for 80 ms: the retry at t=140 is too late for the
    // first caller, who leaves at its deadline, but not for the second.
    let t = ScriptedTransport::new([busy_for("80").delay(ms(60)), Step::status(200).body("ok")]);
    let clock = Clock::start();
    let api = scripted::<ConfigClient>(&t);
    let first = spawn_timed(clock, {
        let api = api.clone();
        async move { api.shared().await }
    });
    tokio::time::sleep(ms(50)).await;
    let second = spawn_timed(clock, {
        let api = api.clone();
        async move { api.shared().await }
    });

    let (first, at) = first.await.expect("first caller's task");
    assert_eq!(
        (first.expect_err("past its deadline").kind(), at),
        (ErrorKind::Deadline, 100)
    );
    let (second, at) = second.await.expect("second caller's task");
    assert_eq!((second.expect("served").as_str(), at), ("ok", 140));
    assert_eq!(t.dispatch_times(), [ms(0), ms(140)]);
    assert_nothing_leaked(&t);
}

/// Coalesced, with no total deadline of its own.
#[resilient_api(
    timeout(attempt = "100ms"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503])
)]
pub trait Open {
    #[get("/config")]
    #[coalesce]
    async fn shared(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn a_caller_without_a_deadline_lets_the_execution_wait() {
    // One caller has a 50 ms deadline of its own, the other none: the 5 s wait serves
    // the second, and the first leaves alone at its deadline.
    let t = ScriptedTransport::new([busy_for("5000").delay(ms(10)), Step::status(200).body("ok")]);
    let clock = Clock::start();
    let api = scripted::<OpenClient>(&t);
    let hurried = api.with_options(CallOptions::new().deadline(ms(50)));
    let patient = spawn_timed(clock, {
        let api = api.clone();
        async move { api.shared().await }
    });
    let hurried = spawn_timed(clock, async move { hurried.shared().await });

    let (hurried, at) = hurried.await.expect("hurried caller's task");
    assert_eq!(
        (hurried.expect_err("past its deadline").kind(), at),
        (ErrorKind::Deadline, 50)
    );
    let (patient, at) = patient.await.expect("patient caller's task");
    assert_eq!((patient.expect("served").as_str(), at), ("ok", 5010));
    assert_eq!(t.dispatch_times(), [ms(0), ms(5010)]);
    assert_nothing_leaked(&t);
}

/// A caller that has left no longer bounds the execution's waits: the patient caller
/// (no deadline) leaves at 5 ms, so the 5 s wait asked for at 10 ms fits no caller
/// left, and the hurried one gets the 503 at once instead of its deadline at 150 ms.
#[tokio::test(start_paused = true)]
async fn a_caller_that_left_no_longer_lets_the_execution_wait() {
    let t = ScriptedTransport::new([busy_for("5000").delay(ms(10))]);
    let clock = Clock::start();
    let api = scripted::<OpenClient>(&t);
    let hurried = api.with_options(CallOptions::new().deadline(ms(150)));
    let patient = spawn_timed(clock, {
        let api = api.clone();
        async move { tokio::time::timeout(ms(5), api.shared()).await }
    });
    let hurried = spawn_timed(clock, async move { hurried.shared().await });

    let (patient, at) = patient.await.expect("patient caller's task");
    assert!(patient.is_err(), "left at 5 ms");
    assert_eq!(at, 5);
    let (hurried, at) = hurried.await.expect("hurried caller's task");
    let e = hurried.expect_err("503");
    assert_eq!(
        (e.kind(), e.status(), at),
        (ErrorKind::Status, Some(503), 10)
    );
    assert_eq!(t.dispatch_times(), [ms(0)]);
    tokio::time::sleep(ms(6000)).await;
    assert_eq!(t.attempts(), 1, "nothing later");
    assert_nothing_leaked(&t);
}

/// Coalesced, two retries 20 ms apart.
#[resilient_api(
    timeout(attempt = "10s"),
    retry(max = 2, backoff = fixed(delay = "20ms"), on = [503])
)]
pub trait Counted {
    #[get("/config")]
    #[coalesce]
    async fn config(&self) -> Result<String, ApiError>;
}

/// Regression: a coalesced caller that left on its own deadline or token reported 0
/// attempts, although the shared execution had made two for it (503 at 0 ms, a retry
/// at 20 ms that hangs); a plain call reports them.
#[tokio::test(start_paused = true)]
async fn a_coalesced_caller_that_leaves_reports_the_attempts_made() {
    let t = ScriptedTransport::new([Step::status(503).body("busy"), Step::hang()]);
    let clock = Clock::start();
    let api = scripted::<CountedClient>(&t).with_options(CallOptions::new().deadline(ms(100)));
    let e = api.config().await.unwrap_err();
    assert_eq!(
        (clock.now_ms(), e.kind(), e.attempts()),
        (100, ErrorKind::Deadline, 2)
    );
    assert_eq!(t.attempts(), 2);
    assert_nothing_leaked(&t);

    let t = ScriptedTransport::new([Step::status(503).body("busy"), Step::hang()]);
    let token = resilient_api::CancellationToken::new();
    let api =
        scripted::<CountedClient>(&t).with_options(CallOptions::new().cancel_on(token.clone()));
    let (r, ()) = tokio::join!(api.config(), async {
        tokio::time::sleep(ms(30)).await;
        token.cancel();
    });
    let e = r.unwrap_err();
    assert_eq!((e.kind(), e.attempts()), (ErrorKind::Cancelled, 2));
    assert_nothing_leaked(&t);
}
