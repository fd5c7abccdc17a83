//! Every compile-time rule (DESIGN §2.4), run over the whole model. Each mistake is
//! reported at its token and checking goes on, so one build shows all of them.

use proc_macro2::Span;
use quote::ToTokens;
use syn::GenericParam;
use syn::ext::IdentExt;

use crate::ast::{self, Api, Decoder, Endpoint, Receiver};
use crate::attr::{
    BackoffKind, BreakerAttr, BulkheadAttr, Group, HedgeAttr, Level, Limit, ParseAttr, PolicyAttrs,
    RateLimitAttr, RetryAttr, RoleKind, Sp, TimeoutAttr,
};
use crate::ctxt::Ctxt;
use crate::expand;
use crate::policy::{self, fmt_ms};

pub fn check(cx: &Ctxt, api: &Api) {
    check_trait(cx, api);
    for endpoint in &api.endpoints {
        check_endpoint(cx, api, endpoint);
    }
    check_partitions(cx, api);
    check_provided(cx, api);
}

/// A provided method (with a body of its own, not an endpoint) is reached by
/// `client.name()` as an endpoint is, so it may not take a name that the client's own
/// methods or traits take either.
fn check_provided(cx: &Ctxt, api: &Api) {
    for item in &api.item.items {
        let syn::TraitItem::Fn(method) = item else {
            continue;
        };
        let name = &method.sig.ident;
        if method.sig.receiver().is_some() && !api.endpoints.iter().any(|e| &e.ident == name) {
            check_method_name(cx, api, name, "a provided method", "");
        }
    }
}

/// A method of the trait, as `what` ("an endpoint"), may not be named like a method
/// the client has of its own or by a trait: `client.circuit_state()` would call the
/// client's own method, and with a name from `Clone`, `Debug`, `ToOwned`, `Into` or
/// `TryInto`, `client.clone()` is ambiguous wherever the trait is in scope (the
/// prelude's are everywhere), and `client.into()` calls `Into::into` (its `self` is
/// tried before the method's `&self`). `hint` ends the message.
fn check_method_name(cx: &Ctxt, api: &Api, name: &syn::Ident, what: &str, hint: &str) {
    let client = &api.client;
    if expand::CLIENT_METHODS.iter().any(|m| name.unraw() == m) {
        cx.error_spanned_by(
            name,
            format!(
                "{what} cannot be named `{name}`: `{client}::{name}` is a method of the generated client itself and would shadow it; choose another name{hint}"
            ),
        );
    }
    if let Some((_, which)) = TRAIT_METHODS.iter().find(|(m, _)| name.unraw() == m) {
        cx.error_spanned_by(
            name,
            format!(
                "{what} cannot be named `{name}`: `{client}` implements `{which}`, so wherever that trait is in scope `client.{name}(..)` can mean `{which}::{name}` (ambiguous, or that method through a reference or a smart pointer); choose another name{hint}"
            ),
        );
    }
}

/// The traits the generated client has: it is a sized `'static` struct (so `Any`
/// holds too) that is `Send + Sync + Unpin + Clone + Debug`, and implements nothing
/// else.
const CLIENT_TRAITS: [&str; 7] = ["Send", "Sync", "Unpin", "Sized", "Clone", "Debug", "Any"];

/// Whether the generated client has the supertrait `bound` (see [`CLIENT_TRAITS`]):
/// any other supertrait could never hold for it.
pub fn client_has(bound: &syn::TypeParamBound) -> bool {
    match bound {
        syn::TypeParamBound::Trait(t) => t
            .path
            .segments
            .last()
            .is_some_and(|s| CLIENT_TRAITS.contains(&s.ident.to_string().as_str())),
        _ => true,
    }
}

