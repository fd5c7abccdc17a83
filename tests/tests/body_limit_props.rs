//! Property tests of response size limits (DESIGN §3.9, §3.8, §3.4).
//!
//! A limit (a method's `#[max_body]` of 0, 1, 16 or 1000 bytes, or the client's
//! `max_body_size(n)` for any `n`, or the 4 MiB default), a status (200, or 404, 500,
//! 503 with retries off), a body of 0 to 20 chunks at small delays (sometimes large
//! enough to pass 64 KiB), maybe cut short, maybe with a `Content-Length` that is
//! right, too small, too large or not a number. Each case is one call on a paused
//! clock, and the contract is:
//! 1. A success read whole (`String`, `Bytes`) is `Ok` with exactly the bytes sent iff
//!    the body is within the limit and so is a valid `Content-Length`; otherwise
//!    `BodyTooLarge`: at once (no chunk waited for) when the declared length is over,
//!    else as soon as the chunk that goes over arrives. A declared length that lies
//!    is only a hint: one over the limit refuses, one within it does not vouch for
//!    the body, which is still counted as it streams (framing is the transport's job:
//!    a transport reports a body short of its length as cut short).
//! 2. An error status is `ErrorKind::Status` with that status and the first
//!    `min(limit, 64 KiB)` bytes of the body, whatever `Content-Length` says; the read
//!    stops as soon as it holds them (no chunk past that point is waited for; with a
//!    limit of 0, none at all). A body cut short keeps what came.
//! 3. A `ResponseStream` yields the chunks, in order, as long as the bytes read stay
//!    within the limit; the chunk that goes over is an error, `BodyTooLarge`, at its
//!    arrival, and so is every read after it. A declared length over the limit
//!    refuses the call itself.
//! 4. A body cut short is `ErrorKind::Transport`, never a success with fewer bytes
//!    (unless it went over the limit first).
//! 5. The call ends, exactly one request is sent, and nothing leaks: the transfer is
//!    let go when the call (or the stream's last read) ends.

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use resilient_api::testing::{ScriptedTransport, Step};
use resilient_api::{ApiError, Bytes, ErrorKind, ResponseStream, resilient_api};
use tests::{Clock, ms};

/// An error response's body is kept up to this (or the call's limit, if lower).
const ERROR_BODY_LIMIT: u64 = 64 * 1024;
/// The client's default limit.
const DEFAULT_LIMIT: u64 = 4 * 1024 * 1024;

/// A method limit of 0 bytes (an error body keeps nothing).
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Limit0 {
    #[get("/text")]
    #[max_body("0")]
    async fn text(&self) -> Result<String, ApiError>;
    #[get("/bytes")]
    #[max_body("0")]
    async fn bytes(&self) -> Result<Bytes, ApiError>;
    #[get("/stream")]
    #[max_body("0")]
    async fn stream(&self) -> Result<ResponseStream, ApiError>;
}

/// A method limit of 1 bytes.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Limit1 {
    #[get("/text")]
    #[max_body("1")]
    async fn text(&self) -> Result<String, ApiError>;
    #[get("/bytes")]
    #[max_body("1")]
    async fn bytes(&self) -> Result<Bytes, ApiError>;
    #[get("/stream")]
    #[max_body("1")]
    async fn stream(&self) -> Result<ResponseStream, ApiError>;
}

/// A method limit of 16 bytes.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Limit16 {
    #[get("/text")]
    #[max_body("16")]
    async fn text(&self) -> Result<String, ApiError>;
    #[get("/bytes")]
    #[max_body("16")]
    async fn bytes(&self) -> Result<Bytes, ApiError>;
    #[get("/stream")]
    #[max_body("16")]
    async fn stream(&self) -> Result<ResponseStream, ApiError>;
}

/// A method limit of 1000 bytes.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Limit1000 {
    #[get("/text")]
    #[max_body("1000")]
    async fn text(&self) -> Result<String, ApiError>;
    #[get("/bytes")]
    #[max_body("1000")]
    async fn bytes(&self) -> Result<Bytes, ApiError>;
    #[get("/stream")]
    #[max_body("1000")]
    async fn stream(&self) -> Result<ResponseStream, ApiError>;
}

/// No limit of its own: the client's applies.
#[resilient_api(timeout(attempt = "10s"), retry(max = 0))]
pub trait Free {
    #[get("/text")]
    async fn text(&self) -> Result<String, ApiError>;
    #[get("/bytes")]
    async fn bytes(&self) -> Result<Bytes, ApiError>;
    #[get("/stream")]
    async fn stream(&self) -> Result<ResponseStream, ApiError>;
}

