//! The generated client's builder, its per-call options, and the shared engine.
//!
//! # When to use
//! Every generated client is built with `{Client}::builder()`, which returns a
//! [`ClientBuilder`]. Clients are cheap to clone (an `Arc` inside) and share their
//! connection pool and policy state. Several clients can share one [`Engine`] so they
//! share per-host state (breaker, bulkhead, rate limit, budget) and a global bulkhead.
//!
//! # Defaults
//! The base URL from the attribute; the reqwest transport with redirects handled by
//! the pipeline (at most 10); responses up to 4 MiB; a random jitter source; a default
//! breaker of 5 consecutive failures and 30 s reset; a default bulkhead of 64 in flight
//! and 256 queued; a retry budget of 20% plus 10 per second.
//!
//! # Example
//! ```no_run
//! use resilient_api::{resilient_api, ApiError, CallOptions, CancellationToken};
//! use std::time::Duration;
//!
//! #[resilient_api(timeout(attempt = "2s", total = "10s"))]
//! pub trait Health {
//!     #[get("/health")]
//!     async fn health(&self) -> Result<String, ApiError>;
//! }
//!
//! # async fn run() -> Result<(), ApiError> {
//! let api = HealthClient::builder()
//!     .base_url("http://127.0.0.1:8080")
//!     .bearer_auth("token")
//!     .build()?;
//! let token = CancellationToken::new();
//! let quick = api.with_options(CallOptions::new().deadline(Duration::from_millis(300)).cancel_on(token));
//! let _ = quick.health().await;
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderName, HeaderValue};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use url::Url;

use crate::bulkhead::{Bulkhead, BulkheadConfig};
use crate::circuit_breaker::CircuitBreaker;
use crate::circuit_breaker::state::{BreakerConfig, CircuitState};
use crate::error::{ApiError, BoxError};
use crate::jitter::Jitter;
use crate::rate_limit::{RateLimitConfig, RateLimiter};
use crate::request::{ApiSpec, EndpointSpec, RequestBuilder};
use crate::response::decode::Decoder;
use crate::retry::budget::{BudgetConfig, RetryBudget};
use crate::transport::{Dispatcher, HttpRequest, Transport};

/// Options for the calls made through one client handle, set with
/// `client.with_options(...)` without changing the trait.
///
/// ```
/// # use resilient_api::testing::{ScriptedTransport, Step};
/// # use resilient_api::{resilient_api, ApiError};
/// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
/// # pub trait Users {
/// #     #[get("/users/{id}")]
/// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
/// # }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), ApiError> {
/// use resilient_api::{CallOptions, CancellationToken};
/// use std::time::Duration;
/// let t = ScriptedTransport::new([Step::status(200).body("ann")]);
/// let api = UsersClient::builder().transport(t).build()?;
/// let token = CancellationToken::new();
/// let options = CallOptions::new()
///     .deadline(Duration::from_millis(300))
///     .cancel_on(token.clone());
/// let quick = api.with_options(options); // same pools, breakers and bulkheads as `api`
/// assert_eq!(quick.user(7).await?, "ann");
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct CallOptions {
    pub(crate) deadline: Option<Duration>,
    pub(crate) cancel: Tokens,
}

/// The tokens that cancel a call: any one of them does. Usually none or one. One
/// pointer wide, as a single token is, so that what carries it (the call's options,
/// a streamed result) does not grow.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tokens(Option<Arc<Vec<CancellationToken>>>);

impl Tokens {
    fn all(&self) -> &[CancellationToken] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }

    /// These tokens and `more`.
    fn and(&self, more: &Tokens) -> Tokens {
        match (self.all(), more.all()) {
            (_, []) => self.clone(),
            ([], _) => more.clone(),
            (a, b) => Tokens(Some(Arc::new([a, b].concat()))),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.all().is_empty()
    }

    /// Whether one of them is cancelled.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.all().iter().any(CancellationToken::is_cancelled)
    }

    /// Ready once one of them is cancelled; never, with none.
    pub(crate) async fn cancelled(&self) {
        match self.all() {
            [] => std::future::pending().await,
            [one] => one.cancelled().await,
            many => {
                let each = many.iter().map(|t| Box::pin(t.cancelled()));
                futures_util::future::select_all(each).await;
            }
        }
    }
}

impl CallOptions {
    /// No extra options.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// use resilient_api::CallOptions;
    /// let t = ScriptedTransport::new([Step::status(200).body("ann")]);
    /// let api = UsersClient::builder().transport(t).build()?;
    /// let plain = api.with_options(CallOptions::new()); // the trait's own timeouts, no token
    /// assert_eq!(plain.user(7).await?, "ann");
    /// # Ok(()) }
    /// ```
    pub fn new() -> Self {
        CallOptions::default()
    }

    /// A total deadline for each call; the shorter of this and the endpoint's `total`
    /// applies. Set twice on one `CallOptions`, the last value is kept, as with any
    /// setter; options given to a client that already has a deadline keep the
    /// shorter of the two, so code handed a client cannot lengthen its deadline.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// use resilient_api::{CallOptions, ErrorKind};
    /// use std::time::Duration;
    /// let t = ScriptedTransport::new([Step::hang()]); // the server never answers
    /// let api = UsersClient::builder().transport(t).build()?;
    /// let quick = api.with_options(CallOptions::new().deadline(Duration::from_millis(300)));
    /// let start = tokio::time::Instant::now();
    /// let Err(e) = quick.user(7).await else { unreachable!() };
    /// assert_eq!(e.kind(), ErrorKind::Deadline);
    /// assert_eq!(start.elapsed(), Duration::from_millis(300)); // not the 5 s attempt timeout
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Cancel calls when `token` is cancelled: they end with
    /// [`ErrorKind::Cancelled`](crate::ErrorKind::Cancelled) in the same tick. Given
    /// more than once (here, or by `with_options` on a client that has one), any of the
    /// tokens cancels them.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// use resilient_api::{CallOptions, CancellationToken, ErrorKind};
    /// use std::time::Duration;
    /// let t = ScriptedTransport::new([Step::hang()]);
    /// let token = CancellationToken::new();
    /// let api = UsersClient::builder().transport(t.clone()).build()?;
    /// let api = api.with_options(CallOptions::new().cancel_on(token.clone()));
    /// let closed = async { tokio::time::sleep(Duration::from_millis(50)).await; token.cancel() };
    /// let (result, ()) = tokio::join!(api.user(7), closed); // e.g. the user closed the page
    /// assert_eq!(result.err().map(|e| e.kind()), Some(ErrorKind::Cancelled));
    /// assert_eq!(t.in_flight(), 0); // the attempt was dropped too
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn cancel_on(mut self, token: CancellationToken) -> Self {
        self.cancel = self.cancel.and(&Tokens(Some(Arc::new(vec![token]))));
        self
    }
}

