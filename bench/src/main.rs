//! Benchmarks of resilient-api: what resilience costs, side by side with raw reqwest
//! and with reqwest-middleware + reqwest-retry.
//!
//! ```text
//! cargo run --release -p bench                  # everything, a few minutes on 2 cores
//! cargo run --release -p bench -- --only herd   # one section
//! cargo run -p bench -- --smoke                 # a few hundred iterations of each (CI)
//! ```
//!
//! Machines are noisy, so every comparison is a ratio measured in the same run, from
//! alternating rounds (A, B, A, B, ...; over loopback, short blocks of each contender
//! in turn), and the median is reported; absolute numbers
//! are context only. Nothing here asserts a timing: a missed target shows as `no` in
//! the final table and the process still exits 0.

#![allow(clippy::print_stdout)]

mod alloc;
mod counting;
mod engine;
mod herd;
mod loopback;
mod queue;
mod server;

use std::error::Error;
use std::fmt;
use std::path::PathBuf;
use std::process::ExitCode;

/// Any failure that stops the bench (a setup problem, never a missed target).
pub type BoxError = Box<dyn Error + Send + Sync>;

/// The sections, in the order they run.
const SECTIONS: &[&str] = &["loopback", "engine", "alloc", "queue", "herd"];

/// How much work each section does.
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    /// A few hundred iterations of everything: checks that it runs, measures nothing.
    pub smoke: bool,
}

impl Scale {
    /// `full` normally, `smoke` in a smoke run.
    pub fn pick<T>(self, full: T, smoke: T) -> T {
        if self.smoke { smoke } else { full }
    }
}

/// Whether a figure met its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Met {
    /// Met.
    Yes,
    /// Missed.
    No,
    /// Context only: no target.
    Context,
}

impl Met {
    /// `Yes` if `ok`, else `No`.
    pub fn from(ok: bool) -> Met {
        if ok { Met::Yes } else { Met::No }
    }
}

impl fmt::Display for Met {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Met::Yes => "yes",
            Met::No => "NO",
            Met::Context => "",
        })
    }
}

/// One line of the final table.
#[derive(Clone, Debug)]
pub struct Row {
    /// What was measured.
    pub figure: String,
    /// The measurement.
    pub value: String,
    /// The target, or empty for context.
    pub target: String,
    /// Whether the target was met.
    pub met: Met,
}

impl Row {
    /// A figure with a target.
    pub fn target(
        figure: impl Into<String>,
        value: impl Into<String>,
        target: &str,
        ok: bool,
    ) -> Row {
        Row {
            figure: figure.into(),
            value: value.into(),
            target: target.to_owned(),
            met: Met::from(ok),
        }
    }

    /// A figure given for context.
    pub fn context(figure: impl Into<String>, value: impl Into<String>) -> Row {
        Row {
            figure: figure.into(),
            value: value.into(),
            target: String::new(),
            met: Met::Context,
        }
    }
}

enum Mode {
    Server(PathBuf),
    Bench {
        scale: Scale,
        only: Option<String>,
    },
    Help,
    /// `n` sequential engine calls and nothing else: run it under
    /// `valgrind --tool=callgrind` for 1000 and 2000 calls and subtract to get the
    /// instructions one call costs (repeatable, unlike time on a noisy machine);
    /// `true`: by the client with hedging and coalescing on too.
    EngineCalls(usize, bool),
    /// `n` calls over loopback by one contender, after a warm-up, made one after
    /// another or by a closed loop of tasks: under callgrind (which follows only this
    /// process, not the server) the difference of two counts gives the client's
    /// instructions per request.
    LoopbackCalls(loopback::Contender, usize, usize),
}

