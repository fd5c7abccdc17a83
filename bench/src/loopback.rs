//! Overhead over loopback: the generated client against the same request written by
//! hand with reqwest, and against reqwest-middleware + reqwest-retry.
//!
//! The three contenders, and the policies' floor (d) timed next to them as a
//! reference, share one `reqwest::Client` (so one configuration and one pool of
//! kept-alive connections) and decode the same JSON into the same type. The
//! client runs on a current-thread runtime, pinned to core 0; the server runs in its
//! own process on core 1.
//!
//! The contenders take turns in short blocks: a cycle is one block of each (500
//! requests at c=1, 2,000 at c=64: tens of milliseconds), the order rotating from
//! cycle to cycle and running backwards every other cycle, and each figure is the
//! median over the cycles of that cycle's ratio. A cycle's blocks run within about a
//! quarter of a second of each other, so the machine's slower swings (its noise
//! comes in bursts of about a second) fall on all four alike and cancel in the
//! ratio. Rounds of 3,500 requests per contender did not: on a noisy host their
//! per-round ratios spread from 0.82 to 1.47 at c=1, and seven runs' medians read
//! 1.018 to 1.114, against 1.047 to 1.068 for twelve runs in blocks (the twentieth
//! round in `bench/README.md`).

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use reqwest_middleware::ClientWithMiddleware;
use reqwest_retry::RetryTransientMiddleware;
use reqwest_retry::policies::ExponentialBackoff;
use resilient_api::bulkhead::{Bulkhead, BulkheadConfig};
use resilient_api::retry::budget::{BudgetConfig, RetryBudget};
use resilient_api::{ApiError, resilient_api};
use tokio::runtime::Runtime;

use tokio::task::JoinSet;

use crate::server::{Item, Pinning, Server};
use crate::{BoxError, Row, Scale, median, quantile};

/// The loopback server's one resource, with the default policies on: retries,
/// retry budget, circuit breaker, bulkhead, attempt and total timeouts.
#[resilient_api(timeout(attempt = "5s", total = "10s"), retry(max = 2))]
pub trait Items {
    /// `GET /item`.
    #[get("/item")]
    async fn item(&self) -> Result<Item, ApiError>;
}

/// Who makes the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contender {
    /// (a) reqwest by hand: send, check the status, decode the JSON.
    Raw,
    /// (b) the generated client with its default policies.
    Generated,
    /// (c) reqwest-middleware with reqwest-retry's exponential backoff, 2 retries.
    Middleware,
    /// (d) Not a contender but a reference: (a) plus the default policies' own work,
    /// written by hand (see [`Floor`]). Timed next to the others, reported as context.
    Floor,
}

/// In table order; (d) is timed with them as a reference.
pub const CONTENDERS: [Contender; 4] = [
    Contender::Raw,
    Contender::Generated,
    Contender::Middleware,
    Contender::Floor,
];

impl Contender {
    /// Short name for the tables.
    pub fn label(self) -> &'static str {
        match self {
            Contender::Raw => "(a) raw reqwest",
            Contender::Generated => "(b) generated",
            Contender::Middleware => "(c) reqwest-middleware",
            Contender::Floor => "(d) the policies' floor",
        }
    }
}

/// The three clients, built over one `reqwest::Client`.
pub struct Clients {
    url: reqwest::Url,
    raw: reqwest::Client,
    generated: ItemsClient,
    middleware: ClientWithMiddleware,
    floor: Floor,
}

/// What the default policies cost at the least on a healthy call, written by hand
/// around the raw request: a breaker's check (one atomic load), a bulkhead permit, a
/// retry-budget deposit, one timer for the attempt, and the content-type check. Its
/// instruction count is the floor for (b): what is above it is the pipeline's own
/// shape, not the policies' work.
struct Floor {
    bulkhead: Bulkhead,
    budget: RetryBudget,
    breaker: AtomicU64,
}

