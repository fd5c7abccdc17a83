//! Attributes into typed structs that keep their spans.
//!
//! Nothing here returns early on a mistake: every error goes into the [`Ctxt`] and
//! parsing carries on with the next key, so one build reports them all. Only range
//! and cross-field rules are left to `valid.rs`; what is checked here is the shape of
//! each key (known, not repeated, a literal of the right kind, a well-formed duration).

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::meta::ParseNestedMeta;
use syn::parse::{Parse, Parser};
use syn::spanned::Spanned;
use syn::{Attribute, Expr, ExprLit, Ident, Lit, LitStr, Meta, Token, token};

use crate::ctxt::Ctxt;
use crate::symbol::*;
use crate::value::{duration, fn_path, int, limit_or_none, lit_str, number, statuses, wrong_kind};

/// Where a setting was written: on the trait (a default) or on the method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Trait,
    Method,
}

/// A value with the span of the literal it came from and the level it was set at.
#[derive(Clone, Debug)]
pub struct Sp<T> {
    pub value: T,
    pub span: Span,
    pub level: Level,
}

/// A time limit: a duration in milliseconds, or `"none"` said on purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    None,
    Ms(u64),
}

#[derive(Clone, Default)]
pub struct TimeoutAttr {
    pub attempt: Option<Sp<Limit>>,
    /// `attempt` was written, even if its value was malformed (already reported):
    /// then "no attempt timeout" would only repeat that error.
    pub attempt_written: bool,
    pub total: Option<Sp<Limit>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackoffKind {
    Fixed,
    Exponential,
    ExponentialJitter,
    DecorrelatedJitter,
}

impl BackoffKind {
    pub fn keys(self) -> &'static [Symbol] {
        match self {
            BackoffKind::Fixed => &[DELAY],
            BackoffKind::Exponential | BackoffKind::ExponentialJitter => &[BASE, FACTOR, CAP],
            BackoffKind::DecorrelatedJitter => &[BASE, CAP],
        }
    }
}

/// `backoff = exponential_jitter(base = "200ms", factor = 2, cap = "10s")`.
#[derive(Clone, Debug)]
pub struct BackoffAttr {
    pub kind: BackoffKind,
    pub delay: Option<Sp<u64>>,
    pub base: Option<Sp<u64>>,
    pub factor: Option<Sp<u32>>,
    pub cap: Option<Sp<u64>>,
}

#[derive(Clone, Default)]
pub struct RetryAttr {
    pub max: Option<Sp<u32>>,
    pub backoff: Option<Sp<BackoffAttr>>,
    /// The `on` key (for errors about it) and its statuses.
    pub on: Option<Sp<Vec<Sp<u16>>>>,
    pub on_key: Option<Span>,
    pub retry_after_cap: Option<Sp<u64>>,
}

#[derive(Clone, Default)]
pub struct BreakerAttr {
    pub failures: Option<Sp<u32>>,
    pub reset: Option<Sp<u64>>,
    pub probes: Option<Sp<u32>>,
    pub failure_rate: Option<Sp<f64>>,
    pub window: Option<Sp<u64>>,
    pub min_calls: Option<Sp<u32>>,
    pub slow_call: Option<Sp<u64>>,
    /// `failure_rate` was named, even with a bad value, or may be among the keys a
    /// syntax error cut off: "applies to the failure-rate breaker only" would be wrong.
    pub rate_named: bool,
}

#[derive(Clone, Default)]
pub struct BulkheadAttr {
    pub concurrency: Option<Sp<u32>>,
    pub queue: Option<Sp<u32>>,
}

#[derive(Clone, Default)]
pub struct RateLimitAttr {
    pub per_second: Option<Sp<f64>>,
    pub burst: Option<Sp<u32>>,
    /// `per_second` was named, even with a bad value, or may be among the keys a
    /// syntax error cut off: "needs a rate" would be wrong.
    pub rate_named: bool,
}

#[derive(Clone, Default)]
pub struct HedgeAttr {
    pub delay: Option<Sp<u64>>,
    pub max: Option<Sp<u32>>,
    /// `delay` was named, even with a bad value, or may be among the keys a syntax
    /// error cut off: "needs a delay" would be wrong.
    pub delay_named: bool,
}

/// `#[parse(with = path)]`.
#[derive(Clone, Default)]
pub struct ParseAttr {
    /// The check: a path to a function `fn(&T) -> Result<(), E>`.
    pub with: Option<Sp<syn::Path>>,
    /// `with` was named, even with a bad value, or may be among the keys a syntax
    /// error cut off: "needs `with`" would be wrong.
    pub with_named: bool,
}

/// A policy attribute as written, with the span of its name (`retry` in
/// `#[retry(...)]`) for errors about the attribute as a whole.
#[derive(Clone)]
pub struct Group<T> {
    pub attr: T,
    pub span: Span,
}

/// The policy keys shared by the trait and its methods.
#[derive(Clone, Default)]
pub struct PolicyAttrs {
    pub timeout: Option<Group<TimeoutAttr>>,
    pub retry: Option<Group<RetryAttr>>,
    pub breaker: Option<Group<BreakerAttr>>,
    pub bulkhead: Option<Group<BulkheadAttr>>,
    pub rate_limit: Option<Group<RateLimitAttr>>,
}

/// `#[resilient_api(...)]`.
#[derive(Default)]
pub struct TraitAttrs {
    pub base_url: Option<LitStr>,
    pub client: Option<Ident>,
    pub krate: Option<syn::Path>,
    pub headers: Vec<(LitStr, LitStr)>,
    pub policy: PolicyAttrs,
    /// A syntax error stopped parsing: the keys after it are unknown, so the rules
    /// about a missing default (an attempt timeout, a rate) are not checked.
    pub incomplete: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    Get,
    Post,
    Put,
    Patch,
    Delete,
    Head,
    Options,
}