fn check_trait(cx: &Ctxt, api: &Api) {
    let item = &api.item;
    if !item.generics.params.is_empty() {
        cx.error_spanned_by(
            &item.generics,
            "generic traits are not supported by `#[resilient_api]`: the client implements the trait once",
        );
    } else if let Some(w) = &item.generics.where_clause {
        cx.error_spanned_by(
            w,
            "`where` clauses on a `#[resilient_api]` trait are not supported",
        );
    }
    if let Some(unsafety) = &item.unsafety {
        cx.error_spanned_by(unsafety, "a `#[resilient_api]` trait cannot be `unsafe`");
    }
    for bound in &item.supertraits {
        if let syn::TypeParamBound::Trait(t) = bound
            && !client_has(bound)
        {
            cx.error_spanned_by(
                t,
                format!(
                    "the generated client cannot implement `{}`: a `#[resilient_api]` trait's supertraits can only be `Send`, `Sync`, `Unpin`, `Sized`, `Clone`, `Debug` and `Any`, which the client is",
                    crate::attr::path_to_string(&t.path)
                ),
            );
        }
    }
    if let Some(auto) = &item.modifiers.auto_token {
        cx.error_spanned_by(auto, "a `#[resilient_api]` trait cannot be `auto`");
    }
    for other in &api.others {
        cx.error_spanned_by(
            other,
            "only methods are supported in a `#[resilient_api]` trait: each one is an endpoint",
        );
    }
    let attrs = &api.attrs;
    if let Some(client) = &attrs.client
        && client.unraw() == item.ident.unraw()
    {
        cx.error_spanned_by(
            client,
            format!(
                "the client cannot be named `{client}`, like the trait it implements: choose another name, such as `\"{client}Client\"` (the default)"
            ),
        );
    }
    if let Some(url) = &attrs.base_url {
        let value = url.value();
        // A scheme is read in any case (RFC 3986 §3.1): `HTTPS://` is `https://`.
        let scheme = |s: &str| {
            value
                .get(..s.len())
                .filter(|p| p.eq_ignore_ascii_case(s))
                .map(|p| &value[p.len()..])
        };
        let rest = scheme("https://").or_else(|| scheme("http://"));
        if rest.is_none_or(|host| host.is_empty() || host.starts_with('/')) {
            cx.error_spanned_by(
                url,
                format!("expected an absolute `http://` or `https://` URL, found `{value}`"),
            );
        }
        if value.contains(['?', '#']) {
            cx.error_spanned_by(url, "a base URL cannot hold a query or fragment");
        }
        let authority = rest.and_then(|r| r.split(['/', '?', '#']).next());
        if authority.is_some_and(|a| a.contains('@')) {
            cx.error_spanned_by(
                url,
                "a base URL cannot hold credentials (`user:password@`): they would not be sent, and would be compiled into the binary; send them with the builder's `bearer_auth` or `secret_header`, or a middleware",
            );
        }
    }
    let mut names: Vec<String> = Vec::new();
    for (name, value) in &attrs.headers {
        let n = name.value();
        if let Err(why) = header_name(&n) {
            cx.error_spanned_by(name, why);
        } else if names.iter().any(|seen| seen.eq_ignore_ascii_case(&n)) {
            cx.error_spanned_by(name, format!("duplicate header `{n}` in `headers(...)`"));
        }
        names.push(n);
        // What `HeaderValue` refuses: the client's `build()` would fail on it.
        if value
            .value()
            .bytes()
            .any(|b| (b < 0x20 && b != b'\t') || b == 0x7f)
        {
            cx.error_spanned_by(
                value,
                "a header value cannot hold control characters (such as CR, LF or NUL) other than a tab",
            );
        }
    }
    check_policy(cx, &attrs.policy, Level::Trait);
    if let Some(Group { attr, .. }) = &attrs.policy.breaker {
        check_breaker_mode(cx, attr, Level::Trait);
    }
}

/// Checks within one level (the trait's attribute or one method's attributes), so a
/// mistake in the trait's defaults is reported once, not once per method.
fn check_policy(cx: &Ctxt, p: &PolicyAttrs, level: Level) {
    if let Some(Group { attr, .. }) = &p.timeout {
        check_timeout(cx, attr);
    }
    if let Some(Group { attr, .. }) = &p.retry {
        check_retry(cx, attr);
    }
    if let Some(Group { attr, .. }) = &p.breaker {
        check_breaker(cx, attr);
    }
    if let Some(Group { attr, .. }) = &p.bulkhead {
        check_bulkhead(cx, attr);
    }
    if let Some(Group { attr, span }) = &p.rate_limit {
        check_rate_limit(cx, attr, *span, level);
    }
}

fn positive_limit(cx: &Ctxt, limit: &Option<Sp<Limit>>, what: &str) {
    if let Some(Sp {
        value: Limit::Ms(0),
        span,
        ..
    }) = limit
    {
        cx.error_at(
            *span,
            format!("{what} must be longer than zero; use `\"none\"` for no limit"),
        );
    }
}

fn check_timeout(cx: &Ctxt, t: &TimeoutAttr) {
    positive_limit(cx, &t.attempt, "the attempt timeout");
    positive_limit(cx, &t.total, "the total deadline");
    attempt_within_total(cx, &t.attempt, &t.total, |_, _| true);
}

/// `attempt <= total`; `report` decides, from the two levels, whether this is the
/// place to report it.
fn attempt_within_total(
    cx: &Ctxt,
    attempt: &Option<Sp<Limit>>,
    total: &Option<Sp<Limit>>,
    report: impl Fn(Level, Level) -> bool,
) {
    if let (Some(a), Some(t)) = (attempt, total)
        && let (Limit::Ms(am), Limit::Ms(tm)) = (a.value, t.value)
        && am > tm
        && report(a.level, t.level)
    {
        // Point at whichever was written on the method, the attempt otherwise.
        let span = if a.level == Level::Trait && t.level == Level::Method {
            t.span
        } else {
            a.span
        };
        cx.error_at(
            span,
            format!(
                "the attempt timeout ({}) is longer than the total deadline ({}): an attempt cannot outlive its call",
                fmt_ms(am),
                fmt_ms(tm)
            ),
        );
    }
}