/// Decides whether a retryable failure is retried. Runs after the built-in
/// classification says it may be; it can only say no. An `Err` ends the call with that
/// error (kind [`ErrorKind::Hook`](crate::ErrorKind::Hook)).
///
/// ```
/// use resilient_api::client::RetryPredicate;
/// use std::sync::Arc;
/// # use resilient_api::ErrorKind;
/// # use resilient_api::testing::{ScriptedTransport, Step};
/// # use resilient_api::{resilient_api, ApiError};
/// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
/// # pub trait Users {
/// #     #[get("/users/{id}")]
/// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
/// # }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), ApiError> {
/// let never_twice: RetryPredicate = Arc::new(|_| Err("no retries today".into()));
/// let t = ScriptedTransport::new([Step::status(503), Step::status(200)]);
/// let api = UsersClient::builder()
///     .transport(t.clone())
///     .retry_predicate(move |e| never_twice(e)) // the builder takes any such closure
///     .build()?;
/// let e = api.user(7).await.unwrap_err();
/// assert_eq!((e.kind(), t.attempts()), (ErrorKind::Hook, 1));
/// # Ok(()) }
/// ```
pub type RetryPredicate = Arc<dyn Fn(&ApiError) -> Result<bool, BoxError> + Send + Sync>;

/// Called before each retry's wait with the failure and the wait. An `Err` ends the
/// call with that error.
///
/// ```
/// use resilient_api::client::OnRetry;
/// use std::sync::Arc;
/// # use resilient_api::ErrorKind;
/// # use resilient_api::testing::{ScriptedTransport, Step};
/// # use resilient_api::{resilient_api, ApiError};
/// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
/// # pub trait Users {
/// #     #[get("/users/{id}")]
/// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
/// # }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), ApiError> {
/// let give_up: OnRetry = Arc::new(|ev| Err(format!("would wait {:?}", ev.wait).into()));
/// let t = ScriptedTransport::new([Step::status(503), Step::status(200)]);
/// let api = UsersClient::builder()
///     .transport(t.clone())
///     .on_retry(move |ev| give_up(ev))
///     .build()?;
/// let e = api.user(7).await.unwrap_err();
/// assert_eq!((e.kind(), t.attempts()), (ErrorKind::Hook, 1));
/// # Ok(()) }
/// ```
pub type OnRetry = Arc<dyn Fn(&RetryEvent<'_>) -> Result<(), BoxError> + Send + Sync>;

/// Runs on every attempt's request just before it is sent (add a fresh token, sign
/// it). An `Err` ends the call with that error.
///
/// ```
/// use resilient_api::client::Middleware;
/// use std::sync::Arc;
/// # use resilient_api::ErrorKind;
/// # use resilient_api::testing::{ScriptedTransport, Step};
/// # use resilient_api::{resilient_api, ApiError};
/// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
/// # pub trait Users {
/// #     #[get("/users/{id}")]
/// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
/// # }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), ApiError> {
/// let no_token: Middleware = Arc::new(|_req| Err("no token to sign with".into()));
/// let t = ScriptedTransport::new([Step::status(200)]);
/// let api = UsersClient::builder()
///     .transport(t.clone())
///     .middleware(move |req| no_token(req))
///     .build()?;
/// let e = api.user(7).await.unwrap_err();
/// assert_eq!((e.kind(), t.attempts()), (ErrorKind::Hook, 0)); // nothing was sent
/// # Ok(()) }
/// ```
pub type Middleware = Arc<dyn Fn(&mut HttpRequest) -> Result<(), BoxError> + Send + Sync>;

/// What an [`OnRetry`] hook is told.
///
/// ```
/// # use resilient_api::testing::{ScriptedTransport, Step};
/// # use resilient_api::{resilient_api, ApiError};
/// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"), retry(backoff = fixed(delay = "20ms")))]
/// # pub trait Users {
/// #     #[get("/users/{id}")]
/// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
/// # }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), ApiError> {
/// use resilient_api::client::RetryEvent;
/// let t = ScriptedTransport::new([Step::status(503), Step::status(200).body("ann")]);
/// let (tx, rx) = std::sync::mpsc::channel();
/// let api = UsersClient::builder()
///     .transport(t)
///     .on_retry(move |ev: &RetryEvent<'_>| {
///         tx.send((ev.endpoint, ev.attempt, ev.error.status(), ev.wait.as_millis()))?;
///         Ok(())
///     })
///     .build()?;
/// assert_eq!(api.user(7).await?, "ann");
/// let seen: Vec<_> = rx.try_iter().collect();
/// assert_eq!(seen, [("user", 1, Some(503), 20)]); // `backoff = fixed(delay = "20ms")`
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RetryEvent<'a> {
    /// The endpoint's name.
    pub endpoint: &'static str,
    /// The attempt that just failed (1 for the first).
    pub attempt: u32,
    /// Its failure.
    pub error: &'a ApiError,
    /// The wait before the next attempt.
    pub wait: Duration,
}

#[derive(Clone, Default)]
pub(crate) struct Hooks {
    pub(crate) retry_predicate: Option<RetryPredicate>,
    pub(crate) on_retry: Option<OnRetry>,
    pub(crate) middleware: Vec<Middleware>,
}

/// The stateful policies of one compartment: one upstream host by default, or a
/// partition an endpoint names.
#[derive(Debug)]
pub(crate) struct Partition {
    pub(crate) name: String,
    pub(crate) breaker: CircuitBreaker,
    pub(crate) bulkhead: Bulkhead,
    pub(crate) rate_limit: Option<RateLimiter>,
    pub(crate) budget: Option<RetryBudget>,
    /// What it was built with: a client built later on the same engine that asks
    /// for the same partition with other settings gets these, with a warning.
    settings: PartitionSettings,
}

impl Partition {
    /// Whether every policy's state at `now` is as a new partition's would be, so
    /// that forgetting this one and making a new one later changes nothing but its
    /// breaker's generation count.
    fn is_settled(&self, now: Instant) -> bool {
        self.bulkhead.in_use() == 0
            && self.bulkhead.queued() == 0
            && self.breaker.is_settled(now)
            && self.rate_limit.as_ref().is_none_or(|r| r.is_settled(now))
            && self.budget.as_ref().is_none_or(|b| b.is_settled(now))
    }
}

/// The settings a partition's policies are built from.
#[derive(Clone, Copy, Debug, PartialEq)]
struct PartitionSettings {
    breaker: BreakerConfig,
    bulkhead: BulkheadConfig,
    rate_limit: Option<RateLimitConfig>,
    budget: Option<BudgetConfig>,
}

