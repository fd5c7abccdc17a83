//! S17 coalesce_cancel: coalesced callers are independent. Cancelling one leaves the
//! other served by the same request; cancelling every caller drops the shared request
//! and forgets its key.

use resilient_api::__private::{ApiSpec, Handle, coalescing_keys};
use resilient_api::client::GeneratedClient;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, CancellationToken, ErrorKind, resilient_api};
use tests::{Clock, assert_follow_up_succeeds, assert_nothing_leaked, ms, scripted, settle};

/// A coalesced read with retries.
#[resilient_api(timeout(attempt = "10s"), retry(max = 2, backoff = fixed(delay = "20ms"), on = [503]))]
pub trait Config {
    #[get("/config")]
    #[coalesce]
    async fn config(&self) -> Result<String, ApiError>;
}

/// Two identical calls on a step answered at t=50; at t=20 the callers picked by
/// `cancel` are cancelled through their tokens.
async fn coalesce_cancel(cancel: [bool; 2]) {
    let t = ScriptedTransport::new([Step::status(200).body("answer").delay(ms(50))]);
    let clock = Clock::start();
    let api = scripted::<ConfigClient>(&t);
    let tokens = [CancellationToken::new(), CancellationToken::new()];
    let callers = [
        api.with_options(CallOptions::new().cancel_on(tokens[0].clone())),
        api.with_options(CallOptions::new().cancel_on(tokens[1].clone())),
    ];

    let timed = |r: Result<String, ApiError>| (r, clock.now_ms());
    let (first, second, in_flight_after_cancel) = tokio::join!(
        async { timed(callers[0].config().await) },
        async { timed(callers[1].config().await) },
        async {
            tokio::time::sleep(ms(20)).await;
            assert_eq!(t.attempts(), 1, "coalesced into one dispatch");
            assert_eq!(t.in_flight(), 1);
            for (token, cancel) in tokens.iter().zip(cancel) {
                if cancel {
                    token.cancel();
                }
            }
            // Let the cancelled callers settle in this same tick.
            for _ in 0..3 {
                tokio::task::yield_now().await;
            }
            assert_eq!(clock.now_ms(), 20);
            t.in_flight()
        },
    );

    for ((result, at), cancelled) in [first, second].into_iter().zip(cancel) {
        if cancelled {
            let e = result.expect_err("cancelled");
            assert_eq!(e.kind(), ErrorKind::Cancelled, "{e:?}");
            assert_eq!(at, 20, "a cancelled caller settles at once");
        } else {
            assert_eq!(result.expect("served"), "answer");
            assert_eq!(at, 50, "the caller left still gets the shared answer");
        }
    }
    if cancel == [true, true] {
        assert_eq!(in_flight_after_cancel, 0, "the shared request was dropped");
        assert_eq!(clock.now_ms(), 20);
    } else {
        assert_eq!(in_flight_after_cancel, 1, "the shared request goes on");
        assert_eq!(clock.now_ms(), 50);
    }
    assert_eq!(t.attempts(), 1);
    assert_eq!(t.dispatch_times(), [ms(0)]);
    assert_nothing_leaked(&t);

    // Nothing dispatched later on behalf of the cancelled callers.
    tokio::time::sleep(ms(100)).await;
    assert_eq!(t.attempts(), 1);
    assert_follow_up_succeeds(&t, || api.config()).await;
}

#[tokio::test(start_paused = true)]
async fn s17_coalesce_cancel_first() {
    coalesce_cancel([true, false]).await;
}

#[tokio::test(start_paused = true)]
async fn s17_coalesce_cancel_second() {
    coalesce_cancel([false, true]).await;
}

#[tokio::test(start_paused = true)]
async fn s17_coalesce_cancel_both() {
    coalesce_cancel([true, true]).await;
}

#[tokio::test(start_paused = true)]
async fn s17_coalesce_dropped_caller_leaves_the_other_served() {
    // Dropping a caller's future (here by a 20 ms timeout around it) is leaving too.
    let t = ScriptedTransport::new([Step::status(200).body("answer").delay(ms(50))]);
    let clock = Clock::start();
    let api = scripted::<ConfigClient>(&t);

    let (dropped, kept) = tokio::join!(
        async {
            let r = tokio::time::timeout(ms(20), api.config()).await;
            (r.is_err(), clock.now_ms())
        },
        async { (api.config().await, clock.now_ms()) },
    );
    assert_eq!(dropped, (true, 20));
    let (result, at) = kept;
    assert_eq!(result.expect("served"), "answer");
    assert_eq!(at, 50);
    assert_eq!(t.attempts(), 1);
    assert_follow_up_succeeds(&t, || api.config()).await;
}