impl Verb {
    pub const ALL: [(Symbol, Verb); 7] = [
        (GET, Verb::Get),
        (POST, Verb::Post),
        (PUT, Verb::Put),
        (PATCH, Verb::Patch),
        (DELETE, Verb::Delete),
        (HEAD, Verb::Head),
        (OPTIONS, Verb::Options),
    ];

    pub fn from_path(path: &syn::Path) -> Option<Verb> {
        Verb::ALL
            .iter()
            .find(|(sym, _)| path == *sym)
            .map(|(_, verb)| *verb)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::Post => "POST",
            Verb::Put => "PUT",
            Verb::Patch => "PATCH",
            Verb::Delete => "DELETE",
            Verb::Head => "HEAD",
            Verb::Options => "OPTIONS",
        }
    }

    pub fn variant(self) -> &'static str {
        match self {
            Verb::Get => "Get",
            Verb::Post => "Post",
            Verb::Put => "Put",
            Verb::Patch => "Patch",
            Verb::Delete => "Delete",
            Verb::Head => "Head",
            Verb::Options => "Options",
        }
    }

    pub fn is_idempotent(self) -> bool {
        !matches!(self, Verb::Post | Verb::Patch)
    }
}

/// `#[get("/users/{id}")]`: the verb, the span of its name, and the template literal
/// (`None` if it was missing or not a string; that error is already reported).
pub struct VerbAttr {
    pub verb: Verb,
    pub span: Span,
    pub template: Option<LitStr>,
}

/// Everything written on one method, ours only; other attributes stay in `kept`.
#[derive(Default)]
pub struct MethodAttrs {
    pub verbs: Vec<VerbAttr>,
    pub policy: PolicyAttrs,
    pub idempotent: Option<Span>,
    /// The header that carries the key, and the span of its name (of the attribute
    /// for the default name).
    pub idempotency_key: Option<Sp<String>>,
    pub hedge: Option<Group<HedgeAttr>>,
    pub coalesce: Option<Span>,
    pub partition: Option<LitStr>,
    /// `#[max_body("4MiB")]`: the largest response body, in bytes.
    pub max_body: Option<u64>,
    /// `#[parse(with = path)]`: the user's check of the decoded result.
    pub parse: Option<Group<ParseAttr>>,
    /// Doc comments, kept on the trait method and on the client's method.
    pub docs: Vec<Attribute>,
    /// Attributes that are not ours (`#[allow]`, `#[deprecated]`, ...): kept on the
    /// trait method.
    pub kept: Vec<Attribute>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    Json,
    Form,
    Raw,
    Stream,
}

#[derive(Clone)]
pub enum RoleKind {
    Path,
    Query { name: Option<LitStr>, secret: bool },
    Header { name: Option<LitStr>, secret: bool },
    Body(BodyKind),
}

/// A role attribute on a parameter, with the span of the attribute's name.
#[derive(Clone)]
pub struct RoleAttr {
    pub kind: RoleKind,
    pub span: Span,
    /// Its arguments were malformed (already reported): a header name missing from
    /// them is not a second mistake.
    pub malformed: bool,
}

pub const TRAIT_KEYS: &[Symbol] = &[
    BASE_URL, CLIENT, CRATE, TIMEOUT, RETRY, BREAKER, BULKHEAD, RATE_LIMIT, HEADERS,
];
/// The policies, written on the trait or on a method.
const POLICIES: &[Symbol] = &[TIMEOUT, RETRY, BREAKER, BULKHEAD, RATE_LIMIT];
pub const TIMEOUT_KEYS: &[Symbol] = &[ATTEMPT, TOTAL];
pub const RETRY_KEYS: &[Symbol] = &[MAX, BACKOFF, ON, RETRY_AFTER_CAP];
pub const BACKOFF_KINDS: &[Symbol] = &[FIXED, EXPONENTIAL, EXPONENTIAL_JITTER, DECORRELATED_JITTER];
pub const BREAKER_KEYS: &[Symbol] = &[
    FAILURES,
    RESET,
    PROBES,
    FAILURE_RATE,
    WINDOW,
    MIN_CALLS,
    SLOW_CALL,
];
pub const BULKHEAD_KEYS: &[Symbol] = &[CONCURRENCY, QUEUE];
pub const RATE_LIMIT_KEYS: &[Symbol] = &[PER_SECOND, BURST];
pub const HEDGE_KEYS: &[Symbol] = &[DELAY, MAX];
pub const PARSE_KEYS: &[Symbol] = &[WITH];
pub const BODY_KINDS: &[Symbol] = &[JSON, FORM, RAW, STREAM];
/// Keys that belong on a method, not in `#[resilient_api(...)]`.
const METHOD_ONLY: &[Symbol] = &[
    IDEMPOTENT,
    IDEMPOTENCY_KEY,
    HEDGE,
    COALESCE,
    PARTITION,
    MAX_BODY,
    PARSE,
    GET,
    POST,
    PUT,
    PATCH,
    DELETE,
    HEAD,
    OPTIONS,
];

/// "`a`, `b` or `c`".
pub fn one_of(keys: &[Symbol]) -> String {
    let quoted: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

pub fn path_to_string(path: &syn::Path) -> String {
    path.to_token_stream().to_string().replace(' ', "")
}

/// One `key = value, ...` list being parsed: its name (for messages), the level it
/// is written at, and the keys seen so far (to report a duplicate at the second).
struct List<'c> {
    cx: &'c Ctxt,
    level: Level,
    name: String,
    seen: Vec<String>,
}

impl<'c> List<'c> {
    fn new(cx: &'c Ctxt, level: Level, name: impl Into<String>) -> Self {
        List {
            cx,
            level,
            name: name.into(),
            seen: Vec::new(),
        }
    }

    /// `true` the first time `path` is given; on a repeat, reports it and gives `false`.
    fn first(&mut self, path: &syn::Path) -> bool {
        let key = path_to_string(path);
        if self.seen.contains(&key) {
            let msg = format!("duplicate key `{key}` in `{}`", self.name);
            self.cx.error_spanned_by(path, msg);
            false
        } else {
            self.seen.push(key);
            true
        }
    }