impl PartitionSettings {
    /// Which of them differ from `other`'s, for an error.
    fn differences(&self, other: &PartitionSettings) -> Vec<&'static str> {
        let mut names = Vec::new();
        if self.breaker != other.breaker {
            names.push("breaker");
        }
        if self.bulkhead != other.bulkhead {
            names.push("bulkhead");
        }
        if self.rate_limit != other.rate_limit {
            names.push("rate limit");
        }
        if self.budget != other.budget {
            names.push("retry budget");
        }
        names
    }
}

/// State shared by clients: partitions per upstream host and partition name, and an
/// optional global bulkhead. Cheap to clone.
///
/// ```
/// use resilient_api::Engine;
/// use resilient_api::bulkhead::BulkheadConfig;
/// let engine = Engine::new().global_bulkhead(BulkheadConfig { concurrency: 100, queue: 1000 });
/// // FooClient::builder().engine(engine.clone()).build()?; BarClient::builder().engine(engine)...
/// # let _ = engine;
/// ```
#[derive(Clone, Default)]
pub struct Engine {
    inner: Arc<EngineInner>,
}

/// A partition's place in an engine: the upstream origin, the partition's name, and
/// for a partition that belongs to one API (a method's own, `Trait::method`) that
/// API's identity, so that another API whose trait has the same name (in another
/// module) never shares it.
type PartitionKey = (String, String, Option<usize>);

#[derive(Default)]
struct EngineInner {
    partitions: Mutex<Partitions>,
    global: Option<Arc<Bulkhead>>,
}

/// An engine's partitions. One that no client uses any more and whose state is as a
/// new one's would be ([`Partition::is_settled`]) is forgotten, so that the map does
/// not grow with every upstream a client was ever built for: a client built for it
/// later starts a new one, which behaves the same. Looked for in batches, when the map
/// has doubled since the last look, so that building a client stays O(1) amortized.
#[derive(Clone, Default)]
struct Partitions {
    map: HashMap<PartitionKey, Arc<Partition>>,
    /// The size at which to look for partitions to forget next.
    prune_at: usize,
}

/// The fewest partitions an engine holds before it looks for some to forget.
const PRUNE_FLOOR: usize = 16;

impl Partitions {
    /// Forget the partitions only this map holds whose state is settled at `now`, if
    /// the map has grown enough since the last look.
    fn prune(&mut self, now: Instant) {
        if self.map.len() < self.prune_at.max(PRUNE_FLOOR) {
            return;
        }
        // A count of 1 is this map's own reference: no client holds it, and none can
        // take it but through this map, whose lock is held.
        self.map
            .retain(|_, p| Arc::strong_count(p) > 1 || !p.is_settled(now));
        self.prune_at = self.map.len().saturating_mul(2);
    }
}

impl Engine {
    /// An engine with no global limit.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://shop.test", timeout(attempt = "5s"), retry(max = 0))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[resilient_api(base_url = "https://shop.test", timeout(attempt = "5s"), retry(max = 0))]
    /// # pub trait Orders {
    /// #     #[get("/orders/{id}")]
    /// #     async fn order(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// # let t = ScriptedTransport::new([]);
    /// use resilient_api::Engine;
    /// let engine = Engine::new();
    /// let users = UsersClient::builder()
    /// #   .transport(t.clone())
    ///     .engine(engine.clone())
    ///     .build()?;
    /// let orders = OrdersClient::builder()
    /// #   .transport(t.clone())
    ///     .engine(engine) // same host: the same breaker, bulkhead and budget as `users`
    ///     .build()?;
    /// # let _ = (users, orders);
    /// # Ok(()) }
    /// ```
    pub fn new() -> Self {
        Engine::default()
    }

    /// Limit the attempts in flight across every client of this engine.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://users.test", timeout(attempt = "5s"), retry(max = 0))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[resilient_api(base_url = "https://orders.test", timeout(attempt = "5s"), retry(max = 0))]
    /// # pub trait Orders {
    /// #     #[get("/orders/{id}")]
    /// #     async fn order(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// use resilient_api::{bulkhead::BulkheadConfig, Engine, ErrorKind};
    /// use std::time::Duration;
    /// let slow = Step::status(200).body("ann").delay(Duration::from_millis(50));
    /// let t = ScriptedTransport::new([slow]);
    /// // One attempt at a time across both clients, and no queue.
    /// let engine = Engine::new().global_bulkhead(BulkheadConfig::new(1, 0));
    /// let users = UsersClient::builder().engine(engine.clone()).transport(t.clone()).build()?;
    /// let orders = OrdersClient::builder().engine(engine).transport(t.clone()).build()?;
    /// let (user, order) = tokio::join!(users.user(7), orders.order(1)); // two hosts, one limit
    /// assert_eq!(user?, "ann");
    /// assert_eq!(order.err().map(|e| e.kind()), Some(ErrorKind::BulkheadFull));
    /// assert_eq!(t.attempts(), 1);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn global_bulkhead(self, config: BulkheadConfig) -> Self {
        let partitions = match Arc::try_unwrap(self.inner) {
            Ok(inner) => inner
                .partitions
                .into_inner()
                .unwrap_or_else(|p| p.into_inner()),
            Err(shared) => shared
                .partitions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        };
        Engine {
            inner: Arc::new(EngineInner {
                partitions: Mutex::new(partitions),
                global: Some(Arc::new(Bulkhead::new(config))),
            }),
        }
    }

    fn existing(&self, key: &PartitionKey) -> Option<Arc<Partition>> {
        let map = self
            .inner
            .partitions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        map.map.get(key).cloned()
    }

    /// The partition `key`, made by `make` if the engine has none yet. One made
    /// before keeps the settings it was made with (the first client built wins);
    /// if `settings` differ, that is said with a warning, naming what differs.
    fn partition(
        &self,
        key: PartitionKey,
        settings: PartitionSettings,
        make: impl FnOnce() -> Partition,
    ) -> Arc<Partition> {
        let mut map = self
            .inner
            .partitions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(made) = map.map.get(&key) {
            let differ = made.settings.differences(&settings);
            if !differ.is_empty() {
                let (origin, name, _) = &key;
                tracing::warn!(
                    origin = %origin,
                    partition = %name,
                    differ = %differ.join(", "),
                    "a client asked for a partition already on this engine with other \
                     settings: it shares the one built first, whose settings hold"
                );
            }
            return made.clone();
        }
        map.prune(Instant::now());
        map.map
            .entry(key)
            .or_insert_with(|| Arc::new(make()))
            .clone()
    }
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self
            .inner
            .partitions
            .lock()
            .map(|m| m.map.len())
            .unwrap_or(0);
        f.debug_struct("Engine").field("partitions", &n).finish()
    }
}

