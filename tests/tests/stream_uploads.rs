//! Streamed request bodies under every limit that can end them: the attempt timeout
//! (counted from admission), the deadline, cancellation, a drop, a bulkhead queue and a
//! connect error, each ending the upload at once and dropping its stream; a
//! `ResponseStream` outliving its client; `Response<()>` on 204 and 304.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bytes::Bytes;
use resilient_api::circuit_breaker::state::Phase;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{
    ApiError, BodyStream, CallOptions, CancellationToken, ErrorKind, Response, ResponseStream,
    TimeoutKind, resilient_api,
};
use tests::{Clock, assert_nothing_leaked, ms, scripted};

/// Uploads with a one-failure breaker; downloads; a bulkhead of one with one queue place.
#[resilient_api(
    timeout(attempt = "100ms", total = "1s"),
    retry(max = 0),
    breaker(failures = 1, reset = "1s"),
    bulkhead(concurrency = 1, queue = 1)
)]
pub trait Files {
    #[put("/files")]
    async fn put(&self, #[body(stream)] data: BodyStream) -> Result<String, ApiError>;

    #[post("/files")]
    async fn post(&self, #[body(stream)] data: BodyStream) -> Result<String, ApiError>;

    #[get("/files")]
    async fn get(&self) -> Result<String, ApiError>;

    #[get("/download")]
    async fn download(&self) -> Result<ResponseStream, ApiError>;

    #[get("/head")]
    async fn head_only(&self) -> Result<Response<()>, ApiError>;
}

/// What the body stream does after its chunks.
#[derive(Clone, Copy)]
enum Then {
    End,
    Stall,
}

/// A body stream: `chunks` each after its delay, then `then`; `dropped` is set when the
/// stream is dropped, `polled` counts chunks handed out.
struct Upload {
    dropped: Arc<AtomicBool>,
    yielded: Arc<AtomicUsize>,
}

fn upload(chunks: &[(u64, &'static str)], then: Then) -> (BodyStream, Upload) {
    struct Guard(Arc<AtomicBool>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let dropped = Arc::new(AtomicBool::new(false));
    let yielded = Arc::new(AtomicUsize::new(0));
    let guard = Guard(dropped.clone());
    let y = yielded.clone();
    let chunks: Vec<(u64, &'static str)> = chunks.to_vec();
    let stream = futures_util::stream::unfold(
        (chunks.into_iter(), Some(then), guard, y),
        |(mut it, then, guard, y)| async move {
            if let Some((delay, c)) = it.next() {
                if delay > 0 {
                    tokio::time::sleep(ms(delay)).await;
                }
                y.fetch_add(1, Ordering::SeqCst);
                return Some((Ok(Bytes::from_static(c.as_bytes())), (it, then, guard, y)));
            }
            match then {
                Some(Then::End) | None => None,
                Some(Then::Stall) => std::future::pending().await,
            }
        },
    );
    (BodyStream::new(stream), Upload { dropped, yielded })
}

fn kind<T: std::fmt::Debug>(r: &Result<T, ApiError>) -> Option<ErrorKind> {
    r.as_ref().err().map(ApiError::kind)
}

/// An upload that stalls is ended by the attempt timeout at exactly 100 ms; the stream
/// is dropped; a PUT's timeout is retryable by class, so the error says the body could
/// not be replayed; one dispatch.
#[tokio::test(start_paused = true)]
async fn a_stalled_upload_ends_at_the_attempt_timeout() {
    let t = ScriptedTransport::new([Step::status(200).body("never")]);
    let clock = Clock::start();
    let api = scripted::<FilesClient>(&t);
    let (body, up) = upload(&[(10, "abc")], Then::Stall);
    let e = api.put(body).await.unwrap_err();
    assert_eq!(clock.now_ms(), 100);
    assert_eq!(e.kind(), ErrorKind::AttemptTimeout);
    assert_eq!(e.timeout(), Some(TimeoutKind::Attempt));
    assert!(e.body_not_replayable(), "{e}");
    assert_eq!((e.attempts(), t.attempts()), (1, 1));
    assert_eq!(up.yielded.load(Ordering::SeqCst), 1);
    assert!(up.dropped.load(Ordering::SeqCst));
    assert_nothing_leaked(&t);
}

/// A POST's stalled upload: not retryable by class, so not marked.
#[tokio::test(start_paused = true)]
async fn a_stalled_post_upload_times_out_unmarked() {
    let t = ScriptedTransport::new([Step::status(200).body("never")]);
    let clock = Clock::start();
    let api = scripted::<FilesClient>(&t);
    let (body, up) = upload(&[], Then::Stall);
    let e = api.post(body).await.unwrap_err();
    assert_eq!((clock.now_ms(), e.kind()), (100, ErrorKind::AttemptTimeout));
    assert!(!e.body_not_replayable());
    assert!(up.dropped.load(Ordering::SeqCst));
    assert_nothing_leaked(&t);
}

/// The caller's deadline ends a stalled upload at exactly its instant, as `Deadline`.
#[tokio::test(start_paused = true)]
async fn the_deadline_ends_a_stalled_upload() {
    let t = ScriptedTransport::new([Step::status(200).body("never")]);
    let clock = Clock::start();
    let api = scripted::<FilesClient>(&t).with_options(CallOptions::new().deadline(ms(40)));
    let (body, up) = upload(&[(10, "abc")], Then::Stall);
    let e = api.put(body).await.unwrap_err();
    assert_eq!((clock.now_ms(), e.kind()), (40, ErrorKind::Deadline));
    assert_eq!(e.timeout(), Some(TimeoutKind::Total));
    assert!(up.dropped.load(Ordering::SeqCst));
    assert_eq!(t.attempts(), 1);
    assert_nothing_leaked(&t);
    assert_eq!(api.circuit_state().phase, Phase::Closed);
}

/// A token cancelled mid-upload settles the call in the same tick and drops the stream
/// at once; the breaker does not count it.
#[tokio::test(start_paused = true)]
async fn cancel_mid_upload_drops_the_stream_at_once() {
    let t = ScriptedTransport::new([
        Step::status(200).body("never"),
        Step::status(200).body("ok"),
    ]);
    let clock = Clock::start();
    let token = CancellationToken::new();
    let api = scripted::<FilesClient>(&t);
    let cancellable = api.with_options(CallOptions::new().cancel_on(token.clone()));
    let (body, up) = upload(&[(10, "a"), (50, "b")], Then::End);
    let cancel = async {
        tokio::time::sleep(ms(20)).await;
        token.cancel();
    };
    let (r, ()) = tokio::join!(cancellable.put(body), cancel);
    assert_eq!((clock.now_ms(), kind(&r)), (20, Some(ErrorKind::Cancelled)));
    assert_eq!(up.yielded.load(Ordering::SeqCst), 1);
    assert!(up.dropped.load(Ordering::SeqCst));
    assert_nothing_leaked(&t);
    assert_eq!(api.circuit_state().phase, Phase::Closed);
    assert_eq!(api.get().await.unwrap(), "ok");
}

/// Dropping the call's future mid-upload drops the stream and frees the slot.
#[tokio::test(start_paused = true)]
async fn drop_mid_upload_frees_everything() {
    let t = ScriptedTransport::new([
        Step::status(200).body("never"),
        Step::status(200).body("ok"),
    ]);
    let api = scripted::<FilesClient>(&t);
    let (body, up) = upload(&[(10, "a"), (50, "b")], Then::End);
    let r = tokio::time::timeout(ms(20), api.put(body)).await;
    assert!(r.is_err());
    assert!(up.dropped.load(Ordering::SeqCst));
    assert_nothing_leaked(&t);
    assert_eq!(api.get().await.unwrap(), "ok");
}

/// A connect error with a streamed body: one dispatch, `Connect`, said not replayable.
#[tokio::test(start_paused = true)]
async fn connect_error_with_a_streamed_body() {
    let t = ScriptedTransport::new([Step::connect_error()]);
    let api = scripted::<FilesClient>(&t);
    let (body, up) = upload(&[(0, "abc")], Then::End);
    let e = api.post(body).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connect);
    assert!(e.body_not_replayable(), "{e}");
    assert_eq!((e.attempts(), t.attempts()), (1, 1));
    assert!(up.dropped.load(Ordering::SeqCst));
    assert_nothing_leaked(&t);
}

/// A streamed upload waiting in the bulkhead queue, cancelled: never dispatched, stream
/// dropped at once.
#[tokio::test(start_paused = true)]
async fn a_queued_upload_cancelled_is_never_sent() {
    let t = ScriptedTransport::new([Step::status(200).body("first").delay(ms(100))]);
    let clock = Clock::start();
    let api = scripted::<FilesClient>(&t);
    let token = CancellationToken::new();
    let queued = api.with_options(CallOptions::new().cancel_on(token.clone()));
    let (body, up) = upload(&[(0, "abc")], Then::End);
    let first = async { api.get().await };
    let second = async {
        let r = queued.put(body).await;
        (r, clock.now_ms())
    };
    let cancel = async {
        tokio::time::sleep(ms(20)).await;
        token.cancel();
    };
    let (a, (b, at), ()) = tokio::join!(first, second, cancel);
    assert_eq!(a.unwrap(), "first");
    assert_eq!((at, kind(&b)), (20, Some(ErrorKind::Cancelled)));
    assert!(up.dropped.load(Ordering::SeqCst));
    assert_eq!(up.yielded.load(Ordering::SeqCst), 0);
    assert_eq!(t.attempts(), 1);
    assert_nothing_leaked(&t);
}

/// A `ResponseStream` outlives its client: read after the client is dropped.
#[tokio::test(start_paused = true)]
async fn a_response_stream_reads_after_the_client_is_dropped() {
    let t = ScriptedTransport::new([Step::status(200).chunks([(ms(10), "a"), (ms(10), "b")])]);
    let clock = Clock::start();
    let api = scripted::<FilesClient>(&t);
    let body = api.download().await.unwrap();
    drop(api);
    assert_eq!(body.text().await.unwrap(), "ab");
    assert_eq!(clock.now_ms(), 20);
    assert_nothing_leaked(&t);
}

/// The stream's deadline (1 s total) still holds after the client is dropped.
#[tokio::test(start_paused = true)]
async fn a_response_stream_keeps_its_deadline_after_the_client_is_dropped() {
    let t = ScriptedTransport::new([Step::status(200).chunks([
        (ms(50), "a"),
        (ms(90), "b"),
        (ms(90), "c"),
        (ms(90), "d"),
        (ms(90), "e"),
        (ms(90), "f"),
        (ms(90), "g"),
        (ms(90), "h"),
        (ms(90), "i"),
        (ms(90), "j"),
        (ms(90), "k"),
        (ms(90), "l"),
    ])]);
    let clock = Clock::start();
    let api = scripted::<FilesClient>(&t);
    let body = api.download().await.unwrap();
    drop(api);
    let r = body.bytes().await;
    assert_eq!(
        (clock.now_ms(), kind(&r)),
        (1000, Some(ErrorKind::Deadline))
    );
    assert_nothing_leaked(&t);
}

/// `Response<()>` on a 204 and a 304 exposes status and headers.
#[tokio::test(start_paused = true)]
async fn response_unit_on_204_and_304() {
    let t = ScriptedTransport::new([
        Step::status(204).header("x-id", "7"),
        Step::status(304)
            .header("etag", "\"v2\"")
            .header("content-length", "99999999"),
    ]);
    let api = scripted::<FilesClient>(&t);
    let r = api.head_only().await.unwrap();
    assert_eq!(
        (r.status().as_u16(), r.headers()["x-id"].to_str().unwrap()),
        (204, "7")
    );
    let r = api.head_only().await.unwrap();
    assert_eq!(
        (r.status().as_u16(), r.headers()["etag"].to_str().unwrap()),
        (304, "\"v2\"")
    );
    assert_nothing_leaked(&t);
}

/// A streamed upload that waited 50 ms for the bulkhead gets its full attempt limit
/// from admission: it times out at 150, not 100.
#[tokio::test(start_paused = true)]
async fn a_queued_upload_gets_its_attempt_limit_from_admission() {
    let t = ScriptedTransport::new([
        Step::status(200).body("first").delay(ms(50)),
        Step::status(200).body("never"),
    ]);
    let clock = Clock::start();
    let api = scripted::<FilesClient>(&t);
    let (body, up) = upload(&[(10, "abc")], Then::Stall);
    let first = async { api.get().await };
    let second = async {
        let r = api.put(body).await;
        (r, clock.now_ms())
    };
    let (a, (b, at)) = tokio::join!(first, second);
    assert_eq!(a.unwrap(), "first");
    assert_eq!((at, kind(&b)), (150, Some(ErrorKind::AttemptTimeout)));
    assert_eq!(t.dispatch_times(), [ms(0), ms(50)]);
    assert!(up.dropped.load(Ordering::SeqCst));
    assert_nothing_leaked(&t);
}
