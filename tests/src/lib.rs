//! Shared helpers for the test suite: time in milliseconds and exact elapsed times.
//!
//! The tests themselves live in `tests/tests/`: one file per policy combination
//! (paused clock, scripted transport), the wiremock files (`http_*.rs`, real sockets,
//! real clock), and `ui.rs` (trybuild).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// `n` milliseconds.
pub const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A stopwatch on the (paused) tokio clock.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    /// Start now.
    pub fn start() -> Self {
        Clock {
            start: Instant::now(),
        }
    }

    /// Whole milliseconds since the start.
    pub fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }
}

/// A wall clock fixed on a whole second, so that a `Retry-After` HTTP date one
/// second ahead is exactly 1000 ms away.
pub fn fixed_wall_clock() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

/// The HTTP date `secs` seconds after [`fixed_wall_clock`].
pub fn http_date_after(secs: u64) -> String {
    httpdate::fmt_http_date(fixed_wall_clock() + Duration::from_secs(secs))
}