fn check_retry(cx: &Ctxt, r: &RetryAttr) {
    let Some(Sp { value: b, .. }) = &r.backoff else {
        return;
    };
    if let Some(f) = &b.factor
        && f.value < 1
    {
        cx.error_at(f.span, "`factor` must be at least 1");
    }
    if matches!(b.kind, BackoffKind::Fixed) {
        return;
    }
    let base = b
        .base
        .as_ref()
        .map_or(policy::DEFAULT_BACKOFF_BASE_MS, |s| s.value);
    let cap = b
        .cap
        .as_ref()
        .map_or(policy::DEFAULT_BACKOFF_CAP_MS, |s| s.value);
    if cap < base {
        match (&b.base, &b.cap) {
            (_, Some(c)) => cx.error_at(
                c.span,
                format!(
                    "`cap` ({}) is below `base` ({}): the cap must be at least the base",
                    fmt_ms(cap),
                    fmt_ms(base)
                ),
            ),
            (Some(bs), None) => cx.error_at(
                bs.span,
                format!(
                    "`base` ({}) is above the default cap ({}): add a `cap` of at least {}",
                    fmt_ms(base),
                    fmt_ms(cap),
                    fmt_ms(base)
                ),
            ),
            (None, None) => {}
        }
    }
}

fn at_least_one(cx: &Ctxt, value: &Option<Sp<u32>>, key: &str) {
    if let Some(v) = value
        && v.value < 1
    {
        cx.error_at(v.span, format!("`{key}` must be at least 1"));
    }
}

fn positive_duration(cx: &Ctxt, value: &Option<Sp<u64>>, key: &str) {
    positive_duration_why(cx, value, key, "");
}

/// [`positive_duration`], the message ending with `why`.
fn positive_duration_why(cx: &Ctxt, value: &Option<Sp<u64>>, key: &str, why: &str) {
    if let Some(v) = value
        && v.value == 0
    {
        cx.error_at(v.span, format!("`{key}` must be longer than zero{why}"));
    }
}

fn check_breaker(cx: &Ctxt, b: &BreakerAttr) {
    at_least_one(cx, &b.failures, "failures");
    at_least_one(cx, &b.probes, "probes");
    at_least_one(cx, &b.min_calls, "min_calls");
    positive_duration_why(
        cx,
        &b.reset,
        "reset",
        ": a breaker that closes as it opens never refuses a call",
    );
    positive_duration(cx, &b.window, "window");
    positive_duration(cx, &b.slow_call, "slow_call");
    if let Some(rate) = &b.failure_rate
        && !(rate.value > 0.0 && rate.value <= 1.0)
    {
        cx.error_at(
            rate.span,
            "`failure_rate` must be in `(0, 1]`: it is the share of failed calls, such as `0.5`",
        );
    }
    if let (Some(_), Some(rate)) = (&b.failures, &b.failure_rate)
        && b.failures.as_ref().map(|f| f.level) == Some(rate.level)
    {
        cx.error_at(
            rate.span,
            "`failures` and `failure_rate` are two ways to trip the breaker: choose one",
        );
    }
}

/// `window` and `min_calls` only mean something with `failure_rate`. Reported only
/// for keys written at `level` (the trait's mistakes once, at the trait).
fn check_breaker_mode(cx: &Ctxt, b: &BreakerAttr, level: Level) {
    if b.failure_rate.is_some() || b.rate_named {
        return;
    }
    let window = b.window.as_ref().map(|v| (v.span, v.level));
    let min_calls = b.min_calls.as_ref().map(|v| (v.span, v.level));
    for (key, found) in [("window", window), ("min_calls", min_calls)] {
        if let Some((span, at)) = found
            && at == level
        {
            cx.error_at(
                span,
                format!(
                    "`{key}` applies to the failure-rate breaker only: add `failure_rate = 0.5`"
                ),
            );
        }
    }
}

fn check_bulkhead(cx: &Ctxt, b: &BulkheadAttr) {
    at_least_one(cx, &b.concurrency, "concurrency");
}

fn check_rate_limit(cx: &Ctxt, r: &RateLimitAttr, span: Span, level: Level) {
    match &r.per_second {
        Some(rate) if rate.value.is_nan() || rate.value <= 0.0 => {
            cx.error_at(rate.span, "`per_second` must be greater than zero");
        }
        Some(rate) if !rate.value.is_finite() => {
            cx.error_at(
                rate.span,
                "`per_second` is too large: it does not fit in an `f64`",
            );
        }
        // On a method, the trait's rate may fill it in: checked on the merged policy.
        None if level == Level::Trait && !r.rate_named => {
            cx.error_at(
                span,
                "`rate_limit` needs a rate: `rate_limit(per_second = 10)`",
            );
        }
        _ => {}
    }
    at_least_one(cx, &r.burst, "burst");
}