    fn was_given(&self, key: Symbol) -> bool {
        self.seen.iter().any(|k| k == key.0)
    }

    /// `key = value`: parse the value and store it, unless the key was given before.
    fn set<T>(
        &mut self,
        meta: &ParseNestedMeta<'_>,
        slot: &mut Option<T>,
        example: &str,
        parse: impl FnOnce(&Ctxt, Level, &Expr) -> Option<T>,
    ) -> syn::Result<()> {
        let first = self.first(&meta.path);
        if let Some(expr) = value_expr(self.cx, meta, example)? {
            let parsed = parse(self.cx, self.level, &expr);
            if first {
                *slot = parsed;
            }
        }
        Ok(())
    }

    fn unknown(&self, meta: &ParseNestedMeta<'_>, keys: &[Symbol]) -> syn::Result<()> {
        let key = path_to_string(&meta.path);
        let mut msg = format!(
            "unknown key `{key}` in `{}`, expected {}",
            self.name,
            one_of(keys)
        );
        // A key of another policy, written in the wrong list: say whose it is.
        // (Not among `keys`, so any list that has it is another.)
        let owners: Vec<String> = KEY_OWNERS
            .iter()
            .filter(|(_, owned)| owned.iter().any(|k| k.0 == key))
            .map(|(owner, _)| format!("`{owner}(...)`"))
            .collect();
        if !owners.is_empty() {
            msg.push_str(&format!("; `{key}` belongs in {}", owners.join(" or ")));
        }
        self.cx.error_spanned_by(&meta.path, msg);
        skip_value(meta)
    }
}

/// The policies (and backoffs) and the keys each takes, for "`failures` belongs in
/// `breaker(...)`".
const KEY_OWNERS: &[(&str, &[Symbol])] = &[
    ("timeout", TIMEOUT_KEYS),
    ("retry", RETRY_KEYS),
    ("backoff = fixed", &[DELAY]),
    ("backoff = exponential", &[BASE, FACTOR, CAP]),
    ("breaker", BREAKER_KEYS),
    ("bulkhead", BULKHEAD_KEYS),
    ("rate_limit", RATE_LIMIT_KEYS),
    ("hedge", HEDGE_KEYS),
];

/// Skip the value of a key we could not use, so parsing can go on after it.
fn skip_value(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(Token![=]) {
        meta.value()?.parse::<Expr>()?;
    } else if meta.input.peek(token::Paren) {
        meta.input.parse::<TokenTree>()?;
    }
    Ok(())
}

/// The expression after `key =`; reports (and skips) a key written without one.
fn value_expr(cx: &Ctxt, meta: &ParseNestedMeta<'_>, example: &str) -> syn::Result<Option<Expr>> {
    if meta.input.peek(Token![=]) {
        Ok(Some(meta.value()?.parse()?))
    } else {
        cx.error_spanned_by(&meta.path, format!("expected a value: `{example}`"));
        skip_value(meta)?;
        Ok(None)
    }
}

/// A policy's key list, parsed the same way on the trait (`retry(...)` inside
/// `#[resilient_api(...)]`) and on a method (`#[retry(...)]`).
trait Keys: Default {
    /// `retry`
    const NAME: &'static str;
    /// `max = 3`: shown when the list itself is missing.
    const EXAMPLE: &'static str;
    fn key(&mut self, list: &mut List<'_>, meta: ParseNestedMeta<'_>) -> syn::Result<()>;
    /// A syntax error stopped parsing the list (already reported): the keys after it
    /// are unknown.
    fn cut_short(&mut self) {}
}

impl Keys for TimeoutAttr {
    const NAME: &'static str = "timeout";
    const EXAMPLE: &'static str = "attempt = \"3s\", total = \"15s\"";
    fn key(&mut self, l: &mut List<'_>, meta: ParseNestedMeta<'_>) -> syn::Result<()> {
        if meta.path == ATTEMPT {
            self.attempt_written = true;
            l.set(&meta, &mut self.attempt, "attempt = \"3s\"", limit_or_none)
        } else if meta.path == TOTAL {
            l.set(&meta, &mut self.total, "total = \"15s\"", limit_or_none)
        } else {
            l.unknown(&meta, TIMEOUT_KEYS)
        }
    }
    fn cut_short(&mut self) {
        // `attempt` may be among the lost keys: "no attempt timeout" could be false.
        self.attempt_written = true;
    }
}

impl Keys for RetryAttr {
    const NAME: &'static str = "retry";
    const EXAMPLE: &'static str = "max = 3";
    fn key(&mut self, l: &mut List<'_>, meta: ParseNestedMeta<'_>) -> syn::Result<()> {
        if meta.path == MAX {
            l.set(&meta, &mut self.max, "max = 3", int)
        } else if meta.path == BACKOFF {
            let first = l.first(&meta.path);
            if !meta.input.peek(Token![=]) {
                l.cx.error_spanned_by(
                    &meta.path,
                    "expected a value: `backoff = exponential_jitter(base = \"200ms\", cap = \"10s\")`",
                );
                return skip_value(&meta);
            }
            let parsed = backoff_value(l.cx, l.level, &meta)?;
            if first {
                self.backoff = parsed;
            }
            Ok(())
        } else if meta.path == ON {
            let key = meta.path.span();
            l.set(&meta, &mut self.on, "on = [503, 429]", statuses)?;
            if self.on.is_some() && self.on_key.is_none() {
                self.on_key = Some(key);
            }
            Ok(())
        } else if meta.path == RETRY_AFTER_CAP {
            l.set(
                &meta,
                &mut self.retry_after_cap,
                "retry_after_cap = \"10s\"",
                duration,
            )
        } else {
            l.unknown(&meta, RETRY_KEYS)
        }
    }
}

