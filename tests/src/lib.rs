//! Shared helpers for the test suite: time in milliseconds and exact elapsed times.
//!
//! The tests themselves live in `tests/tests/`: one file per policy combination
//! (paused clock, scripted transport), the wiremock files (`http_*.rs`, real sockets,
//! real clock), and `ui.rs` (trybuild).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// A current-thread tokio runtime with timers, for a property test's case: each case
/// runs on a fresh one. `paused`: on the paused clock, as the scenario tests are.
pub fn case_runtime(paused: bool) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(paused)
        .build()
        .expect("a current-thread runtime")
}

/// The proptest configuration of a property test file: `$cases` cases per property,
/// and failures kept in `tests/proptest-regressions/$file.txt` (proptest's own
/// default looks for a `lib.rs` beside the test file, and finds none).
#[macro_export]
macro_rules! proptest_config {
    ($cases:expr, $file:literal) => {
        proptest::test_runner::Config {
            cases: $cases,
            failure_persistence: Some(Box::new(
                proptest::test_runner::FileFailurePersistence::Direct(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/proptest-regressions/",
                    $file,
                    ".txt"
                )),
            )),
            ..proptest::test_runner::Config::default()
        }
    };
}

/// `n` milliseconds.
pub const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A stopwatch on the (paused) tokio clock.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    /// Start now.
    pub fn start() -> Self {
        Clock {
            start: Instant::now(),
        }
    }

    /// Whole milliseconds since the start.
    pub fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }
}

/// A wall clock fixed on a whole second, so that a `Retry-After` HTTP date one
/// second ahead is exactly 1000 ms away. It is in the past (2001-09-09T01:46:40Z),
/// so a date 1 s ahead of it is behind the real clock: a client that ignored the
/// injected wall clock would retry at once, not after 1000 ms (a date after the real
/// clock would be capped to the same 1000 ms and hide that).
pub fn fixed_wall_clock() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_000_000_000)
}

/// The HTTP date `secs` seconds after [`fixed_wall_clock`].
pub fn http_date_after(secs: u64) -> String {
    httpdate::fmt_http_date(fixed_wall_clock() + Duration::from_secs(secs))
}

use resilient_api::Jitter;
use resilient_api::client::{ClientBuilder, GeneratedClient};
use resilient_api::testing::{ScriptedTransport, Step};

/// The builder every scenario starts from: `https://example.test`, the scripted
/// transport, and `Jitter::fixed(0.5)` so that every wait is exact.
pub fn scripted_builder<C: GeneratedClient>(t: &ScriptedTransport) -> ClientBuilder<C> {
    ClientBuilder::<C>::new()
        .base_url("https://example.test")
        .transport(t.clone())
        .jitter(Jitter::fixed(0.5))
}

/// A client built from [`scripted_builder`].
pub fn scripted<C: GeneratedClient>(t: &ScriptedTransport) -> C {
    scripted_builder(t).build().expect("the client builds")
}

/// Let every task that can run, run, without moving the clock.
pub async fn settle() {
    for _ in 0..16 {
        tokio::task::yield_now().await;
    }
}

/// Run `fut` on its own task; it reports its result and the ms at which it settled.
pub fn spawn_timed<T: Send + 'static>(
    clock: Clock,
    fut: impl Future<Output = T> + Send + 'static,
) -> tokio::task::JoinHandle<(T, u64)> {
    tokio::spawn(async move {
        let r = fut.await;
        (r, clock.now_ms())
    })
}

/// The contract after every scenario: nothing in flight, no open body.
pub fn assert_nothing_leaked(t: &ScriptedTransport) {
    assert_eq!(t.in_flight(), 0, "an attempt is still in flight");
    assert_eq!(t.open_bodies(), 0, "a response body is still open");
}

/// Script one healthy answer `"ok"` for a follow-up call, after checking that nothing
/// leaked; returns the dispatch count the follow-up must add one to.
pub fn script_follow_up(t: &ScriptedTransport) -> usize {
    assert_nothing_leaked(t);
    t.push([Step::status(200).body("ok")]);
    t.attempts()
}

/// The healthy follow-up after a scenario: nothing leaked, then `call` (made after the
/// `"ok"` answer is scripted) returns `"ok"` with exactly one more dispatch, and
/// again nothing is left over.
pub async fn assert_follow_up_succeeds<F, Fut>(t: &ScriptedTransport, call: F)
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<String, resilient_api::ApiError>>,
{
    let before = script_follow_up(t);
    assert_eq!(call().await.expect("the follow-up call succeeds"), "ok");
    assert_eq!(t.attempts(), before + 1);
    assert_nothing_leaked(t);
}