/// `#[parse(with = check)]` needs its check, and a result it can look at: a value,
/// not `()` nor a stream that is read after the call returns.
fn check_parse(cx: &Ctxt, e: &Endpoint, p: &Group<ParseAttr>) {
    if p.attr.with.is_none() && !p.attr.with_named {
        cx.error_at(
            p.span,
            "`parse` needs a check: `#[parse(with = check)]`, where `check` is a `fn(&T) -> Result<(), E>`",
        );
    }
    match e.ret.ok.as_ref().map(|(_, d)| d.value()) {
        Some(Decoder::Streamed) => cx.error_at(
            p.span,
            "a streamed result cannot be checked: its body is read after the call returns; check what you read from the `ResponseStream` instead",
        ),
        Some(Decoder::Unit) => cx.error_at(
            p.span,
            "a result of `()` has no value to check: `#[parse]` needs a result type to decode",
        ),
        _ => {}
    }
}

fn check_hedge(cx: &Ctxt, h: &HedgeAttr, span: Span) {
    if h.delay.is_none() && !h.delay_named {
        cx.error_at(
            span,
            "`hedge` needs a delay: `#[hedge(delay = \"50ms\", max = 2)]`",
        );
    }
    positive_duration_why(
        cx,
        &h.delay,
        "delay",
        ": with none, every call would start all its attempts at once, which is not a hedge against a slow answer but a multiple of the load",
    );
    if let Some(max) = &h.max
        && max.value < 2
    {
        cx.error_at(
            max.span,
            "`max` counts attempts in flight, the first one included: it must be at least 2",
        );
    }
}

/// RFC 9110 token characters, and not a header that frames the body: the client
/// sets `Content-Length` (or `Transfer-Encoding`) from the body it sends, and a value
/// of the caller's would contradict it (a server would wait for bytes that never come,
/// or read the next request as this one's body).
pub fn header_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !ok {
        return Err(format!(
            "`{name}` is not a valid header name: expected letters, digits and `-`, such as `X-Request-Id`"
        ));
    }
    if ["content-length", "transfer-encoding"]
        .iter()
        .any(|framing| name.eq_ignore_ascii_case(framing))
    {
        return Err(format!(
            "`{name}` cannot be set: the client frames the body itself, and sets this header from the body it sends"
        ));
    }
    Ok(())
}

/// The span of the first `Self` in a type's tokens (`Self`, `&Self`, `Vec<Self>`,
/// `Self::Id`, `<Self as T>::Id`), if any.
pub fn self_in(tokens: proc_macro2::TokenStream) -> Option<Span> {
    tokens.into_iter().find_map(|tt| match tt {
        proc_macro2::TokenTree::Ident(i) if i == "Self" => Some(i.span()),
        proc_macro2::TokenTree::Group(g) => self_in(g.stream()),
        _ => None,
    })
}

/// What in a result type borrows, if anything: a reference, a lifetime other than
/// `'static`, or a `Cow` whose lifetime is left out (elided, so a method's). Other
/// types with a lifetime left out cannot be seen from their name; the compiler
/// still refuses them, from inside the generated code.
fn borrow_in(ty: &syn::Type) -> Option<String> {
    use syn::{Type, TypeParamBound};
    match ty {
        Type::Reference(_) => Some("a reference".to_owned()),
        Type::Array(a) => borrow_in(&a.elem),
        Type::Slice(s) => borrow_in(&s.elem),
        Type::Paren(p) => borrow_in(&p.elem),
        Type::Group(g) => borrow_in(&g.elem),
        Type::Tuple(t) => t.elems.iter().find_map(borrow_in),
        Type::TraitObject(t) => t.bounds.iter().find_map(|b| match b {
            TypeParamBound::Lifetime(l) => lifetime_borrows(l),
            TypeParamBound::Trait(t) => path_borrows(&t.path),
            _ => None,
        }),
        Type::Path(p) => p
            .qself
            .as_ref()
            .and_then(|q| borrow_in(&q.ty))
            .or_else(|| path_borrows(&p.path)),
        _ => None,
    }
}

/// A lifetime other than `'static`, said as [`borrow_in`] says it.
fn lifetime_borrows(l: &syn::Lifetime) -> Option<String> {
    (l.ident != "static").then(|| format!("the lifetime `{l}`"))
}

