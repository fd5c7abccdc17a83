//! Queue at scale: a bulkhead's queue filled with waiters, then all of them cancelled.
//!
//! One permit is held for the whole run, so every `acquire` future joins the FIFO
//! queue when first polled; dropping the futures is cancelling them. Each waiter is
//! polled once with a no-op waker, so no task or timer is involved: only the queue.
//! The futures' boxes are allocated before and freed after the timed part: at 100,000
//! the allocator's own cost (page faults included) is not linear and would hide the
//! queue's.
//! If joining or leaving cost time proportional to the queue's length, the total
//! would grow with the square of the count; linear growth gives a ratio of 10 between
//! 100,000 and 10,000 waiters.
//!
//! The waiters leave in the order they joined (the target's figure), and, as a check
//! that leaving from the middle is as cheap, in a scattered order. Leaving from the
//! front is the easy case for most queues: a queue that searched for the waiter to
//! remove would still read about 10 in order, but about 100 scattered. Scattered
//! leaves also touch memory all over the queue, which 10,000 waiters' boxes fit in
//! the L2 cache and 100,000 do not, so that ratio reads above 10 without any search.

use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use resilient_api::bulkhead::{Bulkhead, BulkheadConfig};

use crate::{BoxError, Row, Scale, median};

/// How long queueing `n` waiters and then cancelling them all took.
#[derive(Clone, Copy, Debug)]
struct Timing {
    queue: Duration,
    cancel: Duration,
}

impl Timing {
    fn total(self) -> Duration {
        self.queue + self.cancel
    }
}

fn queue_and_cancel(n: usize, scattered: bool) -> Result<Timing, BoxError> {
    let bound = u32::try_from(n)?;
    let bulkhead = Bulkhead::new(BulkheadConfig::new(1, bound));
    let mut cx = Context::from_waker(Waker::noop());
    let mut first = Box::pin(bulkhead.acquire());
    let Poll::Ready(Ok(held)) = first.as_mut().poll(&mut cx) else {
        return Err("the first permit was not granted at once".into());
    };

    // Allocated before the clock starts: this measures the queue, not the allocator.
    let mut waiters: Vec<Pin<Box<_>>> = (0..n).map(|_| Box::pin(bulkhead.acquire())).collect();

    let started = Instant::now();
    for waiter in &mut waiters {
        if waiter.as_mut().poll(&mut cx).is_ready() {
            return Err("a waiter was not queued".into());
        }
    }
    let queued = started.elapsed();
    if bulkhead.queued() != bound {
        return Err(format!("{} waiters queued, expected {n}", bulkhead.queued()).into());
    }

    // `Pin::set` drops each waiter in place (leaving the queue), and puts a fresh,
    // never-polled future in its box, so freeing memory is not timed either. The
    // scattered order is a stride coprime to `n`.
    let stride = if !scattered || n.is_multiple_of(7919) {
        1
    } else {
        7919
    };
    let cancelling = Instant::now();
    for i in 0..n {
        waiters[i * stride % n].as_mut().set(bulkhead.acquire());
    }
    let cancel = cancelling.elapsed();
    if bulkhead.queued() != 0 {
        return Err(format!(
            "{} waiters still queued after cancelling",
            bulkhead.queued()
        )
        .into());
    }
    drop(waiters);
    drop(held);
    Ok(Timing {
        queue: queued,
        cancel,
    })
}

/// Section 4.
pub fn run(scale: Scale) -> Result<Vec<Row>, BoxError> {
    println!("\n== 4. queue at scale ==");
    let (small, large) = scale.pick((10_000, 100_000), (1_000, 10_000));
    let rounds = scale.pick(7, 1);
    queue_and_cancel(small, false)?;
    queue_and_cancel(large, false)?;
    let (mut smalls, mut larges, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let mut large_parts = Vec::new();
    let mut scattered = Vec::new();
    for _ in 0..rounds {
        let s = queue_and_cancel(small, false)?;
        let l = queue_and_cancel(large, false)?;
        smalls.push(s.total().as_secs_f64() * 1e3);
        larges.push(l.total().as_secs_f64() * 1e3);
        ratios.push(l.total().as_secs_f64() / s.total().as_secs_f64());
        large_parts.push(l);
        let s = queue_and_cancel(small, true)?;
        let l = queue_and_cancel(large, true)?;
        scattered.push((
            l.total().as_secs_f64() * 1e3,
            l.total().as_secs_f64() / s.total().as_secs_f64(),
        ));
    }
    let scattered_ms = median(&scattered.iter().map(|s| s.0).collect::<Vec<_>>());
    let scattered_ratio = median(&scattered.iter().map(|s| s.1).collect::<Vec<_>>());
    let (s_ms, l_ms, ratio) = (median(&smalls), median(&larges), median(&ratios));
    let q_ms = median(
        &large_parts
            .iter()
            .map(|t| t.queue.as_secs_f64() * 1e3)
            .collect::<Vec<_>>(),
    );
    let c_ms = median(
        &large_parts
            .iter()
            .map(|t| t.cancel.as_secs_f64() * 1e3)
            .collect::<Vec<_>>(),
    );
    println!(
        "{large} waiters: queued in {q_ms:.2} ms, cancelled in {c_ms:.2} ms; \
         {small}: {s_ms:.2} ms in all; ratio {ratio:.2}; leaving in a scattered order \
         {scattered_ms:.2} ms, ratio {scattered_ratio:.2}"
    );
    Ok(vec![
        Row::context(
            format!("queue: {large} waiters queued + cancelled"),
            format!("{l_ms:.1} ms ({q_ms:.1} + {c_ms:.1})"),
        ),
        Row::target(
            format!("queue: time({large}) / time({small})"),
            format!("{ratio:.2} ({l_ms:.1} vs {s_ms:.2} ms)"),
            "≈ 10 (≤ 15)",
            ratio <= 15.0,
        ),
        Row::context(
            format!("queue: leaving in a scattered order: {large} waiters; time ratio"),
            format!("{scattered_ms:.1} ms; {scattered_ratio:.2} (a search for each leaver: ≈ 100)"),
        ),
    ])
}
