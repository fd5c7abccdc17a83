//! The policy engine's own cost, without a network: calls per second with every
//! policy a trait can set for all its methods on (retry, budget, breaker, bulkhead,
//! rate limit, timeouts), on one and on two worker threads; the same with the two
//! per-method policies, hedging and coalescing, on as well; and the cost of a call
//! refused by an open breaker.
//!
//! The transport answers at once with a fixed body. The scripted transport of
//! `resilient_api::testing` would add its own cost (it keeps a script and records
//! every request), so this one does nothing but box a ready future.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use resilient_api::circuit_breaker::state::Phase;
use resilient_api::transport::{HttpRequest, HttpResponse, ResponseBody, SendFuture, Transport};
use resilient_api::{ApiError, ErrorKind, resilient_api};
use tokio::runtime::Runtime;
use tokio::task::JoinSet;

use crate::loopback::cpu_time;
use crate::server::{BODY, Item};
use crate::{BoxError, Row, Scale, median};

/// Every policy on: retries, retry budget (the builder's default), circuit breaker,
/// bulkhead, a rate limit too high to ever wait, attempt and total timeouts.
#[resilient_api(
    timeout(attempt = "5s", total = "10s"),
    retry(max = 2),
    breaker(failures = 5, reset = "30s"),
    bulkhead(concurrency = 64, queue = 256),
    rate_limit(per_second = 1000000000)
)]
pub trait Everything {
    /// `GET /item`.
    #[get("/item")]
    async fn item(&self) -> Result<Item, ApiError>;
}

/// The same, and the endpoint hedged (a second attempt if none answered within 50 ms,
/// which never happens here) and coalesced (identical calls in flight share one
/// execution). A client of its own, so that `Everything`'s is the same as before.
#[resilient_api(
    timeout(attempt = "5s", total = "10s"),
    retry(max = 2),
    breaker(failures = 5, reset = "30s"),
    bulkhead(concurrency = 64, queue = 256),
    rate_limit(per_second = 1000000000)
)]
pub trait EverythingHedged {
    /// `GET /item`, hedged and coalesced.
    #[get("/item")]
    #[hedge(delay = "50ms", max = 2)]
    #[coalesce]
    async fn item(&self) -> Result<Item, ApiError>;
}

/// A breaker that opens on the first failure and stays open for an hour.
#[resilient_api(
    timeout(attempt = "5s", total = "10s"),
    retry(max = 0),
    breaker(failures = 1, reset = "1h")
)]
pub trait Tripped {
    /// `GET /item`.
    #[get("/item")]
    async fn item(&self) -> Result<Item, ApiError>;
}

/// Answers every request at once: `status` with the small JSON body.
#[derive(Clone, Copy, Debug)]
pub struct Immediate {
    status: StatusCode,
}

impl Transport for Immediate {
    fn send(&self, _request: HttpRequest) -> SendFuture {
        let status = self.status;
        Box::pin(async move {
            Ok(HttpResponse {
                status,
                headers: HeaderMap::new(),
                body: ResponseBody::full(Bytes::from_static(BODY)),
            })
        })
    }
}

/// A client with every policy on, over a transport that answers 200 at once.
pub fn everything() -> Result<EverythingClient, BoxError> {
    Ok(EverythingClient::builder()
        .base_url("http://engine.test")
        .transport(Immediate {
            status: StatusCode::OK,
        })
        .build()?)
}

/// One call, its result checked and dropped.
pub async fn call(client: &EverythingClient) -> Result<(), BoxError> {
    black_box(client.item().await?);
    Ok(())
}

/// `n` calls one after another on a current-thread runtime (for instruction counts),
/// by the client with every policy on or, with `hedged`, by the one with hedging and
/// coalescing on too.
pub fn sequential_calls(n: usize, hedged: bool) -> Result<(), BoxError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let task = if hedged {
            Task::AllCalls(everything_hedged()?)
        } else {
            Task::Calls(everything()?)
        };
        for _ in 0..n {
            task.once().await?;
        }
        Ok(())
    })
}

/// The client of [`everything`], with its endpoint hedged and coalesced too.
fn everything_hedged() -> Result<EverythingHedgedClient, BoxError> {
    Ok(EverythingHedgedClient::builder()
        .base_url("http://engine.test")
        .transport(Immediate {
            status: StatusCode::OK,
        })
        .build()?)
}

/// What the tasks of a throughput round do.
#[derive(Debug)]
enum Work {
    /// Calls with every policy on, all tasks through one client.
    Calls(EverythingClient),
    /// The same, with hedging and coalescing on too.
    AllCalls(EverythingHedgedClient),
    /// The same calls, but each task builds a client of its own: nothing of ours is
    /// shared between threads. If shared calls scale like these, the shared client
    /// holds no lock that the threads contend for.
    OwnClients,
    /// The control: decoding the body 20 times, about as long as a call and sharing
    /// nothing between threads, shows how much a second worker gives on this machine.
    Control,
}