fn parse_args() -> Result<Mode, String> {
    let mut args = std::env::args().skip(1);
    let mut smoke = false;
    let mut only = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--server" => {
                let file = args.next().ok_or("`--server` needs a port file")?;
                return Ok(Mode::Server(PathBuf::from(file)));
            }
            "--smoke" => smoke = true,
            "--loopback-calls" => {
                let who = args
                    .next()
                    .ok_or("`--loopback-calls` needs a contender: a, b, c or d")?;
                let who = match who.as_str() {
                    "a" => loopback::Contender::Raw,
                    "b" => loopback::Contender::Generated,
                    "c" => loopback::Contender::Middleware,
                    "d" => loopback::Contender::Floor,
                    other => {
                        return Err(format!(
                            "unknown contender `{other}`; expected a, b, c or d"
                        ));
                    }
                };
                let n = args.next().ok_or("`--loopback-calls` needs a count")?;
                let n = n.parse().map_err(|_| format!("`{n}` is not a count"))?;
                // Optional: how many tasks make the calls (1, one after another, unless given).
                let tasks = match args.next() {
                    Some(c) => match c.parse() {
                        Ok(c) if c >= 1 => c,
                        _ => return Err(format!("`{c}` is not a number of tasks (1 or more)")),
                    },
                    None => 1,
                };
                return Ok(Mode::LoopbackCalls(who, n, tasks));
            }
            "--engine-calls" => {
                let n = args.next().ok_or("`--engine-calls` needs a count")?;
                let n = n.parse().map_err(|_| format!("`{n}` is not a count"))?;
                // Optional: `hedged`, the client with hedging and coalescing on too.
                let hedged = match args.next().as_deref() {
                    None => false,
                    Some("hedged") => true,
                    Some(other) => {
                        return Err(format!("`{other}`: expected `hedged` or nothing"));
                    }
                };
                return Ok(Mode::EngineCalls(n, hedged));
            }
            "--only" => {
                let name = args.next().ok_or("`--only` needs a section name")?;
                if !SECTIONS.contains(&name.as_str()) {
                    return Err(format!(
                        "unknown section `{name}`; expected one of: {}",
                        SECTIONS.join(", ")
                    ));
                }
                only = Some(name);
            }
            "--help" | "-h" => return Ok(Mode::Help),
            // `cargo bench` passes `--bench`; nothing to do with it.
            "--bench" => {}
            other => return Err(format!("unknown argument `{other}`; try `--help`")),
        }
    }
    Ok(Mode::Bench {
        scale: Scale { smoke },
        only,
    })
}

fn main() -> ExitCode {
    let mode = match parse_args() {
        Ok(mode) => mode,
        Err(message) => {
            println!("bench: {message}");
            return ExitCode::from(2);
        }
    };
    let result = match mode {
        Mode::Server(port_file) => server::run(&port_file),
        Mode::Help => {
            println!(
                "usage: bench [--smoke] [--only <{}>]\n       bench --server <port-file>\n       bench --engine-calls <n> [hedged]\n       bench --loopback-calls <a|b|c|d> <n> [<tasks>]",
                SECTIONS.join("|")
            );
            Ok(())
        }
        Mode::EngineCalls(n, hedged) => engine::sequential_calls(n, hedged),
        Mode::LoopbackCalls(who, n, tasks) => loopback::counted_calls(who, n, tasks),
        Mode::Bench { scale, only } => run(scale, only.as_deref()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("bench: {e}");
            let mut source = e.source();
            while let Some(s) = source {
                println!("  caused by: {s}");
                source = s.source();
            }
            ExitCode::FAILURE
        }
    }
}

fn run(scale: Scale, only: Option<&str>) -> Result<(), BoxError> {
    let wanted = |name: &str| only.is_none_or(|o| o == name);
    if scale.smoke {
        println!("smoke run: a few hundred iterations of each; the numbers mean nothing");
    }
    let load_before = load_average();
    let mut rows = Vec::new();
    // The loopback sections share one server process (idle while the engine runs).
    let server = if wanted("loopback") || wanted("alloc") {
        Some(server::Server::start()?)
    } else {
        None
    };
    if let (true, Some(server)) = (wanted("loopback"), &server) {
        rows.extend(loopback::run(scale, server)?);
    }
    if wanted("engine") {
        rows.extend(engine::run(scale)?);
    }
    if let (true, Some(server)) = (wanted("alloc"), &server) {
        rows.extend(alloc::run_loopback(scale, server)?);
        rows.extend(alloc::run_engine(scale)?);
    }
    drop(server);
    if wanted("queue") {
        rows.extend(queue::run(scale)?);
    }
    if wanted("herd") {
        rows.extend(herd::run(scale)?);
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    rows.insert(
        0,
        Row::context(
            "machine: cores, load average before → after",
            format!("{cores}, {load_before} → {}", load_average()),
        ),
    );
    print_table(&rows, scale);
    Ok(())
}

fn print_table(rows: &[Row], scale: Scale) {
    let headers = ["figure", "value", "target", "met?"];
    let cells: Vec<[String; 4]> = rows
        .iter()
        .map(|r| {
            [
                r.figure.clone(),
                r.value.clone(),
                r.target.clone(),
                r.met.to_string(),
            ]
        })
        .collect();
    let mut widths = headers.map(str::len);
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cols: [&str; 4]| {
        let padded: Vec<String> = cols
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
            .collect();
        println!("| {} |", padded.join(" | "));
    };
    println!();
    if scale.smoke {
        println!("(smoke run: too few iterations for any of these numbers to mean anything)");
    }
    line(headers);
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    println!("|-{}-|", rule.join("-|-"));
    for row in &cells {
        line([&row[0], &row[1], &row[2], &row[3]]);
    }
}

/// The 1-minute load average (Linux), to tell a quiet machine from a busy one.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

/// The median of `values` (the mean of the middle two for an even count); 0 if empty.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

/// The `q` quantile (0..=1) of sorted `values`, nearest rank; 0 if empty.
pub fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}
