//! Request coalescing: identical calls in flight at the same time share one execution.
//!
//! # When to use
//! On idempotent calls that many callers make at once (a config document, a hot
//! key). With `#[coalesce]`, a call whose endpoint, URL, headers and body equal those
//! of a call already in flight joins it instead of sending its own request; the shared
//! execution's retries serve every caller. Two `PUT`s of different documents are two
//! calls, never one.
//!
//! Rules:
//! - Every caller gets its own value, decoded from the shared bytes.
//! - Callers are independent: one caller leaving (dropped, cancelled, or past its own
//!   deadline) does not disturb the others. The shared execution is dropped, aborting
//!   its request, when the last caller has left.
//! - Each caller's deadline and cancellation apply to that caller alone; the shared
//!   execution has no deadline of its own and ends when its last caller leaves (the
//!   contract: it stops only when every caller left).
//! - Its waits are bounded by the latest deadline among the callers still waiting
//!   (none, if one of them has none): a backoff or `Retry-After` that would end after
//!   it, or a rate-limit token that would come after it, fails now with the
//!   underlying error, as in a plain call, instead of waiting for nobody. A caller
//!   that leaves takes its deadline out of that bound; one that joins adds its own.
//!   The bound is read when a wait starts (a hedge, once every branch sent has
//!   failed, when it becomes the only way on): a wait already under way when its
//!   last caller who could use it leaves runs on, and the callers still there end
//!   at their own deadlines.
//! - A hook that panics in the shared execution ends it: the panic reaches every
//!   caller (its own payload the caller whose poll ran the hook), and the next
//!   identical call starts afresh.
//! - A call made after the shared execution finished starts a fresh one: nothing is
//!   cached.
//!
//! # Defaults
//! Off. Streamed results and streamed request bodies are never coalesced.
//!
//! # Example
//! ```no_run
//! use resilient_api::{resilient_api, ApiError};
//!
//! #[resilient_api(base_url = "http://127.0.0.1:8080", timeout(attempt = "1s"))]
//! pub trait Config {
//!     #[get("/config")]
//!     #[coalesce]
//!     async fn config(&self) -> Result<String, ApiError>;
//! }
//! ```

use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::FutureExt;
use futures_util::future::{Shared, WeakShared};
use http::{HeaderMap, StatusCode};
use tokio::time::Instant;

use crate::client::ClientInner;
use crate::error::ApiError;
use crate::pipeline::{Call, Prepared};
use crate::response::{RawBody, RawResponse};

/// The answer of a shared execution, as every caller sees it.
type Output = Result<Arc<Answer>, Ended>;
type Execution = Pin<Box<dyn Future<Output = Output> + Send>>;
type SharedCall = Shared<Execution>;
/// Per key: the execution, its callers' deadlines, and its attempts so far.
type Calls = HashMap<Key, (WeakShared<Execution>, Arc<Callers>, Arc<AtomicU32>)>;

/// What an execution keeps for the callers it has now: their deadlines, and the last
/// error status it received.
pub(crate) struct Callers {
    /// A caller takes its deadline with it when it leaves, so the bound is always
    /// that of the callers still waiting.
    deadlines: Mutex<Deadlines>,
    /// The last error status an attempt received (0: none yet): each caller's span
    /// carries it when the caller leaves without an answer with a status of its own
    /// (its deadline, an attempt timeout after a 503), as a call's own span does.
    status: AtomicU16,
}

/// A multiset of deadlines: how many callers have none, and the deadlines of the
/// others. Most executions have one caller: its deadline is kept inline, and the map
/// (which allocates) is used only from the second caller with a deadline on.
#[derive(Default)]
struct Deadlines {
    unbounded: usize,
    first: Option<Instant>,
    more: BTreeMap<Instant, usize>,
}