/// What one task of a round runs.
enum Task {
    Calls(EverythingClient),
    AllCalls(EverythingHedgedClient),
    Control,
}

impl Work {
    fn for_task(&self) -> Result<Task, BoxError> {
        Ok(match self {
            Work::Calls(client) => Task::Calls(client.clone()),
            Work::AllCalls(client) => Task::AllCalls(client.clone()),
            Work::OwnClients => Task::Calls(everything()?),
            Work::Control => Task::Control,
        })
    }
}

impl Task {
    async fn once(&self) -> Result<(), BoxError> {
        match self {
            Task::Calls(client) => call(client).await,
            Task::AllCalls(client) => {
                black_box(client.item().await?);
                Ok(())
            }
            Task::Control => {
                // About as long as one call, so both rounds have the same shape.
                for _ in 0..20 {
                    black_box(serde_json::from_slice::<Item>(black_box(BODY))?);
                }
                tokio::task::consume_budget().await;
                Ok(())
            }
        }
    }
}

/// One throughput round: units per second, and CPU-µs per unit (whole process).
#[derive(Clone, Copy, Debug)]
struct Rate {
    per_sec: f64,
    cpu_us: f64,
}

/// `calls` units of `work` split over `tasks` tasks on `rt`.
fn per_sec(rt: &Runtime, work: &Work, tasks: usize, calls: usize) -> Result<Rate, BoxError> {
    let per_task = calls / tasks;
    let cpu_before = cpu_time()?;
    let started = Instant::now();
    rt.block_on(async {
        let mut set = JoinSet::new();
        for _ in 0..tasks {
            let work = work.for_task()?;
            set.spawn(async move {
                for _ in 0..per_task {
                    work.once().await?;
                }
                Ok::<_, BoxError>(())
            });
        }
        while let Some(done) = set.join_next().await {
            done??;
        }
        Ok::<_, BoxError>(())
    })?;
    let wall = started.elapsed();
    let cpu = cpu_time()? - cpu_before;
    let n = (per_task * tasks) as f64;
    Ok(Rate {
        per_sec: n / wall.as_secs_f64(),
        cpu_us: cpu.as_secs_f64() * 1e6 / n,
    })
}

/// Rates on one and on two workers, from alternating rounds.
#[derive(Debug, Default)]
struct Scaling {
    one: Vec<Rate>,
    two: Vec<Rate>,
}

impl Scaling {
    fn round(
        &mut self,
        rts: [&Runtime; 2],
        work: &Work,
        tasks: usize,
        calls: usize,
        r: usize,
    ) -> Result<(), BoxError> {
        // Which runtime goes first alternates from round to round.
        let (a, b) = if r.is_multiple_of(2) {
            let a = per_sec(rts[0], work, tasks, calls)?;
            (a, per_sec(rts[1], work, tasks, calls)?)
        } else {
            let b = per_sec(rts[1], work, tasks, calls)?;
            (per_sec(rts[0], work, tasks, calls)?, b)
        };
        self.one.push(a);
        self.two.push(b);
        Ok(())
    }

    /// The median of `f` on one worker.
    fn one(&self, f: fn(&Rate) -> f64) -> f64 {
        median(&self.one.iter().map(f).collect::<Vec<_>>())
    }

    /// The median of `f` on two workers.
    fn two(&self, f: fn(&Rate) -> f64) -> f64 {
        median(&self.two.iter().map(f).collect::<Vec<_>>())
    }

    /// The per-round ratios of `f`, two workers over one, in round order.
    fn ratios(&self, f: fn(&Rate) -> f64) -> Vec<f64> {
        self.two
            .iter()
            .zip(&self.one)
            .map(|(b, a)| f(b) / f(a))
            .collect()
    }

    /// The median of the per-round ratios of `f`, two workers over one.
    fn ratio(&self, f: fn(&Rate) -> f64) -> f64 {
        median(&self.ratios(f))
    }
}

fn workers(n: usize) -> Result<Runtime, BoxError> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(n)
        .enable_all()
        .build()?)
}