impl Keys for BreakerAttr {
    const NAME: &'static str = "breaker";
    const EXAMPLE: &'static str = "failures = 5, reset = \"30s\"";
    fn key(&mut self, l: &mut List<'_>, meta: ParseNestedMeta<'_>) -> syn::Result<()> {
        if meta.path == FAILURES {
            l.set(&meta, &mut self.failures, "failures = 5", int)
        } else if meta.path == RESET {
            l.set(&meta, &mut self.reset, "reset = \"30s\"", duration)
        } else if meta.path == PROBES {
            l.set(&meta, &mut self.probes, "probes = 1", int)
        } else if meta.path == FAILURE_RATE {
            self.rate_named = true;
            l.set(&meta, &mut self.failure_rate, "failure_rate = 0.5", number)
        } else if meta.path == WINDOW {
            l.set(&meta, &mut self.window, "window = \"10s\"", duration)
        } else if meta.path == MIN_CALLS {
            l.set(&meta, &mut self.min_calls, "min_calls = 10", int)
        } else if meta.path == SLOW_CALL {
            l.set(&meta, &mut self.slow_call, "slow_call = \"2s\"", duration)
        } else {
            l.unknown(&meta, BREAKER_KEYS)
        }
    }
    fn cut_short(&mut self) {
        self.rate_named = true;
    }
}

impl Keys for BulkheadAttr {
    const NAME: &'static str = "bulkhead";
    const EXAMPLE: &'static str = "concurrency = 8, queue = 32";
    fn key(&mut self, l: &mut List<'_>, meta: ParseNestedMeta<'_>) -> syn::Result<()> {
        if meta.path == CONCURRENCY {
            l.set(&meta, &mut self.concurrency, "concurrency = 8", int)
        } else if meta.path == QUEUE {
            l.set(&meta, &mut self.queue, "queue = 32", int)
        } else {
            l.unknown(&meta, BULKHEAD_KEYS)
        }
    }
}

impl Keys for RateLimitAttr {
    const NAME: &'static str = "rate_limit";
    const EXAMPLE: &'static str = "per_second = 10, burst = 20";
    fn key(&mut self, l: &mut List<'_>, meta: ParseNestedMeta<'_>) -> syn::Result<()> {
        if meta.path == PER_SECOND {
            self.rate_named = true;
            l.set(&meta, &mut self.per_second, "per_second = 10", number)
        } else if meta.path == BURST {
            l.set(&meta, &mut self.burst, "burst = 20", int)
        } else {
            l.unknown(&meta, RATE_LIMIT_KEYS)
        }
    }
    fn cut_short(&mut self) {
        self.rate_named = true;
    }
}

impl Keys for HedgeAttr {
    const NAME: &'static str = "hedge";
    const EXAMPLE: &'static str = "delay = \"50ms\", max = 2";
    fn key(&mut self, l: &mut List<'_>, meta: ParseNestedMeta<'_>) -> syn::Result<()> {
        if meta.path == DELAY {
            self.delay_named = true;
            l.set(&meta, &mut self.delay, "delay = \"50ms\"", duration)
        } else if meta.path == MAX {
            l.set(&meta, &mut self.max, "max = 2", int)
        } else {
            l.unknown(&meta, HEDGE_KEYS)
        }
    }
    fn cut_short(&mut self) {
        self.delay_named = true;
    }
}

impl Keys for ParseAttr {
    const NAME: &'static str = "parse";
    const EXAMPLE: &'static str = "with = check";
    fn key(&mut self, l: &mut List<'_>, meta: ParseNestedMeta<'_>) -> syn::Result<()> {
        if meta.path == WITH {
            self.with_named = true;
            l.set(&meta, &mut self.with, "with = check", fn_path)
        } else {
            // The one key there is, misspelt: "needs a check" would only repeat it.
            self.with_named = true;
            l.unknown(&meta, PARSE_KEYS)
        }
    }
    fn cut_short(&mut self) {
        self.with_named = true;
    }
}

/// `retry(...)` inside `#[resilient_api(...)]`.
fn nested_keys<T: Keys>(cx: &Ctxt, meta: &ParseNestedMeta<'_>) -> syn::Result<T> {
    let mut out = T::default();
    if meta.input.peek(token::Paren) {
        let mut list = List::new(cx, Level::Trait, format!("{}(...)", T::NAME));
        if let Err(err) = meta.parse_nested_meta(|m| out.key(&mut list, m)) {
            cx.syn_error(err);
            out.cut_short();
        }
    } else {
        let msg = format!("expected a list: `{}({})`", T::NAME, T::EXAMPLE);
        cx.error_spanned_by(&meta.path, msg);
        // The keys it meant to give are unknown: none is said to be missing.
        out.cut_short();
        skip_value(meta)?;
    }
    Ok(out)
}

/// `#[retry(...)]` on a method.
fn attr_keys<T: Keys>(cx: &Ctxt, attr: &Attribute) -> T {
    let mut out = T::default();
    if let Meta::List(_) = &attr.meta {
        let mut list = List::new(cx, Level::Method, format!("#[{}(...)]", T::NAME));
        if let Err(err) = attr.parse_nested_meta(|m| out.key(&mut list, m)) {
            cx.syn_error(err);
            out.cut_short();
        }
    } else {
        let msg = format!("expected a list: `#[{}({})]`", T::NAME, T::EXAMPLE);
        cx.error_spanned_by(attr, msg);
        // The keys it meant to give are unknown: none is said to be missing.
        out.cut_short();
    }
    out
}