impl Clients {
    /// Clients for `base` (`http://127.0.0.1:<port>`).
    pub fn new(base: &str) -> Result<Clients, BoxError> {
        // Redirects off: the generated client follows them itself.
        let raw = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let generated = ItemsClient::builder()
            .base_url(base)
            .reqwest_client(raw.clone())
            .build()?;
        let retry = ExponentialBackoff::builder().build_with_max_retries(2);
        let middleware = reqwest_middleware::ClientBuilder::new(raw.clone())
            .with(RetryTransientMiddleware::new_with_policy(retry))
            .build();
        Ok(Clients {
            url: reqwest::Url::parse(&format!("{base}/item"))?,
            raw,
            generated,
            middleware,
            floor: Floor {
                bulkhead: Bulkhead::new(BulkheadConfig::DEFAULT),
                budget: RetryBudget::new(BudgetConfig::DEFAULT, tokio::time::Instant::now()),
                breaker: AtomicU64::new(0),
            },
        })
    }

    /// One request by `who`.
    pub async fn call(&self, who: Contender) -> Result<Item, BoxError> {
        match who {
            Contender::Raw => {
                let response = self.raw.get(self.url.clone()).send().await?;
                if !response.status().is_success() {
                    return Err(format!("status {}", response.status()).into());
                }
                Ok(response.json::<Item>().await?)
            }
            Contender::Generated => Ok(self.generated.item().await?),
            Contender::Floor => self.floor_call().await,
            Contender::Middleware => {
                let response = self.middleware.get(self.url.clone()).send().await?;
                if !response.status().is_success() {
                    return Err(format!("status {}", response.status()).into());
                }
                Ok(response.json::<Item>().await?)
            }
        }
    }

    /// One request by (d), [`Floor`].
    async fn floor_call(&self) -> Result<Item, BoxError> {
        let floor = &self.floor;
        let now = tokio::time::Instant::now();
        if floor.breaker.load(Ordering::Acquire) != 0 {
            return Err("breaker open".into());
        }
        let _permit = floor.bulkhead.acquire().await?;
        floor.budget.deposit(now);
        let attempt = async {
            let response = self.raw.get(self.url.clone()).send().await?;
            if !response.status().is_success() {
                return Err(format!("status {}", response.status()).into());
            }
            let json = response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .is_none_or(|v| v.as_bytes().eq_ignore_ascii_case(b"application/json"));
            if !json {
                return Err("not JSON".into());
            }
            let body = response.bytes().await?;
            Ok::<Item, BoxError>(serde_json::from_slice(&body)?)
        };
        tokio::time::timeout_at(now + Duration::from_secs(5), attempt).await?
    }
}

/// `n` requests by `who` against a fresh server, after a warm-up: one after another
/// (with nothing around them, as the instruction counts have always been taken) when
/// `tasks` is 1, else by a closed loop of `tasks` tasks, as the timed rounds make them.
pub fn counted_calls(who: Contender, n: usize, tasks: usize) -> Result<(), BoxError> {
    let server = Server::start()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let clients = Arc::new(Clients::new(&server.base_url())?);
        if tasks > 1 {
            closed_loop(clients.clone(), who, tasks, 10 * tasks).await?;
            closed_loop(clients, who, tasks, n).await?;
            return Ok(());
        }
        for _ in 0..200 {
            clients.call(who).await?;
        }
        for _ in 0..n {
            clients.call(who).await?;
        }
        Ok(())
    })
}

/// The client's CPU time so far: user + system, every thread (`getrusage(RUSAGE_SELF)`).
pub fn cpu_time() -> Result<Duration, BoxError> {
    use nix::sys::resource::{UsageWho, getrusage};
    let usage = getrusage(UsageWho::RUSAGE_SELF)?;
    let micros = |t: nix::sys::time::TimeVal| {
        let us = t.tv_sec() as i128 * 1_000_000 + i128::from(t.tv_usec());
        Duration::from_micros(u64::try_from(us).unwrap_or(0))
    };
    Ok(micros(usage.user_time()) + micros(usage.system_time()))
}

/// One block's figures.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    cpu_us: f64,
    per_sec: f64,
}

/// A closed loop of `requests` requests by `concurrency` tasks; the latency of each.
pub async fn closed_loop(
    clients: Arc<Clients>,
    who: Contender,
    concurrency: usize,
    requests: usize,
) -> Result<Vec<u64>, BoxError> {
    let left = Arc::new(AtomicUsize::new(requests));
    if concurrency <= 1 {
        return worker(&clients, who, &left, requests).await;
    }
    let mut tasks = JoinSet::new();
    for _ in 0..concurrency {
        let clients = clients.clone();
        let left = left.clone();
        let share = requests / concurrency + 1;
        tasks.spawn(async move { worker(&clients, who, &left, share).await });
    }
    let mut all = Vec::with_capacity(requests);
    while let Some(done) = tasks.join_next().await {
        all.extend(done??);
    }
    Ok(all)
}