/// Section 2.
pub fn run(scale: Scale) -> Result<Vec<Row>, BoxError> {
    println!("\n== 2. engine cost without network ==");
    let client = everything()?;
    let (one, two) = (workers(1)?, workers(2)?);
    // Four tasks on either runtime: the same work, spread over one or two threads.
    // Short rounds, many of them: 72 of 50,000 calls (tens of milliseconds) rather
    // than 9 of 400,000, so that the host's slower swings fall on both runtimes of a
    // round alike (the bench's twentieth round: the runs' medians spread about half
    // as far).
    let tasks = 4;
    let calls = scale.pick(50_000, 400);
    let rounds = scale.pick(72, 1);
    let all = Work::AllCalls(everything_hedged()?);
    let (engine, control, own) = (Work::Calls(client), Work::Control, Work::OwnClients);
    for work in [&engine, &control, &own, &all] {
        per_sec(&one, work, tasks, scale.pick(100_000, 100))?;
        per_sec(&two, work, tasks, scale.pick(100_000, 100))?;
    }
    let (mut calls_scaling, mut control_scaling) = (Scaling::default(), Scaling::default());
    let (mut own_scaling, mut all_scaling) = (Scaling::default(), Scaling::default());
    let mut trips = Vec::new();
    for r in 0..rounds {
        trips.push(line_round_trip_ns(scale.pick(20_000, 200))?);
        calls_scaling.round([&one, &two], &engine, tasks, calls, r)?;
        control_scaling.round([&one, &two], &control, tasks, calls, r)?;
        own_scaling.round([&one, &two], &own, tasks, calls, r)?;
    }
    // In rounds of their own, after the others: context, not the target's figure.
    for r in 0..rounds {
        all_scaling.round([&one, &two], &all, tasks, calls, r)?;
    }
    let all_us = 1e6 / all_scaling.one(|r| r.per_sec);
    let all_scaling = all_scaling.ratio(|r| r.per_sec);
    let own = own_scaling.ratio(|r| r.per_sec);
    let (one_rate, two_rate) = (
        calls_scaling.one(|r| r.per_sec),
        calls_scaling.two(|r| r.per_sec),
    );
    // Each round's, for the split by line round trip below; the target is their median.
    let ratios = calls_scaling.ratios(|r| r.per_sec);
    let scaling = median(&ratios);
    let cpu_ratio = calls_scaling.ratio(|r| r.cpu_us);
    let control = control_scaling.ratio(|r| r.per_sec);
    let control_cpu = control_scaling.ratio(|r| r.cpu_us);
    let us_per_call = 1e6 / one_rate;
    // Each round's scaling next to the line's round trip measured just before it:
    // the rounds where the second worker gains least are those where the host made
    // moving a line between the two cores slow.
    let mut sorted = ratios.clone();
    sorted.sort_by(f64::total_cmp);
    let at =
        |q: f64| sorted[((q * (sorted.len() - 1) as f64).round() as usize).min(sorted.len() - 1)];
    println!(
        "2 workers / 1 over {} rounds: min {:.2}×, quartiles {:.2}×, {:.2}×, {:.2}×, max {:.2}×",
        sorted.len(),
        at(0.0),
        at(0.25),
        at(0.5),
        at(0.75),
        at(1.0)
    );
    let (trip_min, trip_max) = min_max(trips.iter().copied());
    let trip = median(&trips);
    // The rounds split by their line's round trip: within twice the run's fastest,
    // or slower. Each group is named by the round trips it holds, not called fast or
    // slow: a run whose rounds all had the slow line has one group, at about 330 ns.
    // Context for the target's row, which stays the median of all rounds.
    let (near, far): (Vec<_>, Vec<_>) = ratios
        .iter()
        .copied()
        .zip(trips.iter().copied())
        .partition(|&(_, t)| t <= 2.0 * trip_min);
    let group = |v: &[(f64, f64)]| {
        let (lo, hi) = min_max(v.iter().map(|&(_, t)| t));
        let ratios: Vec<f64> = v.iter().map(|&(r, _)| r).collect();
        let span = if v.len() == 1 {
            format!("{lo:.0} ns")
        } else {
            format!("{lo:.0}–{hi:.0} ns")
        };
        format!(
            "{span}: {:.2}× ({} of {} rounds)",
            median(&ratios),
            v.len(),
            trips.len()
        )
    };
    let by_trip = [near, far]
        .iter()
        .filter(|v| !v.is_empty())
        .map(|v| group(v))
        .collect::<Vec<_>>()
        .join("; ");
    println!(
        "every policy on, {calls} calls per round by {tasks} tasks, {rounds} rounds: \
         1 worker {one_rate:.0}/s ({us_per_call:.2} µs/call), 2 workers {two_rate:.0}/s ({scaling:.2}×); \
         CPU per call {cpu_ratio:.2}×; control (decoding only) {control:.2}×, CPU per unit {control_cpu:.2}×; \
         a client per task {own:.2}×; hedging and coalescing on too: {all_us:.2} µs/call, \
         2 workers {all_scaling:.2}×"
    );
    drop((one, two));

    let refused_ns = refused_call_ns(scale)?;
    println!("a call refused by an open breaker: {refused_ns:.0} ns");
    Ok(vec![
        Row::target(
            "engine: µs/call, every policy on, 1 worker (hedging and coalescing off)",
            format!("{us_per_call:.2} ({one_rate:.0} calls/s)"),
            "≈ 1 (≤ 1.5)",
            us_per_call <= 1.5,
        ),
        Row::target(
            "engine: 2 workers / 1 worker",
            format!("{scaling:.2}× ({two_rate:.0} calls/s)"),
            "≥ 1.7×",
            scaling >= 1.7,
        ),
        Row::context(
            "engine: control, decoding only, 2 workers / 1",
            format!("{control:.2}× (what this machine gives)"),
        ),
        Row::context(
            "engine: a client per task (nothing shared), 2 workers / 1",
            format!("{own:.2}× (the shared client without sharing)"),
        ),
        Row::context(
            "engine: a cache line's round trip between two threads (per round)",
            format!("{trip:.0} ns (rounds {trip_min:.0}–{trip_max:.0} ns)"),
        ),
        Row::context("engine: 2 workers / 1, rounds by that round trip", by_trip),
        Row::context(
            "engine: hedging and coalescing on too: µs/call; 2 workers / 1",
            format!("{all_us:.2}; {all_scaling:.2}×"),
        ),
        Row::target(
            "engine: call refused by an open breaker",
            format!("{:.3} µs", refused_ns / 1e3),
            "well under 1 µs (≤ 0.5)",
            refused_ns <= 500.0,
        ),
    ])
}