impl Callers {
    /// The deadlines of an execution's first caller: [`join`](Self::join) on an
    /// empty set, without taking the lock.
    fn new(first: Option<Instant>) -> Self {
        Callers {
            deadlines: Mutex::new(Deadlines {
                unbounded: usize::from(first.is_none()),
                first,
                more: BTreeMap::new(),
            }),
            status: AtomicU16::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Deadlines> {
        self.deadlines.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An attempt of the execution received the error status `status`.
    pub(crate) fn received(&self, status: u16) {
        self.status.store(status, Ordering::Relaxed);
    }

    /// A caller with `deadline` joined.
    fn join(&self, deadline: Option<Instant>) {
        let mut callers = self.lock();
        match deadline {
            None => callers.unbounded += 1,
            Some(d) if callers.first.is_none() => callers.first = Some(d),
            Some(d) => *callers.more.entry(d).or_default() += 1,
        }
    }

    /// A caller with `deadline` left.
    fn leave(&self, deadline: Option<Instant>) {
        let mut callers = self.lock();
        match deadline {
            None => callers.unbounded = callers.unbounded.saturating_sub(1),
            Some(d) if callers.first == Some(d) => callers.first = None,
            Some(d) => {
                if let Some(n) = callers.more.get_mut(&d) {
                    *n -= 1;
                    if *n == 0 {
                        callers.more.remove(&d);
                    }
                }
            }
        }
    }

    /// The latest deadline among the callers still waiting (`None`: one of them has
    /// none, or none is left, and then the execution is dropped anyway).
    pub(crate) fn get(&self) -> Option<Instant> {
        let callers = self.lock();
        if callers.unbounded > 0 {
            return None;
        }
        let more = callers.more.last_key_value().map(|(d, _)| *d);
        callers.first.max(more)
    }
}

/// How a shared execution ended without an answer.
#[derive(Clone)]
enum Ended {
    Failed(Arc<ApiError>),
    /// A hook (or the transport) panicked in it. Caught there, so that the execution
    /// ends (its callers are woken and its key is forgotten) instead of being poisoned:
    /// the payload goes to the first caller to look, the caller whose poll panicked.
    Panicked(Arc<Mutex<Option<Box<dyn Any + Send>>>>),
}

pub(crate) struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    attempts: u32,
}

/// What makes two calls identical.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    endpoint: usize,
    url: String,
    headers: Vec<(String, Vec<u8>)>,
    /// The bytes sent (a streamed body is never coalesced). A refcounted view of the
    /// prepared request's body, not a copy.
    body: Bytes,
}

/// In-flight shared executions of one client.
#[derive(Default)]
pub(crate) struct Coalescer {
    calls: Mutex<Calls>,
}

impl Coalescer {
    fn lock(&self) -> std::sync::MutexGuard<'_, Calls> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many keys the map holds (for tests: none once every caller has left).
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

/// Join the identical call in flight, or start one that others may join.
pub(crate) async fn join(
    inner: &Arc<ClientInner>,
    index: usize,
    prepared: Prepared,
    deadline: Option<Instant>,
    attempts: &AtomicU32,
    call_span: Option<&tracing::Span>,
) -> Result<RawResponse, ApiError> {
    let mut headers: Vec<(String, Vec<u8>)> = prepared
        .headers
        .iter()
        .flatten()
        .map(|(k, v)| (k.as_str().to_owned(), v.as_bytes().to_vec()))
        .collect();
    headers.sort();
    let key = Key {
        endpoint: index,
        url: prepared
            .url(inner, &inner.endpoints[index])
            .as_str()
            .to_owned(),
        headers,
        body: prepared.body.clone(),
    };
    let (shared, made, callers): (SharedCall, Arc<AtomicU32>, Arc<Callers>) = {
        let mut map = inner.coalescer.lock();
        let running = map.get(&key).and_then(|(weak, callers, made)| {
            let s = weak.upgrade().filter(|s| s.peek().is_none())?;
            callers.join(deadline);
            Some((s, made.clone(), callers.clone()))
        });
        match running {
            Some(running) => running,
            None => {
                let callers = Arc::new(Callers::new(deadline));
                let made = Arc::new(AtomicU32::new(0));
                let s = start(
                    inner.clone(),
                    index,
                    prepared,
                    callers.clone(),
                    made.clone(),
                );
                if let Some(weak) = s.downgrade() {
                    map.insert(key.clone(), (weak, callers.clone(), made.clone()));
                }
                (s, made, callers)
            }
        }
    };
    let mut share = Share {
        coalescer: &inner.coalescer,
        key,
        call: Some(shared),
        callers,
        deadline,
        call_span,
    };
    let output = match &mut share.call {
        // After every poll, the execution's attempts so far are this caller's too: a
        // caller that leaves early (its deadline, its token) reports them.
        Some(call) => {
            std::future::poll_fn(|cx| {
                let polled = Pin::new(&mut *call).poll(cx);
                attempts.store(made.load(Ordering::Relaxed), Ordering::Relaxed);
                polled
            })
            .await
        }
        None => unreachable!("a share holds its execution until it is dropped"),
    };
    drop(share);
    let spec = inner.endpoints[index].spec;
    match output {
        Ok(answer) => {
            attempts.store(answer.attempts, Ordering::Relaxed);
            Ok(RawResponse {
                status: answer.status,
                headers: answer.headers.clone(),
                body: RawBody::Buffered(answer.body.clone()),
                endpoint: spec.name,
                attempts: answer.attempts,
            })
        }
        Err(Ended::Failed(e)) => {
            attempts.store(e.attempts(), Ordering::Relaxed);
            Err(ApiError::shared_copy(e))
        }
        // The panic reaches every caller, as a hook's panic reaches a plain call's.
        Err(Ended::Panicked(payload)) => {
            let payload = payload.lock().unwrap_or_else(|p| p.into_inner()).take();
            std::panic::resume_unwind(payload.unwrap_or_else(|| {
                Box::new("a hook panicked in the shared execution this call joined")
            }))
        }
    }
}

/// One caller's hold on a shared execution, with the key it is registered under.
///
/// Dropped when the caller has its answer or leaves early (dropped, cancelled, past
/// its deadline): it lets go of the execution first, then forgets the key if the
/// execution registered there is over, finished or dropped because this was its last
/// caller. A live execution under the key (still serving other callers, or a newer
/// one) keeps its entry: its own last caller forgets it.
struct Share<'a> {
    coalescer: &'a Coalescer,
    key: Key,
    call: Option<SharedCall>,
    /// The execution's callers, and this caller's deadline, which leaves with it.
    callers: Arc<Callers>,
    deadline: Option<Instant>,
    /// The caller's span, which takes the last error status the execution received
    /// as the caller leaves; an answer's own status is recorded over it afterwards.
    call_span: Option<&'a tracing::Span>,
}

impl Drop for Share<'_> {
    fn drop(&mut self) {
        self.callers.leave(self.deadline);
        let status = self.callers.status.load(Ordering::Relaxed);
        if let Some(span) = self.call_span
            && status != 0
        {
            crate::pipeline::record_status(span, status);
        }
        // Outside the lock: this may drop the execution, aborting its request.
        drop(self.call.take());
        let mut map = self.coalescer.lock();
        let over = map
            .get(&self.key)
            .and_then(|(weak, _, _)| weak.upgrade())
            .is_none_or(|s| s.peek().is_some());
        if over {
            map.remove(&self.key);
        }
    }
}

