//! One constant per key the attribute language accepts, so that parsing code reads
//! `if meta.path == RETRY`.

use std::fmt::{self, Display};

use syn::{Ident, Path};

#[derive(Copy, Clone, PartialEq, Eq)]
pub struct Symbol(pub &'static str);

// `#[resilient_api(...)]`
pub const BASE_URL: Symbol = Symbol("base_url");
pub const CLIENT: Symbol = Symbol("client");
pub const CRATE: Symbol = Symbol("crate");
pub const HEADERS: Symbol = Symbol("headers");

// policies, on the trait or a method
pub const TIMEOUT: Symbol = Symbol("timeout");
pub const ATTEMPT: Symbol = Symbol("attempt");
pub const TOTAL: Symbol = Symbol("total");

pub const RETRY: Symbol = Symbol("retry");
pub const MAX: Symbol = Symbol("max");
pub const BACKOFF: Symbol = Symbol("backoff");
pub const ON: Symbol = Symbol("on");
pub const RETRY_AFTER_CAP: Symbol = Symbol("retry_after_cap");

pub const FIXED: Symbol = Symbol("fixed");
pub const EXPONENTIAL: Symbol = Symbol("exponential");
pub const EXPONENTIAL_JITTER: Symbol = Symbol("exponential_jitter");
pub const DECORRELATED_JITTER: Symbol = Symbol("decorrelated_jitter");
pub const DELAY: Symbol = Symbol("delay");
pub const BASE: Symbol = Symbol("base");
pub const FACTOR: Symbol = Symbol("factor");
pub const CAP: Symbol = Symbol("cap");

pub const BREAKER: Symbol = Symbol("breaker");
pub const FAILURES: Symbol = Symbol("failures");
pub const RESET: Symbol = Symbol("reset");
pub const PROBES: Symbol = Symbol("probes");
pub const FAILURE_RATE: Symbol = Symbol("failure_rate");
pub const WINDOW: Symbol = Symbol("window");
pub const MIN_CALLS: Symbol = Symbol("min_calls");
pub const SLOW_CALL: Symbol = Symbol("slow_call");

pub const BULKHEAD: Symbol = Symbol("bulkhead");
pub const CONCURRENCY: Symbol = Symbol("concurrency");
pub const QUEUE: Symbol = Symbol("queue");

pub const RATE_LIMIT: Symbol = Symbol("rate_limit");
pub const PER_SECOND: Symbol = Symbol("per_second");
pub const BURST: Symbol = Symbol("burst");

// method only
pub const GET: Symbol = Symbol("get");
pub const POST: Symbol = Symbol("post");
pub const PUT: Symbol = Symbol("put");
pub const PATCH: Symbol = Symbol("patch");
pub const DELETE: Symbol = Symbol("delete");
pub const HEAD: Symbol = Symbol("head");
pub const OPTIONS: Symbol = Symbol("options");
pub const IDEMPOTENT: Symbol = Symbol("idempotent");
pub const IDEMPOTENCY_KEY: Symbol = Symbol("idempotency_key");
pub const HEDGE: Symbol = Symbol("hedge");
pub const COALESCE: Symbol = Symbol("coalesce");
pub const PARTITION: Symbol = Symbol("partition");
pub const MAX_BODY: Symbol = Symbol("max_body");
pub const PARSE: Symbol = Symbol("parse");
pub const WITH: Symbol = Symbol("with");

// parameters
pub const PATH: Symbol = Symbol("path");
pub const QUERY: Symbol = Symbol("query");
pub const HEADER: Symbol = Symbol("header");
pub const BODY: Symbol = Symbol("body");
pub const SECRET: Symbol = Symbol("secret");
pub const JSON: Symbol = Symbol("json");
pub const FORM: Symbol = Symbol("form");
pub const RAW: Symbol = Symbol("raw");
pub const STREAM: Symbol = Symbol("stream");

// attributes we refuse to carry over to generated items
pub const CFG: Symbol = Symbol("cfg");
pub const CFG_ATTR: Symbol = Symbol("cfg_attr");
pub const DOC: Symbol = Symbol("doc");

// lint attributes of the user's, repeated on the code generated from their tokens
pub const ALLOW: Symbol = Symbol("allow");
pub const EXPECT: Symbol = Symbol("expect");
pub const DEPRECATED: Symbol = Symbol("deprecated");

impl PartialEq<Symbol> for Ident {
    fn eq(&self, word: &Symbol) -> bool {
        self == word.0
    }
}

impl PartialEq<Symbol> for &Ident {
    fn eq(&self, word: &Symbol) -> bool {
        *self == word.0
    }
}

impl PartialEq<Symbol> for Path {
    fn eq(&self, word: &Symbol) -> bool {
        self.is_ident(word.0)
    }
}

impl PartialEq<Symbol> for &Path {
    fn eq(&self, word: &Symbol) -> bool {
        self.is_ident(word.0)
    }
}

impl Display for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}
