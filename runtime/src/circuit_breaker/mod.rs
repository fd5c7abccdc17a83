//! A circuit breaker: stop calling a host that keeps failing, then probe it.
//!
//! # When to use
//! Always on, per partition. When a host fails `failures` times in a row (or a
//! failure rate over a window), calls are refused at once with
//! [`ErrorKind::CircuitOpen`](crate::ErrorKind::CircuitOpen) until `reset` has passed;
//! then `probes` trial attempts go through, and their outcome closes or reopens it.
//! Failures are transport errors, timeouts and 5xx; 4xx, a status past 599 (600 to
//! 999, of no class HTTP defines: an answer, never retried) and cancellations count
//! as nothing. A 2xx is a success even when the client then cannot decode it: the
//! breaker judges whether the upstream answers, and a decode error says the client's
//! type and the answer disagree, which no cooldown mends. Every attempt, retries and
//! hedges included, asks for
//! admission, and an outcome from an attempt admitted under an older state can never
//! change a newer one.
//!
//! The logic is the pure state machine in [`state`], fed `now` and outcomes; this
//! module is the thin shell that shares it between calls and reports every
//! transition: a `tracing` event, and the `resilient_api_breaker_state` gauge with
//! the `metrics` feature.
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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

pub mod state;

use state::{Admission, Breaker, BreakerConfig, CircuitState, Outcome, Rejected, Transition};

/// A breaker shared by every call of one partition.
///
/// While the breaker is quiet ([`Breaker::quiet_generation`]: closed, no failure
/// counted), checking, admitting and recording a success change nothing, so they
/// skip the lock: a healthy call takes none. Anything else takes the lock, and
/// every change made under it republishes whether the breaker is quiet.
// Aligned to its own cache lines (128 bytes: a line and the one the prefetcher pairs
// with it), so that the words every call writes here (and in the partition's other
// policies) are not next to words other threads only read. Measured in the engine's
// two-worker benchmark: without it, a field added elsewhere in the partition cost
// about a tenth of the second worker's gain.
#[repr(align(128))]
#[derive(Debug)]
pub(crate) struct CircuitBreaker {
    /// Origin and partition, for `tracing` (`https://host` or `https://host/name`).
    label: String,
    /// The partition's name (`""` for the default one), for metrics.
    partition: String,
    /// The upstream's origin (`https://host`), for metrics: every client's default
    /// partition is named `default`, and one gauge series per breaker needs both.
    origin: String,
    state: Mutex<Breaker>,
    /// `generation + 1` while quiet, `0` when not; written only under the lock.
    quiet: AtomicU64,
}

impl CircuitBreaker {
    pub(crate) fn new(
        config: BreakerConfig,
        label: String,
        partition: String,
        origin: String,
    ) -> Self {
        let breaker = Breaker::new(config);
        let quiet = AtomicU64::new(quiet_word(&breaker));
        CircuitBreaker {
            label,
            partition,
            origin,
            state: Mutex::new(breaker),
            quiet,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Breaker> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Change the state under the lock, then say whether it is quiet now.
    fn update<R>(&self, change: impl FnOnce(&mut Breaker) -> R) -> R {
        let mut breaker = self.lock();
        let result = change(&mut breaker);
        self.quiet.store(quiet_word(&breaker), Ordering::Release);
        result
    }

    /// The generation, if quiet.
    fn quiet(&self) -> Option<u64> {
        self.quiet.load(Ordering::Acquire).checked_sub(1)
    }

    /// A change that may be a transition: its gauge is set before the lock is let go,
    /// so that the gauge is written in the order of the transitions (set after it, a
    /// thread that half-opened the breaker could overwrite the `open` of a probe that
    /// failed meanwhile on another thread); its event is logged after. The gauge is
    /// set once the state and its quiet word are whole, so a recorder that panics
    /// leaves the breaker consistent.
    fn transit<R>(&self, change: impl FnOnce(&mut Breaker) -> (R, Option<Transition>)) -> R {
        let (result, transition) = {
            let mut breaker = self.lock();
            let (result, transition) = change(&mut breaker);
            self.quiet.store(quiet_word(&breaker), Ordering::Release);
            if let Some(t) = &transition {
                crate::observe::metrics_impl::breaker_state(&self.origin, &self.partition, t.to);
            }
            (result, transition)
        };
        self.emit(transition);
        result
    }

    /// The `tracing` event of a transition.
    fn emit(&self, t: Option<Transition>) {
        if let Some(t) = t {
            tracing::info!(
                partition = %self.label,
                from = ?t.from,
                to = ?t.to,
                generation = t.generation,
                "circuit breaker transition"
            );
        }
    }

    /// Refuse at once while open: no await, no queue.
    pub(crate) fn check(&self, now: Instant) -> Result<(), Rejected> {
        if self.quiet().is_some() {
            return Ok(());
        }
        self.lock().check(now)
    }

    /// Admission right before dispatch. The guard releases a probe slot if dropped
    /// without an outcome (a cancelled attempt counts as nothing).
    pub(crate) fn admit(&self, now: Instant) -> Result<AdmissionGuard<'_>, Rejected> {
        if let Some(generation) = self.quiet() {
            // What `Breaker::admit` returns when closed, without changing anything.
            return Ok(AdmissionGuard {
                breaker: self,
                admission: Some(Admission {
                    generation,
                    probe: false,
                }),
            });
        }
        self.transit(|b| b.admit(now))
            .map(|admission| AdmissionGuard {
                breaker: self,
                admission: Some(admission),
            })
    }

    /// When the breaker will still refuse at `at`: `Some(until)`.
    pub(crate) fn open_at(&self, at: Instant) -> Option<Instant> {
        self.lock().open_at(at)
    }

    /// Whether the breaker at `now` is as a new one would be: closed, with nothing
    /// counted (no failure in a row, nothing in the window, no slow call pending).
    pub(crate) fn is_settled(&self, now: Instant) -> bool {
        let state = self.lock().snapshot(now);
        state.phase == state::Phase::Closed
            && state.consecutive_failures == 0
            && state.calls_in_window == 0
    }

    /// The state at `now`, after moving an open breaker whose cooldown has ended to
    /// half-open (with its event), as the next attempt would: never `Open` past the
    /// cooldown.
    pub(crate) fn snapshot(&self, now: Instant) -> CircuitState {
        self.transit(|b| {
            let transition = b.settle(now);
            (b.snapshot(now), transition)
        })
    }
}

/// An admitted attempt; record its outcome, or drop it to count nothing.
pub(crate) struct AdmissionGuard<'a> {
    breaker: &'a CircuitBreaker,
    admission: Option<Admission>,
}