fn backoff_value(
    cx: &Ctxt,
    level: Level,
    meta: &ParseNestedMeta<'_>,
) -> syn::Result<Option<Sp<BackoffAttr>>> {
    let input = meta.value()?;
    if !input.peek(Ident) {
        let expr: Expr = input.parse()?;
        wrong_kind(cx, &expr, &format!("a backoff: {}", one_of(BACKOFF_KINDS)));
        return Ok(None);
    }
    let name: Ident = input.parse()?;
    let kind = if name == FIXED {
        BackoffKind::Fixed
    } else if name == EXPONENTIAL {
        BackoffKind::Exponential
    } else if name == EXPONENTIAL_JITTER {
        BackoffKind::ExponentialJitter
    } else if name == DECORRELATED_JITTER {
        BackoffKind::DecorrelatedJitter
    } else {
        let msg = format!(
            "unknown backoff `{name}`, expected {}",
            one_of(BACKOFF_KINDS)
        );
        cx.error_spanned_by(&name, msg);
        if input.peek(token::Paren) {
            input.parse::<TokenTree>()?;
        }
        return Ok(None);
    };
    let mut b = BackoffAttr {
        kind,
        delay: None,
        base: None,
        factor: None,
        cap: None,
    };
    let args: TokenStream = if input.peek(token::Paren) {
        let content;
        syn::parenthesized!(content in input);
        content.parse()?
    } else {
        TokenStream::new()
    };
    let mut list = List::new(cx, level, format!("{name}(...)"));
    let parser = syn::meta::parser(|meta| {
        let allowed = kind.keys();
        if !allowed.iter().any(|k| meta.path == *k) {
            list.unknown(&meta, allowed)
        } else if meta.path == DELAY {
            list.set(&meta, &mut b.delay, "delay = \"100ms\"", duration)
        } else if meta.path == BASE {
            list.set(&meta, &mut b.base, "base = \"200ms\"", duration)
        } else if meta.path == FACTOR {
            list.set(&meta, &mut b.factor, "factor = 2", int)
        } else {
            list.set(&meta, &mut b.cap, "cap = \"10s\"", duration)
        }
    });
    if let Err(err) = parser.parse2(args) {
        cx.syn_error(err);
    }
    if kind == BackoffKind::Fixed && !list.was_given(DELAY) {
        cx.error_spanned_by(&name, "`fixed` needs a delay: `fixed(delay = \"100ms\")`");
        return Ok(None);
    }
    Ok(Some(Sp {
        value: b,
        span: name.span(),
        level,
    }))
}

/// `headers("Name" = "value", ...)`.
fn headers_value(
    cx: &Ctxt,
    meta: &ParseNestedMeta<'_>,
    out: &mut Vec<(LitStr, LitStr)>,
) -> syn::Result<()> {
    const EXAMPLE: &str = "headers(\"User-Agent\" = \"my-app/1.0\")";
    if !meta.input.peek(token::Paren) {
        cx.error_spanned_by(&meta.path, format!("expected a list: `{EXAMPLE}`"));
        return skip_value(meta);
    }
    let content;
    syn::parenthesized!(content in meta.input);
    let pairs = content.parse_terminated(Expr::parse, Token![,])?;
    for pair in pairs {
        let Expr::Assign(assign) = &pair else {
            wrong_kind(cx, &pair, &format!("a header such as `{EXAMPLE}`"));
            continue;
        };
        let name = lit_str(
            cx,
            &assign.left,
            "a header name string such as `\"User-Agent\"`",
        );
        let value = lit_str(cx, &assign.right, "a header value string");
        if let (Some(name), Some(value)) = (name, value) {
            out.push((name, value));
        }
    }
    Ok(())
}

/// A string literal parsed as `T` (an identifier, a path): `what` is the noun ("a type
/// name"), `example` a value such as `"PaymentsClient"`.
fn parsed_str<T: Parse>(cx: &Ctxt, expr: &Expr, what: &str, example: &str) -> Option<T> {
    let s = lit_str(cx, expr, &format!("{what} string such as `{example}`"))?;
    match s.parse::<T>() {
        Ok(value) => Some(value),
        Err(_) => {
            cx.error_spanned_by(&s, format!("expected {what} such as `{example}`"));
            None
        }
    }
}

/// Store a policy group unless it was given before (the duplicate is reported by
/// `first`).
fn put<T>(slot: &mut Option<Group<T>>, first: bool, attr: T, span: Span) {
    if first {
        *slot = Some(Group { attr, span });
    }
}

/// Parse `#[resilient_api(...)]`'s arguments.
pub fn trait_attrs(cx: &Ctxt, args: TokenStream) -> TraitAttrs {
    let mut attrs = TraitAttrs::default();
    let mut list = List::new(cx, Level::Trait, "#[resilient_api(...)]");
    let parser = syn::meta::parser(|meta| {
        let span = meta.path.span();
        let path = &meta.path;
        let policy = &mut attrs.policy;
        if path == BASE_URL {
            let example = "base_url = \"https://api.example.com\"";
            list.set(&meta, &mut attrs.base_url, example, |cx, _, e| {
                lit_str(cx, e, "a URL string such as `\"https://api.example.com\"`")
            })?;
        } else if path == CLIENT {
            let example = "client = \"PaymentsClient\"";
            list.set(&meta, &mut attrs.client, example, |cx, _, e| {
                parsed_str(cx, e, "a type name", "\"PaymentsClient\"")
            })?;
        } else if path == CRATE {
            let example = "crate = \"::resilient_api\"";
            list.set(&meta, &mut attrs.krate, example, |cx, _, e| {
                parsed_str(cx, e, "a path", "\"::resilient_api\"")
            })?;
        } else if path == TIMEOUT {
            let first = list.first(path);
            put(&mut policy.timeout, first, nested_keys(cx, &meta)?, span);
        } else if path == RETRY {
            let first = list.first(path);
            put(&mut policy.retry, first, nested_keys(cx, &meta)?, span);
        } else if path == BREAKER {
            let first = list.first(path);
            put(&mut policy.breaker, first, nested_keys(cx, &meta)?, span);
        } else if path == BULKHEAD {
            let first = list.first(path);
            put(&mut policy.bulkhead, first, nested_keys(cx, &meta)?, span);
        } else if path == RATE_LIMIT {
            let first = list.first(path);
            put(&mut policy.rate_limit, first, nested_keys(cx, &meta)?, span);
        } else if path == HEADERS {
            let first = list.first(path);
            let mut headers = Vec::new();
            headers_value(cx, &meta, &mut headers)?;
            if first {
                attrs.headers = headers;
            }
        } else if let Some(key) = METHOD_ONLY.iter().find(|k| path == **k) {
            let example = match *key {
                HEDGE => "#[hedge(delay = \"50ms\", max = 2)]".to_owned(),
                PARTITION => "#[partition(\"search\")]".to_owned(),
                MAX_BODY => "#[max_body(\"4MiB\")]".to_owned(),
                PARSE => "#[parse(with = check)]".to_owned(),
                IDEMPOTENT | IDEMPOTENCY_KEY | COALESCE => format!("#[{key}]"),
                _ => format!("#[{key}(\"/path\")]"),
            };
            cx.error_spanned_by(
                path,
                format!("`{key}` belongs on a method: write `{example}` above the method"),
            );
            skip_value(&meta)?;
        } else {
            if path == ATTEMPT {
                // `attempt = "3s"` meant inside `timeout(...)`: reported as unknown, and
                // not again as every method's missing attempt timeout.
                let timeout = policy.timeout.get_or_insert_with(|| Group {
                    attr: TimeoutAttr::default(),
                    span,
                });
                timeout.attr.attempt_written = true;
            }
            list.unknown(&meta, TRAIT_KEYS)?;
        }
        Ok(())
    });
    if let Err(err) = parser.parse2(args) {
        cx.syn_error(err);
        attrs.incomplete = true;
    }
    attrs
}