/// Implemented by every generated client.
///
/// ```
/// use resilient_api::client::GeneratedClient;
/// use resilient_api::{resilient_api, ApiError};
///
/// #[resilient_api(base_url = "https://api.test", timeout(attempt = "1s"))]
/// pub trait Users {
///     #[get("/users/{id}")]
///     async fn user(&self, id: u64) -> Result<String, ApiError>;
/// }
///
/// fn endpoint_names<C: GeneratedClient>() -> Vec<&'static str> {
///     C::API.endpoints.iter().map(|e| e.name).collect()
/// }
/// assert_eq!(endpoint_names::<UsersClient>(), ["user"]);
/// ```
pub trait GeneratedClient: Sized {
    /// What the macro saw.
    const API: &'static ApiSpec;
    /// Wrap a built handle.
    fn from_handle(handle: Handle) -> Self;
}

pub(crate) struct EndpointRuntime {
    pub(crate) spec: &'static EndpointSpec,
    pub(crate) partition: Arc<Partition>,
    /// The full URL of an endpoint whose path has no parameter, parsed once at build
    /// time: such calls clone it instead of parsing a path.
    pub(crate) fixed_url: Option<Url>,
    /// How many path values a request must hold, exactly: one past the largest
    /// [`PathPart::Param`](crate::request::PathPart::Param) index.
    pub(crate) path_params: usize,
}

pub(crate) struct ClientInner {
    pub(crate) api: &'static ApiSpec,
    pub(crate) base: Url,
    pub(crate) base_path: String,
    pub(crate) headers: HeaderMap,
    pub(crate) transport: Dispatcher,
    pub(crate) jitter: Jitter,
    pub(crate) wall_clock: fn() -> SystemTime,
    pub(crate) max_body: u64,
    pub(crate) max_redirects: u32,
    pub(crate) hooks: Hooks,
    pub(crate) endpoints: Vec<EndpointRuntime>,
    pub(crate) global: Option<Arc<Bulkhead>>,
    pub(crate) default_partition: Arc<Partition>,
    pub(crate) coalescer: crate::coalesce::Coalescer,
}

/// The shared engine of one generated client plus its per-call options. Generated
/// code holds one; users hold the generated client.
#[derive(Clone)]
pub struct Handle {
    pub(crate) inner: Arc<ClientInner>,
    pub(crate) options: CallOptions,
}

impl Handle {
    /// The same client with `options` added to the ones it has: of two deadlines the
    /// shorter applies, and every token given cancels its calls.
    pub fn with_options(&self, options: CallOptions) -> Handle {
        let CallOptions { deadline, cancel } = options;
        Handle {
            inner: self.inner.clone(),
            options: CallOptions {
                deadline: crate::pipeline::sooner(self.options.deadline, deadline),
                cancel: self.options.cancel.and(&cancel),
            },
        }
    }

    /// State of the default partition's circuit breaker. Once an open breaker's
    /// cooldown has ended it reads half-open (and that transition is logged), as the
    /// next call would find it.
    pub fn circuit_state(&self) -> CircuitState {
        self.inner
            .default_partition
            .breaker
            .snapshot(Instant::now())
    }

    /// State of the circuit breaker of the partition named `partition`, if there is one.
    pub fn partition_circuit_state(&self, partition: &str) -> Option<CircuitState> {
        self.inner
            .endpoints
            .iter()
            .find(|e| e.partition.name == partition)
            .map(|e| e.partition.breaker.snapshot(Instant::now()))
    }

    /// Run one call through the pipeline and decode its result.
    ///
    /// The request must be built from the spec of one of this client's endpoints
    /// (`C::API.endpoints`): one built from another API's spec is refused with
    /// [`ErrorKind::InvalidRequest`](crate::ErrorKind::InvalidRequest) naming that
    /// endpoint, and so is one that left a path parameter without a value (naming
    /// the parameter) or gave more path values than its template has, before anything
    /// is sent.
    ///
    /// The pipeline's future with the decoder mapped over it: no wrapping future that
    /// would move the pipeline's (large) state once more on every call.
    pub fn call<D: Decoder>(
        &self,
        request: RequestBuilder,
    ) -> impl Future<Output = Result<D::Output, ApiError>> + Send + '_ {
        use futures_util::FutureExt;
        crate::pipeline::execute(self, request, D::STREAMING).map(|(ended, span)| {
            // The call ends here, decoded or not: a body that cannot be decoded is the
            // call's outcome in the metrics and in its span, which closes after this.
            crate::observe::metrics_impl::decoded(ended, |raw| {
                raw.and_then(|raw| {
                    let attempts = raw.attempts;
                    D::decode(raw).map_err(|mut e| {
                        e.set_attempts(attempts);
                        crate::pipeline::call_failed(&span, e)
                    })
                })
            })
        })
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("api", &self.inner.api.name)
            .field(
                "base_url",
                &crate::observe::redact_url(self.inner.base.as_str()),
            )
            .field("headers", &crate::observe::Redacted(&self.inner.headers))
            .field("endpoints", &self.inner.endpoints.len())
            .finish_non_exhaustive()
    }
}

/// Builds a generated client. Setters take and return the builder by value;
/// [`build`](ClientBuilder::build) reports bad configuration as an error.
///
/// ```
/// # use resilient_api::testing::{ScriptedTransport, Step};
/// # use resilient_api::{resilient_api, ApiError};
/// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
/// # pub trait Users {
/// #     #[get("/users/{id}")]
/// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
/// # }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), ApiError> {
/// let t = ScriptedTransport::new([Step::status(200).body("ann")]);
/// let api = UsersClient::builder() // a `ClientBuilder<UsersClient>`
///     .base_url("https://staging.api.test")
///     .transport(t.clone())
///     .header("user-agent", "billing/1.4")
///     .build()?;
/// assert_eq!(api.user(7).await?, "ann");
/// assert_eq!(t.requests()[0].url, "https://staging.api.test/users/7");
/// # Ok(()) }
/// ```
#[must_use]
pub struct ClientBuilder<C> {
    base_url: Option<String>,
    transport: Option<Arc<dyn Transport>>,
    #[cfg(feature = "reqwest")]
    reqwest: Option<reqwest::Client>,
    jitter: Jitter,
    wall_clock: fn() -> SystemTime,
    headers: Vec<(String, String, bool)>,
    max_body: u64,
    max_redirects: u32,
    engine: Option<Engine>,
    hooks: Hooks,
    breaker: BreakerConfig,
    bulkhead: BulkheadConfig,
    budget: Option<BudgetConfig>,
    _client: PhantomData<fn() -> C>,
}

