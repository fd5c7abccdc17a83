//! The model of an annotated trait: `Api { endpoints }`, `Endpoint { method, path,
//! params, ret, policy }`.
//!
//! Building the model records facts as written (every verb attribute, every role of a
//! parameter, the receiver's shape) rather than judging them: the rules live in
//! `valid.rs`, which sees the whole model at once.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{
    FnArg, GenericArgument, Ident, ItemTrait, LitStr, Pat, PathArguments, ReturnType, Signature,
    TraitItem, TraitItemFn, Type,
};

use crate::attr::{
    self, BackoffAttr, BreakerAttr, BulkheadAttr, Group, HedgeAttr, Limit, MethodAttrs,
    PolicyAttrs, RateLimitAttr, RoleAttr, RoleKind, Sp, TraitAttrs, Verb,
};
use crate::ctxt::Ctxt;
use crate::template;
pub use crate::template::Part;

pub struct Api {
    /// The trait as it will be re-emitted: our attributes stripped.
    pub item: ItemTrait,
    pub client: Ident,
    /// The runtime crate's path, `::resilient_api` unless `crate = "..."` says otherwise.
    pub krate: TokenStream,
    pub attrs: TraitAttrs,
    pub endpoints: Vec<Endpoint>,
    /// Items that are not methods (`type`, `const`, macros): not supported.
    pub others: Vec<TraitItem>,
}

pub struct Endpoint {
    pub ident: Ident,
    /// The signature as written (attributes of parameters stripped).
    pub sig: Signature,
    pub attrs: MethodAttrs,
    /// The path template of the first verb attribute.
    pub template: Option<Template>,
    pub receiver: Receiver,
    pub params: Vec<Param>,
    pub ret: Ret,
    /// A default body on an endpoint: not allowed.
    pub body_span: Option<Span>,
    pub policy: Effective,
}

/// The shape of a method's receiver.
pub enum Receiver {
    /// `&self`: the only one supported.
    Ref,
    /// `&mut self`, `self`, `mut self`, `self: Box<Self>`: the offending tokens.
    Other(TokenStream, &'static str),
    /// No receiver at all.
    Missing,
}

pub struct Param {
    /// `None` when the pattern is not a plain name (the error is in `valid.rs`).
    pub ident: Option<Ident>,
    /// The name without `r#`, as it appears in `{name}` and in errors (empty for a
    /// pattern that binds no single name).
    pub name: String,
    pub pat: Pat,
    pub ty: Type,
    pub roles: Vec<RoleAttr>,
    /// Whether `{name}` appears in the path template.
    pub in_path: bool,
}

impl Param {
    /// The role this parameter plays, once validated: its one attribute, or the path
    /// when unmarked and named in the template.
    pub fn role(&self) -> Option<&RoleKind> {
        match self.roles.first() {
            Some(role) => Some(&role.kind),
            None if self.in_path => Some(&RoleKind::Path),
            None => None,
        }
    }

