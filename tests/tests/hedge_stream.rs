//! S6 hedge_stream_winner: a hedge's streamed response wins while the primary hangs.
//!
//! The call returns with the hedge's head at t=10, the caller reads the body after
//! the call returned, and the primary is dropped as soon as the winner is chosen.

use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, ResponseStream, resilient_api};
use tests::{Clock, assert_nothing_leaked, ms, script_follow_up, scripted};

/// A hedged search whose result is read as a stream.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Search {
    #[get("/search")]
    #[hedge(delay = "10ms", max = 2)]
    async fn search(&self) -> Result<ResponseStream, ApiError>;
}

/// Nothing left over, and the same client serves a healthy call.
async fn follow_up(t: &ScriptedTransport, api: &SearchClient) {
    let before = script_follow_up(t);
    let body = api
        .search()
        .await
        .expect("the follow-up call succeeds")
        .text()
        .await
        .expect("the follow-up body reads");
    assert_eq!(body, "ok");
    assert_eq!(t.attempts(), before + 1);
    assert_nothing_leaked(t);
}

#[tokio::test(start_paused = true)]
async fn s6_hedge_stream_winner() {
    let t = ScriptedTransport::new([
        Step::hang(),
        Step::status(200).chunks([(ms(20), "win"), (ms(20), "ner")]),
    ]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    let stream = api.search().await.unwrap();
    assert_eq!(clock.now_ms(), 10, "the hedge's head wins at t=10");
    assert_eq!(stream.status(), 200);
    assert_eq!(t.attempts(), 2);
    assert_eq!(t.dispatch_times(), [ms(0), ms(10)]);
    assert_eq!(t.in_flight(), 0, "the hanging primary was dropped");
    assert_eq!(t.open_bodies(), 1, "the winner's body is still to read");

    let text = stream.text().await.unwrap();
    assert_eq!(text, "winner");
    assert_eq!(clock.now_ms(), 50);
    assert_eq!(t.attempts(), 2, "nothing dispatched while reading");
    assert_nothing_leaked(&t);

    follow_up(&t, &api).await;
}

#[tokio::test(start_paused = true)]
async fn hedge_stream_winner_chunks_arrive_at_their_times() {
    let t = ScriptedTransport::new([
        Step::hang(),
        Step::status(200).chunks([(ms(20), "win"), (ms(20), "ner")]),
    ]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    let mut stream = api.search().await.unwrap();
    assert_eq!(clock.now_ms(), 10);
    assert_eq!(t.in_flight(), 0);

    let first = stream.chunk().await.unwrap().unwrap();
    assert_eq!(&first[..], b"win");
    assert_eq!(clock.now_ms(), 30);
    let second = stream.chunk().await.unwrap().unwrap();
    assert_eq!(&second[..], b"ner");
    assert_eq!(clock.now_ms(), 50);
    assert!(stream.chunk().await.unwrap().is_none());
    assert_eq!(clock.now_ms(), 50);
    assert_eq!(t.open_bodies(), 0);
    assert_eq!(t.attempts(), 2);

    follow_up(&t, &api).await;
}

#[tokio::test(start_paused = true)]
async fn hedge_stream_winner_dropped_unread_closes_its_body() {
    let t = ScriptedTransport::new([
        Step::hang(),
        Step::status(200).chunks([(ms(20), "win"), (ms(20), "ner")]),
    ]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    let mut stream = api.search().await.unwrap();
    let first = stream.chunk().await.unwrap().unwrap();
    assert_eq!(&first[..], b"win");
    assert_eq!(clock.now_ms(), 30);
    assert_eq!(t.open_bodies(), 1);
    drop(stream);
    assert_eq!(
        t.open_bodies(),
        0,
        "dropping the stream aborts the transfer"
    );
    assert_eq!(t.in_flight(), 0);
    assert_eq!(t.attempts(), 2);

    follow_up(&t, &api).await;
}

#[tokio::test(start_paused = true)]
async fn hedge_stream_primary_answering_first_launches_no_hedge() {
    let t = ScriptedTransport::new([Step::status(200)
        .delay(ms(9))
        .chunks([(ms(20), "pri"), (ms(20), "mary")])]);
    let clock = Clock::start();
    let api = scripted::<SearchClient>(&t);

    let stream = api.search().await.unwrap();
    assert_eq!(clock.now_ms(), 9);
    // Reading the body past the hedge delay starts no hedge: the call is over.
    let text = stream.text().await.unwrap();
    assert_eq!(text, "primary");
    assert_eq!(clock.now_ms(), 49);
    assert_eq!(t.attempts(), 1);
    assert_eq!(t.dispatch_times(), [ms(0)]);

    follow_up(&t, &api).await;
}