/// The default response size limit: 4 MiB.
///
/// ```
/// # use resilient_api::testing::{ScriptedTransport, Step};
/// # use resilient_api::{resilient_api, ApiError};
/// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
/// # pub trait Users {
/// #     #[get("/users/{id}")]
/// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
/// # }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), ApiError> {
/// use resilient_api::client::DEFAULT_MAX_BODY;
/// assert_eq!(DEFAULT_MAX_BODY, 4 * 1024 * 1024);
/// let api = UsersClient::builder()
/// #   .transport(ScriptedTransport::new([]))
///     .max_body_size(4 * DEFAULT_MAX_BODY) // this API sends large exports
///     .build()?;
/// # let _ = api;
/// # Ok(()) }
/// ```
pub const DEFAULT_MAX_BODY: u64 = 4 * 1024 * 1024;

impl<C: GeneratedClient> Default for ClientBuilder<C> {
    fn default() -> Self {
        ClientBuilder::new()
    }
}

impl<C: GeneratedClient> ClientBuilder<C> {
    /// A builder with every default.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// use resilient_api::client::{ClientBuilder, GeneratedClient};
    /// use resilient_api::Jitter;
    /// /// The offline builder of any generated client, for tests.
    /// fn offline<C: GeneratedClient>(t: &ScriptedTransport) -> ClientBuilder<C> {
    ///     ClientBuilder::new().transport(t.clone()).jitter(Jitter::fixed(0.5))
    /// }
    /// let t = ScriptedTransport::new([Step::status(200).body("ann")]);
    /// let api: UsersClient = offline(&t).build()?; // the same as `UsersClient::builder()...`
    /// assert_eq!(api.user(7).await?, "ann");
    /// # Ok(()) }
    /// ```
    pub fn new() -> Self {
        ClientBuilder {
            base_url: None,
            transport: None,
            #[cfg(feature = "reqwest")]
            reqwest: None,
            jitter: Jitter::random(),
            wall_clock: SystemTime::now,
            headers: Vec::new(),
            max_body: DEFAULT_MAX_BODY,
            max_redirects: 10,
            engine: None,
            hooks: Hooks::default(),
            breaker: BreakerConfig::DEFAULT,
            bulkhead: BulkheadConfig::DEFAULT,
            budget: Some(BudgetConfig::DEFAULT),
            _client: PhantomData,
        }
    }