async fn worker(
    clients: &Clients,
    who: Contender,
    left: &AtomicUsize,
    capacity: usize,
) -> Result<Vec<u64>, BoxError> {
    let mut latencies = Vec::with_capacity(capacity);
    while left
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
    {
        let started = Instant::now();
        let item = clients.call(who).await?;
        black_box(item);
        latencies.push(u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX));
    }
    Ok(latencies)
}

/// One block of `requests` requests by `who`; their latencies are added to `latencies`.
fn block(
    rt: &Runtime,
    clients: &Arc<Clients>,
    who: Contender,
    concurrency: usize,
    requests: usize,
    latencies: &mut Vec<u64>,
) -> Result<Sample, BoxError> {
    let cpu_before = cpu_time()?;
    let started = Instant::now();
    let these = rt.block_on(closed_loop(clients.clone(), who, concurrency, requests))?;
    let wall = started.elapsed();
    let cpu = cpu_time()? - cpu_before;
    let n = these.len().max(1) as f64;
    latencies.extend(these);
    Ok(Sample {
        cpu_us: cpu.as_secs_f64() * 1e6 / n,
        per_sec: n / wall.as_secs_f64(),
    })
}

/// Section 1: CPU per request, throughput and latency of (a), (b) and (c).
pub fn run(scale: Scale, server: &Server) -> Result<Vec<Row>, BoxError> {
    println!("\n== 1. overhead over loopback ==");
    let placement = match server.pinning() {
        Pinning::Pinned => "client on core 0, server on core 1 (taskset)".to_owned(),
        Pinning::Unpinned(why) => format!("unpinned ({why})"),
    };
    println!("{placement}");
    let _pin = server.pin_client();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let clients = Arc::new(Clients::new(&server.base_url())?);
    let first = rt.block_on(clients.call(Contender::Generated))?;
    if first.id != 42 || first.name != "resilient" {
        return Err(format!("the generated client decoded {first:?}").into());
    }

    // 31 rounds of 7 cycles: 3,500 requests per contender per round at c=1, 14,000
    // at c=64, as many as the rounds of one block each took before.
    let cycles = scale.pick(31 * 7, 2);
    let mut rows = vec![Row::context("loopback placement", placement)];
    for concurrency in [1usize, 64] {
        let size = scale.pick(if concurrency == 1 { 500 } else { 2_000 }, 100);
        // Warm-up: every connection opened, every code path touched.
        for who in CONTENDERS {
            rt.block_on(closed_loop(clients.clone(), who, concurrency, 4 * size))?;
        }
        let mut samples: [Vec<Sample>; CONTENDERS.len()] = Default::default();
        let mut latencies: [Vec<u64>; CONTENDERS.len()] = Default::default();
        for r in 0..cycles {
            for k in 0..CONTENDERS.len() {
                // Rotated each cycle, and run backwards every other cycle, so that no
                // contender always follows the same one (a, b, c, d; a, d, c, b;
                // c, d, a, b; c, b, a, d; ...).
                let k = if r % 2 == 0 {
                    k
                } else {
                    CONTENDERS.len() - 1 - k
                };
                let i = (r + k) % CONTENDERS.len();
                let who = CONTENDERS[i];
                let sample = block(&rt, &clients, who, concurrency, size, &mut latencies[i])?;
                samples[i].push(sample);
            }
        }
        for l in &mut latencies {
            l.sort_unstable();
        }
        rows.extend(report(concurrency, size, &samples, &latencies));
    }
    Ok(rows)
}