#[derive(Clone, Copy, Debug)]
enum Res {
    Text,
    Bytes,
    Stream,
}

/// The `Content-Length` header sent, relative to the bytes actually sent.
#[derive(Clone, Debug)]
enum Length {
    Absent,
    Right,
    /// This many bytes fewer than sent (not below 0).
    TooSmall(u64),
    /// This many bytes more than sent.
    TooLarge(u64),
    /// Not a length at all.
    Garbage(&'static str),
}

#[derive(Clone, Debug)]
struct Case {
    /// The method's `#[max_body]`: 0, 1, 16, 1000, or none.
    method_limit: Option<u64>,
    /// The client's `max_body_size`, if set.
    client_limit: Option<u64>,
    status: u16,
    result: Res,
    /// Each chunk: its delay after the previous one (ms) and its length.
    chunks: Vec<(u64, usize)>,
    seed: u64,
    length: Length,
    /// Cut the body short this long after the last chunk.
    cut: Option<u64>,
}

impl Case {
    fn limit(&self) -> u64 {
        self.method_limit
            .or(self.client_limit)
            .unwrap_or(DEFAULT_LIMIT)
    }

    /// Printable ASCII (so that `String` decodes), varying with the position and seed.
    fn body(&self) -> Vec<u8> {
        let total: usize = self.chunks.iter().map(|&(_, n)| n).sum();
        (0..total as u64)
            .map(|k| {
                let h = (k.wrapping_add(self.seed)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
                b'!' + (h % 94) as u8
            })
            .collect()
    }

    fn content_length(&self, total: u64) -> Option<String> {
        match &self.length {
            Length::Absent => None,
            Length::Right => Some(total.to_string()),
            Length::TooSmall(k) => Some(total.saturating_sub(*k).to_string()),
            Length::TooLarge(k) => Some((total + k).to_string()),
            Length::Garbage(g) => Some((*g).to_owned()),
        }
    }

    /// A valid `Content-Length` (digits only), as a number.
    fn declared(&self, total: u64) -> Option<u64> {
        let v = self.content_length(total)?;
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        v.parse().ok()
    }

    fn step(&self, body: &[u8]) -> Step {
        let mut at = 0;
        let chunks: Vec<(Duration, Bytes)> = self
            .chunks
            .iter()
            .map(|&(delay, n)| {
                let c = Bytes::copy_from_slice(&body[at..at + n]);
                at += n;
                (ms(delay), c)
            })
            .collect();
        let mut step = Step::status(self.status).chunks(chunks);
        if let Some(v) = self.content_length(body.len() as u64) {
            step = step.header("content-length", &v);
        }
        if let Some(c) = self.cut {
            step = step.cut_after(ms(c));
        }
        step
    }
}

/// What the contract says one case gives.
#[derive(Debug, PartialEq)]
enum Expected {
    /// The call fails: kind, status and kept body (for a status error), at this ms.
    CallFails {
        kind: ErrorKind,
        status: Option<u16>,
        body: Option<Vec<u8>>,
        at: u64,
    },
    /// A buffered call succeeds with this body at this ms.
    Body { body: Vec<u8>, at: u64 },
    /// A stream call returns at 0 ms; reading it yields these bytes, then ends
    /// (`Ok`) or fails with this kind, at this ms.
    Stream {
        yielded: Vec<u8>,
        end: Result<(), ErrorKind>,
        at: u64,
    },
}

fn expected(case: &Case, body: &[u8]) -> Expected {
    let limit = case.limit();
    let total = body.len() as u64;
    // Cumulative bytes and arrival time after each chunk.
    let mut cum = Vec::new();
    let mut times = Vec::new();
    let (mut c, mut t) = (0u64, 0u64);
    for &(delay, n) in &case.chunks {
        c += n as u64;
        t += delay;
        cum.push(c);
        times.push(t);
    }
    let all_time = t;
    let error = case.status >= 400;
    if error {
        let kept_limit = limit.min(ERROR_BODY_LIMIT);
        let kept = body[..kept_limit.min(total) as usize].to_vec();
        let at = if kept_limit == 0 {
            0
        } else if let Some(i) = cum.iter().position(|&c| c >= kept_limit) {
            times[i]
        } else {
            all_time + case.cut.unwrap_or(0)
        };
        return Expected::CallFails {
            kind: ErrorKind::Status,
            status: Some(case.status),
            body: Some(kept),
            at,
        };
    }
    if case.declared(total).is_some_and(|d| d > limit) {
        return Expected::CallFails {
            kind: ErrorKind::BodyTooLarge,
            status: None,
            body: None,
            at: 0,
        };
    }
    let over = cum.iter().position(|&c| c > limit);
    let (end, at, upto) = match (over, case.cut) {
        (Some(i), _) => (
            Err(ErrorKind::BodyTooLarge),
            times[i],
            if i == 0 { 0 } else { cum[i - 1] },
        ),
        (None, Some(cut)) => (Err(ErrorKind::Transport), all_time + cut, total),
        (None, None) => (Ok(()), all_time, total),
    };
    match (case.result, end) {
        (Res::Stream, end) => Expected::Stream {
            yielded: body[..upto as usize].to_vec(),
            end,
            at,
        },
        (_, Ok(())) => Expected::Body {
            body: body.to_vec(),
            at,
        },
        (_, Err(kind)) => Expected::CallFails {
            kind,
            status: None,
            body: None,
            at,
        },
    }
}

/// A call's result, before a stream is read.
enum Got {
    Buffered(Result<Vec<u8>, ApiError>),
    Stream(Result<ResponseStream, ApiError>),
}

macro_rules! call_on {
    ($client:ty, $case:expr, $t:expr) => {{
        let mut builder = tests::scripted_builder::<$client>($t);
        if let Some(n) = $case.client_limit {
            builder = builder.max_body_size(n);
        }
        let api = builder.build().expect("the client builds");
        match $case.result {
            Res::Text => Got::Buffered(api.text().await.map(String::into_bytes)),
            Res::Bytes => Got::Buffered(api.bytes().await.map(|b| b.to_vec())),
            Res::Stream => Got::Stream(api.stream().await),
        }
    }};
}

fn call_failed(e: &ApiError, at: u64) -> Expected {
    let status = (e.kind() == ErrorKind::Status)
        .then(|| e.status())
        .flatten();
    Expected::CallFails {
        kind: e.kind(),
        status,
        body: e.body().map(|b| b.to_vec()),
        at,
    }
}

/// Run one case on the paused clock; what it gave, in the form of [`Expected`].
async fn run(case: &Case, t: &ScriptedTransport) -> Result<Expected, TestCaseError> {
    let clock = Clock::start();
    let got = match case.method_limit {
        Some(0) => call_on!(Limit0Client, case, t),
        Some(1) => call_on!(Limit1Client, case, t),
        Some(16) => call_on!(Limit16Client, case, t),
        Some(1000) => call_on!(Limit1000Client, case, t),
        None => call_on!(FreeClient, case, t),
        Some(other) => unreachable!("no trait with a limit of {other}"),
    };
    let at = clock.now_ms();
    prop_assert_eq!(t.attempts(), 1, "one request, retries are off");
    let mut stream = match got {
        Got::Buffered(Ok(b)) => {
            tests::assert_nothing_leaked(t);
            return Ok(Expected::Body { body: b, at });
        }
        Got::Buffered(Err(e)) | Got::Stream(Err(e)) => {
            tests::assert_nothing_leaked(t);
            return Ok(call_failed(&e, at));
        }
        Got::Stream(Ok(s)) => s,
    };
    prop_assert_eq!(at, 0, "a stream call returns with the head");
    prop_assert_eq!(stream.status(), case.status);
    let mut yielded = Vec::new();
    let end = loop {
        match stream.chunk().await {
            Ok(Some(c)) => yielded.extend_from_slice(&c),
            Ok(None) => break Ok(()),
            Err(e) => break Err(e.kind()),
        }
    };
    let at = clock.now_ms();
    prop_assert_eq!(t.open_bodies(), 0, "an ended stream lets its transfer go");
    // Read again: the same end, without reading from the transfer.
    let again = stream.chunk().await;
    match end {
        Ok(()) => prop_assert!(matches!(again, Ok(None)), "{again:?}"),
        Err(kind) => prop_assert_eq!(again.err().map(|e| e.kind()), Some(kind)),
    }
    prop_assert_eq!(clock.now_ms(), at, "a read after the end does not wait");
    drop(stream);
    tests::assert_nothing_leaked(t);
    Ok(Expected::Stream { yielded, end, at })
}

fn check(case: &Case) -> Result<(), TestCaseError> {
    let rt = tests::case_runtime(true);
    let body = case.body();
    let t = ScriptedTransport::new([case.step(&body)]);
    let got = rt.block_on(async {
        // The call always ends: on the paused clock, a call stuck with no timer of its
        // own would let this one fire.
        tokio::time::timeout(Duration::from_secs(3600), run(case, &t))
            .await
            .map_err(|_| TestCaseError::fail("the call did not end within an hour"))?
    })?;
    let want = expected(case, &body);
    // Compare without printing two large bodies in full.
    if got != want {
        return Err(TestCaseError::fail(format!(
            "limit {}, total {}\n got: {}\nwant: {}",
            case.limit(),
            body.len(),
            summary(&got),
            summary(&want)
        )));
    }
    Ok(())
}

fn short(b: &[u8]) -> String {
    if b.len() <= 40 {
        format!("{:?}", String::from_utf8_lossy(b))
    } else {
        format!("<{} bytes>", b.len())
    }
}

fn summary(e: &Expected) -> String {
    match e {
        Expected::CallFails {
            kind,
            status,
            body,
            at,
        } => format!(
            "call fails: {kind:?} status {status:?} body {} at {at} ms",
            body.as_deref().map_or("none".to_owned(), short)
        ),
        Expected::Body { body, at } => format!("body {} at {at} ms", short(body)),
        Expected::Stream { yielded, end, at } => {
            format!("stream yields {} then {end:?} at {at} ms", short(yielded))
        }
    }
}

fn config() -> ProptestConfig {
    tests::proptest_config!(512, "body_limit_props")
}

/// Limits near every chunk boundary the bodies make, and around 64 KiB.
fn client_limit() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![
        1 => Just(None),
        4 => (0u64..=400).prop_map(Some),
        3 => (0u64..=7000).prop_map(Some),
        1 => (ERROR_BODY_LIMIT - 300..=ERROR_BODY_LIMIT + 300).prop_map(Some),
        1 => (ERROR_BODY_LIMIT..=200_000).prop_map(Some),
    ]
}

fn chunk_len() -> impl Strategy<Value = usize> {
    prop_oneof![
        2 => 0usize..=3,
        8 => 0usize..=300,
        1 => 2000usize..=8000,
    ]
}

fn length() -> impl Strategy<Value = Length> {
    prop_oneof![
        3 => Just(Length::Absent),
        3 => Just(Length::Right),
        2 => (1u64..=50).prop_map(Length::TooSmall),
        1 => (1u64..=5000).prop_map(Length::TooSmall),
        2 => (1u64..=50).prop_map(Length::TooLarge),
        1 => (1u64..=200_000).prop_map(Length::TooLarge),
        // "+5" too: HTTP's `1*DIGIT` is no sign (`u64::from_str` would take it).
        2 => prop::sample::select(vec![
            "", " ", "abc", "-1", "1.5", "0x10", "1e3", "1 2", "+5", "+200000"
        ])
            .prop_map(Length::Garbage),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop_oneof![
            1 => Just(None),
            1 => prop::sample::select(vec![0u64, 1, 16, 1000]).prop_map(Some),
        ],
        client_limit(),
        prop::sample::select(vec![200u16, 200, 404, 500, 503]),
        prop::sample::select(vec![Res::Text, Res::Bytes, Res::Stream]),
        prop::collection::vec((0u64..=10, chunk_len()), 0..=20),
        any::<u64>(),
        length(),
        prop_oneof![3 => Just(None), 1 => (0u64..=10).prop_map(Some)],
        prop_oneof![1 => Just(None), 1 => (-1i64..=1).prop_map(Some)],
    )
        .prop_map(
            |(method_limit, client_limit, status, result, chunks, seed, length, cut, fit)| {
                let mut case = Case {
                    method_limit,
                    client_limit,
                    status,
                    result,
                    chunks,
                    seed,
                    length,
                    cut,
                };
                if let Some(d) = fit {
                    fit_total(&mut case, d);
                }
                case
            },
        )
}

/// Make the body's total `d` bytes off the limit that counts (the kept 64 KiB or less
/// for an error status), where that is a size the chunks can have: the boundaries
/// where an off-by-one would hide.
fn fit_total(case: &mut Case, d: i64) {
    let limit = if case.status >= 400 {
        case.limit().min(ERROR_BODY_LIMIT)
    } else {
        case.limit()
    };
    let Some(target) = limit.checked_add_signed(d).filter(|&t| t <= 200_000) else {
        return;
    };
    let Some(last) = case.chunks.len().checked_sub(1) else {
        return;
    };
    let mut left = target as usize;
    for (i, (_, n)) in case.chunks.iter_mut().enumerate() {
        *n = if i == last { left } else { (*n).min(left) };
        left -= *n;
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_body_is_bounded_by_its_limit(case in case()) {
        check(&case)?;
    }
}