    /// The base URL; overrides the attribute's `base_url`. Required if the attribute
    /// has none. An http or https URL without a query, a fragment or credentials
    /// (`user:password@`, which would not be sent: use [`bearer_auth`](Self::bearer_auth),
    /// [`secret_header`](Self::secret_header) or a middleware); anything else makes
    /// [`build`](Self::build) fail.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let t = ScriptedTransport::new([Step::status(200).body("ann")]);
    /// let api = UsersClient::builder() // the trait says `base_url = "https://api.test"`
    ///     .base_url("http://127.0.0.1:8080/v2")
    ///     .transport(t.clone())
    ///     .build()?;
    /// api.user(7).await?;
    /// assert_eq!(t.requests()[0].url, "http://127.0.0.1:8080/v2/users/7");
    /// # Ok(()) }
    /// ```
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }

    /// Put something else on the wire (default: reqwest).
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let t = ScriptedTransport::new([Step::status(200).body("ann")]); // offline, for tests
    /// let api = UsersClient::builder().transport(t.clone()).build()?;
    /// assert_eq!(api.user(7).await?, "ann");
    /// assert_eq!(t.attempts(), 1);
    /// # Ok(()) }
    /// ```
    pub fn transport(mut self, transport: impl Transport) -> Self {
        self.transport = Some(Arc::new(transport));
        self
    }

    /// Use this reqwest client (its connection pool, TLS and proxy settings). Turn its
    /// redirects off to let the pipeline follow them safely.
    ///
    /// ```
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// let http = reqwest::Client::builder()
    ///     .redirect(reqwest::redirect::Policy::none()) // the pipeline follows them
    ///     .pool_max_idle_per_host(4)
    ///     .connect_timeout(Duration::from_secs(2))
    ///     .build()?;
    /// let api = UsersClient::builder().reqwest_client(http).build()?;
    /// # let _ = api;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "reqwest")]
    pub fn reqwest_client(mut self, client: reqwest::Client) -> Self {
        self.reqwest = Some(client);
        self
    }

    /// The randomness for jitter and idempotency keys (default: random).
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"), retry(backoff = exponential_jitter(base = "200ms")))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// use resilient_api::Jitter;
    /// use std::time::Duration;
    /// let t = ScriptedTransport::new([Step::status(503), Step::status(503), Step::status(200)]);
    /// let api = UsersClient::builder()
    ///     .transport(t.clone())
    ///     .jitter(Jitter::fixed(0.5)) // full jitter waits exactly half: 100 ms, then 200 ms
    ///     .build()?;
    /// api.user(7).await?;
    /// let ms = Duration::from_millis;
    /// assert_eq!(t.dispatch_times(), [ms(0), ms(100), ms(300)]);
    /// # Ok(()) }
    /// ```
    pub fn jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// The wall clock used only to turn a `Retry-After` HTTP date into a wait
    /// (default: `SystemTime::now`). Tests fix it to make date waits exact.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// use std::time::{Duration, SystemTime, UNIX_EPOCH};
    /// fn fixed_now() -> SystemTime {
    ///     UNIX_EPOCH + Duration::from_secs(1_700_000_000) // Tue, 14 Nov 2023 22:13:20 GMT
    /// }
    /// let t = ScriptedTransport::new([
    ///     Step::status(503).header("retry-after", "Tue, 14 Nov 2023 22:13:22 GMT"),
    ///     Step::status(200).body("ann"),
    /// ]);
    /// let api = UsersClient::builder().transport(t.clone()).wall_clock(fixed_now).build()?;
    /// assert_eq!(api.user(7).await?, "ann");
    /// assert_eq!(t.dispatch_times(), [Duration::ZERO, Duration::from_secs(2)]);
    /// # Ok(()) }
    /// ```
    pub fn wall_clock(mut self, clock: fn() -> SystemTime) -> Self {
        self.wall_clock = clock;
        self
    }

    /// A header sent on every request. Setting a name again replaces its earlier value
    /// (names are case-insensitive); a header made secret before (by
    /// [`secret_header`](Self::secret_header) or [`bearer_auth`](Self::bearer_auth))
    /// stays secret with its new value, and so does one an endpoint declares secret
    /// (`#[header("X-Api-Key", secret)]`) on that endpoint's requests, whoever gave
    /// the value. `Content-Length` and `Transfer-Encoding` are
    /// the client's own, set from the body it sends: `build()` refuses them.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let t = ScriptedTransport::new([Step::status(200).body("ann")]);
    /// let api = UsersClient::builder()
    ///     .transport(t.clone())
    ///     .header("user-agent", "billing/1.4")
    ///     .build()?;
    /// api.user(7).await?;
    /// assert_eq!(t.requests()[0].headers["user-agent"], "billing/1.4");
    /// # Ok(()) }
    /// ```
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into(), false));
        self
    }

    /// A secret header sent on every request: redacted everywhere, dropped on a
    /// cross-origin redirect.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let t = ScriptedTransport::new([Step::status(200).body("ann")]);
    /// let api = UsersClient::builder()
    ///     .transport(t.clone())
    ///     .secret_header("x-api-key", "k-123")
    ///     .build()?;
    /// api.user(7).await?;
    /// assert_eq!(t.requests()[0].headers["x-api-key"], "k-123"); // sent,
    /// assert!(!format!("{api:?}").contains("k-123")); // but never printed
    /// # Ok(()) }
    /// ```
    pub fn secret_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into(), true));
        self
    }

    /// `Authorization: Bearer <token>`, secret.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let t = ScriptedTransport::new([Step::status(200).body("ann")]);
    /// let api = UsersClient::builder().transport(t.clone()).bearer_auth("t-42").build()?;
    /// api.user(7).await?;
    /// assert_eq!(t.requests()[0].headers["authorization"], "Bearer t-42");
    /// assert!(t.requests()[0].headers["authorization"].is_sensitive());
    /// # Ok(()) }
    /// ```
    pub fn bearer_auth(self, token: impl fmt::Display) -> Self {
        self.secret_header("authorization", format!("Bearer {token}"))
    }

    /// Largest response body accepted, in bytes (default 4 MiB). A method's own limit
    /// wins. An error response's body is not refused but cut: it is kept up to this
    /// limit or 64 KiB, whichever is lower (see [`ApiError::body`]).
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// use resilient_api::ErrorKind;
    /// let t = ScriptedTransport::new([Step::status(200).body(vec![b'x'; 2048])]);
    /// let api = UsersClient::builder().transport(t).max_body_size(1024).build()?;
    /// let Err(e) = api.user(7).await else { unreachable!() };
    /// assert_eq!(e.kind(), ErrorKind::BodyTooLarge);
    /// # Ok(()) }
    /// ```
    pub fn max_body_size(mut self, bytes: u64) -> Self {
        self.max_body = bytes;
        self
    }

    /// Redirects followed per attempt at most (default 10; 0 turns them off).
    ///
    /// A 301, 302, 303, 307 or 308 with a `Location` is followed, to an `http` or
    /// `https` URL only, and never from `https` down to `http`. As RFC 9110 and the
    /// Fetch standard have it, a 303 turns any method but HEAD into a bodiless GET, a
    /// 301 or 302 does so for a POST only, and every other case (a 307 or 308, a PUT,
    /// PATCH or DELETE answered 301 or 302) sends the same method and body again: a
    /// write is never replaced by a GET whose answer would pass for the write's
    /// (reqwest turns every method into a GET on a 301 or 302). Once a redirect leaves
    /// the origin, credential and secret headers are dropped. User info in a
    /// `Location` (`https://user:pass@host/`) is dropped, never sent. A `Location` in
    /// raw UTF-8 is followed to the URL it encodes to, as browsers follow it; one that
    /// is not UTF-8 is an error. Other 3xx statuses are answers, handed to the method
    /// as they are.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// use resilient_api::ErrorKind;
    /// let t = ScriptedTransport::new([
    ///     Step::status(302).header("location", "/people/7"),
    ///     Step::status(302).header("location", "/people/7/profile"),
    /// ]);
    /// let api = UsersClient::builder().transport(t.clone()).max_redirects(1).build()?;
    /// let Err(e) = api.user(7).await else { unreachable!() };
    /// assert_eq!(e.kind(), ErrorKind::Redirect); // the second redirect is one too many
    /// assert_eq!(t.requests()[1].url, "https://api.test/people/7");
    /// # Ok(()) }
    /// ```
    pub fn max_redirects(mut self, n: u32) -> Self {
        self.max_redirects = n;
        self
    }

    /// Share per-host policy state and global limits with other clients.
    ///
    /// Clients on one engine share a host's default partition and every partition
    /// named with `#[partition("...")]`; a method's own partition (`Trait::method`)
    /// stays its API's. A shared partition keeps the settings of the first client
    /// built with it: a later client that asks for it with another breaker,
    /// bulkhead, rate limit or retry budget shares it all the same, and a `tracing`
    /// warning at `build()` names what differs. Give an API a partition of its own to
    /// keep its own settings. A partition that no client uses any more is kept while
    /// its state differs from a new one's (a breaker with failures counted or open, a
    /// bucket not yet refilled, a budget with calls still counted) and forgotten after,
    /// so an engine that outlives many clients, for many hosts, does not grow with them.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://shop.test", timeout(attempt = "5s"), retry(max = 0), breaker(failures = 1))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[resilient_api(base_url = "https://shop.test", timeout(attempt = "5s"), retry(max = 0))]
    /// # pub trait Orders {
    /// #     #[get("/orders/{id}")]
    /// #     async fn order(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// use resilient_api::{Engine, ErrorKind};
    /// let t = ScriptedTransport::new([Step::status(503)]);
    /// let engine = Engine::new();
    /// let users = UsersClient::builder().engine(engine.clone()).transport(t.clone()).build()?;
    /// let orders = OrdersClient::builder().engine(engine).transport(t.clone()).build()?;
    /// let _ = users.user(7).await; // trips the host's breaker (`breaker(failures = 1)`)
    /// let Err(e) = orders.order(1).await else { unreachable!() };
    /// assert_eq!(e.kind(), ErrorKind::CircuitOpen); // same host, same breaker
    /// assert_eq!(t.attempts(), 1);
    /// # Ok(()) }
    /// ```
    pub fn engine(mut self, engine: Engine) -> Self {
        self.engine = Some(engine);
        self
    }

    /// The breaker of endpoints that declare none (default: 5 failures, 30 s).
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"), retry(max = 0))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// use resilient_api::circuit_breaker::state::{BreakerConfig, BreakerMode, Phase};
    /// let t = ScriptedTransport::new([Step::status(503)]);
    /// let api = UsersClient::builder()
    ///     .transport(t)
    ///     .default_breaker(BreakerConfig {
    ///         mode: BreakerMode::ConsecutiveFailures { failures: 1 },
    ///         ..BreakerConfig::DEFAULT
    ///     })
    ///     .build()?;
    /// let _ = api.user(7).await; // one failure (the trait has `retry(max = 0)`)
    /// assert_eq!(api.circuit_state().phase, Phase::Open);
    /// # Ok(()) }
    /// ```
    pub fn default_breaker(mut self, config: BreakerConfig) -> Self {
        self.breaker = config;
        self
    }

    /// The bulkhead of endpoints that declare none (default: 64 in flight, 256 queued).
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// use resilient_api::{bulkhead::BulkheadConfig, ErrorKind};
    /// use std::time::Duration;
    /// let slow = Step::status(200).body("ann").delay(Duration::from_millis(50));
    /// let t = ScriptedTransport::new([slow]);
    /// let api = UsersClient::builder()
    ///     .transport(t)
    ///     .default_bulkhead(BulkheadConfig::new(1, 0)) // one at a time, nobody waits
    ///     .build()?;
    /// let (first, second) = tokio::join!(api.user(7), api.user(8));
    /// assert_eq!(first?, "ann");
    /// assert_eq!(second.err().map(|e| e.kind()), Some(ErrorKind::BulkheadFull));
    /// # Ok(()) }
    /// ```
    pub fn default_bulkhead(mut self, config: BulkheadConfig) -> Self {
        self.bulkhead = config;
        self
    }

    /// The retry budget per partition; `None` turns it off (default: on).
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// use resilient_api::{retry::budget::BudgetConfig, ErrorKind};
    /// let t = ScriptedTransport::new([Step::status(503)]);
    /// let no_retries = BudgetConfig { min_per_sec: 0, retry_ratio: 0.0, ..BudgetConfig::DEFAULT };
    /// let api = UsersClient::builder()
    ///     .transport(t.clone())
    ///     .retry_budget(Some(no_retries))
    ///     .build()?;
    /// let Err(e) = api.user(7).await else { unreachable!() };
    /// assert_eq!((e.kind(), t.attempts()), (ErrorKind::BudgetExhausted, 1));
    /// // `.retry_budget(None)`: only `retry(max = ...)` bounds the retries.
    /// # Ok(()) }
    /// ```
    pub fn retry_budget(mut self, config: Option<BudgetConfig>) -> Self {
        self.budget = config;
        self
    }

    /// Decide whether a retryable failure is retried (it can only say no). Asked
    /// before each retry, and before a hedge that would send the request again once
    /// every branch sent has failed: a no there ends the round, and the call, with that
    /// failure.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let t = ScriptedTransport::new([Step::status(503).body("down for maintenance")]);
    /// let api = UsersClient::builder()
    ///     .transport(t.clone())
    ///     .retry_predicate(|e| Ok(e.body_text().as_deref() != Some("down for maintenance")))
    ///     .build()?;
    /// let Err(e) = api.user(7).await else { unreachable!() };
    /// assert_eq!((e.status(), t.attempts()), (Some(503), 1)); // a 503, but not retried
    /// # Ok(()) }
    /// ```
    pub fn retry_predicate(
        mut self,
        f: impl Fn(&ApiError) -> Result<bool, BoxError> + Send + Sync + 'static,
    ) -> Self {
        self.hooks.retry_predicate = Some(Arc::new(f));
        self
    }

    /// Called before every retry's wait.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// let t = ScriptedTransport::new([Step::status(503), Step::status(200)]);
    /// let api = UsersClient::builder()
    ///     .transport(t.clone())
    ///     .on_retry(|ev| {
    ///         tracing::info!(attempt = ev.attempt, wait = ?ev.wait, "retrying after {}", ev.error);
    ///         Ok(()) // an `Err` would end the call instead
    ///     })
    ///     .build()?;
    /// api.user(7).await?;
    /// assert_eq!(t.attempts(), 2);
    /// # Ok(()) }
    /// ```
    pub fn on_retry(
        mut self,
        f: impl Fn(&RetryEvent<'_>) -> Result<(), BoxError> + Send + Sync + 'static,
    ) -> Self {
        self.hooks.on_retry = Some(Arc::new(f));
        self
    }

    /// Runs on every attempt's request before it is sent, in the order added.
    ///
    /// ```
    /// # use resilient_api::testing::{ScriptedTransport, Step};
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(base_url = "https://api.test", timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), ApiError> {
    /// # fn fresh_token() -> &'static str { "t-1" }
    /// let t = ScriptedTransport::new([Step::status(200).body("ann")]);
    /// let api = UsersClient::builder()
    ///     .transport(t.clone())
    ///     .middleware(|req| {
    ///         let mut token = http::HeaderValue::try_from(format!("Bearer {}", fresh_token()))?;
    ///         token.set_sensitive(true);
    ///         req.headers.insert(http::header::AUTHORIZATION, token);
    ///         Ok(())
    ///     })
    ///     .build()?;
    /// api.user(7).await?;
    /// assert_eq!(t.requests()[0].headers["authorization"], "Bearer t-1");
    /// # Ok(()) }
    /// ```
    pub fn middleware(
        mut self,
        f: impl Fn(&mut HttpRequest) -> Result<(), BoxError> + Send + Sync + 'static,
    ) -> Self {
        self.hooks.middleware.push(Arc::new(f));
        self
    }

    /// Build the client; resolves every partition now so calls never look one up.
    ///
    /// ```
    /// # use resilient_api::{resilient_api, ApiError};
    /// # #[resilient_api(timeout(attempt = "5s"))]
    /// # pub trait Users {
    /// #     #[get("/users/{id}")]
    /// #     async fn user(&self, id: u64) -> Result<String, ApiError>;
    /// # }
    /// use resilient_api::ErrorKind;
    /// let built = UsersClient::builder().base_url("ftp://files.test").build();
    /// let e = built.err();
    /// assert_eq!(e.as_ref().map(|e| e.kind()), Some(ErrorKind::Builder));
    /// assert_eq!(
    ///     e.map(|e| e.to_string()).as_deref(),
    ///     Some("invalid client configuration: base URL must be an http or https URL")
    /// );
    /// ```
    pub fn build(self) -> Result<C, ApiError> {
        let api = C::API;
        let raw_base = self.base_url.as_deref().or(api.base_url).ok_or_else(|| {
            ApiError::builder("no base URL: set `base_url` on the attribute or the builder")
        })?;
        let base = Url::parse(raw_base)
            .map_err(|e| ApiError::builder("base URL is not a valid URL").with_source(e))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(ApiError::builder("base URL must be an http or https URL"));
        }
        // The `url` crate reads some URLs that a request cannot carry (a host that
        // `http` refuses, such as an unfilled `{{host}}`): every call would fail in
        // the transport, as if sent, and be retried.
        if http::Uri::try_from(base.as_str()).is_err() {
            return Err(ApiError::builder(
                "base URL is not one a request can be sent to",
            ));
        }
        // Not sent by the transport (a request is built from a parsed URL, which
        // skips reqwest's own user-info step), and a secret in a URL leaks into
        // logs: refuse it rather than drop it without a word.
        if !base.username().is_empty() || base.password().is_some() {
            return Err(ApiError::builder(
                "base URL cannot hold credentials (`user:password@`): send them with \
                 `bearer_auth`, `secret_header` or a middleware",
            ));
        }
        if base.query().is_some() || base.fragment().is_some() {
            return Err(ApiError::builder(
                "base URL cannot have a query or fragment",
            ));
        }
        let base_path = base.path().trim_end_matches('/').to_owned();

        let mut headers = HeaderMap::new();
        for (name, value) in api.headers {
            let n = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| ApiError::builder(format!("`{name}` is not a valid header name")))?;
            let v = crate::request::header_value(value)
                .map_err(|r| ApiError::builder(format!("header `{name}`: {r}")))?;
            headers.append(n, v);
        }
        for (name, value, secret) in &self.headers {
            let n = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| ApiError::builder(format!("`{name}` is not a valid header name")))?;
            // The client sets these from the body it sends; a value of the caller's
            // would contradict it (a server would wait for bytes that never come).
            if n == http::header::CONTENT_LENGTH || n == http::header::TRANSFER_ENCODING {
                return Err(ApiError::builder(format!(
                    "header `{name}` cannot be set: the client frames the body itself"
                )));
            }
            let mut v: HeaderValue = crate::request::header_value(value)
                .map_err(|r| ApiError::builder(format!("header `{name}`: {r}")))?;
            // A value given again replaces the old one, not its secrecy.
            let was_secret = headers.get(&n).is_some_and(HeaderValue::is_sensitive);
            if *secret || was_secret || crate::observe::is_secret_header(&n, &v) {
                v.set_sensitive(true);
            }
            headers.insert(n, v);
        }

        let transport = match self.transport {
            Some(t) => Dispatcher::Custom(t),
            None => default_transport(
                #[cfg(feature = "reqwest")]
                self.reqwest,
            )?,
        };

        let engine = self.engine.unwrap_or_default();
        let origin = base.origin().ascii_serialization();
        let now = Instant::now();
        let settings = |spec: Option<&EndpointSpec>| {
            let policy = spec.map(|s| s.policy);
            PartitionSettings {
                breaker: policy.and_then(|p| p.breaker).unwrap_or(self.breaker),
                bulkhead: policy.and_then(|p| p.bulkhead).unwrap_or(self.bulkhead),
                rate_limit: policy.and_then(|p| p.rate_limit),
                budget: self.budget,
            }
        };
        let make = |name: &str, settings: PartitionSettings| {
            let label = if name.is_empty() {
                origin.clone()
            } else {
                format!("{origin}/{name}")
            };
            Partition {
                name: name.to_owned(),
                breaker: CircuitBreaker::new(
                    settings.breaker,
                    label,
                    name.to_owned(),
                    origin.clone(),
                ),
                bulkhead: Bulkhead::new(settings.bulkhead),
                rate_limit: settings.rate_limit.map(|r| RateLimiter::new(r, now)),
                budget: settings.budget.map(|b| RetryBudget::new(b, now)),
                settings,
            }
        };
        // The default partition takes its settings from the first endpoint that uses it.
        let first_default = api
            .endpoints
            .iter()
            .copied()
            .find(|e| e.policy.partition.is_none());
        let default_key = (origin.clone(), String::new(), None);
        let default_partition = match first_default {
            Some(spec) => {
                let settings = settings(Some(spec));
                engine.partition(default_key, settings, || make("", settings))
            }
            // No endpoint of this API uses the host's default partition: it must not
            // fix that partition's settings for the APIs that do.
            None => engine
                .existing(&default_key)
                .unwrap_or_else(|| Arc::new(make("", settings(None)))),
        };
        // A method's own partition (`Trait::method`, named by the macro) is the API's
        // alone, even beside another API whose trait has the same name; so is a name
        // of this API's that one of its methods has as its own. A name given with
        // `#[partition]`, whatever it looks like, is shared on purpose.
        let owner = std::ptr::from_ref(api) as usize;
        let owned = |name: &str| {
            api.endpoints
                .iter()
                .any(|e| e.policy.own_partition && e.policy.partition == Some(name))
        };
        let endpoints = api
            .endpoints
            .iter()
            .map(|&spec| {
                let partition = match spec.policy.partition {
                    None => default_partition.clone(),
                    Some(name) => {
                        let settings = settings(Some(spec));
                        engine.partition(
                            (
                                origin.clone(),
                                name.to_owned(),
                                owned(name).then_some(owner),
                            ),
                            settings,
                            || make(name, settings),
                        )
                    }
                };
                let fixed_url = spec
                    .path
                    .iter()
                    .all(|p| matches!(p, crate::request::PathPart::Lit(_)))
                    .then(|| {
                        let mut url = base.clone();
                        let mut path = base_path.clone();
                        for part in spec.path {
                            if let crate::request::PathPart::Lit(s) = part {
                                path.push_str(s);
                            }
                        }
                        url.set_path(&path);
                        url
                    });
                let path_params = spec
                    .path
                    .iter()
                    .filter_map(|p| match p {
                        crate::request::PathPart::Param(i) => i.checked_add(1),
                        crate::request::PathPart::Lit(_) => None,
                    })
                    .max()
                    .unwrap_or(0);
                EndpointRuntime {
                    spec,
                    partition,
                    fixed_url,
                    path_params,
                }
            })
            .collect();

        let inner = ClientInner {
            api,
            base,
            base_path,
            headers,
            transport,
            jitter: self.jitter,
            wall_clock: self.wall_clock,
            max_body: self.max_body,
            max_redirects: self.max_redirects,
            hooks: self.hooks,
            endpoints,
            global: engine.inner.global.clone(),
            default_partition,
            coalescer: Default::default(),
        };
        Ok(C::from_handle(Handle {
            inner: Arc::new(inner),
            options: CallOptions::default(),
        }))
    }
}

