//! The merged policy of an endpoint as plain values (spans dropped, defaults
//! decided), shared by `valid.rs` (to compare partitions), `expand.rs` (to write the
//! statics) and the generated docs (to state the effective policy).

use crate::ast::{Effective, Endpoint};
use crate::attr::{BackoffKind, Limit};

/// The runtime's defaults (`Backoff::DEFAULT`, `BreakerConfig::DEFAULT`,
/// `BulkheadConfig::DEFAULT`, `RetryPolicy::DEFAULT`), repeated here for compile-time
/// checks and docs (`tests/macro_defaults.rs` fails if they drift).
pub const DEFAULT_BACKOFF_BASE_MS: u64 = 200;
pub const DEFAULT_BACKOFF_FACTOR: u32 = 2;
pub const DEFAULT_BACKOFF_CAP_MS: u64 = 30_000;
pub const DEFAULT_RETRY_MAX: u32 = 2;
pub const DEFAULT_RETRY_ON: &[u16] = &[408, 425, 429, 500, 502, 503, 504];
pub const DEFAULT_RETRY_AFTER_CAP_MS: u64 = 60_000;
pub const DEFAULT_BREAKER_FAILURES: u32 = 5;
pub const DEFAULT_BREAKER_RESET_MS: u64 = 30_000;
pub const DEFAULT_BREAKER_PROBES: u32 = 1;
pub const DEFAULT_BULKHEAD_CONCURRENCY: u32 = 64;
pub const DEFAULT_BULKHEAD_QUEUE: u32 = 256;
/// Chosen by the macro: the runtime's failure-rate mode has no defaults of its own.
pub const DEFAULT_RATE_WINDOW_MS: u64 = 10_000;
pub const DEFAULT_RATE_MIN_CALLS: u32 = 10;
pub const DEFAULT_HEDGE_MAX: u32 = 2;

