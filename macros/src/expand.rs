//! Tokens from a validated model: the trait (our attributes stripped, `async fn`
//! turned into `Send` futures), the client, and the endpoints as static data.
//!
//! Reads only a model that `valid.rs` accepted; on errors, [`fallback`] emits the
//! trait and a stub client next to the `compile_error!`s so the user sees those
//! errors and not a cascade.

use proc_macro2::{Literal, Span, TokenStream};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemTrait, Pat, ReturnType, Signature, TraitItem};

use crate::ast::{self, Api, Decoder, Endpoint, Part};
use crate::attr::{BodyKind, RoleKind};
use crate::ctxt::Ctxt;
use crate::policy::{self, Backoff, Mode};
use crate::symbol::{ALLOW, CFG_ATTR, DEPRECATED, EXPECT};
use crate::valid;

/// The attribute, start to end: parse, check, write.
pub fn resilient_api(args: TokenStream, item: ItemTrait) -> TokenStream {
    let cx = Ctxt::new();
    let api = Api::from_syn(&cx, args, item);
    valid::check(&cx, &api);
    match cx.check() {
        Ok(()) => expand(&api),
        Err(err) => fallback(&api, &err),
    }
}

/// Clippy's lints, which users would otherwise see on code they did not write.
///
/// rustc's own lints need no `allow`: the generated items carry the macro's spans, so
/// `dead_code` and the style lints leave them alone. An `allow` of one would also be
/// an error (E0453) in a crate that forbids it (`tests/ui/pass/strict-lints.rs`).
fn allow_lints() -> TokenStream {
    quote! {
        #[allow(
            clippy::all,
            clippy::pedantic,
            clippy::nursery,
        )]
    }
}

/// The user's `#[allow(...)]` and `#[expect(...)]` among `attrs`, as `#[allow(...)]`
/// for the code generated from their tokens: the client's method repeats the
/// method's parameter names and types, the client's name comes from the trait's,
/// so a lint the user silenced there (`non_snake_case`, `deprecated`, ...) would fire
/// again on the copy. An expectation stays fulfilled by the user's own item. One
/// inside `#[cfg_attr(pred, ...)]` (not yet expanded on a method or a parameter) is
/// repeated under the same predicate.
fn user_allows(attrs: &[syn::Attribute]) -> Vec<TokenStream> {
    let mut out = Vec::new();
    for a in attrs {
        lint_allows(&a.meta, None, &mut out);
    }
    out
}