#[cfg(feature = "reqwest")]
fn default_transport(client: Option<reqwest::Client>) -> Result<Dispatcher, ApiError> {
    use crate::transport::ReqwestTransport;
    let client = match client {
        Some(c) => c,
        None => ReqwestTransport::default_client()
            .map_err(|e| ApiError::builder("could not build the reqwest client").with_source(e))?,
    };
    Ok(Dispatcher::Reqwest(client))
}

#[cfg(not(feature = "reqwest"))]
fn default_transport() -> Result<Dispatcher, ApiError> {
    Err(ApiError::builder(
        "no transport: enable the `reqwest` feature or call `.transport(...)`",
    ))
}

impl<C> fmt::Debug for ClientBuilder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Redacted once parsed: as raw text, a password holding a `#`, `?` or `/`
        // would end the authority early and be shown. `build` refuses such a base URL.
        let base_url = self.base_url.as_deref().map(|raw| match Url::parse(raw) {
            Ok(url) => crate::observe::redact_url(url.as_str()),
            Err(_) => "[not a URL]".to_owned(),
        });
        f.debug_struct("ClientBuilder")
            .field("base_url", &base_url)
            .field(
                "headers",
                &self.headers.iter().map(|(n, _, _)| n).collect::<Vec<_>>(),
            )
            .field("max_body", &self.max_body)
            .finish_non_exhaustive()
    }
}