/// What in a path's generic arguments borrows (see [`borrow_in`]).
fn path_borrows(path: &syn::Path) -> Option<String> {
    use syn::{GenericArgument, PathArguments};
    // `Cow` bare or from `std`/`alloc`: its lifetime, left out, is a method's.
    let std_cow = |seg: &syn::PathSegment| {
        seg.ident == "Cow"
            && (path.segments.len() == 1
                || path
                    .segments
                    .iter()
                    .rev()
                    .nth(1)
                    .is_some_and(|s| s.ident == "borrow"))
    };
    path.segments.iter().find_map(|seg| {
        let PathArguments::AngleBracketed(args) = &seg.arguments else {
            return None;
        };
        let mut has_lifetime = false;
        let found = args.args.iter().find_map(|arg| match arg {
            GenericArgument::Lifetime(l) => {
                has_lifetime = true;
                lifetime_borrows(l)
            }
            GenericArgument::Type(t) => borrow_in(t),
            GenericArgument::AssocType(a) => borrow_in(&a.ty),
            _ => None,
        });
        found.or_else(|| {
            (std_cow(seg) && !has_lifetime)
                .then(|| "a `Cow` whose lifetime is left out (so a method's)".to_owned())
        })
    })
}

/// The methods the generated client has from traits, and which trait each is of: the
/// traits it derives, the prelude's traits implemented for every type (`Into`,
/// `TryInto`) or every `Clone` type (`ToOwned`), and `std`'s implemented for every
/// type (`Borrow`, `BorrowMut`) or every `'static` one (`Any`).
const TRAIT_METHODS: [(&str, &str); 10] = [
    ("clone", "Clone"),
    ("clone_from", "Clone"),
    ("fmt", "Debug"),
    ("to_owned", "ToOwned"),
    ("clone_into", "ToOwned"),
    ("into", "Into"),
    ("try_into", "TryInto"),
    ("borrow", "Borrow"),
    ("borrow_mut", "BorrowMut"),
    ("type_id", "Any"),
];

fn check_endpoint(cx: &Ctxt, api: &Api, e: &Endpoint) {
    let name = &e.ident;
    let sig = &e.sig;

    check_method_name(
        cx,
        api,
        name,
        "an endpoint",
        " (the path does not depend on it)",
    );

    // The verb and the path.
    match e.attrs.verbs.as_slice() {
        [] => cx.error_spanned_by(
            name,
            format!(
                "`{name}` has no verb: add one of `#[get(\"/path\")]`, `#[post(...)]`, `#[put(...)]`, `#[patch(...)]`, `#[delete(...)]`, `#[head(...)]` or `#[options(...)]`"
            ),
        ),
        [first, rest @ ..] => {
            for extra in rest {
                cx.error_at(
                    extra.span,
                    format!(
                        "`{name}` already has a verb, `#[{}]`: an endpoint has exactly one",
                        first.verb.as_str().to_lowercase()
                    ),
                );
            }
        }
    }
    if let Some(t) = &e.template {
        for problem in &t.problems {
            cx.error_spanned_by(&t.lit, problem);
        }
    }
    if let Some(span) = e.body_span {
        cx.error_at(
            span,
            "an endpoint method has no body: the generated client implements it",
        );
    }

    // The signature.
    if sig.asyncness.is_none() {
        cx.error_spanned_by(
            sig.fn_token,
            format!("endpoint methods must be `async`: write `async fn {name}`"),
        );
    }
    if let Some(c) = &sig.constness {
        cx.error_spanned_by(c, "an endpoint method cannot be `const`");
    }
    if let syn::Safety::Unsafe(u) = &sig.safety {
        cx.error_spanned_by(u, "an endpoint method cannot be `unsafe`");
    }
    if let Some(abi) = &sig.abi {
        cx.error_spanned_by(abi, "an endpoint method cannot have an ABI");
    }
    if let Some(v) = &sig.variadic {
        cx.error_spanned_by(v, "an endpoint method cannot be variadic");
    }
    for param in &sig.generics.params {
        if !matches!(param, GenericParam::Lifetime(_)) {
            cx.error_spanned_by(
                param,
                "generic endpoint methods are not supported: the request is built from concrete types",
            );
        }
    }
    if let Some(w) = &sig.generics.where_clause {
        cx.error_spanned_by(w, "`where` clauses on endpoint methods are not supported");
    }
    match &e.receiver {
        Receiver::Ref => {}
        Receiver::Other(tokens, what) => cx.error_spanned_by(
            tokens,
            format!(
                "{what} is not supported: take `&self` (a client is shared; clone it to own one)"
            ),
        ),
        Receiver::Missing => cx.error_spanned_by(
            name,
            format!(
                "`{name}` needs `&self` as its first parameter: endpoints are methods of the client"
            ),
        ),
    }

    // The result.
    match (&e.ret.ty, &e.ret.ok) {
        (None, _) => {
            cx.error_spanned_by(name, format!("`{name}` must return `Result<T, ApiError>`"))
        }
        (Some(ty), None) => cx.error_spanned_by(
            ty,
            "expected `Result<T, ApiError>`: every call can fail, so endpoints return a `Result`",
        ),
        _ => {}
    }
    if let Some((ty, _)) = &e.ret.ok
        && let Some(what) = borrow_in(ty)
    {
        cx.error_spanned_by(
            ty,
            format!(
                "the result of an endpoint cannot borrow: this type holds {what}, but a decoded value is the caller's to keep after the call (and coalesced callers each get one); return an owned type, such as `String` or `Cow<'static, str>`"
            ),
        );
    }
    if let Some(err) = &e.ret.err
        && !ast::is_named(err, "ApiError")
    {
        cx.error_spanned_by(
            err,
            "expected `ApiError`: every call fails with `resilient_api::ApiError`, so endpoints return `Result<T, ApiError>`",
        );
    }

    // `Self` in the trait is the implementor: the generated client, which is neither
    // a value to send nor one to decode (and, unsized in the trait, no result at all).
    let types = e.params.iter().map(|p| &p.ty).chain(&e.ret.ty);
    for ty in types {
        if let Some(span) = self_in(ty.to_token_stream()) {
            cx.error_at(
                span,
                format!(
                    "`Self` in an endpoint's signature is the generated client, `{}`, which is neither sent nor decoded: name the type itself",
                    api.client
                ),
            );
        }
    }
    check_params(cx, e);
    if let Some(key) = &e.attrs.idempotency_key
        && let Some((fixed, _)) = api
            .attrs
            .headers
            .iter()
            .find(|(n, _)| n.value().eq_ignore_ascii_case(&key.value))
    {
        cx.error_spanned_by(
            fixed,
            format!(
                "`{}` is the idempotency key of `{name}`, which is made anew for every call; a fixed value in the trait's headers would stand for every call's key: remove it",
                fixed.value()
            ),
        );
    }
    check_policy(cx, &e.attrs.policy, Level::Method);
    check_effective(cx, e, !api.attrs.incomplete);
}

