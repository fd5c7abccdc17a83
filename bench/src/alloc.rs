//! Allocations per call, counted by the global allocator ([`crate::counting`]), which
//! counts only while this section asks it to.
//!
//! Calls run one after another on a current-thread runtime, after a warm-up, and the
//! count, over the whole process, is averaged over many calls; rounds alternate between
//! contenders and medians are reported.

use std::hint::black_box;
use std::sync::Arc;

use crate::counting::allocations_during;
use crate::loopback::{CONTENDERS, Clients, Contender};
use crate::server::Server;
use crate::{BoxError, Row, Scale, median};

/// Allocations per call of `f`, averaged over `n` calls made one after another.
pub fn per_call<F: Future<Output = Result<(), BoxError>>>(
    rt: &tokio::runtime::Runtime,
    n: usize,
    mut f: impl FnMut() -> F,
) -> Result<f64, BoxError> {
    let (count, result) = allocations_during(|| {
        rt.block_on(async {
            for _ in 0..n {
                f().await?;
            }
            Ok::<_, BoxError>(())
        })
    });
    result?;
    Ok(count as f64 / n as f64)
}

/// Section 3, over loopback: the generated client minus raw reqwest, same request.
pub fn run_loopback(scale: Scale, server: &Server) -> Result<Vec<Row>, BoxError> {
    println!("\n== 3. allocations per call ==");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let clients = Arc::new(Clients::new(&server.base_url())?);
    let n = scale.pick(2_000, 100);
    let rounds = scale.pick(5, 1);
    let who = CONTENDERS;
    for w in who {
        per_call(&rt, n / 4, || call(&clients, w))?;
    }
    let mut counts: [Vec<f64>; CONTENDERS.len()] = Default::default();
    for _ in 0..rounds {
        for (i, w) in who.iter().enumerate() {
            counts[i].push(per_call(&rt, n, || call(&clients, *w))?);
        }
    }
    let extra: Vec<f64> = counts[1]
        .iter()
        .zip(&counts[0])
        .map(|(g, r)| g - r)
        .collect();
    let extra = median(&extra);
    let [raw, generated, middleware, floor] = counts.map(|c| median(&c));
    println!(
        "over loopback, {n} sequential calls per round: raw {raw:.1}, generated {generated:.1}, \
         reqwest-middleware {middleware:.1}, the policies' floor {floor:.1} allocations per call"
    );
    Ok(vec![
        Row::target(
            "allocations/call: (b) − (a) over loopback",
            format!("{extra:+.1} ({generated:.1} vs {raw:.1})"),
            "≤ 6",
            extra <= 6.0,
        ),
        Row::context(
            "allocations/call: (c) reqwest-middleware; (d) the floor",
            format!("{middleware:.1}; {floor:.1}"),
        ),
    ])
}

async fn call(clients: &Clients, who: Contender) -> Result<(), BoxError> {
    black_box(clients.call(who).await?);
    Ok(())
}

/// Section 3, without network: a call with every policy on, on the in-bench transport.
pub fn run_engine(scale: Scale) -> Result<Vec<Row>, BoxError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let client = crate::engine::everything()?;
    let n = scale.pick(20_000, 200);
    per_call(&rt, n / 4, || crate::engine::call(&client))?;
    let per = median(
        &(0..scale.pick(5, 1))
            .map(|_| per_call(&rt, n, || crate::engine::call(&client)))
            .collect::<Result<Vec<_>, _>>()?,
    );
    println!("in-bench transport, every policy on: {per:.1} allocations per call");
    Ok(vec![Row::context(
        "allocations/call: in-bench transport (1 is its own)",
        format!("{per:.1}"),
    )])
}