/// `#[retry(...)]` and the like on a method: parsed, and stored unless repeated.
fn method_group<T: Keys>(cx: &Ctxt, slot: &mut Option<Group<T>>, attr: &Attribute, span: Span) {
    let parsed = attr_keys(cx, attr);
    if slot.is_some() {
        cx.error_spanned_by(
            attr.path(),
            format!("duplicate `#[{}]` attribute on this method", T::NAME),
        );
    } else {
        *slot = Some(Group { attr: parsed, span });
    }
}

fn duplicate_attr(cx: &Ctxt, path: &syn::Path, name: &str) {
    cx.error_spanned_by(
        path,
        format!("duplicate `#[{name}]` attribute on this method"),
    );
}

/// Whether `path` names one of the method attributes of the attribute language (a
/// verb, a policy, or a marker such as `#[coalesce]`): a method carrying one is an
/// endpoint, even with a body (which is then an error of its own).
pub fn is_method_attr(path: &syn::Path) -> bool {
    METHOD_ONLY.iter().chain(POLICIES).any(|sym| path == *sym)
}

/// Sort a method's attributes into ours (parsed) and the rest (kept as written).
pub fn method_attrs(cx: &Ctxt, attrs: &[Attribute]) -> MethodAttrs {
    let mut out = MethodAttrs::default();
    for attr in attrs {
        let path = attr.path();
        let span = path.span();
        let dup = |name: &str| duplicate_attr(cx, path, name);
        if let Some(verb) = Verb::from_path(path) {
            let expected = format!(
                "expected a path template: `#[{}(\"/users/{{id}}\")]`",
                path_to_string(path)
            );
            let template = match &attr.meta {
                Meta::List(list) => one_arg(cx, attr, list, &expected).and_then(|expr| {
                    lit_str(
                        cx,
                        &expr,
                        "a path template string such as `\"/users/{id}\"`",
                    )
                }),
                _ => {
                    cx.error_spanned_by(attr, expected);
                    None
                }
            };
            out.verbs.push(VerbAttr {
                verb,
                span,
                template,
            });
        } else if path == TIMEOUT {
            method_group(cx, &mut out.policy.timeout, attr, span);
        } else if path == RETRY {
            method_group(cx, &mut out.policy.retry, attr, span);
        } else if path == BREAKER {
            method_group(cx, &mut out.policy.breaker, attr, span);
        } else if path == BULKHEAD {
            method_group(cx, &mut out.policy.bulkhead, attr, span);
        } else if path == RATE_LIMIT {
            method_group(cx, &mut out.policy.rate_limit, attr, span);
        } else if path == HEDGE {
            method_group(cx, &mut out.hedge, attr, span);
        } else if path == PARSE {
            method_group(cx, &mut out.parse, attr, span);
        } else if path == IDEMPOTENT || path == COALESCE {
            let name = if path == IDEMPOTENT {
                IDEMPOTENT
            } else {
                COALESCE
            };
            if !matches!(attr.meta, Meta::Path(_)) {
                cx.error_spanned_by(attr, format!("`#[{name}]` takes no arguments"));
            }
            let slot = if name == IDEMPOTENT {
                &mut out.idempotent
            } else {
                &mut out.coalesce
            };
            match slot {
                Some(_) => dup(name.0),
                None => *slot = Some(span),
            }
        } else if path == IDEMPOTENCY_KEY {
            // The span of the header's name when written, for errors about the name.
            let header = match &attr.meta {
                Meta::Path(_) => Some(("Idempotency-Key".to_owned(), span)),
                // Malformed (already reported), the method still asks for a key: the
                // rules that a key satisfies are not reported against it too.
                _ => Some(
                    single_string(
                        cx,
                        attr,
                        "#[idempotency_key(\"Idempotency-Key\")]",
                        "a header name string such as `\"Idempotency-Key\"`",
                    )
                    .map_or_else(
                        || ("Idempotency-Key".to_owned(), span),
                        |s| (s.value(), s.span()),
                    ),
                ),
            };
            if out.idempotency_key.is_some() {
                dup("idempotency_key");
            } else if let Some((value, span)) = header {
                out.idempotency_key = Some(Sp {
                    value,
                    span,
                    level: Level::Method,
                });
            }
        } else if path == PARTITION {
            let name = single_string(
                cx,
                attr,
                "#[partition(\"search\")]",
                "a partition name string such as `\"search\"`",
            );
            if out.partition.is_some() {
                dup("partition");
            } else if let Some(name) = name {
                out.partition = Some(name);
            }
        } else if path == MAX_BODY {
            let lit = single_string(
                cx,
                attr,
                "#[max_body(\"4MiB\")]",
                "a size string such as `\"4MiB\"`",
            );
            if out.max_body.is_some() {
                dup("max_body");
            } else if let Some(lit) = lit {
                let text = lit.value();
                match crate::value::size(&text) {
                    Some(bytes) => out.max_body = Some(bytes),
                    None if crate::value::size_too_large(&text) => cx.error_spanned_by(
                        &lit,
                        format!(
                            "size `{}` is too large: expected at most `{}` bytes",
                            text.trim(),
                            u64::MAX
                        ),
                    ),
                    None => cx.error_spanned_by(
                        &lit,
                        "malformed size: expected a whole number of bytes with an optional unit, such as `\"512KiB\"`, `\"4MiB\"`, `\"1GiB\"` or `\"65536\"` (units: B, KB, MB, GB, KiB, MiB, GiB)",
                    ),
                }
            }
        } else if path == DOC {
            out.docs.push(attr.clone());
        } else if path == CFG {
            cx.error_spanned_by(
                attr,
                "`#[cfg]` on an endpoint is not supported: the client implements every method of the trait",
            );
        } else if let Some(msg) = belongs_elsewhere(path, Place::Method) {
            cx.error_spanned_by(path, msg);
        } else {
            // A `#[cfg_attr(...)]` (a doc line, a lint level) never removes the method,
            // and stays on it as other attributes that are not the macro's do; one that
            // expands to an attribute of the macro's is unknown to rustc, and says so.
            out.kept.push(attr.clone());
        }
    }
    out
}