fn start(
    inner: Arc<ClientInner>,
    index: usize,
    prepared: Prepared,
    callers: Arc<Callers>,
    attempts: Arc<AtomicU32>,
) -> SharedCall {
    // A span of its own, a root that follows from the caller who started it: the
    // execution's attempts and events live there, not in whichever caller's span
    // polls it, which a child would keep open after that caller left.
    let spec = inner.endpoints[index].spec;
    let span = tracing::debug_span!(
        parent: None,
        "http.client.shared",
        "http.request.method" = spec.verb.as_str(),
        "url.template" = spec.template,
        "endpoint" = spec.name,
    );
    // Asked only of a span someone listens to: finding the current span costs.
    if !span.is_disabled() {
        span.follows_from(tracing::Span::current());
    }
    let fut = async move {
        let call = Call {
            inner: &inner,
            start: tokio::time::Instant::now(),
            ep: &inner.endpoints[index],
            deadline: None,
            callers: Some(&callers),
            attempts: &attempts,
            streaming: false,
            clock: crate::timeout::AttemptClock::new(),
            driven: false,
            call_span: None,
        };
        let result = call.run(None, &prepared, None, None).await;
        match result {
            Ok(raw) => {
                let body = match raw.body {
                    RawBody::Buffered(b) => b,
                    RawBody::Streaming(_) => Bytes::new(),
                };
                Ok(Arc::new(Answer {
                    status: raw.status,
                    headers: raw.headers,
                    body,
                    attempts: raw.attempts,
                }))
            }
            Err(mut e) => {
                e.set_attempts(attempts.load(Ordering::Relaxed));
                Err(Ended::Failed(Arc::new(e)))
            }
        }
    };
    let fut: Execution = Box::pin(
        std::panic::AssertUnwindSafe(tracing::Instrument::instrument(fut, span))
            .catch_unwind()
            .map(|caught| {
                caught.unwrap_or_else(|payload| {
                    Err(Ended::Panicked(Arc::new(Mutex::new(Some(payload)))))
                })
            }),
    );
    fut.shared()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_bound_is_the_latest_deadline_of_the_callers_still_waiting() {
        let t0 = Instant::now();
        let (early, late) = (t0 + Duration::from_secs(1), t0 + Duration::from_secs(2));
        let callers = Callers::new(Some(early));
        callers.join(Some(late));
        callers.join(Some(late));
        assert_eq!(callers.get(), Some(late));
        callers.join(None);
        assert_eq!(callers.get(), None, "one caller has no deadline");
        callers.leave(None);
        callers.leave(Some(late));
        assert_eq!(
            callers.get(),
            Some(late),
            "one of the two late callers is left"
        );
        callers.leave(Some(late));
        assert_eq!(callers.get(), Some(early));
        // A deadline nobody joined with changes nothing.
        callers.leave(Some(t0));
        assert_eq!(callers.get(), Some(early));
        // The first caller leaves before a later one.
        callers.join(Some(late));
        callers.leave(Some(early));
        assert_eq!(callers.get(), Some(late));
        callers.join(Some(early));
        assert_eq!(callers.get(), Some(late));
        callers.leave(Some(late));
        assert_eq!(callers.get(), Some(early));
    }
}