fn role_name(kind: &RoleKind) -> &'static str {
    match kind {
        RoleKind::Path => "#[path]",
        RoleKind::Query { .. } => "#[query]",
        RoleKind::Header { .. } => "#[header]",
        RoleKind::Body(_) => "#[body]",
    }
}

fn check_params(cx: &Ctxt, e: &Endpoint) {
    let template = e.template.as_ref();
    let mut body_seen = false;
    // Names sent so far, and by which parameter: queries exactly, headers in any case.
    let mut queries: Vec<(String, &str)> = Vec::new();
    let mut headers: Vec<(String, &str)> = Vec::new();
    for p in &e.params {
        if p.ident.is_none() {
            cx.error_spanned_by(
                &p.pat,
                "expected a parameter name: patterns are not supported in endpoint parameters",
            );
            continue;
        }
        let name = &p.name;
        for extra in p.roles.iter().skip(1) {
            cx.error_at(
                extra.span,
                format!(
                    "`{name}` already has a role, `{}`: a parameter has exactly one",
                    role_name(&p.roles[0].kind)
                ),
            );
        }
        match p.roles.first() {
            None if p.in_path => {}
            // Without a template whose every `{name}` could be read, whether it fills
            // one is unknown. A template with other problems (a name written twice, no
            // leading `/`) still names what it names.
            None if template.is_none_or(|t| !t.names_complete) => {}
            None => {
                // `/users/:id` or `/users/<id>`, as other routers write parameters.
                let other_style = template.and_then(|t| {
                    [format!(":{name}"), format!("<{name}>")]
                        .into_iter()
                        .find(|s| t.value.split('/').any(|seg| seg == s))
                });
                let hint = other_style.map_or_else(String::new, |s| {
                    format!(" (`{s}` in the path template is text: write `{{{name}}}`)")
                });
                cx.error_spanned_by(
                    &p.pat,
                    format!(
                        "parameter `{name}` has no role: name it in the path as `{{{name}}}`, or mark it `#[query]`, `#[header(\"Name\")]` or `#[body]`{hint}"
                    ),
                );
            }
            Some(role) => match &role.kind {
                RoleKind::Path if !p.in_path => {
                    if let Some(t) = template.filter(|t| t.names_complete) {
                        cx.error_at(
                            role.span,
                            format!("`#[path]` parameter `{name}` has no `{{{name}}}` in the path template `{}`", t.value),
                        );
                    }
                }
                RoleKind::Path => {}
                other if p.in_path => cx.error_at(
                    role.span,
                    format!(
                        "`{name}` fills `{{{name}}}` in the path, so it cannot also be `{}`",
                        role_name(other)
                    ),
                ),
                // A malformed `#[header(...)]` was reported as that alone.
                RoleKind::Header { name: None, .. } if role.malformed => {}
                RoleKind::Header { name: None, .. } => cx.error_at(
                    role.span,
                    format!(
                        "`#[header]` needs the header's name: `#[header(\"X-Name\")] {name}: ...`"
                    ),
                ),
                RoleKind::Header {
                    name: Some(header), ..
                } => {
                    if let Err(why) = header_name(&header.value()) {
                        cx.error_spanned_by(header, why);
                    }
                    let lower = header.value().to_ascii_lowercase();
                    match headers.iter().find(|(h, _)| *h == lower) {
                        Some((_, other)) => cx.error_spanned_by(
                            header,
                            format!(
                                "the `{}` header is already set by the parameter `{other}`: one header, one parameter",
                                header.value()
                            ),
                        ),
                        None => headers.push((lower, name)),
                    }
                    // The caller's key is what makes this method retryable.
                    let keyed_otherwise = e.verb().is_none_or(|v| v.is_idempotent())
                        || e.attrs.idempotent.is_some()
                        || e.attrs.idempotency_key.is_some();
                    if p.is_caller_key() && ast::is_named(&p.ty, "Option") && !keyed_otherwise {
                        cx.error_spanned_by(
                            &p.ty,
                            format!(
                                "the `{}` header makes this {} method retryable, but it is optional: a call without the key would be retried without one; make it required, or mark the method `#[idempotent]` if repeating it is safe",
                                header.value(),
                                e.verb().map_or("", |v| v.as_str())
                            ),
                        );
                    }
                }
                RoleKind::Query { name: Some(q), .. } if q.value().is_empty() => {
                    cx.error_spanned_by(q, "a query parameter's name cannot be empty");
                }
                RoleKind::Query { name: q, .. } => {
                    let sent = q.as_ref().map_or_else(|| name.clone(), syn::LitStr::value);
                    match queries.iter().find(|(n, _)| *n == sent) {
                        Some((_, other)) => cx.error_at(
                            role.span,
                            format!(
                                "the query parameter `{sent}` is already sent by the parameter `{other}`: one name, one parameter (to repeat a name, pass a sequence such as `Vec<T>`)"
                            ),
                        ),
                        None => queries.push((sent, name)),
                    }
                }
                RoleKind::Body(_) => {
                    if body_seen {
                        cx.error_at(
                            role.span,
                            "a request has one body: this method already has a `#[body]` parameter",
                        );
                    }
                    body_seen = true;
                }
            },
        }
    }
    if let Some(t) = template {
        for wanted in &t.names {
            if !e.params.iter().any(|p| &p.name == wanted) {
                cx.error_spanned_by(
                    &t.lit,
                    format!(
                        "`{{{wanted}}}` in the path template has no parameter: add a parameter `{wanted}: ...` to this method"
                    ),
                );
            }
        }
    }
}

