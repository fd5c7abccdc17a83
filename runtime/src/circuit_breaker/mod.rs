//! A circuit breaker: stop calling a host that keeps failing, then probe it.
//!
//! # When to use
//! Always on, per partition. When a host fails `failures` times in a row (or a
//! failure rate over a window), calls are refused at once with
//! [`ErrorKind::CircuitOpen`](crate::ErrorKind::CircuitOpen) until `reset` has passed;
//! then `probes` trial attempts go through, and their outcome closes or reopens it.
//! Failures are transport errors, timeouts and 5xx; 4xx, cancellations and decode
//! errors count as nothing. Every attempt, retries and hedges included, asks for
//! admission, and an outcome from an attempt admitted under an older state can never
//! change a newer one.
//!
//! The logic is the pure state machine in [`state`], fed `now` and outcomes; this
//! module is the thin shell that shares it between calls and emits `tracing` events
//! for every transition.
//!
//! # Defaults
//! Five consecutive failures, 30 s reset, one probe, no slow-call rule.
//!
//! # Example
//! ```
//! use resilient_api::__private::{BreakerConfig, BreakerMode};
//! use std::time::Duration;
//! // As `breaker(failures = 2, reset = "1s")` declares it:
//! let config = BreakerConfig {
//!     mode: BreakerMode::ConsecutiveFailures { failures: 2 },
//!     reset: Duration::from_secs(1),
//!     ..BreakerConfig::DEFAULT
//! };
//! # let _ = config;
//! ```

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

pub mod state;

use state::{Admission, Breaker, BreakerConfig, CircuitState, Outcome, Rejected, Transition};

/// A breaker shared by every call of one partition.
#[derive(Debug)]
pub(crate) struct CircuitBreaker {
    partition: String,
    state: Mutex<Breaker>,
}

impl CircuitBreaker {
    pub(crate) fn new(config: BreakerConfig, partition: String) -> Self {
        CircuitBreaker {
            partition,
            state: Mutex::new(Breaker::new(config)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Breaker> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn emit(&self, t: Option<Transition>) {
        if let Some(t) = t {
            tracing::info!(
                partition = %self.partition,
                from = ?t.from,
                to = ?t.to,
                generation = t.generation,
                "circuit breaker transition"
            );
        }
    }

    /// Refuse at once while open: no await, no queue.
    pub(crate) fn check(&self, now: Instant) -> Result<(), Rejected> {
        self.lock().check(now)
    }

    /// Admission right before dispatch. The guard releases a probe slot if dropped
    /// without an outcome (a cancelled attempt counts as nothing).
    pub(crate) fn admit(&self, now: Instant) -> Result<AdmissionGuard<'_>, Rejected> {
        let (result, transition) = self.lock().admit(now);
        self.emit(transition);
        result.map(|admission| AdmissionGuard {
            breaker: self,
            admission: Some(admission),
        })
    }

    /// When the breaker will still refuse at `at`: `Some(until)`.
    pub(crate) fn open_at(&self, at: Instant) -> Option<Instant> {
        self.lock().open_at(at)
    }

    pub(crate) fn snapshot(&self, now: Instant) -> CircuitState {
        self.lock().snapshot(now)
    }
}

/// An admitted attempt; record its outcome, or drop it to count nothing.
pub(crate) struct AdmissionGuard<'a> {
    breaker: &'a CircuitBreaker,
    admission: Option<Admission>,
}

impl AdmissionGuard<'_> {
    pub(crate) fn record(mut self, outcome: Outcome, latency: Duration, now: Instant) {
        if let Some(a) = self.admission.take() {
            let t = self.breaker.lock().record(a, outcome, latency, now);
            self.breaker.emit(t);
        }
    }
}

impl Drop for AdmissionGuard<'_> {
    fn drop(&mut self) {
        if let Some(a) = self.admission.take() {
            self.breaker.lock().release(a);
        }
    }
}