/// How long one cache line takes to go from one thread to another and back, in
/// nanoseconds (the median of `trips` round trips, in batches).
///
/// Every call through a shared client writes a few words that every thread writes:
/// the bulkhead's count of free slots (twice: taken, then given back), the rate
/// limiter's arrival time and the retry budget's newest bucket. On two workers, each
/// such write usually finds its line in the other core's cache and must wait for it
/// to come over. What that costs is not ours to choose: on this virtual machine it
/// changes from run to run with where the host runs the two virtual cores, and this
/// measures it next to each round of the scaling figure.
fn line_round_trip_ns(trips: u64) -> Result<f64, BoxError> {
    // Its own lines, so that nothing else shares them.
    #[repr(align(128))]
    struct Line(AtomicU64);
    /// Waits until `line` holds `value`; gives up after a second (a thread that is
    /// never scheduled must not hang the bench).
    fn wait_for(line: &Line, value: u64) -> Result<(), BoxError> {
        let started = Instant::now();
        let mut spins = 0_u32;
        while line.0.load(Ordering::Acquire) != value {
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(4096) && started.elapsed() > Duration::from_secs(1) {
                return Err("the other thread of the round-trip test stopped answering".into());
            }
        }
        Ok(())
    }
    let line = Arc::new(Line(AtomicU64::new(0)));
    let other = Arc::clone(&line);
    let echo = std::thread::spawn(move || -> Result<(), BoxError> {
        for i in 0..trips {
            wait_for(&other, 2 * i + 1)?;
            other.0.store(2 * i + 2, Ordering::Release);
        }
        Ok(())
    });
    let batch = 100.min(trips.max(1));
    let mut samples = Vec::new();
    let mut i = 0;
    while i < trips {
        let started = Instant::now();
        let end = (i + batch).min(trips);
        for j in i..end {
            line.0.store(2 * j + 1, Ordering::Release);
            wait_for(&line, 2 * j + 2)?;
        }
        samples.push(started.elapsed().as_nanos() as f64 / (end - i) as f64);
        i = end;
    }
    echo.join()
        .map_err(|_| "the round-trip test's other thread panicked")??;
    Ok(median(&samples))
}

/// Trip a breaker (`failures = 1`, `reset = "1h"`) with a failing call, then time
/// calls it refuses; nanoseconds per refused call.
fn refused_call_ns(scale: Scale) -> Result<f64, BoxError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let client = TrippedClient::builder()
        .base_url("http://engine.test")
        .transport(Immediate {
            status: StatusCode::SERVICE_UNAVAILABLE,
        })
        .build()?;
    let tripped: Result<(), BoxError> = rt.block_on(async {
        match client.item().await {
            Err(e) if e.kind() == ErrorKind::Status => {}
            other => return Err(format!("the tripping call ended with {other:?}").into()),
        }
        if client.circuit_state().phase != Phase::Open {
            return Err("the breaker did not open".into());
        }
        match client.item().await {
            Err(e) if e.kind() == ErrorKind::CircuitOpen => Ok(()),
            other => Err(format!("a call on an open breaker ended with {other:?}").into()),
        }
    });
    tripped?;
    let n = scale.pick(200_000, 200);
    let mut samples = Vec::new();
    for _ in 0..scale.pick(7, 1) {
        let started = Instant::now();
        rt.block_on(async {
            for _ in 0..n {
                black_box(client.item().await.err());
            }
        });
        samples.push(started.elapsed().as_nanos() as f64 / n as f64);
    }
    Ok(median(&samples))
}

/// The smallest and the largest of `values` (infinities, inverted, when there are none).
fn min_max(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    })
}