const WHY_IDEMPOTENT: &str =
    "the request may already have run; mark it `#[idempotent]` or add `#[idempotency_key]`";

/// Rules over the merged policy. A value from the trait and one from the method can
/// clash only here; a clash wholly within the trait was reported at the trait.
/// `defaults_known`: the trait's attribute parsed to its end (otherwise a default the
/// method lacks may be among the keys lost to the syntax error).
fn check_effective(cx: &Ctxt, e: &Endpoint, defaults_known: bool) {
    let p = &e.policy;
    let name = &e.ident;
    if !p.attempt_written && defaults_known {
        cx.error_spanned_by(
            name,
            format!(
                "`{name}` has no attempt timeout: add `timeout(attempt = \"...\")` to `#[resilient_api]` or `#[timeout(attempt = \"...\")]` to this method, or `attempt = \"none\"` to wait without limit"
            ),
        );
    }
    attempt_within_total(cx, &p.attempt, &p.total, |a, t| {
        a == Level::Method || t == Level::Method
    });

    let verb = e.verb();
    let verb_name = verb.map_or("", |v| v.as_str());
    if !p.idempotent && verb.is_some() {
        if let Some(Group { attr, .. }) = &e.attrs.policy.retry
            && let Some(on) = attr.on_key
        {
            cx.error_at(
                on,
                format!("`retry(on = ...)` on a {verb_name} method that is not idempotent: {WHY_IDEMPOTENT}"),
            );
        }
        if let Some(h) = &e.attrs.hedge {
            cx.error_at(
                h.span,
                format!(
                    "`#[hedge]` on a {verb_name} method that is not idempotent: {WHY_IDEMPOTENT}"
                ),
            );
        }
    }
    if let Some(span) = e.attrs.coalesce
        && !(verb.is_some_and(|v| v.is_idempotent()) || e.attrs.idempotent.is_some())
        && verb.is_some()
    {
        cx.error_at(
            span,
            format!(
                "`#[coalesce]` on a {verb_name} method that is not idempotent: identical calls would run once for several callers; mark it `#[idempotent]` if that is safe"
            ),
        );
    }
    // A streamed result is read by its one caller after the call returns: there is no
    // answer to hand to several callers, and the client runs each call on its own.
    if let Some(span) = e.attrs.coalesce
        && e.ret
            .ok
            .as_ref()
            .is_some_and(|(_, d)| matches!(d.value(), Decoder::Streamed))
    {
        cx.error_at(
            span,
            "a streamed result cannot be shared: a method returning `ResponseStream` cannot be coalesced",
        );
    }
    if let Some(p) = &e.attrs.parse {
        check_parse(cx, e, p);
    }
    if let Some(span) = e.attrs.coalesce
        && e.attrs.idempotency_key.is_some()
    {
        cx.error_at(
            span,
            "`#[coalesce]` with `#[idempotency_key]`: every call has its own key, so no two calls are identical, and calls with different keys are different operations",
        );
    }
    if let Some(h) = &e.attrs.hedge {
        check_hedge(cx, &h.attr, h.span);
    }
    if let Some(key) = &e.attrs.idempotency_key
        && let Err(why) = header_name(&key.value)
    {
        cx.error_at(key.span, why);
    }
    if let Some(part) = &e.attrs.partition
        && part.value().is_empty()
    {
        cx.error_spanned_by(part, "a partition name cannot be empty");
    }

    if let Some(stream) = e.stream_body() {
        const WHY: &str = "a streamed body cannot be replayed";
        if let Some(max) = &p.retry_max
            && max.value > 0
        {
            match max.level {
                Level::Method => cx.error_at(
                    max.span,
                    format!("{WHY}: set `#[retry(max = 0)]` on a method with `#[body(stream)]`"),
                ),
                Level::Trait => cx.error_at(
                    stream.span,
                    format!(
                        "{WHY}, but the trait's `retry(max = {})` applies here: add `#[retry(max = 0)]` to `{name}`",
                        max.value
                    ),
                ),
            }
        }
        // Never retried: statuses or a backoff named on the method would do nothing.
        let retried = p.retry_max.as_ref().is_some_and(|max| max.value > 0);
        if let Some(r) = &e.attrs.policy.retry
            && !retried
        {
            let named = [
                r.attr.on_key.map(|span| (span, "on")),
                r.attr.backoff.as_ref().map(|b| (b.span, "backoff")),
                r.attr
                    .retry_after_cap
                    .as_ref()
                    .map(|c| (c.span, "retry_after_cap")),
            ];
            for (span, key) in named.into_iter().flatten() {
                cx.error_at(
                    span,
                    format!(
                        "{WHY}, so a method with `#[body(stream)]` is never retried: its `{key}` would do nothing; remove it"
                    ),
                );
            }
        }
        if let Some(h) = &e.attrs.hedge {
            cx.error_at(
                h.span,
                format!("{WHY}: a method with `#[body(stream)]` cannot be hedged"),
            );
        }
        if let Some(span) = e.attrs.coalesce {
            cx.error_at(
                span,
                format!("{WHY} or compared: a method with `#[body(stream)]` cannot be coalesced"),
            );
        }
    }

    if e.attrs.policy.breaker.is_some()
        && let Some(b) = &p.breaker
    {
        check_breaker_mode(cx, b, Level::Method);
    }
    if let Some(Group { span, .. }) = &e.attrs.policy.rate_limit
        && let Some(r) = &p.rate_limit
        && r.per_second.is_none()
        && !r.rate_named
        && defaults_known
    {
        cx.error_at(
            *span,
            "`rate_limit` needs a rate: `#[rate_limit(per_second = 10)]` (or one on the trait)",
        );
    }
}