    /// `#[header("Idempotency-Key")]`: the caller brings the call's idempotency key.
    pub fn is_caller_key(&self) -> bool {
        self.roles.iter().any(|r| {
            matches!(&r.kind, RoleKind::Header { name: Some(n), .. }
                if n.value().eq_ignore_ascii_case("idempotency-key"))
        })
    }
}

/// What a successful call decodes into, by the syntax of `T` in `Result<T, _>`.
#[derive(Clone)]
pub enum Decoder {
    Unit,
    Text,
    RawBytes,
    Streamed,
    Wrapped(Box<Decoder>),
    Json(Box<Type>),
}

pub struct Ret {
    /// The return type as written (`None` for no `->`).
    pub ty: Option<Type>,
    /// `T` of `Result<T, E>` and how to decode it, if the type has that shape.
    pub ok: Option<(Type, Decoder)>,
    /// `E` of `Result<T, E>`: must be `ApiError`, the error every call fails with.
    pub err: Option<Type>,
}

/// A path template split into literal text and parameters.
pub struct Template {
    pub lit: LitStr,
    pub value: String,
    pub parts: Vec<Part>,
    /// Parameter names in template order; `Part::Param(i)` indexes this.
    pub names: Vec<String>,
    /// What is wrong with the template, if anything.
    pub problems: Vec<String>,
    /// Whether `names` holds every name the template has (see `template::Parsed`):
    /// only then is a parameter known not to fill a `{name}`.
    pub names_complete: bool,
}

impl Template {
    /// Splits the literal's text: the rules are in `template.rs`.
    pub fn parse(lit: LitStr) -> Template {
        let value = lit.value();
        let template::Parsed {
            parts,
            names,
            problems,
            names_complete,
        } = template::parse(&value);
        Template {
            lit,
            value,
            parts,
            names,
            problems,
            names_complete,
        }
    }
}

/// The effective policy of one endpoint: the trait's defaults merged with the
/// method's attributes, field by field. Every value remembers where it was written.
#[derive(Default)]
pub struct Effective {
    pub attempt: Option<Sp<Limit>>,
    pub attempt_written: bool,
    pub total: Option<Sp<Limit>>,
    pub retry_max: Option<Sp<u32>>,
    pub backoff: Option<Sp<BackoffAttr>>,
    pub retry_on: Option<Sp<Vec<Sp<u16>>>>,
    pub retry_after_cap: Option<Sp<u64>>,
    pub breaker: Option<BreakerAttr>,
    pub bulkhead: Option<BulkheadAttr>,
    pub rate_limit: Option<RateLimitAttr>,
    pub hedge: Option<HedgeAttr>,
    pub coalesce: bool,
    pub idempotent: bool,
    pub idempotency_key: Option<String>,
    /// The partition name: `#[partition]`, or `Trait::method` when the method has a
    /// breaker, bulkhead or rate limit of its own.
    pub partition: Option<String>,
    /// Whether `partition` is the method's own `Trait::method`, named by the macro:
    /// its API's alone, where a name the user gives is shared.
    pub own_partition: bool,
    /// `#[max_body]`: the method's response size limit in bytes.
    pub max_body: Option<u64>,
}

fn pick<T: Clone>(method: &Option<T>, default: &Option<T>) -> Option<T> {
    method.clone().or_else(|| default.clone())
}

fn inner<T: Clone>(group: &Option<Group<T>>) -> Option<T> {
    group.as_ref().map(|g| g.attr.clone())
}

impl Effective {
    pub fn merge(
        api: &Ident,
        ident: &Ident,
        verb: Option<Verb>,
        t: &PolicyAttrs,
        m: &MethodAttrs,
    ) -> Effective {
        let mp = &m.policy;
        let tt = inner(&t.timeout).unwrap_or_default();
        let mt = inner(&mp.timeout).unwrap_or_default();
        let tr = inner(&t.retry).unwrap_or_default();
        let mr = inner(&mp.retry).unwrap_or_default();

        let breaker = match (inner(&t.breaker), inner(&mp.breaker)) {
            (None, None) => None,
            (Some(b), None) | (None, Some(b)) => Some(b),
            (Some(mut tb), Some(mb)) => {
                // The tripping rule is one choice: a method that picks a mode drops the
                // trait's other mode instead of mixing the two.
                if mb.failures.is_some() {
                    tb.failure_rate = None;
                    tb.window = None;
                    tb.min_calls = None;
                }
                if mb.failure_rate.is_some() {
                    tb.failures = None;
                }
                Some(BreakerAttr {
                    failures: pick(&mb.failures, &tb.failures),
                    reset: pick(&mb.reset, &tb.reset),
                    probes: pick(&mb.probes, &tb.probes),
                    failure_rate: pick(&mb.failure_rate, &tb.failure_rate),
                    window: pick(&mb.window, &tb.window),
                    min_calls: pick(&mb.min_calls, &tb.min_calls),
                    slow_call: pick(&mb.slow_call, &tb.slow_call),
                    rate_named: mb.rate_named || tb.rate_named,
                })
            }
        };
        let bulkhead = match (inner(&t.bulkhead), inner(&mp.bulkhead)) {
            (None, None) => None,
            (tb, mb) => {
                let (tb, mb) = (tb.unwrap_or_default(), mb.unwrap_or_default());
                Some(BulkheadAttr {
                    concurrency: pick(&mb.concurrency, &tb.concurrency),
                    queue: pick(&mb.queue, &tb.queue),
                })
            }
        };
        let rate_limit = match (inner(&t.rate_limit), inner(&mp.rate_limit)) {
            (None, None) => None,
            (tr, mr) => {
                let (tr, mr) = (tr.unwrap_or_default(), mr.unwrap_or_default());
                Some(RateLimitAttr {
                    per_second: pick(&mr.per_second, &tr.per_second),
                    burst: pick(&mr.burst, &tr.burst),
                    rate_named: mr.rate_named || tr.rate_named,
                })
            }
        };
        let own_compartment =
            mp.breaker.is_some() || mp.bulkhead.is_some() || mp.rate_limit.is_some();
        let partition = match &m.partition {
            Some(name) => Some(name.value()),
            // Named after the trait too: two APIs sharing an engine each have their
            // own, where an explicit name is shared on purpose.
            None if own_compartment => Some(format!("{}::{}", api.unraw(), ident.unraw())),
            None => None,
        };
        Effective {
            attempt: pick(&mt.attempt, &tt.attempt),
            attempt_written: mt.attempt_written || tt.attempt_written,
            total: pick(&mt.total, &tt.total),
            retry_max: pick(&mr.max, &tr.max),
            backoff: pick(&mr.backoff, &tr.backoff),
            retry_on: pick(&mr.on, &tr.on),
            retry_after_cap: pick(&mr.retry_after_cap, &tr.retry_after_cap),
            breaker,
            bulkhead,
            rate_limit,
            hedge: inner(&m.hedge),
            coalesce: m.coalesce.is_some(),
            idempotent: verb.is_some_and(Verb::is_idempotent)
                || m.idempotent.is_some()
                || m.idempotency_key.is_some(),
            idempotency_key: m.idempotency_key.as_ref().map(|k| k.value.clone()),
            own_partition: m.partition.is_none() && own_compartment,
            partition,
            max_body: m.max_body,
        }
    }
}

impl Api {
    /// Parse the attribute's arguments and the trait into the model, stripping our
    /// attributes from `item` as they are read.
    pub fn from_syn(cx: &Ctxt, args: TokenStream, mut item: ItemTrait) -> Api {
        let attrs = attr::trait_attrs(cx, args);
        attr::misplaced_on_trait(cx, &mut item.attrs);
        let krate = match &attrs.krate {
            Some(path) => quote!(#path),
            None => quote!(::resilient_api),
        };
        // A client named like the trait is refused in `valid.rs`; the model keeps the
        // default name so that the fallback's stub client does not clash with the trait.
        let client = attrs
            .client
            .clone()
            .filter(|c| c.unraw() != item.ident.unraw())
            .unwrap_or_else(|| {
                Ident::new(&format!("{}Client", item.ident.unraw()), item.ident.span())
            });
        let mut endpoints = Vec::new();
        let mut others = Vec::new();
        for trait_item in &mut item.items {
            match trait_item {
                TraitItem::Fn(method) => {
                    let is_endpoint = method.default.is_none()
                        || method.attrs.iter().any(|a| attr::is_method_attr(a.path()));
                    if !is_endpoint {
                        let whose = format!(
                            "a parameter of `{}`, which is a provided method and no endpoint (it has a body and no verb): only an endpoint's parameters take a role",
                            method.sig.ident
                        );
                        for arg in &mut method.sig.inputs {
                            let attrs = match arg {
                                FnArg::Receiver(r) => &mut r.attrs,
                                FnArg::Typed(pt) => &mut pt.attrs,
                            };
                            attr::misplaced_roles(cx, attrs, &whose);
                        }
                    }
                    if is_endpoint {
                        endpoints.push(Endpoint::from_syn(
                            cx,
                            &item.ident,
                            &attrs.policy,
                            attrs.krate.as_ref(),
                            method,
                        ));
                    }
                }
                other => {
                    // Refused (`valid.rs`) as a whole: our attributes on it are not
                    // also "cannot find attribute" in the trait re-emitted.
                    let reported = other.clone();
                    let attrs = match other {
                        TraitItem::Const(c) => Some(&mut c.attrs),
                        TraitItem::Type(t) => Some(&mut t.attrs),
                        TraitItem::Macro(m) => Some(&mut m.attrs),
                        _ => None,
                    };
                    if let Some(attrs) = attrs {
                        attrs.retain(|a| !attr::is_method_attr(a.path()));
                    }
                    others.push(reported);
                }
            }
        }
        Api {
            item,
            client,
            krate,
            attrs,
            endpoints,
            others,
        }
    }
}

impl Endpoint {
    fn from_syn(
        cx: &Ctxt,
        api: &Ident,
        defaults: &PolicyAttrs,
        krate: Option<&syn::Path>,
        method: &mut TraitItemFn,
    ) -> Endpoint {
        let attrs = attr::method_attrs(cx, &method.attrs);
        // What stays on the trait's method: doc comments and attributes not ours.
        method.attrs = attrs.docs.iter().chain(&attrs.kept).cloned().collect();

        let template = attrs
            .verbs
            .first()
            .and_then(|v| v.template.clone())
            .map(Template::parse);
        let mut receiver = Receiver::Missing;
        let mut params = Vec::new();
        for arg in &mut method.sig.inputs {
            match arg {
                FnArg::Receiver(r) => {
                    attr::misplaced_roles(
                        cx,
                        &mut r.attrs,
                        "`self`: the receiver takes no role; mark a parameter after it",
                    );
                    receiver = match (&r.kind, &r.mutability, r.ty_is_ref_self()) {
                        (syn::ReceiverKind::Reference(_, _, None), None, _) => Receiver::Ref,
                        (syn::ReceiverKind::Reference(_, _, Some(_)), _, _) => {
                            Receiver::Other(quote!(#r), "`&mut self`")
                        }
                        (syn::ReceiverKind::Typed(..), _, true) => Receiver::Ref,
                        (syn::ReceiverKind::Typed(..), _, false) => {
                            Receiver::Other(quote!(#r), "a typed `self`")
                        }
                        _ => Receiver::Other(quote!(#r), "`self` by value"),
                    };
                }
                FnArg::Typed(pt) => {
                    let roles = attr::param_roles(cx, &mut pt.attrs);
                    let ident = match &*pt.pat {
                        Pat::Ident(p) if p.subpat.is_none() && p.by_ref.is_none() => {
                            Some(p.ident.clone())
                        }
                        _ => None,
                    };
                    // `ref id` is refused, but still names `{id}`: no second error.
                    let name = match &*pt.pat {
                        Pat::Ident(p) => p.ident.unraw().to_string(),
                        _ => String::new(),
                    };
                    let in_path = ident.is_some()
                        && template.as_ref().is_some_and(|t| t.names.contains(&name));
                    params.push(Param {
                        ident,
                        name,
                        pat: (*pt.pat).clone(),
                        ty: (*pt.ty).clone(),
                        roles,
                        in_path,
                    });
                }
            }
        }
        // `fn f(..) -> impl Future<Output = R>` is refused as not `async`; its result
        // is still read as `R`, so that mistake is reported once.
        let ret = match future_output(&method.sig) {
            Some(output) => Ret::from_syn(
                &ReturnType::Type(Default::default(), Box::new(output.clone())),
                krate,
            ),
            None => Ret::from_syn(&method.sig.output, krate),
        };
        let verb = attrs.verbs.first().map(|v| v.verb);
        let mut policy = Effective::merge(api, &method.sig.ident, verb, defaults, &attrs);
        // A caller-supplied `Idempotency-Key` header makes the call safe to repeat, as a
        // generated key does: every attempt sends the caller's one value. An optional
        // key (`Option<_>`) would let a call without one be retried: `valid.rs` refuses it.
        policy.idempotent |= params.iter().any(Param::is_caller_key);
        Endpoint {
            ident: method.sig.ident.clone(),
            sig: method.sig.clone(),
            attrs,
            template,
            receiver,
            params,
            ret,
            body_span: method.default.as_ref().map(|b| b.span()),
            policy,
        }
    }

    pub fn verb(&self) -> Option<Verb> {
        self.attrs.verbs.first().map(|v| v.verb)
    }

    /// The `#[body(stream)]` parameter's role attribute, if any.
    pub fn stream_body(&self) -> Option<&RoleAttr> {
        self.params
            .iter()
            .flat_map(|p| &p.roles)
            .find(|r| matches!(r.kind, RoleKind::Body(attr::BodyKind::Stream)))
    }
}

/// `R` of a method that is not `async` but returns `impl Future<Output = R> + ...`.
fn future_output(sig: &Signature) -> Option<&Type> {
    if sig.asyncness.is_some() {
        return None;
    }
    let ReturnType::Type(_, ty) = &sig.output else {
        return None;
    };
    let Type::ImplTrait(it) = &**ty else {
        return None;
    };
    it.bounds.iter().find_map(|b| {
        let syn::TypeParamBound::Trait(t) = b else {
            return None;
        };
        let seg = t.path.segments.last().filter(|s| s.ident == "Future")?;
        let PathArguments::AngleBracketed(args) = &seg.arguments else {
            return None;
        };
        args.args.iter().find_map(|a| match a {
            GenericArgument::AssocType(at) if at.ident == "Output" => Some(&at.ty),
            _ => None,
        })
    })
}

trait ReceiverExt {
    /// `self: &Self`.
    fn ty_is_ref_self(&self) -> bool;
}

impl ReceiverExt for syn::Receiver {
    fn ty_is_ref_self(&self) -> bool {
        match &self.kind {
            syn::ReceiverKind::Typed(_, ty) => match &**ty {
                Type::Reference(r) => {
                    r.mutability.is_none()
                        && matches!(&*r.elem, Type::Path(p) if p.qself.is_none() && p.path.is_ident("Self"))
                }
                _ => false,
            },
            _ => false,
        }
    }
}

/// The last segment of a path type, e.g. `Result` in `std::result::Result<T, E>`.
fn last_segment(ty: &Type) -> Option<&syn::PathSegment> {
    type_path(ty)?.segments.last()
}

/// The type arguments of a segment, e.g. `[T, E]` of `Result<T, E>`.
fn type_args(seg: &syn::PathSegment) -> Vec<&Type> {
    match &seg.arguments {
        PathArguments::AngleBracketed(args) => args
            .args
            .iter()
            .filter_map(|a| match a {
                GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The one type argument of a path type's last segment, e.g. `T` of `Response<T>`.
pub fn single_type_arg(ty: &Type) -> Option<&Type> {
    match type_args(last_segment(ty)?).as_slice() {
        [only] => Some(only),
        _ => None,
    }
}

/// Whether the type's last path segment is `name` (e.g. `Option`).
pub fn is_named(ty: &Type, name: &str) -> bool {
    last_segment(ty).is_some_and(|s| s.ident == name)
}

/// The path of a path type, e.g. `std::string::String`.
fn type_path(ty: &Type) -> Option<&syn::Path> {
    match ty {
        Type::Path(p) if p.qself.is_none() => Some(&p.path),
        Type::Group(g) => type_path(&g.elem),
        Type::Paren(p) => type_path(&p.elem),
        _ => None,
    }
}

/// Whether `path` names a type the library reads by its name: any path but one from
/// the user's crate (`crate::`, `self::`, `super::`), unless that one goes through the
/// trait's `crate = "..."` path or a `resilient_api` segment. So a user's own type
/// that shares a name is JSON when named from the crate (`self::Response<T>`), and
/// otherwise fails the generated check with a note that says so.
fn read_by_name(path: &syn::Path, krate: Option<&syn::Path>) -> bool {
    let from_user_crate = path
        .segments
        .first()
        .is_some_and(|s| s.ident == "crate" || s.ident == "self" || s.ident == "super");
    let through_krate = krate.is_some_and(|k| {
        k.segments.len() < path.segments.len()
            && k.segments
                .iter()
                .zip(&path.segments)
                .all(|(a, b)| a.ident == b.ident)
    });
    !from_user_crate || through_krate || path.segments.iter().any(|s| s.ident == "resilient_api")
}

impl Decoder {
    /// The decoder of the value itself: inside a `Response<T>`, `T`'s.
    pub fn value(&self) -> &Decoder {
        match self {
            Decoder::Wrapped(inner) => inner.value(),
            d => d,
        }
    }

    /// The decoder of result type `ty`; `krate` is the `crate = "..."` path, if set.
    pub fn of(ty: &Type, krate: Option<&syn::Path>) -> Decoder {
        if let Type::Tuple(t) = ty
            && t.elems.is_empty()
        {
            return Decoder::Unit;
        }
        if let Some(path) = type_path(ty)
            && let Some(seg) = path.segments.last()
        {
            let args = type_args(seg);
            let named = |name: &str| seg.ident == name && read_by_name(path, krate);
            if named("String") && args.is_empty() {
                return Decoder::Text;
            }
            if named("Bytes") && args.is_empty() {
                return Decoder::RawBytes;
            }
            if named("ResponseStream") && args.is_empty() {
                return Decoder::Streamed;
            }
            if named("Response")
                && let [inner] = args.as_slice()
            {
                return Decoder::Wrapped(Box::new(Decoder::of(inner, krate)));
            }
        }
        Decoder::Json(Box::new(ty.clone()))
    }
}

impl Ret {
    fn from_syn(output: &ReturnType, krate: Option<&syn::Path>) -> Ret {
        let ty = match output {
            ReturnType::Default => {
                return Ret {
                    ty: None,
                    ok: None,
                    err: None,
                };
            }
            ReturnType::Type(_, ty) => (**ty).clone(),
        };
        let (ok, err) = match last_segment(&ty)
            .filter(|seg| seg.ident == "Result")
            .map(type_args)
            .as_deref()
        {
            Some([ok, err]) => (
                Some(((*ok).clone(), Decoder::of(ok, krate))),
                Some((*err).clone()),
            ),
            _ => (None, None),
        };
        Ret {
            ty: Some(ty),
            ok,
            err,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template_check;
    use proptest::prelude::*;

    fn template(s: &str) -> Template {
        Template::parse(LitStr::new(s, Span::call_site()))
    }

    #[test]
    fn template_splits_literals_and_params_in_order() {
        let t = template("/users/{id}/posts/{post}");
        assert!(t.problems.is_empty(), "{:?}", t.problems);
        assert_eq!(t.names, ["id", "post"]);
        assert_eq!(
            t.parts,
            [
                Part::Lit("/users/".into()),
                Part::Param(0),
                Part::Lit("/posts/".into()),
                Part::Param(1)
            ]
        );
    }

    #[test]
    fn template_param_may_end_or_share_a_segment() {
        let t = template("/files/{name}.json");
        assert!(t.problems.is_empty());
        assert_eq!(
            t.parts,
            [
                Part::Lit("/files/".into()),
                Part::Param(0),
                Part::Lit(".json".into())
            ]
        );
    }

    #[test]
    fn template_problems() {
        for bad in [
            "users",
            "/a/{id",
            "/a/id}",
            "/a/{}",
            "/a/{1x}",
            "/a/{id}/{id}",
            "/a?x=1",
            "/a/{{id}}",
            "/a/{ id }",
            "/a/{id/**/}",
            "/../admin/{id}",
            "/a/./b",
            "/a/%2E%2e/b",
            "/a\\b",
            "/a/{r#r#x}",
            "/a/.\t./admin",
            "/a/%2\te%2\te/{id}",
            "/a/b\n",
            "/a/\u{7f}",
            "/a/%{id}",
            "/a/%2{id}",
            "/a/x%{id}/b",
            "/100%/x",
            "/a%",
            "/a/%zz",
            "/a/%2",
            "/a/%g0/{id}",
            "/a/%2%{id}",
        ] {
            assert!(!template(bad).problems.is_empty(), "{bad}");
        }
    }

    /// Regression: a name written three times was reported twice, the same message
    /// at the same span (rustc folds the copies; the macro should not make them).
    /// Each repeated name is one problem, and the names read stay complete.
    #[test]
    fn template_a_repeated_name_is_one_problem() {
        let twice = |n: &str, s: &str| format!("`{{{n}}}` appears twice in path template `{s}`");
        let raw = |s: &str| format!("`{{r#id}}` names `id` a second time in path template `{s}`");
        for (s, want) in [
            (
                "/users/{id}/x/{id}/{id}",
                vec![twice("id", "/users/{id}/x/{id}/{id}")],
            ),
            ("/users/{id}/{r#id}", vec![raw("/users/{id}/{r#id}")]),
            (
                "/{a}/{b}/{a}/{b}/{a}",
                vec![
                    twice("a", "/{a}/{b}/{a}/{b}/{a}"),
                    twice("b", "/{a}/{b}/{a}/{b}/{a}"),
                ],
            ),
            ("/{id}/{id}/{r#id}", vec![twice("id", "/{id}/{id}/{r#id}")]),
        ] {
            let t = template(s);
            assert_eq!(t.problems, want, "{s}");
            assert!(t.names_complete, "{s}");
        }
    }

    /// The same `{...}` that is no name, written twice, is one problem.
    #[test]
    fn template_the_same_bad_brace_twice_is_one_problem() {
        for s in ["/a/{1x}/{1x}", "/a/{ id }/{ id }"] {
            assert_eq!(
                template(s).problems.len(),
                1,
                "{s}: {:?}",
                template(s).problems
            );
        }
    }

    /// Whether the names read are every name the template holds: not once a `{...}`
    /// is no name or the braces do not balance.
    #[test]
    fn template_names_are_complete_unless_a_brace_is_unreadable() {
        for s in [
            "/a/{id}",
            "users/{id}",
            "/a/{id}?x",
            "/../{id}",
            "/a/{id}/{id}",
        ] {
            assert!(template(s).names_complete, "{s}");
        }
        for s in [
            "/a/{id",
            "/a/id}",
            "/a/{}",
            "/a/{1x}",
            "/a/{ id }",
            "/a/{{id}}",
        ] {
            assert!(!template(s).names_complete, "{s}");
        }
    }

    #[test]
    fn template_raw_names_are_stored_bare() {
        for (t, name) in [("/t/{r#type}", "type"), ("/t/{type}", "type")] {
            let t = template(t);
            assert!(t.problems.is_empty(), "{:?}", t.problems);
            assert_eq!(t.names, [name]);
        }
    }

    #[test]
    fn template_percent_escapes_are_text() {
        let t = template("/a%20b/{id}%2Fx/%41%7e");
        assert!(t.problems.is_empty(), "{:?}", t.problems);
        assert_eq!(t.parts[0], Part::Lit("/a%20b/".into()));
    }

    #[test]
    fn template_dots_inside_a_segment_are_text() {
        let t = template("/v1.2/files/{name}.tar.gz/..x");
        assert!(t.problems.is_empty(), "{:?}", t.problems);
    }

    /// Text made of the pieces templates are made of, so that braces, names, raw
    /// prefixes, dots, escapes and non-ASCII meet far more often than at random. The
    /// second half is mostly well-formed, so that dot segments and names are judged
    /// in templates with nothing else wrong.
    fn template_like() -> impl Strategy<Value = String> {
        let any_piece = prop::sample::select(vec![
            "/", "/", "{", "}", "{", "}", "r#", "id", "type", "self", "_", "x1", "é", "e\u{301}",
            "中", ".", "..", "%", "%2e", "%2E", "?", "#", "\\", " ", "\t", "\n", "-", "0", "a",
            "/*", "\"", "%20", "%zz", "%2", "2",
        ]);
        let segment = prop::sample::select(vec![
            "",
            "a",
            "v1.2",
            "~",
            "é",
            ".",
            "..",
            "%2e",
            ".%2E",
            "%2E%2e",
            "...",
            "..x",
            "\t",
            "{id}",
            "{x}",
            "{r#type}",
            "{r#r#x}",
            "{self}",
            "{_}",
            "{é}",
            "{e\u{301}}",
            "a{y}.b",
            "%{x}",
            "%2{y}",
            "100%",
            "%41b",
            "%4",
        ]);
        prop_oneof![
            prop::collection::vec(any_piece, 0..24).prop_map(|pieces| pieces.concat()),
            prop::collection::vec(segment, 0..6).prop_map(|segments| {
                segments
                    .iter()
                    .map(|seg| format!("/{seg}"))
                    .collect::<String>()
            }),
        ]
    }

    /// What holds for the template of any text, and more for one without problems.
    fn check_template(s: &str) -> Result<(), TestCaseError> {
        let t = template(s);
        prop_assert_eq!(&t.value, s);
        template_check::check(s, &t.parts, &t.names, &t.problems).map_err(TestCaseError::fail)
    }

    /// A template made of clean text and distinct names, with the parts and names it
    /// must parse into.
    fn clean_template() -> impl Strategy<Value = (String, Vec<Part>, Vec<String>)> {
        let text = "[a-z0-9_~-]{0,4}(/[a-z0-9_~-]{1,4}(\\.[a-z0-9]{1,3})?){0,2}/?";
        let name = prop_oneof![
            "[a-zA-Z][a-zA-Z0-9_]{0,6}".prop_filter("not a name", |n| {
                !matches!(n.as_str(), "self" | "Self" | "super" | "crate")
            }),
            "_[a-z0-9_]{1,4}",
            prop::sample::select(vec![
                "type", "r#type", "r#match", "async", "é", "naïve", "中"
            ])
            .prop_map(str::to_owned),
        ];
        let piece = (text, prop::option::of(name));
        prop::collection::vec(piece, 1..6).prop_map(|pieces| {
            let (mut s, mut parts, mut names) = (String::from("/"), Vec::new(), Vec::new());
            let mut lit = String::from("/");
            for (text, name) in pieces {
                s.push_str(&text);
                lit.push_str(&text);
                let Some(mut name) = name else { continue };
                let mut bare = name.strip_prefix("r#").unwrap_or(&name).to_owned();
                while names.contains(&bare) {
                    name.push('_');
                    bare.push('_');
                }
                s.push_str(&format!("{{{name}}}"));
                if !lit.is_empty() {
                    parts.push(Part::Lit(std::mem::take(&mut lit)));
                }
                parts.push(Part::Param(names.len()));
                names.push(bare);
            }
            if !lit.is_empty() {
                parts.push(Part::Lit(lit));
            }
            (s, parts, names)
        })
    }

    proptest! {
        #[test]
        fn template_parse_holds_on_any_text(s in any::<String>()) {
            check_template(&s)?;
        }

        #[test]
        fn template_parse_holds_on_template_like_text(s in template_like()) {
            check_template(&s)?;
        }

        #[test]
        fn template_parse_holds_on_template_like_chars(
            s in "[/{}a-zA-Z_.%?#\\\\ \t\u{e9}\u{301}\u{4e2d}0-9-]{0,32}",
        ) {
            check_template(&s)?;
        }

        #[test]
        fn clean_templates_are_accepted_as_built((s, parts, names) in clean_template()) {
            let t = template(&s);
            prop_assert!(t.problems.is_empty(), "{:?}: {:?}", s, t.problems);
            prop_assert_eq!(&t.parts, &parts, "{:?}", s);
            prop_assert_eq!(&t.names, &names, "{:?}", s);
            check_template(&s)?;
        }
    }
}