#[tokio::test(start_paused = true)]
async fn s17_coalesce_cancel_during_shared_backoff() {
    // The shared execution is in its backoff (503 at t=0, retry due at t=20) when the
    // first caller is cancelled at t=10; the second still gets the retry's answer, and
    // the cancelled caller causes no dispatch of its own.
    let t = ScriptedTransport::new([
        Step::status(503).body("busy"),
        Step::status(200).body("answer").delay(ms(5)),
    ]);
    let clock = Clock::start();
    let api = scripted::<ConfigClient>(&t);
    let token = CancellationToken::new();
    let cancellable = api.with_options(CallOptions::new().cancel_on(token.clone()));

    let (first, second, ()) = tokio::join!(
        async { (cancellable.config().await, clock.now_ms()) },
        async { (api.config().await, clock.now_ms()) },
        async {
            tokio::time::sleep(ms(10)).await;
            token.cancel();
        },
    );
    let (e, at) = first;
    assert_eq!(e.unwrap_err().kind(), ErrorKind::Cancelled);
    assert_eq!(at, 10);
    let (result, at) = second;
    assert_eq!(result.expect("served"), "answer");
    assert_eq!(at, 25);
    assert_eq!(t.attempts(), 2);
    assert_eq!(t.dispatch_times(), [ms(0), ms(20)]);
    assert_follow_up_succeeds(&t, || api.config()).await;
}

/// The handle under a [`ConfigClient`], kept to look at the client's coalescing map.
struct Probe(Handle);

impl GeneratedClient for Probe {
    const API: &'static ApiSpec = <ConfigClient as GeneratedClient>::API;
    fn from_handle(handle: Handle) -> Self {
        Probe(handle)
    }
}

/// A [`ConfigClient`] on `t` and the handle it runs on.
fn probed(t: &ScriptedTransport) -> (ConfigClient, Handle) {
    let Probe(handle) = scripted::<Probe>(t);
    (ConfigClient::from_handle(handle.clone()), handle)
}

#[tokio::test(start_paused = true)]
async fn s17_coalesce_cancel_both_forgets_the_key() {
    // Regression: when every caller left before the shared execution finished, its
    // key (URL and headers) stayed in the client's map for the client's lifetime.
    let t = ScriptedTransport::new([Step::hang()]);
    let (api, handle) = probed(&t);
    let tokens = [CancellationToken::new(), CancellationToken::new()];
    let callers = tokens
        .clone()
        .map(|token| api.with_options(CallOptions::new().cancel_on(token)));

    let (first, second, ()) = tokio::join!(callers[0].config(), callers[1].config(), async {
        tokio::time::sleep(ms(20)).await;
        assert_eq!(t.attempts(), 1, "coalesced into one dispatch");
        assert_eq!(coalescing_keys(&handle), 1, "the shared execution is known");
        tokens.iter().for_each(CancellationToken::cancel);
    },);
    settle().await;
    for r in [first, second] {
        assert_eq!(r.expect_err("cancelled").kind(), ErrorKind::Cancelled);
    }
    assert_nothing_leaked(&t);
    assert_eq!(coalescing_keys(&handle), 0, "the key outlived every caller");
    assert_follow_up_succeeds(&t, || api.config()).await;
    assert_eq!(coalescing_keys(&handle), 0);
}

#[tokio::test(start_paused = true)]
async fn s17_coalesce_dropped_callers_forget_the_key() {
    // The same when the callers' futures are dropped (here by a timeout around them).
    let t = ScriptedTransport::new([Step::hang()]);
    let (api, handle) = probed(&t);

    let (first, second) = tokio::join!(
        tokio::time::timeout(ms(20), api.config()),
        tokio::time::timeout(ms(30), api.config()),
    );
    assert!(first.is_err() && second.is_err(), "both callers timed out");
    settle().await;
    assert_nothing_leaked(&t);
    assert_eq!(t.attempts(), 1);
    assert_eq!(coalescing_keys(&handle), 0, "the key outlived every caller");
}

#[tokio::test(start_paused = true)]
async fn s17_coalesce_late_leaver_keeps_the_newer_execution() {
    // The first execution answers at t=50 and one of its callers at once makes the same
    // call again, starting a second execution. The other caller of the first is polled
    // again only at t=55, and its leaving then must not forget the second execution's
    // key: a third call at t=60 still joins the second execution.
    let t = ScriptedTransport::new([
        Step::status(200).body("first").delay(ms(50)),
        Step::status(200).body("second").delay(ms(50)),
    ]);
    let clock = Clock::start();
    let (api, handle) = probed(&t);

    let (again, late, third) = tokio::join!(
        async {
            assert_eq!(api.config().await.expect("served"), "first");
            (api.config().await, clock.now_ms())
        },
        async {
            let mut call = std::pin::pin!(api.config());
            let joined = tokio::time::timeout(ms(10), &mut call).await;
            assert!(joined.is_err(), "joined the first execution");
            tokio::time::sleep(ms(45)).await;
            let r = call.await;
            assert_eq!(clock.now_ms(), 55);
            assert_eq!(coalescing_keys(&handle), 1, "the second execution is known");
            r
        },
        async {
            tokio::time::sleep(ms(60)).await;
            (api.config().await, clock.now_ms())
        },
    );
    assert_eq!(late.expect("served"), "first");
    let (r, at) = again;
    assert_eq!((r.expect("served").as_str(), at), ("second", 100));
    let (r, at) = third;
    assert_eq!((r.expect("joined").as_str(), at), ("second", 100));
    assert_eq!(
        t.attempts(),
        2,
        "the third call joined the second execution"
    );
    assert_eq!(t.dispatch_times(), [ms(0), ms(50)]);
    assert_eq!(coalescing_keys(&handle), 0);
    assert_follow_up_succeeds(&t, || api.config()).await;
}