impl AdmissionGuard<'_> {
    /// Whether the attempt holds a half-open probe slot.
    pub(crate) fn probe(&self) -> bool {
        self.admission.as_ref().is_some_and(|a| a.probe)
    }

    /// Record `outcome`; `timing` gives the attempt's latency and end, read only if
    /// the breaker needs them.
    pub(crate) fn record(mut self, outcome: Outcome, timing: impl FnOnce() -> (Duration, Instant)) {
        let Some(a) = self.admission.take() else {
            return;
        };
        // Quiet, only a failure changes anything (a stale one included, which the
        // state machine then ignores under the lock).
        if outcome != Outcome::Failure && self.breaker.quiet().is_some() {
            return;
        }
        let (latency, now) = timing();
        self.breaker
            .transit(|b| ((), b.record(a, outcome, latency, now)));
    }
}

impl Drop for AdmissionGuard<'_> {
    fn drop(&mut self) {
        // Only a probe holds anything to give back.
        if let Some(a) = self.admission.take()
            && a.probe
        {
            self.breaker.update(|b| b.release(a));
        }
    }
}

fn quiet_word(breaker: &Breaker) -> u64 {
    breaker.quiet_generation().map_or(0, |g| g.wrapping_add(1))
}

#[cfg(all(test, feature = "metrics"))]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, mpsc};
    use std::time::Duration;

    use metrics::{
        Counter, Gauge, GaugeFn, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit,
    };
    use tokio::time::Instant;

    use super::CircuitBreaker;
    use super::state::{BreakerConfig, BreakerMode, Outcome, Phase};

    /// One gauge value for every thread; the first `set(1.0)` (half-open) stops,
    /// says so on `entered`, and waits for `proceed` (at most 300 ms).
    struct Gate {
        value: AtomicU64,
        stopped: AtomicBool,
        entered: std::sync::Mutex<mpsc::Sender<()>>,
        proceed: std::sync::Mutex<mpsc::Receiver<()>>,
    }

    impl GaugeFn for Gate {
        fn increment(&self, _: f64) {}
        fn decrement(&self, _: f64) {}
        fn set(&self, value: f64) {
            if value == 1.0 && !self.stopped.swap(true, Ordering::SeqCst) {
                let _ = self.entered.lock().expect("entered").send(());
                let _ = self
                    .proceed
                    .lock()
                    .expect("proceed")
                    .recv_timeout(Duration::from_millis(300));
            }
            self.value.store(value.to_bits(), Ordering::SeqCst);
        }
    }

    impl Gate {
        /// A gate whose first half-open `set` stops until `proceed` (if `stops`).
        fn new(stops: bool, entered: mpsc::Sender<()>, proceed: mpsc::Receiver<()>) -> Self {
            Gate {
                value: AtomicU64::new(0),
                stopped: AtomicBool::new(!stops),
                entered: std::sync::Mutex::new(entered),
                proceed: std::sync::Mutex::new(proceed),
            }
        }

        fn value(&self) -> f64 {
            f64::from_bits(self.value.load(Ordering::SeqCst))
        }
    }

    /// A breaker that one failure trips for `reset`, with `probes` probes.
    fn one_failure_trips(reset: Duration, probes: u32) -> CircuitBreaker {
        CircuitBreaker::new(
            BreakerConfig {
                mode: BreakerMode::ConsecutiveFailures { failures: 1 },
                reset,
                probes,
                ..BreakerConfig::DEFAULT
            },
            "https://h".into(),
            String::new(),
            "https://h".into(),
        )
    }

    /// A recorder whose every gauge is the one it holds; counters and histograms are
    /// dropped.
    struct GaugeRecorder<G>(Arc<G>);

    impl<G: GaugeFn + Send + Sync + 'static> Recorder for GaugeRecorder<G> {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
            Counter::noop()
        }
        fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::from_arc(self.0.clone())
        }
        fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::noop()
        }
    }

    /// Regression: the gauge was set after the breaker's lock was let go, so a thread
    /// that half-opened the breaker could set `1` after another thread's later
    /// transition (its probe failed: open) had set `2`, and the gauge read half-open
    /// while the breaker was open.
    #[test]
    fn the_breaker_gauge_is_set_in_the_order_of_the_transitions() {
        let (entered_tx, entered_rx) = mpsc::channel();
        let (proceed_tx, proceed_rx) = mpsc::channel();
        let gate = Arc::new(Gate::new(true, entered_tx, proceed_rx));
        let breaker = Arc::new(one_failure_trips(Duration::ZERO, 2));
        let recorder = Arc::new(GaugeRecorder(gate.clone()));
        let fail = |b: &CircuitBreaker| {
            let a = b.admit(Instant::now()).expect("admitted");
            a.record(Outcome::Failure, || (Duration::ZERO, Instant::now()));
        };
        metrics::with_local_recorder(&*recorder, || fail(&breaker));
        let gauge = || gate.value();
        assert_eq!(gauge(), 2.0, "open");

        // A first probe half-opens it; its thread stops while setting the gauge.
        let first = std::thread::spawn({
            let (breaker, recorder) = (breaker.clone(), recorder.clone());
            move || {
                metrics::with_local_recorder(&*recorder, || {
                    let probe = breaker.admit(Instant::now()).expect("a probe");
                    drop(probe);
                })
            }
        });
        entered_rx.recv().expect("the first probe half-opened it");
        // A second probe fails: open again.
        let (done_tx, done_rx) = mpsc::channel();
        let second = std::thread::spawn({
            let (breaker, recorder) = (breaker.clone(), recorder.clone());
            move || {
                metrics::with_local_recorder(&*recorder, || fail(&breaker));
                let _ = done_tx.send(());
            }
        });
        let _ = done_rx.recv_timeout(Duration::from_millis(100));
        let _ = proceed_tx.send(());
        first.join().expect("first");
        second.join().expect("second");
        // The state as the transitions left it: with a zero cooldown, a read through
        // `snapshot` would half-open it first.
        assert_eq!(breaker.lock().snapshot(Instant::now()).phase, Phase::Open);
        assert_eq!(gauge(), 2.0, "the gauge reads the breaker's state");
    }

    /// Read after its cooldown, an open breaker is half-open, and the gauge says so.
    #[test]
    fn a_read_after_the_cooldown_half_opens_and_sets_the_gauge() {
        let (entered, _) = mpsc::channel();
        let (_, proceed) = mpsc::channel();
        // Never stops a thread: this test has only one.
        let gauge = Arc::new(Gate::new(false, entered, proceed));
        let breaker = one_failure_trips(Duration::from_secs(1), 1);
        let t0 = Instant::now();
        let recorder = GaugeRecorder(gauge.clone());
        let read = |at| metrics::with_local_recorder(&recorder, || breaker.snapshot(at));
        metrics::with_local_recorder(&recorder, || {
            let a = breaker.admit(t0).expect("closed");
            a.record(Outcome::Failure, || (Duration::ZERO, t0));
        });
        let value = || gauge.value();
        let open = read(t0 + Duration::from_millis(999));
        assert_eq!((open.phase, value()), (Phase::Open, 2.0));
        let half_open = read(t0 + Duration::from_secs(1));
        assert_eq!((half_open.phase, value()), (Phase::HalfOpen, 1.0));
        assert_eq!(half_open.generation, open.generation + 1);
        let admitted = breaker.admit(t0 + Duration::from_secs(1)).expect("a probe");
        assert_eq!(read(t0 + Duration::from_secs(1)).probes_in_flight, 1);
        drop(admitted);
    }

    /// A gauge that panics when set.
    struct Panicking;

    impl GaugeFn for Panicking {
        fn increment(&self, _: f64) {}
        fn decrement(&self, _: f64) {}
        fn set(&self, _: f64) {
            panic!("the recorder failed");
        }
    }

    /// The gauge is set under the breaker's lock: a recorder that panics there must
    /// not leave the lock-free check saying "closed" for a breaker that opened.
    #[test]
    fn a_recorder_that_panics_leaves_the_breaker_open() {
        let breaker = one_failure_trips(Duration::from_secs(10), 1);
        let tripped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            metrics::with_local_recorder(&GaugeRecorder(Arc::new(Panicking)), || {
                let a = breaker.admit(Instant::now()).expect("closed");
                a.record(Outcome::Failure, || (Duration::ZERO, Instant::now()));
            })
        }));
        assert!(tripped.is_err(), "the recorder panicked");
        assert!(breaker.admit(Instant::now()).is_err(), "open: refused");
        assert_eq!(breaker.snapshot(Instant::now()).phase, Phase::Open);
    }
}