fn report(
    concurrency: usize,
    block: usize,
    samples: &[Vec<Sample>; CONTENDERS.len()],
    latencies: &[Vec<u64>; CONTENDERS.len()],
) -> Vec<Row> {
    let med =
        |i: usize, f: fn(&Sample) -> f64| median(&samples[i].iter().map(f).collect::<Vec<_>>());
    // Latency quantiles over every request a contender made, in µs.
    let p = |i: usize, q: f64| quantile(&latencies[i], q) as f64 / 1e3;
    // Medians of per-cycle ratios: cycle r's block of one contender ran next to cycle
    // r's block of the other.
    let ratio = |num: usize, den: usize, f: fn(&Sample) -> f64| {
        let per_cycle: Vec<f64> = samples[num]
            .iter()
            .zip(&samples[den])
            .map(|(n, d)| f(n) / f(d))
            .collect();
        median(&per_cycle)
    };
    println!(
        "concurrency {concurrency}, {} cycles of a {block}-request block each (medians):",
        samples[0].len()
    );
    println!(
        "  {:<24} {:>10} {:>10} {:>9} {:>9}",
        "contender", "CPU-µs/req", "req/s", "p50 µs", "p99 µs"
    );
    for (i, who) in CONTENDERS.iter().enumerate() {
        println!(
            "  {:<24} {:>10.2} {:>10.0} {:>9.1} {:>9.1}",
            who.label(),
            med(i, |s| s.cpu_us),
            med(i, |s| s.per_sec),
            p(i, 0.50),
            p(i, 0.99),
        );
    }
    let (a, b, c, d) = (0, 1, 2, 3);
    let cpu_ba = ratio(b, a, |s| s.cpu_us);
    let tput_ba = ratio(b, a, |s| s.per_sec);
    let cpu_da = ratio(d, a, |s| s.cpu_us);
    let tput_da = ratio(d, a, |s| s.per_sec);
    let cpu_bc = ratio(b, c, |s| s.cpu_us);
    let tput_bc = ratio(b, c, |s| s.per_sec);
    let us = |i: usize| med(i, |s| s.cpu_us);
    let rps = |i: usize| med(i, |s| s.per_sec);
    let lat = |i: usize| format!("{:.0}/{:.0}", p(i, 0.50), p(i, 0.99));
    let c_ = concurrency;
    vec![
        Row::target(
            format!("c={c_}: CPU-µs/req (b)/(a)"),
            format!("{cpu_ba:.3} ({:.1} vs {:.1} µs)", us(b), us(a)),
            "≤ 1.05",
            cpu_ba <= 1.05,
        ),
        Row::target(
            format!("c={c_}: throughput (b)/(a)"),
            format!("{tput_ba:.3} ({:.0} vs {:.0}/s)", rps(b), rps(a)),
            "≥ 0.97",
            tput_ba >= 0.97,
        ),
        Row::target(
            format!("c={c_}: CPU-µs/req (b)/(c)"),
            format!("{cpu_bc:.3} ({:.1} vs {:.1} µs)", us(b), us(c)),
            "< 1",
            cpu_bc < 1.0,
        ),
        Row::target(
            format!("c={c_}: throughput (b)/(c)"),
            format!("{tput_bc:.3} ({:.0} vs {:.0}/s)", rps(b), rps(c)),
            "> 1",
            tput_bc > 1.0,
        ),
        Row::context(
            format!("c={c_}: p50/p99 µs (a; b; c)"),
            format!("{}; {}; {}", lat(a), lat(b), lat(c)),
        ),
        // What the default policies' own work costs at the least, timed the same way.
        Row::context(
            format!("c={c_}: floor (d)/(a): CPU, throughput"),
            format!("{cpu_da:.3}, {tput_da:.3}"),
        ),
        // The targets' allowances (5% more CPU, 3% less throughput), and how much of
        // each the floor alone uses up: what is left for the pipeline's own shape.
        Row::context(
            format!("c={c_}: allowance used, CPU; throughput: (b), floor (d)"),
            format!(
                "{}, {}; {}, {}",
                used(cpu_ba - 1.0, 0.05),
                used(cpu_da - 1.0, 0.05),
                used(1.0 - tput_ba, 0.03),
                used(1.0 - tput_da, 0.03),
            ),
        ),
    ]
}

/// How much of `allowance` a cost of `cost` uses, as a percentage; "none" when the
/// contender did better than raw reqwest.
fn used(cost: f64, allowance: f64) -> String {
    if cost <= 0.0 {
        "none".to_owned()
    } else {
        format!("{:.0}%", cost / allowance * 100.0)
    }
}
