//! coalesce_body: only identical calls share an execution, and a request's body is
//! part of what makes it identical. Two concurrent PUTs of different documents are two
//! dispatches, each with its own body; the same document twice is one.

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, resilient_api};
use serde::Serialize;
use tests::{Clock, assert_follow_up_succeeds, assert_nothing_leaked, ms, scripted};

/// The document a PUT stores.
#[derive(Serialize)]
pub struct Doc {
    v: &'static str,
}

const A: Doc = Doc { v: "A" };
const B: Doc = Doc { v: "B" };

/// A coalesced idempotent write.
#[resilient_api(timeout(attempt = "10s"))]
pub trait Docs {
    #[put("/doc")]
    #[coalesce]
    async fn put(&self, #[body] doc: &Doc) -> Result<String, ApiError>;

    #[get("/doc")]
    async fn get(&self) -> Result<String, ApiError>;
}

#[tokio::test(start_paused = true)]
async fn coalesce_puts_with_different_bodies_are_not_merged() {
    // Regression: the coalescing key ignored the body, so B's PUT joined A's: one
    // dispatch with A's body, and B's caller was told it succeeded.
    let t = ScriptedTransport::new([
        Step::status(200).body("first").delay(ms(50)),
        Step::status(200).body("second").delay(ms(50)),
    ]);
    let clock = Clock::start();
    let api = scripted::<DocsClient>(&t);

    let timed = |r: Result<String, ApiError>| (r, clock.now_ms());
    let (a, b) = tokio::join!(async { timed(api.put(&A).await) }, async {
        timed(api.put(&B).await)
    });
    let bodies: Vec<_> = t.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(t.attempts(), 2, "different bodies, different calls");
    assert_eq!(t.dispatch_times(), [ms(0), ms(0)]);
    let mut sent = bodies.clone();
    sent.sort();
    assert_eq!(sent, [&br#"{"v":"A"}"#[..], &br#"{"v":"B"}"#[..]]);
    // Each caller gets the answer to the dispatch that carried its own body.
    let answer_to = |body: &[u8]| match bodies.iter().position(|b| b.as_ref() == body) {
        Some(0) => "first",
        Some(_) => "second",
        None => unreachable!("every body was sent"),
    };
    for ((result, at), body) in [(a, br#"{"v":"A"}"#), (b, br#"{"v":"B"}"#)] {
        assert_eq!(result.expect("served"), answer_to(body));
        assert_eq!(at, 50);
    }
    assert_nothing_leaked(&t);
    assert_follow_up_succeeds(&t, || api.get()).await;
}

#[tokio::test(start_paused = true)]
async fn coalesce_puts_with_the_same_body_share_one_dispatch() {
    let t = ScriptedTransport::new([Step::status(200).body("stored").delay(ms(50))]);
    let clock = Clock::start();
    let api = scripted::<DocsClient>(&t);

    let timed = |r: Result<String, ApiError>| (r, clock.now_ms());
    let (first, second) = tokio::join!(async { timed(api.put(&A).await) }, async {
        timed(api.put(&Doc { v: "A" }).await)
    });
    for (result, at) in [first, second] {
        assert_eq!(result.expect("served"), "stored");
        assert_eq!(at, 50);
    }
    assert_eq!(t.attempts(), 1, "identical calls share one execution");
    assert_eq!(t.requests()[0].body.as_ref(), br#"{"v":"A"}"#);
    assert_nothing_leaked(&t);
    assert_follow_up_succeeds(&t, || api.get()).await;
}