/// `250 ms`, `3 s`, `1 min`, `2 h`, or the exact milliseconds when not round.
pub fn fmt_ms(ms: u64) -> String {
    if ms == 0 {
        "0 ms".to_owned()
    } else if ms.is_multiple_of(3_600_000) {
        format!("{} h", ms / 3_600_000)
    } else if ms.is_multiple_of(60_000) {
        format!("{} min", ms / 60_000)
    } else if ms.is_multiple_of(1_000) {
        format!("{} s", ms / 1_000)
    } else {
        format!("{ms} ms")
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Backoff {
    Fixed { delay: u64 },
    Exponential { base: u64, factor: u32, cap: u64 },
    ExponentialJitter { base: u64, factor: u32, cap: u64 },
    DecorrelatedJitter { base: u64, cap: u64 },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Retry {
    pub max: Option<u32>,
    pub backoff: Option<Backoff>,
    pub on: Option<Vec<u16>>,
    pub retry_after_cap: Option<u64>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    ConsecutiveFailures {
        failures: u32,
    },
    FailureRate {
        threshold: f64,
        window: u64,
        min_calls: u32,
    },
}

/// Fields left `None` take `BreakerConfig::DEFAULT`'s.
#[derive(Clone, Debug, PartialEq)]
pub struct Breaker {
    pub mode: Option<Mode>,
    pub reset: Option<u64>,
    pub probes: Option<u32>,
    pub slow_call: Option<u64>,
}

impl Breaker {
    /// As it runs, every field left out taking the default: two declarations that
    /// configure the same breaker compare equal, whether a default is written out or
    /// left out.
    pub fn resolved(&self) -> (Mode, u64, u32, Option<u64>) {
        let mode = self.mode.clone().unwrap_or(Mode::ConsecutiveFailures {
            failures: DEFAULT_BREAKER_FAILURES,
        });
        let reset = self.reset.unwrap_or(DEFAULT_BREAKER_RESET_MS);
        let probes = self.probes.unwrap_or(DEFAULT_BREAKER_PROBES);
        (mode, reset, probes, self.slow_call)
    }
}

/// Fields left `None` take `BulkheadConfig::DEFAULT`'s.
#[derive(Clone, Debug, PartialEq)]
pub struct Bulkhead {
    pub concurrency: Option<u32>,
    pub queue: Option<u32>,
}

impl Bulkhead {
    /// As it runs, as [`Breaker::resolved`].
    pub fn resolved(&self) -> (u32, u32) {
        (
            self.concurrency.unwrap_or(DEFAULT_BULKHEAD_CONCURRENCY),
            self.queue.unwrap_or(DEFAULT_BULKHEAD_QUEUE),
        )
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct RateLimit {
    pub per_second: f64,
    pub burst: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Hedge {
    pub delay: u64,
    pub max: u32,
}

pub fn limit(l: Option<Limit>) -> Option<u64> {
    match l {
        Some(Limit::Ms(ms)) => Some(ms),
        Some(Limit::None) | None => None,
    }
}

pub fn retry(p: &Effective, streamed: bool) -> Retry {
    let backoff = p.backoff.as_ref().map(|b| {
        let b = &b.value;
        let base = b.base.as_ref().map_or(DEFAULT_BACKOFF_BASE_MS, |s| s.value);
        let factor = b
            .factor
            .as_ref()
            .map_or(DEFAULT_BACKOFF_FACTOR, |s| s.value);
        let cap = b.cap.as_ref().map_or(DEFAULT_BACKOFF_CAP_MS, |s| s.value);
        match b.kind {
            BackoffKind::Fixed => Backoff::Fixed {
                delay: b.delay.as_ref().map_or(0, |s| s.value),
            },
            BackoffKind::Exponential => Backoff::Exponential { base, factor, cap },
            BackoffKind::ExponentialJitter => Backoff::ExponentialJitter { base, factor, cap },
            BackoffKind::DecorrelatedJitter => Backoff::DecorrelatedJitter { base, cap },
        }
    });
    let max = p.retry_max.as_ref().map(|m| m.value);
    Retry {
        // A streamed body is never re-sent: without a word from the user, no retries.
        max: if streamed && max.is_none() {
            Some(0)
        } else {
            max
        },
        backoff,
        on: p
            .retry_on
            .as_ref()
            .map(|on| on.value.iter().map(|s| s.value).collect()),
        retry_after_cap: p.retry_after_cap.as_ref().map(|c| c.value),
    }
}

pub fn breaker(p: &Effective) -> Option<Breaker> {
    let b = p.breaker.as_ref()?;
    let mode = match (&b.failure_rate, &b.failures) {
        (Some(rate), _) => Some(Mode::FailureRate {
            threshold: rate.value,
            window: b
                .window
                .as_ref()
                .map_or(DEFAULT_RATE_WINDOW_MS, |w| w.value),
            min_calls: b
                .min_calls
                .as_ref()
                .map_or(DEFAULT_RATE_MIN_CALLS, |m| m.value),
        }),
        (None, Some(f)) => Some(Mode::ConsecutiveFailures { failures: f.value }),
        (None, None) => None,
    };
    Some(Breaker {
        mode,
        reset: b.reset.as_ref().map(|r| r.value),
        probes: b.probes.as_ref().map(|r| r.value),
        slow_call: b.slow_call.as_ref().map(|r| r.value),
    })
}

pub fn bulkhead(p: &Effective) -> Option<Bulkhead> {
    let b = p.bulkhead.as_ref()?;
    Some(Bulkhead {
        concurrency: b.concurrency.as_ref().map(|c| c.value),
        queue: b.queue.as_ref().map(|q| q.value),
    })
}

/// `burst` defaults to one second's worth of tokens (at least 1).
pub fn rate_limit(p: &Effective) -> Option<RateLimit> {
    let r = p.rate_limit.as_ref()?;
    let per_second = r.per_second.as_ref()?.value;
    let burst = r.burst.as_ref().map_or_else(
        || {
            let ceil = per_second.ceil();
            if ceil >= f64::from(u32::MAX) {
                u32::MAX
            } else if ceil >= 1.0 {
                ceil as u32
            } else {
                1
            }
        },
        |b| b.value,
    );
    Some(RateLimit { per_second, burst })
}

pub fn hedge(p: &Effective) -> Option<Hedge> {
    let h = p.hedge.as_ref()?;
    Some(Hedge {
        delay: h.delay.as_ref()?.value,
        max: h.max.as_ref().map_or(DEFAULT_HEDGE_MAX, |m| m.value),
    })
}

fn list(codes: &[u16]) -> String {
    let codes: Vec<String> = codes.iter().map(u16::to_string).collect();
    match codes.split_last() {
        None => "no status".to_owned(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

fn describe_backoff(b: &Backoff) -> String {
    match *b {
        Backoff::Fixed { delay } => format!("a fixed {} between attempts", fmt_ms(delay)),
        Backoff::Exponential { base, factor, cap } => format!(
            "exponential backoff from {}, ×{factor}, capped at {}",
            fmt_ms(base),
            fmt_ms(cap)
        ),
        Backoff::ExponentialJitter { base, factor, cap } => format!(
            "exponential backoff with full jitter from {}, ×{factor}, capped at {}",
            fmt_ms(base),
            fmt_ms(cap)
        ),
        Backoff::DecorrelatedJitter { base, cap } => format!(
            "decorrelated-jitter backoff from {} to {}",
            fmt_ms(base),
            fmt_ms(cap)
        ),
    }
}

/// The generated "Policy" section of an endpoint's docs, one Markdown line each,
/// after the user's own docs.
pub fn describe(e: &Endpoint) -> Vec<String> {
    let p = &e.policy;
    let verb = e.verb().map_or("", |v| v.as_str());
    let template = e
        .template
        .as_ref()
        .map_or(String::new(), |t| t.value.clone());
    let mut lines = Vec::new();
    if e.attrs.docs.is_empty() {
        // The summary line rustdoc shows in lists.
        lines.push(format!("`{verb} {template}`"));
    }
    lines.push(String::new());
    lines.push("**Policy** (generated by `#[resilient_api]`):".to_owned());
    lines.push(String::new());
    let idem = if p.idempotency_key.is_some() {
        "idempotent by key"
    } else if e.attrs.idempotent.is_some() {
        "declared idempotent"
    } else if p.idempotent {
        "idempotent"
    } else {
        "not idempotent"
    };
    lines.push(format!("- Request: `{verb} {template}` ({idem})."));

    let attempt = match p.attempt.as_ref().map(|a| a.value) {
        Some(Limit::Ms(ms)) => format!("{} per attempt", fmt_ms(ms)),
        _ => "no limit per attempt".to_owned(),
    };
    let total = match limit(p.total.as_ref().map(|t| t.value)) {
        Some(ms) => format!("{} in total", fmt_ms(ms)),
        None => "no total deadline".to_owned(),
    };
    lines.push(format!("- Timeouts: {attempt}, {total}."));

    let streamed = e.stream_body().is_some();
    let r = retry(p, streamed);
    let max = r.max.unwrap_or(DEFAULT_RETRY_MAX);
    let retries = if max == 0 {
        if streamed {
            "none (a streamed body cannot be replayed)".to_owned()
        } else {
            "none".to_owned()
        }
    } else {
        let times = if max == 1 {
            "1 retry".to_owned()
        } else {
            format!("{max} retries")
        };
        let when = if p.idempotent {
            match r.on.as_deref().unwrap_or(DEFAULT_RETRY_ON) {
                [] => "on connection failures and attempt timeouts, never on a status".to_owned(),
                on => format!(
                    "on status {}, on connection failures and attempt timeouts",
                    list(on)
                ),
            }
        } else {
            "only on failures before the request was sent (it is not idempotent, so a request that may have run is never repeated)".to_owned()
        };
        let backoff = describe_backoff(r.backoff.as_ref().unwrap_or(&Backoff::ExponentialJitter {
            base: DEFAULT_BACKOFF_BASE_MS,
            factor: DEFAULT_BACKOFF_FACTOR,
            cap: DEFAULT_BACKOFF_CAP_MS,
        }));
        let cap = fmt_ms(r.retry_after_cap.unwrap_or(DEFAULT_RETRY_AFTER_CAP_MS));
        format!("up to {times}, {when}; {backoff}; `Retry-After` honoured up to {cap}")
    };
    lines.push(format!("- Retries: {retries}."));

    let breaker = match breaker(p) {
        None => "the client's default".to_owned(),
        Some(b) => {
            let mode = match b.mode.unwrap_or(Mode::ConsecutiveFailures {
                failures: DEFAULT_BREAKER_FAILURES,
            }) {
                Mode::ConsecutiveFailures { failures } => {
                    format!("opens after {failures} consecutive failures")
                }
                Mode::FailureRate {
                    threshold,
                    window,
                    min_calls,
                } => format!(
                    "opens when {}% of at least {min_calls} calls in {} fail",
                    (threshold * 100.0).round(),
                    fmt_ms(window)
                ),
            };
            let reset = fmt_ms(b.reset.unwrap_or(DEFAULT_BREAKER_RESET_MS));
            let probes = b.probes.unwrap_or(DEFAULT_BREAKER_PROBES);
            let probes = if probes == 1 {
                "1 probe".to_owned()
            } else {
                format!("{probes} probes")
            };
            let slow = b
                .slow_call
                .map(|s| format!("; calls of {} or more count as failures", fmt_ms(s)))
                .unwrap_or_default();
            format!("{mode}, stays open {reset}, then admits {probes}{slow}")
        }
    };
    lines.push(format!("- Circuit breaker: {breaker}."));

    // A key left out of the method's own bulkhead is the library's default, not the
    // client's (`default_bulkhead` sets the partitions no method names): said as the
    // number it is.
    let bulkhead = match bulkhead(p) {
        None => "the client's default".to_owned(),
        Some(b) => format!(
            "{} calls at once, {} waiting",
            b.concurrency.unwrap_or(DEFAULT_BULKHEAD_CONCURRENCY),
            b.queue.unwrap_or(DEFAULT_BULKHEAD_QUEUE)
        ),
    };
    lines.push(format!("- Bulkhead: {bulkhead}."));

    if let Some(r) = rate_limit(p) {
        lines.push(format!(
            "- Rate limit: {} attempts per second, bursts of {}.",
            r.per_second, r.burst
        ));
    }
    if let Some(h) = hedge(p) {
        lines.push(format!(
            "- Hedging: another attempt after {} without an answer, at most {} in flight.",
            fmt_ms(h.delay),
            h.max
        ));
    }
    if p.coalesce {
        lines.push("- Coalescing: identical concurrent calls share one execution.".to_owned());
    }
    if let Some(key) = &p.idempotency_key {
        lines.push(format!(
            "- Idempotency key: a fresh `{key}` header per call, the same on every attempt."
        ));
    }
    if let Some(bytes) = p.max_body {
        lines.push(format!("- Responses up to {bytes} bytes."));
    }
    if let Some(with) = e.attrs.parse.as_ref().and_then(|p| p.attr.with.as_ref()) {
        let with = crate::attr::path_to_string(&with.value);
        lines.push(format!(
            "- Result checked by `{with}`: a value it refuses is a decode error, never retried."
        ));
    }
    match &p.partition {
        Some(part) => lines.push(format!("- Partition: `{part}`.")),
        None => lines.push("- Partition: the client's default.".to_owned()),
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_in_the_largest_round_unit() {
        assert_eq!(fmt_ms(250), "250 ms");
        assert_eq!(fmt_ms(3_000), "3 s");
        assert_eq!(fmt_ms(90_000), "90 s");
        assert_eq!(fmt_ms(120_000), "2 min");
        assert_eq!(fmt_ms(7_200_000), "2 h");
    }

    /// The policy lines of the trait's only method.
    fn lines_of(args: proc_macro2::TokenStream, item: syn::ItemTrait) -> Vec<String> {
        let cx = crate::ctxt::Ctxt::new();
        let api = crate::ast::Api::from_syn(&cx, args, item);
        let lines = describe(&api.endpoints[0]);
        cx.check().expect("a valid trait");
        lines
    }

    #[test]
    fn a_check_and_an_empty_status_list_are_described() {
        let lines = lines_of(
            quote::quote!(timeout(attempt = "3s"), retry(on = [])),
            syn::parse_quote! {
                pub trait Users {
                    #[get("/users/{id}")]
                    #[parse(with = checks::user)]
                    async fn user(&self, id: u64) -> Result<User, ApiError>;
                }
            },
        );
        let retries = lines.iter().find(|l| l.starts_with("- Retries:"));
        assert_eq!(
            retries.map(String::as_str),
            Some(
                "- Retries: up to 2 retries, on connection failures and attempt timeouts, never on a status; exponential backoff with full jitter from 200 ms, ×2, capped at 30 s; `Retry-After` honoured up to 1 min."
            )
        );
        let check = lines.iter().find(|l| l.starts_with("- Result checked"));
        assert_eq!(
            check.map(String::as_str),
            Some(
                "- Result checked by `checks::user`: a value it refuses is a decode error, never retried."
            )
        );
    }

    /// Regression: a method's own bulkhead with a key left out (or none, as
    /// `#[bulkhead()]`) was described as "the client's default" or "the default queue",
    /// but runs with the library's numbers, not the builder's `default_bulkhead`.
    #[test]
    fn a_bulkhead_with_keys_left_out_is_described_by_its_numbers() {
        let described = |attr: proc_macro2::TokenStream| {
            let item: syn::ItemTrait = syn::parse_quote! {
                pub trait Api {
                    #[get("/a")]
                    #attr
                    async fn a(&self) -> Result<String, ApiError>;
                }
            };
            lines_of(quote::quote!(timeout(attempt = "3s")), item)
                .into_iter()
                .find(|l| l.starts_with("- Bulkhead:"))
                .expect("a bulkhead line")
        };
        assert_eq!(
            described(quote::quote!(#[bulkhead()])),
            "- Bulkhead: 64 calls at once, 256 waiting."
        );
        assert_eq!(
            described(quote::quote!(#[bulkhead(concurrency = 8)])),
            "- Bulkhead: 8 calls at once, 256 waiting."
        );
        assert_eq!(
            described(quote::quote!(#[bulkhead(queue = 0)])),
            "- Bulkhead: 64 calls at once, 0 waiting."
        );
        assert_eq!(
            described(quote::quote!(#[coalesce])),
            "- Bulkhead: the client's default."
        );
    }

    #[test]
    fn status_lists_read_as_prose() {
        assert_eq!(list(&[503]), "503");
        assert_eq!(list(&[503, 429]), "503 and 429");
        assert_eq!(list(&[500, 502, 503]), "500, 502 and 503");
    }
}
