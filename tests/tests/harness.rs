//! The scripted transport itself: the scenario tests are only as exact as it is. It
//! records every dispatch when it is made, in dispatch order; a body's chunks arrive
//! at fixed times from the head, whenever the reader asks; an empty body ends at once;
//! a body to be cut short declares no length; a mistake in a script fails loudly, and
//! the records stay in step with the script, from any number of threads.

use futures_util::StreamExt;
use resilient_api::request::RequestBody;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::transport::{HttpRequest, Transport};
use resilient_api::{ApiError, resilient_api};
use tests::{Clock, assert_nothing_leaked, ms, scripted};

fn get(path: &str) -> HttpRequest {
    HttpRequest {
        method: http::Method::GET,
        url: format!("https://example.test{path}")
            .parse()
            .expect("a URL"),
        headers: http::HeaderMap::new(),
        body: RequestBody::Empty,
    }
}

/// Regression: a send dropped before its first poll (a deadline or a hedge winning a
/// tie) was counted in `attempts()` but missing from `requests()`.
#[tokio::test(start_paused = true)]
async fn a_dispatch_is_recorded_when_it_is_made() {
    let t = ScriptedTransport::new([Step::status(200)]);
    drop(t.send(get("/a")));
    assert_eq!((t.attempts(), t.requests().len(), t.in_flight()), (1, 1, 0));
    assert_eq!(t.dispatch_times(), [ms(0)]);
}

/// Regression: `requests()` followed the order the futures were first polled in.
#[tokio::test(start_paused = true)]
async fn requests_are_in_dispatch_order() {
    let t = ScriptedTransport::new([Step::status(201), Step::status(202)]);
    let a = t.send(get("/a"));
    tokio::time::sleep(ms(5)).await;
    let b = t.send(get("/b"));
    let second = b.await.unwrap();
    let first = a.await.unwrap();
    assert_eq!((first.status.as_u16(), second.status.as_u16()), (201, 202));
    let urls: Vec<String> = t.requests().into_iter().map(|r| r.url).collect();
    assert_eq!(urls, ["https://example.test/a", "https://example.test/b"]);
    assert_eq!(t.dispatch_times(), [ms(0), ms(5)]);
}

/// Regression: a dispatch past the end of the script went unnoticed when its future
/// was dropped unpolled; it fails at once now.
#[tokio::test(start_paused = true)]
#[should_panic(expected = "attempt 2 has no step left in the script")]
async fn a_dispatch_past_the_script_fails_at_once() {
    let t = ScriptedTransport::new([Step::status(200)]);
    drop(t.send(get("/a")));
    drop(t.send(get("/b")));
}

/// Regression: each chunk's delay counted from when the reader asked for it, so a
/// slow reader saw the server slow down too. Chunks are due at fixed times from the
/// head: 20 ms, then 40 ms after that.
#[tokio::test(start_paused = true)]
async fn chunks_arrive_at_fixed_times_from_the_head() {
    let t = ScriptedTransport::new([Step::status(200).chunks([(ms(20), "a"), (ms(40), "b")])]);
    let clock = Clock::start();
    let mut response = t.send(get("/")).await.unwrap();
    tokio::time::sleep(ms(15)).await;
    assert_eq!(response.body.next().await.unwrap().unwrap(), "a");
    assert_eq!(clock.now_ms(), 20);
    tokio::time::sleep(ms(30)).await;
    assert_eq!(response.body.next().await.unwrap().unwrap(), "b");
    assert_eq!(clock.now_ms(), 60);
    // Asked for late, a chunk already due comes at once.
    let t = ScriptedTransport::new([Step::status(200).chunks([(ms(10), "a")])]);
    let clock = Clock::start();
    let mut response = t.send(get("/")).await.unwrap();
    tokio::time::sleep(ms(50)).await;
    assert_eq!(response.body.next().await.unwrap().unwrap(), "a");
    assert_eq!(clock.now_ms(), 50);
}

/// Regression: an empty body (every step's default) first yielded an empty chunk.
#[tokio::test(start_paused = true)]
async fn an_empty_body_ends_at_once() {
    let t = ScriptedTransport::new([Step::status(204)]);
    let mut response = t.send(get("/")).await.unwrap();
    assert!(response.body.next().await.is_none());
    assert_eq!(t.open_bodies(), 0);
}

/// Regression: a whole body with `cut_after` declared its length, delivered all of
/// it, and then failed; it declares none now, as a server cut off mid-body would not
/// have sent the rest.
#[tokio::test(start_paused = true)]
async fn a_body_to_be_cut_declares_no_length() {
    let t = ScriptedTransport::new([Step::status(200).body("abc").cut_after(ms(5))]);
    let clock = Clock::start();
    let mut response = t.send(get("/")).await.unwrap();
    assert!(!response.headers.contains_key("content-length"));
    assert_eq!(response.body.next().await.unwrap().unwrap(), "abc");
    assert!(response.body.next().await.unwrap().is_err());
    assert_eq!((clock.now_ms(), t.open_bodies()), (5, 0));
}

/// Regression: an invalid header in a script was silently left out, so a test of
/// `Retry-After` could pass without the header ever being sent.
#[test]
#[should_panic(expected = "is not a valid value for retry-after")]
fn an_invalid_header_value_fails_loudly() {
    let _ = Step::status(503).header("retry-after", "1\n");
}

