//! coalesce_hedge: a shared execution that hedges. Its hedges are bounded by its
//! callers' latest deadline, and that bound grows as callers join: a hedge that the
//! first caller's deadline ruled out is sent for a caller who joined later and waits
//! longer.

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, CallOptions, ErrorKind, resilient_api};
use tests::{Clock, assert_no_late_dispatch, assert_nothing_leaked, ms, scripted, spawn_timed};

/// A coalesced, hedged GET (10 ms, 2 branches), no retries.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait Shared {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    #[coalesce]
    async fn search(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn coalesce_hedge_both_callers_get_the_hedge() {
    let t = ScriptedTransport::new([Step::hang(), Step::status(200).body("hedge").delay(ms(5))]);
    let clock = Clock::start();
    let api = scripted::<SharedClient>(&t);
    let (a, b) = (api.clone(), api.clone());
    let a = spawn_timed(clock, async move { a.search().await });
    let b = spawn_timed(clock, async move { b.search().await });
    for h in [a, b] {
        let (r, at) = h.await.expect("joins");
        assert_eq!((r.expect("the hedge wins").as_str(), at), ("hedge", 15));
    }
    assert_eq!(t.dispatch_times(), [ms(0), ms(10)]);
    assert_no_late_dispatch(&t, 2, ms(100)).await;
    assert_nothing_leaked(&t);
}

/// Regression: the hedge due at t=10 was dropped from the round when it was planned
/// (t=0), because the only caller then had a 10 ms deadline; the caller who joined at
/// t=5 without one got no hedge and waited for the hanging primary until its attempt
/// timeout (t=1000).
#[tokio::test(start_paused = true)]
async fn a_caller_joining_later_gets_the_hedge_the_first_deadline_ruled_out() {
    let t = ScriptedTransport::new([Step::hang(), Step::status(200).body("hedge").delay(ms(5))]);
    let clock = Clock::start();
    let api = scripted::<SharedClient>(&t);
    let a = api.clone();
    let a = spawn_timed(clock, async move {
        a.with_options(CallOptions::new().deadline(ms(10)))
            .search()
            .await
    });
    tests::settle().await;
    tokio::time::sleep(ms(5)).await;
    let b = api.clone();
    let b = spawn_timed(clock, async move { b.search().await });

    let (r, at) = a.await.expect("joins");
    let e = r.expect_err("the first caller's deadline passes");
    assert_eq!((e.kind(), at), (ErrorKind::Deadline, 10));
    let (r, at) = b.await.expect("joins");
    assert_eq!(
        (
            r.expect("the hedge answers the caller who waits").as_str(),
            at
        ),
        ("hedge", 15)
    );
    assert_eq!(t.dispatch_times(), [ms(0), ms(10)]);
    assert_no_late_dispatch(&t, 2, ms(100)).await;
    assert_nothing_leaked(&t);
}

/// The bound still holds for the callers there are: a lone caller with a 10 ms
/// deadline gets no hedge at t=10 (the deadline wins the tie), and nothing is sent later.
#[tokio::test(start_paused = true)]
async fn a_lone_caller_deadline_still_rules_out_the_hedge() {
    let t = ScriptedTransport::new([Step::hang()]);
    let clock = Clock::start();
    let api = scripted::<SharedClient>(&t);
    let e = api
        .with_options(CallOptions::new().deadline(ms(10)))
        .search()
        .await
        .expect_err("the deadline passes");
    assert_eq!(
        (e.kind(), e.attempts(), clock.now_ms()),
        (ErrorKind::Deadline, 1, 10)
    );
    assert_no_late_dispatch(&t, 1, ms(100)).await;
    assert_nothing_leaked(&t);
}

/// A caller whose deadline falls within a timer tick after the hedge's time gets no
/// hedge, and the round does not spin on the hedge's time once it has come.
#[tokio::test(start_paused = true)]
async fn a_deadline_just_after_the_hedge_time_rules_it_out() {
    let t = ScriptedTransport::new([Step::hang()]);
    let clock = Clock::start();
    let api = scripted::<SharedClient>(&t);
    let e = api
        .with_options(CallOptions::new().deadline(std::time::Duration::from_micros(10_500)))
        .search()
        .await
        .expect_err("the deadline passes");
    assert_eq!(
        (e.kind(), e.attempts(), clock.now_ms()),
        (ErrorKind::Deadline, 1, 11)
    );
    assert_no_late_dispatch(&t, 1, ms(100)).await;
    assert_nothing_leaked(&t);
}

/// A coalesced, hedged GET whose hedge waits 100 ms, no retries.
#[resilient_api(timeout(attempt = "1s"), retry(max = 0))]
pub trait SlowHedge {
    #[get("/search")]
    #[hedge(delay = "100ms", max = 2)]
    #[coalesce]
    async fn search(&self) -> Result<String, ApiError>;
}

/// A hedge planned while a patient caller (no deadline) was there, who left at 5 ms:
/// when the primary fails at 10 ms only a departed caller could use the hedge (due at
/// 100), so the hurried caller (deadline 50) gets the 503 then, as it would alone.
#[tokio::test(start_paused = true)]
async fn a_hedge_only_a_departed_caller_could_use_is_not_waited_for() {
    for patient_too in [false, true] {
        let t = ScriptedTransport::new([
            Step::status(503).body("busy").delay(ms(10)),
            Step::status(200).body("hedge"),
        ]);
        let clock = Clock::start();
        let api = scripted::<SlowHedgeClient>(&t);
        let hurried = api.with_options(CallOptions::new().deadline(ms(50)));
        let patient = patient_too.then(|| {
            let api = api.clone();
            spawn_timed(clock, async move {
                tokio::time::timeout(ms(5), api.search()).await
            })
        });
        let hurried = spawn_timed(clock, async move { hurried.search().await });
        if let Some(patient) = patient {
            let (patient, at) = patient.await.expect("the patient caller's task");
            assert!(patient.is_err(), "left at 5 ms");
            assert_eq!(at, 5);
        }
        let (hurried, at) = hurried.await.expect("the hurried caller's task");
        let e = hurried.expect_err("503");
        assert_eq!(
            (e.kind(), e.status(), at),
            (ErrorKind::Status, Some(503), 10),
            "patient caller too: {patient_too}"
        );
        assert_no_late_dispatch(&t, 1, ms(200)).await;
        assert_nothing_leaked(&t);
    }
}