/// The one string of `#[name("...")]` (or `#[name = "..."]`).
fn single_string(cx: &Ctxt, attr: &Attribute, example: &str, expected: &str) -> Option<LitStr> {
    let expr = match &attr.meta {
        Meta::List(list) => one_arg(cx, attr, list, &format!("expected `{example}`"))?,
        Meta::NameValue(nv) => nv.value.clone(),
        Meta::Path(_) => {
            cx.error_spanned_by(attr, format!("expected `{example}`"));
            return None;
        }
    };
    lit_str(cx, &expr, expected)
}

/// The one argument of `#[name(arg)]`. An empty list is reported as `expected` (not
/// as syn's "unexpected end of input"), and an argument after the first at itself;
/// the first is still read.
fn one_arg(cx: &Ctxt, attr: &Attribute, list: &syn::MetaList, expected: &str) -> Option<Expr> {
    let parser = syn::punctuated::Punctuated::<Expr, Token![,]>::parse_terminated;
    let args = match list.parse_args_with(parser) {
        Ok(args) => args,
        Err(err) => {
            cx.syn_error(err);
            return None;
        }
    };
    let mut args = args.into_iter();
    let first = args.next();
    if first.is_none() {
        cx.error_spanned_by(attr, expected);
    }
    for extra in args {
        cx.error_spanned_by(
            &extra,
            format!(
                "`#[{}(...)]` takes one argument",
                path_to_string(attr.path())
            ),
        );
    }
    first
}

/// The role attributes a parameter of an endpoint takes.
const ROLES: &[Symbol] = &[PATH, QUERY, HEADER, BODY];

/// Where an attribute is written: the trait itself, a method, a parameter.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Trait,
    Method,
    Param,
}

/// If `path` is the attribute language's but does not belong `here`, what to say:
/// where it belongs (rustc alone would say only "cannot find attribute").
fn belongs_elsewhere(path: &syn::Path, here: Place) -> Option<String> {
    let find = |keys: &[Symbol]| keys.iter().copied().find(|k| path == *k);
    if let Some(key) = find(POLICIES) {
        match here {
            Place::Method => None,
            Place::Trait => Some(format!(
                "`#[{key}(...)]` on the trait goes inside its attribute: `#[resilient_api({key}(...))]`"
            )),
            Place::Param => Some(format!(
                "`#[{key}(...)]` belongs on the method, not on a parameter"
            )),
        }
    } else if let Some(key) = find(&[HEADERS]) {
        Some(match here {
            Place::Trait => format!(
                "`#[{key}(...)]` on the trait goes inside its attribute: `#[resilient_api({key}(...))]`"
            ),
            _ => format!(
                "`{key}` belongs in the trait's attribute: `#[resilient_api({key}(\"Name\" = \"value\"))]`"
            ),
        })
    } else if let Some(key) = find(&[BASE_URL, CLIENT]) {
        Some(match here {
            Place::Trait => format!(
                "`#[{key}]` on the trait goes inside its attribute: `#[resilient_api({key} = \"...\")]`"
            ),
            _ => format!(
                "`{key}` belongs in the trait's attribute: `#[resilient_api({key} = \"...\")]`"
            ),
        })
    } else if let Some(key) = find(METHOD_ONLY) {
        match here {
            Place::Method => None,
            Place::Trait => Some(format!("`#[{key}]` belongs on a method, not on the trait")),
            Place::Param => Some(format!(
                "`#[{key}]` belongs on the method, not on a parameter"
            )),
        }
    } else if let Some(key) = find(ROLES) {
        match here {
            Place::Param => None,
            Place::Trait => Some(format!(
                "`#[{key}]` belongs on a parameter of an endpoint, not on the trait"
            )),
            Place::Method => Some(format!(
                "`#[{key}]` belongs on a parameter, not on the method: `#[{key}] name: Type`"
            )),
        }
    } else {
        None
    }
}

/// The attribute language's attributes written on the trait itself, after
/// `#[resilient_api]`: each reported with where it belongs, and taken out of `attrs`.
pub fn misplaced_on_trait(cx: &Ctxt, attrs: &mut Vec<Attribute>) {
    attrs.retain(|attr| match belongs_elsewhere(attr.path(), Place::Trait) {
        Some(msg) => {
            cx.error_spanned_by(attr.path(), msg);
            false
        }
        None => true,
    });
}