/// The same for a name.
#[test]
#[should_panic(expected = "is not a header name")]
fn an_invalid_header_name_fails_loudly() {
    let _ = Step::status(503).header("retry after", "1");
}

/// Regression: a status that is not one silently became 500.
#[test]
#[should_panic(expected = "1000 is not an HTTP status")]
fn an_invalid_status_fails_loudly() {
    let _ = Step::status(1000);
}

/// Regression: a chunk delay or a cut too far away to add to the clock (a body that
/// never goes on, scripted with `Duration::MAX`) panicked with an overflow inside the
/// transport; such a body now simply waits.
#[tokio::test(start_paused = true)]
async fn a_body_that_never_goes_on_waits_instead_of_panicking() {
    let forever = std::time::Duration::MAX;
    let t = ScriptedTransport::new([
        Step::status(200).chunks([(ms(0), "a"), (forever, "b")]),
        Step::status(200).chunks([(forever, "a"), (forever, "b")]),
        Step::status(200).body("a").cut_after(forever),
    ]);
    for _ in 0..3 {
        let mut response = t.send(get("/")).await.expect("a head");
        let mut read = Vec::new();
        let idle = tokio::time::timeout(ms(1000), async {
            while let Some(chunk) = response.body.next().await {
                read.extend_from_slice(&chunk.expect("a chunk"));
            }
        })
        .await;
        assert!(idle.is_err(), "the body ended");
        assert!(read.is_empty() || read == b"a", "{read:?}");
        drop(response);
    }
    assert_eq!((t.in_flight(), t.open_bodies()), (0, 0));
}

/// DESIGN §3.10 ("it records every dispatch with its time and bytes") and the
/// transport's own docs ("recorded now, in dispatch order"): `requests()[k]` is the
/// request that was answered with step `k`. `ScriptedTransport` is `Send + Sync` and
/// `Clone`, so a multi-threaded test (or a `flavor = "multi_thread"` runtime) may
/// dispatch from several threads at once.
///
/// Regression: `send` took the step under one lock and pushed the record later under
/// another, so two dispatches on two threads could take steps k, k+1 and be recorded
/// as k+1, k: thousands of these 20,000 records were paired with another dispatch's
/// step.
#[test]
fn requests_are_recorded_in_the_order_steps_are_taken_across_threads() {
    const THREADS: usize = 4;
    const EACH: usize = 5000;
    let t = ScriptedTransport::new(
        (0..THREADS * EACH).map(|i| Step::status(200).header("x-step", &i.to_string())),
    );
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS)
        .map(|th| {
            let t = t.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let rt = tests::case_runtime(false);
                barrier.wait();
                let mut seen = Vec::with_capacity(EACH);
                for j in 0..EACH {
                    let path = format!("/{th}/{j}");
                    let answer = rt.block_on(t.send(get(&path))).expect("a head");
                    let url = format!("https://example.test{path}");
                    let step: usize = answer.headers["x-step"]
                        .to_str()
                        .expect("text")
                        .parse()
                        .expect("a number");
                    seen.push((url, step));
                }
                seen
            })
        })
        .collect();
    let seen: Vec<_> = threads
        .into_iter()
        .flat_map(|h| h.join().expect("no panic"))
        .collect();
    let recorded = t.requests();
    assert_eq!(recorded.len(), THREADS * EACH);
    let mismatched = seen
        .iter()
        .filter(|(url, step)| recorded[*step].url != *url)
        .count();
    assert_eq!(
        mismatched, 0,
        "requests()[k] is not the request that was answered with step k"
    );
}

/// The transport's docs: `attempts()` is "dispatches so far", `requests()` "every
/// dispatch so far", and harness.rs's regression `a_dispatch_is_recorded_when_it_is_made`
/// established that the two must agree. A dispatch past the end of the script panics
/// (documented, fine), but the panic is raised inside the call's task: a test that
/// spawns calls gets it as a `JoinError` and goes on, and `push` after exhaustion is a
/// documented use.
///
/// Regression: `send` counted the attempt before it found the script empty, and
/// panicked without recording it, so from then on `attempts()` was one more than
/// `requests().len()`, for good: after a `push` and a follow-up, 3 against 2.
#[tokio::test(start_paused = true)]
async fn a_dispatch_past_the_script_keeps_attempts_and_requests_in_step() {
    let t = ScriptedTransport::new([Step::status(200).body("one")]);
    let api = scripted::<ApiClient>(&t);
    assert_eq!(api.plain().await.expect("scripted"), "one");
    let overrun = api.clone();
    let joined = tokio::spawn(async move { overrun.plain().await }).await;
    assert!(joined.is_err(), "the overrun panics, loudly");
    assert_nothing_leaked(&t);
    assert_eq!(
        (t.attempts(), t.requests().len(), t.dispatch_times().len()),
        (t.requests().len(), t.requests().len(), t.requests().len()),
        "after the overrun: attempts vs recorded dispatches"
    );
    t.push([Step::status(200).body("two")]);
    assert_eq!(api.plain().await.expect("scripted again"), "two");
    assert_eq!(
        t.attempts(),
        t.requests().len(),
        "after push and a follow-up: attempts vs recorded dispatches"
    );
}

/// One plain GET, no retries.
#[resilient_api(timeout(attempt = "100ms"), retry(max = 0))]
pub trait Api {
    #[get("/plain")]
    async fn plain(&self) -> Result<String, ApiError>;
}