/// [`user_allows`] for one attribute's meta, under `pred` when it sits in a
/// `cfg_attr`.
fn lint_allows(meta: &syn::Meta, pred: Option<&TokenStream>, out: &mut Vec<TokenStream>) {
    let syn::Meta::List(list) = meta else {
        return;
    };
    if list.path == ALLOW || list.path == EXPECT {
        let lints = &list.tokens;
        out.push(match pred {
            Some(pred) => quote_spanned!(list.span()=> #[cfg_attr(#pred, allow(#lints))]),
            None => quote_spanned!(list.span()=> #[allow(#lints)]),
        });
    } else if list.path == CFG_ATTR {
        let Ok(args) = list.parse_args_with(
            syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
        ) else {
            return;
        };
        let mut args = args.into_iter();
        let Some(own) = args.next() else {
            return;
        };
        let pred = match pred {
            Some(outer) => quote!(all(#outer, #own)),
            None => quote!(#own),
        };
        for inner in args {
            lint_allows(&inner, Some(&pred), out);
        }
    }
}

fn doc(text: &str) -> TokenStream {
    quote!(#[doc = #text])
}

/// A local of generated code that user code cannot see or shadow.
fn local(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
}

fn ms(ra: &TokenStream, ms: u64) -> TokenStream {
    let ms = Literal::u64_unsuffixed(ms);
    quote!(#ra::__private::ms(#ms))
}

fn opt(inner: Option<TokenStream>) -> TokenStream {
    match inner {
        Some(t) => quote!(::core::option::Option::Some(#t)),
        None => quote!(::core::option::Option::None),
    }
}

fn u32_lit(v: u32) -> Literal {
    Literal::u32_unsuffixed(v)
}

/// The trait as re-emitted: attributes stripped (already done while parsing),
/// `async fn` turned into a `Send` future, generated docs appended to endpoints.
fn user_trait(api: &Api, with_docs: bool) -> ItemTrait {
    let mut item = api.item.clone();
    // A supertrait the client cannot implement is an error (reported in `valid.rs`);
    // kept, it would add "the trait bound is not satisfied" on the client.
    item.supertraits = std::mem::take(&mut item.supertraits)
        .into_iter()
        .filter(crate::valid::client_has)
        .collect();
    if item.supertraits.is_empty() {
        item.colon_token = None;
    }
    for trait_item in &mut item.items {
        let TraitItem::Fn(method) = trait_item else {
            continue;
        };
        let Some(endpoint) = api.endpoints.iter().find(|e| e.ident == method.sig.ident) else {
            continue;
        };
        if with_docs {
            for line in policy::describe(endpoint) {
                method.attrs.push(syn::parse_quote!(#[doc = #line]));
            }
        }
        // `-> !` is no `Result` (reported in `valid.rs`); as a future's `Output` it
        // would be rustc's "the `!` type is experimental" too.
        if let ReturnType::Type(_, ty) = &method.sig.output
            && matches!(**ty, syn::Type::Never(_))
        {
            method.sig.output = ReturnType::Default;
        }
        if method.sig.asyncness.is_some() {
            method.sig = future_sig(&method.sig);
        }
        // A `const` or variadic endpoint is an error (reported in `valid.rs`); kept,
        // rustc would repeat it, on the trait and again on the stub client's method.
        method.sig.constness = None;
        method.sig.variadic = None;
        // A default body on an endpoint is an error (reported in `valid.rs`); kept, it
        // would add "not a future" on the `-> impl Future` signature.
        if method.default.take().is_some() {
            method.semi_token = Some(Default::default());
        }
        // A trait method without a body takes names, not patterns.
        for arg in &mut method.sig.inputs {
            if let FnArg::Typed(pt) = arg {
                match &mut *pt.pat {
                    Pat::Ident(p) if p.subpat.is_none() && p.by_ref.is_none() => {
                        p.mutability = None;
                    }
                    pat => *pat = syn::parse_quote!(_),
                }
            }
        }
    }
    item
}

/// `async fn f(..) -> R` as `fn f(..) -> impl Future<Output = R> + Send`.
fn future_sig(sig: &Signature) -> Signature {
    let mut sig = sig.clone();
    sig.asyncness = None;
    let ret = match &sig.output {
        ReturnType::Default => quote!(()),
        ReturnType::Type(_, ty) => quote!(#ty),
    };
    let span = sig.output.span();
    sig.output = syn::parse_quote_spanned! {span=>
        -> impl ::core::future::Future<Output = #ret> + ::core::marker::Send
    };
    for arg in &mut sig.inputs {
        if let FnArg::Typed(pt) = arg
            && let Pat::Ident(p) = &mut *pt.pat
        {
            p.mutability = None;
        }
    }
    sig
}

/// `__RESILIENT_API_PAYMENTS` for the API, `__RESILIENT_API_PAYMENTS_ENDPOINT_0_USER`
/// for an endpoint: hidden in a `const _` block, and unique within it.
fn static_ident(api: &Api, endpoint: Option<&Ident>) -> Ident {
    let api_name = api.item.ident.unraw().to_string().to_uppercase();
    match endpoint {
        None => format_ident!("__RESILIENT_API_{}", api_name),
        Some(e) => {
            let index = api
                .endpoints
                .iter()
                .position(|x| x.ident == *e)
                .unwrap_or(0);
            format_ident!(
                "__RESILIENT_API_{}_ENDPOINT_{}_{}",
                api_name,
                index,
                e.unraw().to_string().to_uppercase()
            )
        }
    }
}

/// The client's inherent methods, written by [`client_struct`]: an endpoint of one of
/// these names would be shadowed (`valid.rs` refuses it).
pub const CLIENT_METHODS: [&str; 4] = [
    "builder",
    "with_options",
    "circuit_state",
    "partition_circuit_state",
];

fn client_struct(api: &Api, docs: &[String]) -> TokenStream {
    let ra = &api.krate;
    let vis = &api.item.vis;
    let client = &api.client;
    let docs = docs.iter().map(|d| doc(d));
    let allow = allow_lints();
    let user_allows = user_allows(&api.item.attrs);
    let example = format!("```text\nlet api = {client}::builder().build()?;\n```");
    let trait_name = api.item.ident.unraw();
    let partition_example = format!(
        "```text\nif let Some(state) = api.partition_circuit_state(\"{trait_name}::method\") {{\n    \
         tracing::info!(phase = ?state.phase, \"breaker\");\n}}\n```"
    );
    let methods = [
        quote! {
            /// Start building a client: base URL, transport, client-wide headers and
            /// secrets, default breaker and bulkhead, observability.
            ///
            #[doc = #example]
            pub fn builder() -> #ra::ClientBuilder<Self> {
                #ra::ClientBuilder::new()
            }
        },
        quote! {
            /// The same client (shared engine, pools, breakers and bulkheads) with
            /// per-call options, such as a shorter deadline or a cancellation token,
            /// added to the ones it has: of two deadlines the shorter applies, and every
            /// token given cancels its calls.
            ///
            /// ```text
            /// let token = CancellationToken::new();
            /// let quick = api.with_options(
            ///     CallOptions::new().deadline(Duration::from_millis(300)).cancel_on(token.clone()),
            /// );
            /// // quick's calls end within 300 ms, or when `token.cancel()` is called.
            /// ```
            pub fn with_options(&self, options: #ra::CallOptions) -> Self {
                Self {
                    __handle: self.__handle.with_options(options),
                }
            }
        },
        quote! {
            /// State of the default partition's circuit breaker. Once an open
            /// breaker's cooldown has ended it reads half-open, as the next call
            /// would find it.
            ///
            /// ```text
            /// if api.circuit_state().phase == Phase::Open {
            ///     // calls are refused at once with `ErrorKind::CircuitOpen` until `open_until`
            /// }
            /// ```
            pub fn circuit_state(&self) -> #ra::circuit_breaker::state::CircuitState {
                self.__handle.circuit_state()
            }
        },
        quote! {
            /// State of the circuit breaker of the partition `partition` (a method's
            /// own is `Trait::method`; a named one, its name), if one of this
            /// client's endpoints uses it.
            ///
            #[doc = #partition_example]
            pub fn partition_circuit_state(
                &self,
                partition: &::core::primitive::str,
            ) -> ::core::option::Option<#ra::circuit_breaker::state::CircuitState> {
                self.__handle.partition_circuit_state(partition)
            }
        },
    ];
    // In the fallback, an endpoint named like one of them (the error) keeps its stub,
    // so a call to it does not add a second error about the inherent method.
    let methods = CLIENT_METHODS
        .iter()
        .zip(methods)
        .filter(|(name, _)| !api.endpoints.iter().any(|e| e.ident.unraw() == **name))
        .map(|(_, method)| method);
    quote! {
        #(#docs)*
        #[derive(::core::clone::Clone, ::core::fmt::Debug)]
        #allow
        #(#user_allows)*
        #vis struct #client {
            __handle: #ra::__private::Handle,
        }

        #allow
        #(#user_allows)*
        impl #client {
            #(#methods)*
        }
    }
}

/// `tokens` with every span set to `span` (groups included), so rustc reports a
/// whole generated path at one user token instead of at the attribute.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut tt| {
            if let proc_macro2::TokenTree::Group(g) = &tt {
                let mut group = proc_macro2::Group::new(g.delimiter(), respan(g.stream(), span));
                group.set_span(span);
                tt = proc_macro2::TokenTree::Group(group);
            } else {
                tt.set_span(span);
            }
            tt
        })
        .collect()
}

fn decoder(ra: &TokenStream, d: &Decoder) -> TokenStream {
    match d {
        Decoder::Unit => quote!(#ra::__private::Unit),
        Decoder::Text => quote!(#ra::__private::Text),
        Decoder::RawBytes => quote!(#ra::__private::RawBytes),
        Decoder::Streamed => quote!(#ra::__private::Streamed),
        Decoder::Wrapped(inner) => {
            let inner = decoder(ra, inner);
            quote!(#ra::__private::Wrapped<#inner>)
        }
        Decoder::Json(ty) => quote_spanned!(ty.span()=> #ra::__private::Json<#ty>),
    }
}

/// `d` with the value (inside a `Response<T>`, `T`) checked by the user's `with`:
/// a local type implementing `Check`, declared among the method's statements, whose
/// check calls `with(&value)`. A `with` of the wrong shape fails there, at `with`.
/// A `with` from `Self::` (a function of the trait's) is the client's, through the
/// trait: inside the local type's `impl`, `Self` would be that type.
fn checked(api: &Api, d: &Decoder, with: &syn::Path, items: &mut Vec<TokenStream>) -> TokenStream {
    let ra = &api.krate;
    let pv = quote!(#ra::__private);
    if let Decoder::Wrapped(inner) = d {
        let inner = checked(api, inner, with, items);
        return quote!(#pv::Wrapped<#inner>);
    }
    let d = decoder(ra, d);
    let check = local("__Check");
    // At `with`: a check that takes the value by value fails there, not at the
    // macro's attribute.
    let value = Ident::new("__value", Span::mixed_site().located_at(with.span()));
    let name = crate::attr::path_to_string(with);
    let callee = match with.segments.first() {
        Some(first) if with.leading_colon.is_none() && first.ident == "Self" => {
            let client = &api.client;
            let trait_ident = &api.item.ident;
            let rest = with.segments.iter().skip(1);
            quote_spanned!(first.ident.span()=> <#client as #trait_ident> #(:: #rest)*)
        }
        _ => with.to_token_stream(),
    };
    let call = quote_spanned!(with.span()=> #callee(#value));
    items.push(quote! {
        struct #check;
        impl #pv::Check<<#d as #pv::Decoder>::Output> for #check {
            const NAME: &'static ::core::primitive::str = #name;
            #[inline]
            fn check(
                #value: &<#d as #pv::Decoder>::Output,
            ) -> ::core::result::Result<(), #pv::BoxError> {
                ::core::result::Result::map_err(#call, ::core::convert::Into::into)
            }
        }
    });
    quote!(#pv::Checked<#d, #check>)
}

fn backoff(ra: &TokenStream, b: &Backoff) -> TokenStream {
    let p = quote!(#ra::__private::Backoff);
    match *b {
        Backoff::Fixed { delay } => {
            let delay = ms(ra, delay);
            quote!(#p::Fixed { delay: #delay })
        }
        Backoff::Exponential { base, factor, cap } => {
            let (base, factor, cap) = (ms(ra, base), u32_lit(factor), ms(ra, cap));
            quote!(#p::Exponential { base: #base, factor: #factor, cap: #cap })
        }
        Backoff::ExponentialJitter { base, factor, cap } => {
            let (base, factor, cap) = (ms(ra, base), u32_lit(factor), ms(ra, cap));
            quote!(#p::ExponentialJitter { base: #base, factor: #factor, cap: #cap })
        }
        Backoff::DecorrelatedJitter { base, cap } => {
            let (base, cap) = (ms(ra, base), ms(ra, cap));
            quote!(#p::DecorrelatedJitter { base: #base, cap: #cap })
        }
    }
}

/// `Struct { given fields, ..Struct::DEFAULT }`, the update only when needed.
fn with_defaults(ty: TokenStream, fields: Vec<TokenStream>, all: usize) -> TokenStream {
    if fields.len() == all {
        quote!(#ty { #(#fields,)* })
    } else {
        quote!(#ty { #(#fields,)* ..#ty::DEFAULT })
    }
}

fn policy_tokens(ra: &TokenStream, e: &Endpoint) -> TokenStream {
    let p = &e.policy;
    let pv = quote!(#ra::__private);
    let attempt = opt(policy::limit(p.attempt.as_ref().map(|a| a.value)).map(|v| ms(ra, v)));
    let total = opt(policy::limit(p.total.as_ref().map(|a| a.value)).map(|v| ms(ra, v)));

    let r = policy::retry(p, e.stream_body().is_some());
    let mut fields = Vec::new();
    if let Some(max) = r.max {
        let max = u32_lit(max);
        fields.push(quote!(max: #max));
    }
    if let Some(b) = &r.backoff {
        let b = backoff(ra, b);
        fields.push(quote!(backoff: #b));
    }
    if let Some(on) = &r.on {
        fields.push(quote!(on: &[#(#on),*]));
    }
    if let Some(cap) = r.retry_after_cap {
        let cap = ms(ra, cap);
        fields.push(quote!(retry_after_cap: #cap));
    }
    let retry = with_defaults(quote!(#pv::RetryPolicy), fields, 4);

    let breaker = opt(policy::breaker(p).map(|b| {
        let mut fields = Vec::new();
        match b.mode {
            Some(Mode::ConsecutiveFailures { failures }) => {
                let failures = u32_lit(failures);
                fields.push(
                    quote!(mode: #pv::BreakerMode::ConsecutiveFailures { failures: #failures }),
                );
            }
            Some(Mode::FailureRate {
                threshold,
                window,
                min_calls,
            }) => {
                let threshold = Literal::f64_unsuffixed(threshold);
                let window = ms(ra, window);
                let min_calls = u32_lit(min_calls);
                fields.push(quote!(mode: #pv::BreakerMode::FailureRate {
                    threshold: #threshold,
                    window: #window,
                    min_calls: #min_calls,
                }));
            }
            None => {}
        }
        if let Some(reset) = b.reset {
            let reset = ms(ra, reset);
            fields.push(quote!(reset: #reset));
        }
        if let Some(probes) = b.probes {
            let probes = u32_lit(probes);
            fields.push(quote!(probes: #probes));
        }
        if let Some(slow) = b.slow_call {
            let slow = opt(Some(ms(ra, slow)));
            fields.push(quote!(slow_call: #slow));
        }
        with_defaults(quote!(#pv::BreakerConfig), fields, 4)
    }));

    let bulkhead = opt(policy::bulkhead(p).map(|b| {
        let mut fields = Vec::new();
        if let Some(c) = b.concurrency {
            let c = u32_lit(c);
            fields.push(quote!(concurrency: #c));
        }
        if let Some(q) = b.queue {
            let q = u32_lit(q);
            fields.push(quote!(queue: #q));
        }
        with_defaults(quote!(#pv::BulkheadConfig), fields, 2)
    }));

    let rate_limit = opt(policy::rate_limit(p).map(|r| {
        let per_second = Literal::f64_unsuffixed(r.per_second);
        let burst = u32_lit(r.burst);
        quote!(#pv::RateLimitConfig { per_second: #per_second, burst: #burst })
    }));

    let hedge = opt(policy::hedge(p).map(|h| {
        let delay = ms(ra, h.delay);
        let max = u32_lit(h.max);
        quote!(#pv::HedgeConfig { delay: #delay, max: #max })
    }));

    let coalesce = p.coalesce;
    let partition = opt(p.partition.as_ref().map(|s| quote!(#s)));
    let own_partition = p.own_partition;
    let max_body = opt(p.max_body.map(|b| quote!(#b)));
    quote! {
        #pv::Policy {
            attempt_timeout: #attempt,
            total_timeout: #total,
            retry: #retry,
            breaker: #breaker,
            bulkhead: #bulkhead,
            rate_limit: #rate_limit,
            hedge: #hedge,
            coalesce: #coalesce,
            partition: #partition,
            own_partition: #own_partition,
            max_body: #max_body,
        }
    }
}

fn endpoint_static(api: &Api, index: usize, e: &Endpoint) -> TokenStream {
    let ra = &api.krate;
    let pv = quote!(#ra::__private);
    let ident = static_ident(api, Some(&e.ident));
    let name = e.ident.unraw().to_string();
    let verb = format_ident!("{}", e.verb().map_or("Get", |v| v.variant()));
    let (template, parts) = match &e.template {
        Some(t) => {
            let parts = t.parts.iter().map(|part| match part {
                Part::Lit(s) => quote!(#pv::PathPart::Lit(#s)),
                Part::Param(i) => quote!(#pv::PathPart::Param(#i)),
            });
            (t.value.clone(), quote!(&[#(#parts),*]))
        }
        None => (String::new(), quote!(&[])),
    };
    let idempotent = e.policy.idempotent;
    let key = opt(e.policy.idempotency_key.as_ref().map(|k| quote!(#k)));
    let secrets: Vec<String> = e
        .params
        .iter()
        .filter_map(|p| match p.role()? {
            RoleKind::Query { name, secret: true } => {
                Some(name.as_ref().map_or_else(|| p.name.clone(), |n| n.value()))
            }
            RoleKind::Header {
                name: Some(name),
                secret: true,
            } => Some(name.value()),
            _ => None,
        })
        .collect();
    let policy = policy_tokens(ra, e);
    quote! {
        #[doc(hidden)]
        static #ident: #pv::EndpointSpec = #pv::EndpointSpec {
            index: #index,
            name: #name,
            verb: #pv::Verb::#verb,
            template: #template,
            path: #parts,
            idempotent: #idempotent,
            idempotency_key: #key,
            secrets: &[#(#secrets),*],
            policy: #policy,
        };
    }
}

fn api_static(api: &Api) -> TokenStream {
    let ra = &api.krate;
    let pv = quote!(#ra::__private);
    let ident = static_ident(api, None);
    let name = api.item.ident.unraw().to_string();
    let base_url = opt(api.attrs.base_url.as_ref().map(|u| quote!(#u)));
    let headers = api.attrs.headers.iter().map(|(n, v)| quote!((#n, #v)));
    let endpoints = api
        .endpoints
        .iter()
        .map(|e| static_ident(api, Some(&e.ident)));
    quote! {
        #[doc(hidden)]
        static #ident: #pv::ApiSpec = #pv::ApiSpec {
            name: #name,
            base_url: #base_url,
            headers: &[#(#headers),*],
            endpoints: &[#(&#endpoints),*],
        };
    }
}

/// The client's method: build the request from the arguments, then call.
fn endpoint_method(api: &Api, e: &Endpoint, docs: &[TokenStream]) -> TokenStream {
    let ra = &api.krate;
    let pv = quote!(#ra::__private);
    let req = local("__req");
    let handle = local("__handle");
    let spec = static_ident(api, Some(&e.ident));
    let mut sig = future_sig(&e.sig);
    for arg in &mut sig.inputs {
        if let FnArg::Typed(pt) = arg {
            pt.attrs.clear();
        }
    }

    let mut steps = Vec::new();
    // Path parameters in template order: `PathPart::Param(i)` counts them that way.
    if let Some(t) = &e.template {
        for wanted in &t.names {
            if let Some(p) = e.params.iter().find(|p| &p.name == wanted)
                && let Some(ident) = &p.ident
            {
                steps.push(quote_spanned!(p.ty.span()=> #req.path(#wanted, &#ident);));
            }
        }
    }
    for p in &e.params {
        let (Some(ident), Some(role)) = (&p.ident, p.role()) else {
            continue;
        };
        let name = &p.name;
        let span = p.ty.span();
        steps.push(match role {
            RoleKind::Path => continue,
            RoleKind::Query { name: q, .. } => {
                let q = q.as_ref().map_or_else(|| name.clone(), |q| q.value());
                quote_spanned!(span=> #req.query(#q, &#ident);)
            }
            RoleKind::Header { name: h, .. } => {
                let h = h.as_ref().map_or_else(String::new, |h| h.value());
                if ast::is_named(&p.ty, "Option") {
                    let v = local("__value");
                    quote_spanned! {span=>
                        if let ::core::option::Option::Some(#v) =
                            ::core::option::Option::as_ref(&#ident)
                        {
                            #req.header(#h, #v);
                        }
                    }
                } else {
                    quote_spanned!(span=> #req.header(#h, &#ident);)
                }
            }
            RoleKind::Body(BodyKind::Json) => quote_spanned!(span=> #req.json(#name, &#ident);),
            RoleKind::Body(BodyKind::Form) => quote_spanned!(span=> #req.form(#name, &#ident);),
            RoleKind::Body(BodyKind::Raw) => quote_spanned!(span=> #req.raw(#ident);),
            RoleKind::Body(BodyKind::Stream) => quote_spanned!(span=> #req.stream(#ident);),
        });
    }
    let mutability = if steps.is_empty() {
        quote!()
    } else {
        quote!(mut)
    };
    // Spanned at `T` of `Result<T, _>`, so "`User: Deserialize` is not satisfied"
    // points at the user's type.
    let mut by_name = Vec::new();
    let call = match &e.ret.ok {
        Some((ty, d)) => {
            name_checks(&pv, ty, d, &mut by_name);
            let d = match e.attrs.parse.as_ref().and_then(|p| p.attr.with.as_ref()) {
                Some(with) => checked(api, d, &with.value, &mut by_name),
                None => decoder(ra, d),
            };
            let call = respan(quote!(#pv::Handle::call::<#d>), ty.span());
            // The call's own future, returned as it is: no wrapping block to move.
            quote_spanned!(ty.span()=> #call(#handle, #req))
        }
        None => quote!(#pv::Handle::call::<#pv::Unit>(#handle, #req)),
    };
    let user_allows = user_allows(&e.attrs.kept);
    // The user's own `self`: with the method's tokens from another macro's
    // arguments, a `self` of ours would not be the receiver (E0424).
    let this = e
        .sig
        .receiver()
        .map_or_else(|| quote!(self), |r| r.self_token.to_token_stream());
    quote! {
        #(#docs)*
        #(#user_allows)*
        #sig {
            let #mutability #req = #pv::RequestBuilder::new(&#spec);
            #(#steps)*
            let #handle = &#this.__handle;
            #(#by_name)*
            #call
        }
    }
}

/// For each type in a result read by its name (`Response<T>`, `Bytes`,
/// `ResponseStream`, `String`, through any path but one from the user's crate), a
/// check that it is that type, spanned at it: a type of the user's own that shares
/// the name fails there, saying how to name it. The
/// checks are empty functions, gone once compiled.
fn name_checks(pv: &TokenStream, ty: &syn::Type, d: &Decoder, out: &mut Vec<TokenStream>) {
    let check = match d {
        Decoder::Text => quote!(string_by_name),
        Decoder::RawBytes => quote!(bytes_by_name),
        Decoder::Streamed => quote!(stream_by_name),
        Decoder::Wrapped(inner) => {
            if let Some(inner_ty) = crate::ast::single_type_arg(ty) {
                name_checks(pv, inner_ty, inner, out);
            }
            quote!(response_by_name)
        }
        Decoder::Unit | Decoder::Json(_) => return,
    };
    let check = respan(quote!(#pv::#check::<#ty>), ty.span());
    out.push(quote_spanned!(ty.span()=> #check();));
}

fn client_docs(api: &Api) -> Vec<String> {
    let trait_name = api.item.ident.unraw();
    let mut docs = vec![
        format!("Client for [`{trait_name}`], generated by `#[resilient_api]`."),
        String::new(),
        format!(
            "Build one with [`{}::builder`]; it is cheap to clone, and clones share one engine (connection pool, breakers, bulkheads). Every method runs its endpoint's policy, stated in the method's docs.",
            api.client
        ),
    ];
    if let Some(url) = &api.attrs.base_url {
        docs.push(String::new());
        docs.push(format!("Base URL: `{}`.", url.value()));
    }
    if !api.endpoints.is_empty() {
        docs.push(String::new());
        docs.push("| method | request |".to_owned());
        docs.push("|---|---|".to_owned());
        for e in &api.endpoints {
            let verb = e.verb().map_or("", |v| v.as_str());
            let template = e
                .template
                .as_ref()
                .map_or(String::new(), |t| t.value.clone());
            docs.push(format!(
                "| [`{m}`]({trait_name}::{m}) | `{verb} {template}` |",
                m = e.ident.unraw()
            ));
        }
    }
    docs
}

fn expand(api: &Api) -> TokenStream {
    let ra = &api.krate;
    let pv = quote!(#ra::__private);
    let user_trait = user_trait(api, true);
    let trait_ident = &api.item.ident;
    let client = &api.client;
    let client_struct = client_struct(api, &client_docs(api));
    let allow = allow_lints();
    let mut user_allows = user_allows(&api.item.attrs);
    // A deprecated trait: its `impl` for the client is ours, not a use of the user's.
    // Only then: an `allow` of a lint the crate forbids is an error (E0453).
    if api.item.attrs.iter().any(|a| a.path() == DEPRECATED) {
        user_allows.push(quote!(#[allow(deprecated)]));
    }
    let endpoint_statics = api
        .endpoints
        .iter()
        .enumerate()
        .map(|(i, e)| endpoint_static(api, i, e));
    let api_static = api_static(api);
    let api_ident = static_ident(api, None);
    let methods = api.endpoints.iter().map(|e| {
        let mut docs: Vec<TokenStream> = e.attrs.docs.iter().map(|d| quote!(#d)).collect();
        docs.extend(policy::describe(e).iter().map(|l| doc(l)));
        endpoint_method(api, e, &docs)
    });
    quote! {
        #user_trait

        #client_struct

        #allow
        #(#user_allows)*
        const _: () = {
            #(#endpoint_statics)*
            #api_static

            impl #pv::GeneratedClient for #client {
                const API: &'static #pv::ApiSpec = &#api_ident;
                fn from_handle(handle: #pv::Handle) -> Self {
                    Self { __handle: handle }
                }
            }

            impl #trait_ident for #client {
                #(#methods)*
            }
        };
    }
}

/// On errors: the trait as the user wrote it (our attributes stripped, so no
/// "cannot find attribute" cascade) and a client without endpoints, so code using
/// the client's name still resolves.
fn fallback(api: &Api, err: &syn::Error) -> TokenStream {
    let ra = &api.krate;
    let pv = quote!(#ra::__private);
    let mut user_trait = user_trait(api, false);
    for item in &mut user_trait.items {
        // `Self` in a result (refused in `valid.rs`) is unsized in the trait: with
        // `Self: Sized` on the method, the signature stays well-formed, and that error
        // stands alone.
        if let TraitItem::Fn(method) = item
            && let ReturnType::Type(_, ty) = &method.sig.output
            && valid::self_in(ty.to_token_stream()).is_some()
        {
            method
                .sig
                .generics
                .make_where_clause()
                .predicates
                .push(syn::parse_quote!(Self: ::core::marker::Sized));
        }
    }
    let client = &api.client;
    let client_struct = client_struct(
        api,
        &[format!(
            "Client for [`{}`], not generated: `#[resilient_api]` reported errors.",
            api.item.ident.unraw()
        )],
    );
    let api_ident = static_ident(api, None);
    let name = api.item.ident.unraw().to_string();
    let allow = allow_lints();
    let errors = err.to_compile_error();
    let stub_impl = stub_impl(api, &user_trait);
    quote! {
        #errors
        #user_trait
        #client_struct
        #allow
        const _: () = {
            #stub_impl
            #[doc(hidden)]
            static #api_ident: #pv::ApiSpec = #pv::ApiSpec {
                name: #name,
                base_url: ::core::option::Option::None,
                headers: &[],
                endpoints: &[],
            };
            impl #pv::GeneratedClient for #client {
                const API: &'static #pv::ApiSpec = &#api_ident;
                fn from_handle(handle: #pv::Handle) -> Self {
                    Self { __handle: handle }
                }
            }
        };
    }
}

/// `impl Trait for Client` with bodies that never run, so that code calling the
/// client does not add "no method named ..." to the real errors. A generic trait's
/// stub is generic as the trait is; an associated type or const (refused) gets a
/// placeholder no code runs. Left out when the trait has parts a stub cannot mirror
/// (an associated type with bounds or generics, a macro, `-> impl Trait` other than a
/// future on a method that is not `async`).
fn stub_impl(api: &Api, user_trait: &ItemTrait) -> TokenStream {
    let mut items = Vec::new();
    for item in &user_trait.items {
        match item {
            TraitItem::Fn(method) => {
                if method.default.is_some() {
                    continue;
                }
                let sig = &method.sig;
                let returns_future = api
                    .endpoints
                    .iter()
                    .any(|e| e.ident == sig.ident && e.sig.asyncness.is_some());
                let body = if returns_future {
                    quote!(async move { ::core::unreachable!() })
                } else if let ReturnType::Type(_, ty) = &sig.output
                    && let syn::Type::ImplTrait(bounds) = &**ty
                {
                    // `-> impl Future<Output = R> + Send` written out: a future that
                    // never ends has every bound such a future is given.
                    if !bounds.bounds.iter().any(is_future_bound) {
                        return TokenStream::new();
                    }
                    quote!(::core::future::pending())
                } else {
                    quote!(::core::unreachable!())
                };
                items.push(quote! {
                    #[allow(unused_variables)]
                    #sig { #body }
                });
            }
            TraitItem::Type(ty) if ty.default.is_none() => {
                if !ty.bounds.is_empty() || !ty.generics.params.is_empty() {
                    return TokenStream::new();
                }
                let ident = &ty.ident;
                items.push(quote!(type #ident = ();));
            }
            TraitItem::Const(c) if c.default.is_none() => {
                let (ident, ty) = (&c.ident, &c.ty);
                // Associated consts of an impl are evaluated only where used.
                items.push(quote! {
                    const #ident: #ty = ::core::unreachable!();
                });
            }
            TraitItem::Type(_) | TraitItem::Const(_) => {}
            _ => return TokenStream::new(),
        }
    }
    let trait_ident = &api.item.ident;
    let client = &api.client;
    let (impl_generics, ty_generics, where_clause) = user_trait.generics.split_for_impl();
    // An `unsafe trait` is refused already; a safe `impl` of it would add an error.
    let unsafety = &api.item.unsafety;
    quote! {
        #unsafety impl #impl_generics #trait_ident #ty_generics for #client #where_clause {
            #(#items)*
        }
    }
}

/// Whether a bound names `Future` (`impl Future<Output = R>`, `impl core::future::Future`).
fn is_future_bound(bound: &syn::TypeParamBound) -> bool {
    matches!(bound, syn::TypeParamBound::Trait(t)
        if t.path.segments.last().is_some_and(|s| s.ident == "Future"))
}

#[cfg(test)]
mod tests {
    use quote::quote;

    fn run(args: proc_macro2::TokenStream, item: proc_macro2::TokenStream) -> String {
        let item = syn::parse2(item).expect("a trait");
        super::resilient_api(args, item).to_string()
    }

    fn errors(out: &str) -> usize {
        out.matches("compile_error").count()
    }

    #[test]
    fn client_methods_lists_every_inherent_method() {
        let out = run(
            quote!(timeout(attempt = "3s")),
            quote!(
                pub trait Users {}
            ),
        );
        let found: Vec<&str> = out
            .split("pub fn ")
            .skip(1)
            .filter_map(|rest| rest.split([' ', '(']).next())
            .collect();
        assert_eq!(found, super::CLIENT_METHODS);
    }

    #[test]
    fn valid_trait_expands_without_errors() {
        let out = run(
            quote!(timeout(attempt = "3s"), retry(max = 3)),
            quote! {
                pub trait Users {
                    #[get("/users/{id}")]
                    async fn user(&self, id: u64) -> Result<User, ApiError>;
                }
            },
        );
        assert_eq!(errors(&out), 0, "{out}");
        assert!(out.contains("pub struct UsersClient"));
        assert!(out.contains("RequestBuilder :: new"));
        assert!(out.contains("Json < User >"));
    }

    #[test]
    fn method_overrides_trait_policy_key_by_key() {
        let out = run(
            quote!(
                timeout(attempt = "3s"),
                retry(max = 3, backoff = fixed(delay = "20ms"))
            ),
            quote! {
                pub trait Users {
                    #[get("/users/{id}")]
                    #[retry(max = 0)]
                    async fn user(&self, id: u64) -> Result<(), ApiError>;
                }
            },
        );
        assert_eq!(errors(&out), 0, "{out}");
        assert!(out.contains("max : 0"), "{out}");
        assert!(out.contains("Backoff :: Fixed"), "{out}");
    }

    #[test]
    fn own_breaker_gets_a_partition_named_after_the_method() {
        let out = run(
            quote!(timeout(attempt = "3s")),
            quote! {
                pub trait Users {
                    #[get("/users/{id}")]
                    #[breaker(failures = 3)]
                    async fn user(&self, id: u64) -> Result<(), ApiError>;
                }
            },
        );
        assert!(
            out.contains("partition : :: core :: option :: Option :: Some (\"Users::user\")"),
            "{out}"
        );
    }

    #[test]
    fn every_mistake_is_reported_and_the_trait_still_emitted() {
        let out = run(
            quote!(retry(maxx = 1), timeout(attempt = "3 s")),
            quote! {
                pub trait Users {
                    #[get("/users/{id}")]
                    fn user(self) -> u32;
                }
            },
        );
        // unknown key, malformed duration, not async, self by value, `{id}` without
        // a parameter, not a `Result`.
        assert_eq!(errors(&out), 6, "{out}");
        assert!(out.contains("pub trait Users"));
        assert!(out.contains("pub struct UsersClient"));
    }

    #[test]
    fn streamed_body_without_retry_settings_is_not_retried() {
        let out = run(
            quote!(timeout(attempt = "3s")),
            quote! {
                pub trait Files {
                    #[put("/files/{name}")]
                    async fn upload(&self, name: &str, #[body(stream)] body: BodyStream) -> Result<(), ApiError>;
                }
            },
        );
        assert_eq!(errors(&out), 0, "{out}");
        assert!(out.contains("max : 0"), "{out}");
    }

    #[test]
    fn method_level_mistakes_are_reported_at_the_method() {
        let out = run(
            quote!(timeout(attempt = "3s")),
            quote! {
                pub trait Files {
                    #[put("/files/{name}")]
                    #[retry(max = 2)]
                    #[retry(max = 3)]
                    #[hedge(delay = "10ms")]
                    async fn upload(&self, name: &str, #[body(stream)] body: BodyStream) -> Result<(), ApiError>;
                }
            },
        );
        // duplicate `#[retry]`, retrying a streamed body, hedging a streamed body
        assert_eq!(errors(&out), 3, "{out}");
        assert!(out.contains("duplicate `#[retry]` attribute"), "{out}");
        assert!(out.contains("set `#[retry(max = 0)]`"), "{out}");
    }
}