/// Role attributes where no role can be: on `self`, or on a parameter of a provided
/// method (`whose`, such as "`self`"). Each reported, and taken out of `attrs`.
pub fn misplaced_roles(cx: &Ctxt, attrs: &mut Vec<Attribute>, whose: &str) {
    attrs.retain(|attr| {
        let path = attr.path();
        let Some(key) = ROLES.iter().find(|k| path == **k) else {
            return true;
        };
        cx.error_spanned_by(path, format!("`#[{key}]` on {whose}"));
        false
    });
}

/// Take a parameter's role attributes out of `attrs`, leaving the others.
pub fn param_roles(cx: &Ctxt, attrs: &mut Vec<Attribute>) -> Vec<RoleAttr> {
    let mut roles = Vec::new();
    attrs.retain(|attr| {
        let path = attr.path();
        let span = path.span();
        let mut malformed = false;
        let kind = if path == PATH {
            if !matches!(attr.meta, Meta::Path(_)) {
                cx.error_spanned_by(
                    attr,
                    "`#[path]` takes no arguments: the parameter's name is the `{name}` it fills",
                );
            }
            Some(RoleKind::Path)
        } else if path == QUERY || path == HEADER {
            let is_query = path == QUERY;
            let (name, secret, ok) = name_and_secret(cx, attr, is_query);
            malformed = !ok;
            if is_query {
                Some(RoleKind::Query { name, secret })
            } else {
                Some(RoleKind::Header { name, secret })
            }
        } else if path == BODY {
            let mut kind = BodyKind::Json;
            if let Meta::List(_) = attr.meta {
                let mut seen = 0;
                let r = attr.parse_nested_meta(|meta| {
                    seen += 1;
                    let found = if meta.path == JSON {
                        Some(BodyKind::Json)
                    } else if meta.path == FORM {
                        Some(BodyKind::Form)
                    } else if meta.path == RAW {
                        Some(BodyKind::Raw)
                    } else if meta.path == STREAM {
                        Some(BodyKind::Stream)
                    } else {
                        None
                    };
                    match found {
                        Some(_) if seen > 1 => {
                            cx.error_spanned_by(&meta.path, "a body has one encoding")
                        }
                        Some(found) => {
                            kind = found;
                            if meta.input.peek(Token![=]) || meta.input.peek(token::Paren) {
                                let key = path_to_string(&meta.path);
                                cx.error_spanned_by(
                                    &meta.path,
                                    format!("`{key}` takes no value: write `#[body({key})]`"),
                                );
                            }
                        }
                        None => {
                            let key = path_to_string(&meta.path);
                            cx.error_spanned_by(
                                &meta.path,
                                format!(
                                    "unknown body encoding `{key}`, expected {}",
                                    one_of(BODY_KINDS)
                                ),
                            );
                        }
                    }
                    skip_value(&meta)
                });
                if let Err(err) = r {
                    cx.syn_error(err);
                }
            } else if let Meta::NameValue(_) = attr.meta {
                cx.error_spanned_by(
                    attr,
                    "expected `#[body]`, `#[body(form)]`, `#[body(raw)]` or `#[body(stream)]`",
                );
            }
            Some(RoleKind::Body(kind))
        } else if let Some(msg) = belongs_elsewhere(path, Place::Param) {
            cx.error_spanned_by(path, msg);
            // Taken out: not also "cannot find attribute".
            return false;
        } else {
            if path == CFG {
                cx.error_spanned_by(attr, "`#[cfg]` on a parameter is not supported");
            } else if path == CFG_ATTR {
                cx.error_spanned_by(
                    attr,
                    "`#[cfg_attr]` on a parameter is not supported (it may add a `#[cfg]`): \
                     write out the attributes it adds",
                );
            } else {
                return true;
            }
            // Taken out: a parameter the `cfg` removed would make every call to the
            // stub client's method a second error (wrong number of arguments).
            return false;
        };
        match kind {
            Some(kind) => {
                roles.push(RoleAttr {
                    kind,
                    span,
                    malformed,
                });
                false
            }
            None => true,
        }
    });
    roles
}

/// `#[query]`, `#[query("name")]`, `#[query("name", secret)]`, `#[header("Name", secret)]`:
/// the name, whether secret, and whether the arguments were well formed (a mistake is
/// reported here).
fn name_and_secret(cx: &Ctxt, attr: &Attribute, is_query: bool) -> (Option<LitStr>, bool, bool) {
    let example = if is_query {
        "`#[query]`, `#[query(\"name\")]` or `#[query(\"name\", secret)]`"
    } else {
        "`#[header(\"X-Name\")]` or `#[header(\"X-Name\", secret)]`"
    };
    let list = match &attr.meta {
        Meta::Path(_) => return (None, false, true),
        Meta::List(list) => list,
        Meta::NameValue(_) => {
            cx.error_spanned_by(attr, format!("expected {example}"));
            return (None, false, false);
        }
    };
    let parser = syn::punctuated::Punctuated::<Expr, Token![,]>::parse_terminated;
    let items = match parser.parse2(list.tokens.clone()) {
        Ok(items) => items,
        Err(err) => {
            cx.syn_error(err);
            return (None, false, false);
        }
    };
    let mut name = None;
    let mut secret = false;
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        match item {
            Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) if i == 0 => {
                if crate::value::unsuffixed_str(cx, s) {
                    name = Some(s.clone());
                } else {
                    ok = false;
                }
            }
            Expr::Path(p) if p.path == SECRET && !secret => secret = true,
            _ => {
                cx.error_spanned_by(item, format!("expected {example}"));
                ok = false;
            }
        }
    }
    (name, secret, ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_lists_read_as_prose() {
        assert_eq!(one_of(&[MAX]), "`max`");
        assert_eq!(one_of(&[CONCURRENCY, QUEUE]), "`concurrency` or `queue`");
        assert_eq!(
            one_of(&[ATTEMPT, TOTAL, MAX]),
            "`attempt`, `total` or `max`"
        );
    }
}