/// Endpoints sharing a partition share its breaker, bulkhead and rate limiter, so
/// they must agree on their settings.
fn check_partitions(cx: &Ctxt, api: &Api) {
    let eps = &api.endpoints;
    for (i, e) in eps.iter().enumerate() {
        let Some(part) = &e.policy.partition else {
            continue;
        };
        let Some(first) = eps[..i]
            .iter()
            .find(|o| o.policy.partition.as_ref() == Some(part))
        else {
            continue;
        };
        // As they run: a default written out is the default left out. "No breaker of
        // its own" (the client's) stays apart from an explicit one.
        let breaker = |e: &Endpoint| policy::breaker(&e.policy).map(|b| b.resolved());
        let bulkhead = |e: &Endpoint| policy::bulkhead(&e.policy).map(|b| b.resolved());
        let differs = [
            ("breaker", breaker(e) != breaker(first)),
            ("bulkhead", bulkhead(e) != bulkhead(first)),
            (
                "rate limit",
                policy::rate_limit(&e.policy) != policy::rate_limit(&first.policy),
            ),
        ];
        for (what, differ) in differs {
            if differ {
                let span = e
                    .attrs
                    .partition
                    .as_ref()
                    .map_or_else(|| e.ident.span(), |p| p.span());
                cx.error_at(
                    span,
                    format!(
                        "`{}` and `{}` share partition `{part}` but set different {what}s: a partition has one {what}, so give both the same settings or use another `#[partition]`",
                        e.ident, first.ident
                    ),
                );
            }
        }
    }
}