/// "Nothing is dispatched later": exactly `expected` dispatches now, and still after
/// `quiet` more time on the (paused) clock.
pub async fn assert_no_late_dispatch(t: &ScriptedTransport, expected: usize, quiet: Duration) {
    assert_eq!(t.attempts(), expected, "dispatches before the quiet period");
    tokio::time::sleep(quiet).await;
    assert_eq!(t.attempts(), expected, "a dispatch came later");
}

/// Every request `server` received so far (wiremock tests).
pub async fn received(server: &wiremock::MockServer) -> Vec<wiremock::Request> {
    server
        .received_requests()
        .await
        .expect("request recording is on")
}

/// A raw HTTP/1.1 server on loopback, for what wiremock cannot do: cut a body short,
/// send chunks, keep a connection or count them. `serve` runs on each accepted
/// connection with its number (0 for the first). Returns the base URL and how many
/// connections were accepted.
pub async fn raw_server<F, Fut>(serve: F) -> (String, Arc<AtomicUsize>)
where
    F: Fn(tokio::net::TcpStream, usize) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let n = count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve(sock, n));
        }
    });
    (format!("http://{addr}"), accepted)
}

/// Read one HTTP/1.1 request (head and `content-length` body) from `sock`, for the
/// tests' raw loopback servers (the ones that must misbehave in ways wiremock cannot,
/// such as cutting a body short).
pub async fn read_request(sock: &mut tokio::net::TcpStream) -> std::io::Result<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = sock.read(&mut tmp).await?;
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&tmp[..n]);
            }
            return Ok(buf);
        }
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            return Ok(buf);
        }
        buf.extend_from_slice(&tmp[..n]);
    }
}

/// An in-memory sink for `tracing_subscriber::fmt` output, for tests that read what
/// was logged.
#[derive(Clone, Default)]
pub struct LogBuffer(Arc<std::sync::Mutex<Vec<u8>>>);

impl LogBuffer {
    /// Everything written so far.
    pub fn contents(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    }
}

impl std::io::Write for LogBuffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogBuffer {
    type Writer = LogBuffer;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// A raw loopback server, for what wiremock cannot do (cut a body short, trickle a
/// head, answer garbage); every task it started ends when it is dropped.
pub struct Raw {
    /// `http://127.0.0.1:port`.
    pub base: String,
    /// Connections accepted.
    pub accepted: Arc<AtomicUsize>,
    /// Requests read whole.
    pub requests: Arc<AtomicUsize>,
    /// The accept loop, which owns the connections' tasks.
    pub task: tokio::task::JoinHandle<()>,
}

impl Drop for Raw {
    fn drop(&mut self) {
        // The accept loop owns the connections' `JoinSet`: aborting it aborts them.
        self.task.abort();
    }
}

impl Raw {
    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Requests read whole so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

/// One accepted connection, handed to the server's `serve`.
pub struct Conn {
    /// The socket.
    pub sock: tokio::net::TcpStream,
    /// Which connection of the server's this is, from 0.
    pub n: usize,
    requests: Arc<AtomicUsize>,
}

impl Conn {
    /// Read one request (head and `content-length` body), counting it; `false` at the
    /// end of the connection.
    pub async fn request(&mut self) -> bool {
        match read_request(&mut self.sock).await {
            Ok(r) if !r.is_empty() => {
                self.requests.fetch_add(1, Ordering::SeqCst);
                true
            }
            _ => false,
        }
    }

    /// Write `bytes` and flush; `false` once the client has gone.
    pub async fn write(&mut self, bytes: &[u8]) -> bool {
        use tokio::io::AsyncWriteExt;
        self.sock.write_all(bytes).await.is_ok() && self.sock.flush().await.is_ok()
    }
}

/// A raw server that runs `serve` on every connection it accepts.
pub async fn raw<F, Fut>(serve: F) -> Raw
where
    F: Fn(Conn) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let accepted = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(AtomicUsize::new(0));
    let (a, r) = (accepted.clone(), requests.clone());
    let task = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        while let Ok((sock, _)) = listener.accept().await {
            let n = a.fetch_add(1, Ordering::SeqCst);
            conns.spawn(serve(Conn {
                sock,
                n,
                requests: r.clone(),
            }));
        }
    });
    Raw {
        base: format!("http://{addr}"),
        accepted,
        requests,
        task,
    }
}

/// The error a test's hook fails with: `HookFailed("predicate")` reads "predicate
/// failed", and a test downcasts a call's source to it to see that the hook's own
/// error came through.
#[derive(Debug, PartialEq)]
pub struct HookFailed(pub &'static str);

impl std::fmt::Display for HookFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} failed", self.0)
    }
}

impl std::error::Error for HookFailed {}
